"""The output check at the end of a task (docs/post-processing.md), through the CLI on both backends:
a retried job's duplicate, a stray and an incomplete log removed and shown by `task show`; outputs
missing or disagreeing in the catalog pause the task until the catalog is repaired and it is resumed;
the finalize batch ends the tasks with nothing to check and leaves only the others to the one-task
path; and `jedictl check` catches a task that ended with two files for one input."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from jedictl.engine.finalize import batch as batch_module
from jedictl.engine.finalize import postprocessor
from jedictl.engine.finalize.post_check import PostCheck
from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, catalog_files, datasets, files, removed_outputs
from tests.cli.test_finalize import NOW, SKIP_SCOUTS, item, prepare_grid, run_round, task_row, to_ready
from tests.cli.test_generate import WORKED_EXAMPLE
from tests.helpers import run_sql


def submit(cli, store, name: str, out: str = "ds.out", log: str = "ds.log") -> int:
    """The worked example (25 files, 2 per job) writing `out` and `log`."""
    document = json.dumps({**WORKED_EXAMPLE, "taskName": name, **SKIP_SCOUTS})
    document = document.replace('"dataset": "ds.out"', f'"dataset": "{out}"').replace('"dataset": "ds.log"', f'"dataset": "{log}"')
    return cli.json("submit", "-", db=store, input=document)["task_id"]


def records(store, task_id: int, kind: str, status: str) -> list:
    """The task's output (or log) records in `status`, with their producing job, oldest first."""
    return run_sql(store, lambda conn: conn.execute(
        select(files.c.lfn, files.c.out_job_id, files.c.size, files.c.checksum, files.c.guid, datasets.c.name)
        .join(datasets, datasets.c.id == files.c.dataset_id)
        .where(files.c.task_id == task_id, datasets.c.type == kind, files.c.status == status).order_by(files.c.id)).all())


def catalog_lfns(store, name: str) -> set[str]:
    return set(run_sql(store, lambda conn: conn.execute(
        select(catalog_files.c.lfn).join(catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id)
        .where(catalog_datasets.c.name == name)).scalars().all()))


def add_files(cli, store, dataset: str, entries: list[dict]) -> None:
    cli("data", "add-files", dataset, "-", db=store, input=json.dumps(entries))


def finalize(cli, store) -> dict:
    return cli.json("finalize", "--now", NOW, db=store)


def run_until_final(cli, store, task_id: int, rounds: int = 8) -> dict:
    report = {}
    for seed in range(2, 2 + rounds):
        run_round(cli, store, seed, 0.0)
        report = finalize(cli, store)
        if task_row(store, task_id).status not in ("running", "ready", "scouting"):
            break
    return report


def started_with_failures(cli, store) -> tuple[int, list, list]:
    """A task whose first round lost some jobs (retried later): its failed output and log records."""
    task_id = submit(cli, store, "post.check")
    to_ready(cli, store)
    run_round(cli, store, 1, 0.5)
    finalize(cli, store)
    failed_outputs, failed_logs = records(store, task_id, "output", "failed"), records(store, task_id, "log", "failed")
    assert len(failed_outputs) >= 2 and len(failed_logs) >= 2, "the seed must fail at least two jobs"
    return task_id, failed_outputs, failed_logs


# ---------------------------------------------------------------------------------------- removals

def test_retried_jobs_duplicate_a_stray_and_an_incomplete_log_are_removed(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id, failed_outputs, failed_logs = started_with_failures(cli, store)
    duplicate, log_lost, log_kept = failed_outputs[0], failed_logs[0], failed_logs[1]
    # The failed attempt's pilot had registered its output before the job was declared failed (PanDA's
    # pilots register at stage-out): the dataset will hold two files for that input once the retry runs.
    add_files(cli, store, "ds.out", [{"lfn": duplicate.lfn, "size": 123, "checksum": "ad:0000abcd"},
                                     {"lfn": "ds.out.unknown.root", "size": 7}])
    # Two failed jobs' logs were added at once: one never reached storage, the other did.
    catalog = tmp_path / "logs.yaml"
    catalog.write_text(json.dumps({"datasets": [{"name": "ds.log", "files": [{"lfn": log_lost.lfn}, {"lfn": log_kept.lfn}],
                                                 "replicas": [{"endpoint": "CERN-PROD_DATADISK", "complete": False,
                                                               "files": [log_kept.lfn]}]}]}))
    cli("data", "import", str(catalog), db=store)
    assert run_sql(store, check_all) == []  # a running task: nothing is wrong yet

    report = run_until_final(cli, store, task_id)
    ended = item(report, task_id)
    assert ended["outcome"] == "done"
    assert "1 duplicate file removed, 1 stray file removed, 1 incomplete log file removed" in ended["reason"]
    assert duplicate.lfn not in catalog_lfns(store, "ds.out") and "ds.out.unknown.root" not in catalog_lfns(store, "ds.out")
    assert log_lost.lfn not in catalog_lfns(store, "ds.log") and log_kept.lfn in catalog_lfns(store, "ds.log")
    finished = {row.lfn for row in records(store, task_id, "output", "finished")}
    assert catalog_lfns(store, "ds.out") == finished  # exactly the finished outputs, one per input chunk
    assert run_sql(store, check_all) == []

    shown = cli.json("task", "show", str(task_id), db=store)
    removed = {entry["lfn"]: entry for entry in shown["removed_outputs"]}
    assert set(removed) == {duplicate.lfn, "ds.out.unknown.root", log_lost.lfn}
    first = removed[duplicate.lfn]
    assert (first["kind"], first["dataset"], first["job_id"], first["size"]) == ("duplicate", "ds.out", duplicate.out_job_id, 123)
    assert first["kept_lfn"] in finished and f"written by job {duplicate.out_job_id}" in first["reason"]
    assert first["kept_lfn"] in first["reason"] and first["by"]
    assert removed["ds.out.unknown.root"]["kind"] == "stray" and removed["ds.out.unknown.root"]["job_id"] is None
    assert removed[log_lost.lfn]["kind"] == "incomplete_log"
    # The table shows them too.
    table = cli("task", "show", str(task_id), db=store).output
    assert duplicate.lfn in table and "incomplete_log" in table


# ---------------------------------------------------------------------------------------- problems

def test_outputs_missing_or_disagreeing_in_the_catalog_pause_the_task_until_repaired(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "post.check.problems")
    to_ready(cli, store)
    run_round(cli, store, 1, 0.0)
    outputs = records(store, task_id, "output", "finished")
    assert len(outputs) == 13  # every job finished; finalize has not looked yet
    missing, wrong = outputs[0], outputs[1]
    cli("data", "remove-files", "ds.out", missing.lfn, wrong.lfn, db=store)
    add_files(cli, store, "ds.out", [{"lfn": wrong.lfn, "size": wrong.size + 1, "checksum": wrong.checksum, "guid": wrong.guid}])

    ended = item(finalize(cli, store), task_id)
    assert ended["outcome"] == "paused"
    task = task_row(store, task_id)
    assert (task.status, task.old_status, task.lease_owner, task.ended_at) == ("paused", "prepared", None, None)
    assert task.error_dialog == (
        f"post-processing: 2 outputs disagree with the data catalog: {missing.lfn} of ds.out is not in the data catalog; "
        f"{wrong.lfn} of ds.out has size {wrong.size + 1} in the catalog, {wrong.size} reported by its job "
        "(repair the catalog, then `task resume`)")
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["status"] == "paused" and shown["error_dialog"] == task.error_dialog
    assert shown["status_history"][-1]["reason"] == task.error_dialog
    # Nothing was closed or ended: the catalog dataset stays open for the repair.
    assert run_sql(store, lambda conn: conn.execute(select(catalog_datasets.c.state).where(catalog_datasets.c.name == "ds.out")).scalar()) == "open"
    # `check` sees the same damage from its side (a finished output the catalog lost).
    assert [v for v in run_sql(store, check_all)] == [
        f"task {task_id} output {missing.lfn} of ds.out (job {missing.out_job_id}) is not in the data catalog"]
    # A paused task is not finalized again by itself.
    assert [i for i in finalize(cli, store)["items"] if i.get("task_id") == task_id] == []

    # The operator repairs the catalog and resumes the task: it ends done, the pause's dialog gone.
    cli("data", "remove-files", "ds.out", wrong.lfn, db=store)
    add_files(cli, store, "ds.out", [{"lfn": row.lfn, "size": row.size, "checksum": row.checksum, "guid": row.guid} for row in (missing, wrong)])
    cli("task", "resume", str(task_id), db=store)
    assert task_row(store, task_id).status == "prepared"
    assert item(finalize(cli, store), task_id)["outcome"] == "done"
    task = task_row(store, task_id)
    assert (task.status, task.error_dialog) == ("done", None)
    assert run_sql(store, check_all) == []


def test_a_checksum_disagreement_is_named(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "post.check.checksum")
    to_ready(cli, store)
    run_round(cli, store, 1, 0.0)
    log = records(store, task_id, "log", "finished")[0]
    cli("data", "remove-files", "ds.log", log.lfn, db=store)
    add_files(cli, store, "ds.log", [{"lfn": log.lfn, "size": log.size, "checksum": "ad:00000000", "guid": log.guid}])
    assert item(finalize(cli, store), task_id)["outcome"] == "paused"
    assert task_row(store, task_id).error_dialog.startswith(
        f"post-processing: 1 output disagrees with the data catalog: {log.lfn} of ds.log has checksum ad:00000000 in the catalog, "
        f"{log.checksum} reported by its job")


# ------------------------------------------------------------------------------------- batch path

def test_the_batch_ends_tasks_with_nothing_to_check_and_leaves_the_others(cli, store, tmp_path, monkeypatch):
    prepare_grid(cli, store, tmp_path)
    ids = [submit(cli, store, f"post.batch.{n}", out=f"ds.out.{n}", log=f"ds.log.{n}") for n in range(3)]
    to_ready(cli, store)
    run_round(cli, store, 1, 0.0)
    add_files(cli, store, "ds.out.1", [{"lfn": "ds.out.1.stray.root", "size": 1}])
    one_task = []
    original = postprocessor.TaskFinalizer.run

    def spied(self):
        one_task.append(self.task_id)
        return original(self)

    monkeypatch.setattr(postprocessor.TaskFinalizer, "run", spied)
    report = finalize(cli, store)
    assert one_task == [ids[1]]  # the only task with something to remove
    assert [item(report, task_id)["outcome"] for task_id in ids] == ["done", "done", "done"]
    assert "1 stray file removed" in item(report, ids[1])["reason"]
    assert "ds.out.1.stray.root" not in catalog_lfns(store, "ds.out.1")
    assert run_sql(store, check_all) == []


# ------------------------------------------------------------------------------------- the check

def test_check_catches_a_task_that_ended_with_two_files_for_one_input(cli, store, tmp_path, monkeypatch):
    """The guard broken: with the output check disabled, the retried job's duplicate stays in the ended
    task's dataset, and `jedictl check` names it."""
    monkeypatch.setattr(postprocessor, "check_outputs", lambda conn, task_id, now, by: PostCheck())
    monkeypatch.setattr(batch_module, "tasks_to_check", lambda conn, task_ids: set())
    prepare_grid(cli, store, tmp_path)
    task_id, failed_outputs, _ = started_with_failures(cli, store)
    duplicate = failed_outputs[0]
    add_files(cli, store, "ds.out", [{"lfn": duplicate.lfn, "size": 123}])
    assert item(run_until_final(cli, store, task_id), task_id)["outcome"] == "done"
    problems = run_sql(store, check_all)
    # One line per input of the failed job (two files per job): each names the two files.
    assert problems and all(line.startswith(f"task {task_id} output dataset ds.out holds 2 files for input f.") for line in problems)
    assert all(duplicate.lfn in line and line.endswith("though the task is done") for line in problems)
    checked = cli("check", db=store, code=1)
    assert "duplicate_outputs_of_ended_tasks" in checked.output
