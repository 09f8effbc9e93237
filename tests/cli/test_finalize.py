"""`jedictl finalize` through the CLI: one scenario per path through the task statuses of seed 000
(done, finished, failed, broken, aborted, exhausted, scouting -> scouted -> running), with a test clock."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, datasets, jobs, tasks
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.helpers import run_sql

NOW = "2026-11-21T12:00:00"
SKIP_SCOUTS = {"skipScout": True}


# ------------------------------------------------------------------------------------------ helpers

def submit(cli, store, name: str, **params) -> int:
    # The stories run several tasks of the worked example: they share its output datasets (the explicit
    # opt-out), each task naming its files with its id so that no two jobs write the same file.
    document = json.dumps({**WORKED_EXAMPLE, "taskName": name, "allowTaskDuplication": True, **params})
    document = document.replace("ds.out.${SN}", "ds.out.${JEDITASKID}.${SN}").replace("ds.log.${SN}", "ds.log.${JEDITASKID}.${SN}")
    return cli.json("submit", "-", db=store, input=document)["task_id"]


def prepare_grid(cli, store, tmp_path) -> None:
    _grid(cli, store, tmp_path)


def to_ready(cli, store, now: str = NOW) -> None:
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, "--now", now, db=store)


def run_round(cli, store, seed: int, failure_rate: float, *extra: str, now: str = NOW) -> dict:
    cli("generate", "--seed", str(seed), "--now", now, db=store)
    return cli.json("simulate", "--seed", str(seed), "--failure-rate", str(failure_rate), "--now", now, *extra, db=store)


def finalize(cli, store, now: str = NOW) -> dict:
    report = cli.json("finalize", "--now", now, db=store)
    assert run_sql(store, check_all) == []
    return report


def item(report: dict, task_id: int) -> dict:
    return next(i for i in report["items"] if i.get("task_id") == task_id and i["outcome"] not in ("kick_child", "kill_child"))


def task_row(store, task_id: int):
    return run_sql(store, lambda conn: conn.execute(select(tasks).where(tasks.c.id == task_id)).one())


def dataset_rows(store, task_id: int) -> dict[str, dict]:
    rows = run_sql(store, lambda conn: conn.execute(select(datasets).where(datasets.c.task_id == task_id)).all())
    return {row.name: dict(row._mapping) for row in rows}


def history(cli, store, task_id: int) -> list[tuple[str, str | None]]:
    return [(h["status"], h["reason"]) for h in cli.json("task", "show", str(task_id), db=store)["status_history"]]


def statuses(cli, store, task_id: int) -> list[str]:
    return [status for status, _ in history(cli, store, task_id)]


def catalog_state(store, name: str) -> str | None:
    return run_sql(store, lambda conn: conn.execute(select(catalog_datasets.c.state).where(catalog_datasets.c.name == name)).scalar())


def run_to_end(cli, store, task_id: int, failure_rate: float = 0.0, rounds: int = 10) -> dict:
    """generate -> simulate -> finalize until the task leaves the running statuses."""
    report = {}
    for seed in range(2, 2 + rounds):
        run_round(cli, store, seed, failure_rate)
        report = finalize(cli, store)
        if task_row(store, task_id).status not in ("running", "scouting", "ready"):
            break
    return report


# ----------------------------------------------------------------------------------------- scenarios

def test_scouting_scouted_running_then_done(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "scouts.done")
    to_ready(cli, store)
    ran = run_round(cli, store, 1, 0.0)
    assert ran["counts"]["jobs"] == ran["counts"]["finished"] == 10  # 10 scouts, 2 files each
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "running"
    assert item(report, task_id)["reason"].startswith("scouting -> scouted -> running: 10 scout jobs succeeded")
    assert statuses(cli, store, task_id)[-2:] == ["scouted", "running"]
    assert history(cli, store, task_id)[-1] == ("running", "avalanche: 5 more input files released")
    # The resource model measured on the scouts is on the task.
    task = task_row(store, task_id)
    assert task.walltime_unit == "kSI2kseconds" and task.assessed_at is not None
    assert task.cpu_time > 0 and task.cpu_time_unit in ("HS06sPerEvent", "mHS06sPerEvent")
    assert 0 < task.ram_count < 2000 and task.ram_unit == "MBPerCore"  # simulated PSS is below the job's RAM
    assert task.out_disk_unit == "B" and 0 < task.out_disk_count <= 10  # output bytes per input byte, capped at 10
    assert task.io_intensity > 0 and task.io_intensity_unit == "kBPerS"
    master = dataset_rows(store, task_id)["ds.in"]
    assert (master["n_files"], master["n_files_to_be_used"], master["n_files_finished"]) == (25, 25, 20)

    # The rest of the input runs and the task ends done: datasets settled, outputs closed in the catalog.
    report = run_to_end(cli, store, task_id)
    assert item(report, task_id)["outcome"] == "done"
    assert statuses(cli, store, task_id)[-2:] == ["prepared", "done"]
    rows = dataset_rows(store, task_id)
    assert {name: row["status"] for name, row in rows.items()} == {"ds.in": "done", "ds.out": "done", "ds.log": "done"}
    assert rows["ds.out"]["n_files"] == rows["ds.out"]["n_files_finished"] == 13
    assert catalog_state(store, "ds.out") == catalog_state(store, "ds.log") == "closed"
    task = task_row(store, task_id)
    assert task.lease_owner is None and task.ended_at is not None
    assert finalize(cli, store)["items"] == []  # nothing left to do


def test_early_avalanche_when_half_of_the_scouts_finished(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "scouts.early")
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    sites = run_sql(store, lambda conn: sorted(set(conn.execute(select(jobs.c.site)).scalars())))
    # Two scouts at one site: 2 of 10 finished is not enough.
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--site", sites[0], "--jobs", "2", "--now", NOW, db=store)
    assert finalize(cli, store)["items"] == []  # not a candidate
    # Three more at every site: at least half of the scouts finished, the others still queued.
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--jobs", "2", "--now", NOW, db=store)
    finished = run_sql(store, lambda conn: conn.execute(select(jobs.c.status)).scalars().all()).count("finished")
    assert 5 <= finished < 10
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "running"
    assert f"({finished}/10 scout jobs finished)" in item(report, task_id)["reason"]
    master = dataset_rows(store, task_id)["ds.in"]
    assert master["n_files_to_be_used"] == 25 and master["n_files_finished"] == 2 * finished
    report = run_to_end(cli, store, task_id)
    assert task_row(store, task_id).status == "done"


def test_done_without_scouts_measures_the_first_jobs(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "noscouts.done", **SKIP_SCOUTS)
    to_ready(cli, store)
    run_round(cli, store, 1, 0.0)
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "done"
    assert item(report, task_id)["reason"].startswith("running -> prepared -> done: resource model measured on 13 finished jobs")
    task = task_row(store, task_id)
    assert task.walltime_unit == "kSI2kseconds" and task.cpu_time is not None and task.ram_count is not None


def test_some_inputs_failed_for_good_ends_finished(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "partly", maxAttempt=1, **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "1", "--jobs", "1", "--now", NOW, db=store)  # one job per site fails
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--now", NOW, db=store)
    report = finalize(cli, store)
    rows = dataset_rows(store, task_id)
    master = rows["ds.in"]
    assert 0 < master["n_files_failed"] < 25 and master["n_files_finished"] + master["n_files_failed"] == 25
    assert item(report, task_id)["outcome"] == "finished"
    assert task_row(store, task_id).error_dialog == f"{master['n_files_finished']}/25 input files processed"
    assert {row["status"] for row in rows.values()} == {"finished"}  # master partly done, outputs partly produced
    assert rows["ds.out"]["n_files"] == rows["ds.out"]["n_files_finished"] < 13
    assert catalog_state(store, "ds.out") == "closed"


def test_every_input_failed_ends_failed(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "allfail", maxAttempt=1, **SKIP_SCOUTS)
    to_ready(cli, store)
    run_round(cli, store, 1, 1.0)
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "failed"
    assert task_row(store, task_id).error_dialog == "no input file was processed successfully"
    assert {row["status"] for row in dataset_rows(store, task_id).values()} == {"failed"}
    assert statuses(cli, store, task_id)[-2:] == ["prepared", "failed"]


def test_scouts_that_all_failed_break_the_task(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "badscouts", maxAttempt=1)
    to_ready(cli, store)
    run_round(cli, store, 1, 1.0)
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "broken"
    assert statuses(cli, store, task_id)[-2:] == ["tobroken", "broken"]
    assert task_row(store, task_id).error_dialog == "no scout jobs succeeded"
    assert {row["status"] for row in dataset_rows(store, task_id).values()} == {"failed"}


def test_below_the_goal_with_use_exhausted_waits_exhausted_then_finishes(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "ux", maxAttempt=1, useExhausted=True, goal=100, **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "1", "--jobs", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--now", NOW, db=store)
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "exhausted"
    assert task_row(store, task_id).error_dialog == "exhausted since the task was incomplete and didn't reach the goal"
    # Nobody retried it: after 48 h the watchdog finishes it; finalize ends it finished (the goal is
    # no longer enforced once the task is forced to finish).
    assert cli.json("watch", "--now", "2026-11-23T11:00:00", db=store)["items"] == []
    watched = cli.json("watch", "--now", "2026-11-23T12:00:00", db=store)
    assert [(i["outcome"], i["status"]) for i in watched["items"] if i.get("task_id") == task_id] == [
        ("kick_exhausted", "finishing"), ("settle", "passed")]
    report = finalize(cli, store, "2026-11-23T12:00:00")
    assert item(report, task_id)["outcome"] == "finished"
    assert statuses(cli, store, task_id)[-4:] == ["exhausted", "finishing", "passed", "finished"]


def test_fail_when_goal_unreached(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "fg", maxAttempt=1, failWhenGoalUnreached=True, goal=99.9, **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "1", "--jobs", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--now", NOW, db=store)
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "failed"
    assert task_row(store, task_id).error_dialog.startswith("goal 99.9% not reached")


def test_killed_task_is_aborted_once_its_jobs_stopped(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "killed", **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    site = run_sql(store, lambda conn: conn.execute(select(jobs.c.site).limit(1)).scalar())
    on_worker = cli.json("jobs", "dispatch", "--site", site, "--count", "1", "--now", NOW, db=store)["jobs"][0]
    cli("jobs", "heartbeat", str(on_worker["job_id"]), "--now", NOW, db=store)  # running on a worker
    killed = cli.json("kill", str(task_id), "--now", NOW, db=store)
    assert killed["status"] == "toabort"
    assert finalize(cli, store)["items"] == []  # a job is still on a worker: not yet
    assert task_row(store, task_id).status == "toabort"
    # The executor reports the job it was told to stop; finalize aborts the task.
    line = json.dumps({"job_id": on_worker["job_id"], "status": "failed", "attempt_nr": on_worker["attempt_nr"],
                       "error_source": "pilot", "error_code": 1144, "error_diag": "killed"})
    cli("jobs", "report", "-", "--now", NOW, db=store, input=line + "\n")
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "aborted"
    assert {row["status"] for row in dataset_rows(store, task_id).values()} == {"failed"}
    assert task_row(store, task_id).lease_owner is None


def test_a_failed_parent_kills_its_children_and_a_done_parent_kicks_them(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    parent = submit(cli, store, "parent.fails", maxAttempt=1, **SKIP_SCOUTS)
    child = submit(cli, store, "child.of.failed", parent_tid=parent, **SKIP_SCOUTS)
    grandchild = submit(cli, store, "grandchild", parent_tid=child, **SKIP_SCOUTS)
    to_ready(cli, store)
    assert task_row(store, child).status == "pending"  # waiting for its parent
    run_round(cli, store, 1, 1.0)
    report = finalize(cli, store)
    assert item(report, parent)["outcome"] == "failed"
    killed = {i["task_id"]: i["status"] for i in report["items"] if i["outcome"] == "kill_child"}
    assert killed == {child: "aborted"}  # the kill command aborted the child and, through it, the grandchild
    assert task_row(store, child).status == task_row(store, grandchild).status == "aborted"
    assert [c["command"] for c in cli.json("task", "show", str(child), db=store)["commands"]] == ["kill"]

    good = submit(cli, store, "parent.works", **SKIP_SCOUTS)
    waiting = submit(cli, store, "child.of.good", parent_tid=good, **SKIP_SCOUTS)
    to_ready(cli, store)
    run_round(cli, store, 3, 0.0)
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == waiting).values(wait_until=datetime(2030, 1, 1))))
    report = finalize(cli, store)
    assert item(report, good)["outcome"] == "done"
    assert [(i["outcome"], i["task_id"]) for i in report["items"] if i["outcome"] == "kick_child"] == [("kick_child", waiting)]
    assert task_row(store, waiting).wait_until is None


def test_avalanche_command_forces_the_scouts_to_end(cli, sqlite_url, tmp_path):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "forced")
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert cli.json("task", "avalanche", str(task_id), "--now", NOW, db=store)["status"] == "scouted"
    report = finalize(cli, store)  # no scout has finished: the statistics stay, the avalanche goes ahead
    assert item(report, task_id)["outcome"] == "running"
    assert history(cli, store, task_id)[-1] == ("running", "avalanche: 5 more input files released")


@pytest.mark.parametrize("status", ["ready", "running"])
def test_a_mutable_input_sends_the_task_back_to_the_feeder(cli, sqlite_url, tmp_path, status):
    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "mutable", **SKIP_SCOUTS)
    to_ready(cli, store)
    run_round(cli, store, 1, 0.0)
    run_sql(store, lambda conn: (conn.execute(update(datasets).where(datasets.c.task_id == task_id, datasets.c.name == "ds.in")
                                              .values(state="mutable")),
                                 conn.execute(update(tasks).where(tasks.c.id == task_id).values(status=status, walltime_unit="x"))))
    report = finalize(cli, store)
    assert item(report, task_id)["outcome"] == "defined"
    assert dataset_rows(store, task_id)["ds.in"]["status"] == "toupdate"
