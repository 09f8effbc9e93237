"""Analysis brokerage follows the data, end to end on both backends (issue 19, item 1; docs/analysis.md).

Three single-core sites, the input only at one: the jobs go there. Twelve hours on (ANALY_TIMEOUT) the
watchdog closes the jobs that got no CPU; the next jobs go to an idle site, wait `assigned` (not
dispatchable) with their input marked for transfer, and become `activated` -- dispatchable -- once the
catalog records the replica at an endpoint that site reads.
"""

from __future__ import annotations

import json
from datetime import timedelta

import yaml
from sqlalchemy import select, update

from jedictl.clock import parse_time
from jedictl.store.invariants import check_all
from jedictl.store.schema import job_files, jobs
from tests.helpers import run_sql

T0 = parse_time("2030-03-01T08:00:00")
SITES = ("DATA_SITE", "IDLE_B", "IDLE_C")


def at(delta: timedelta = timedelta()) -> dict[str, str]:
    return {"JEDICTL_NOW": (T0 + delta).isoformat()}


GRID = {
    "storage_endpoints": [{"name": f"{site}_DISK", "kind": "disk", "free_gb": 100000, "total_gb": 200000} for site in SITES],
    "sites": [{"name": site, "cloud": "WORLD", "core_count": 1, "core_power": 10.0, "max_memory": 4000, "max_walltime": 172800,
               "max_scratch_mb": 60000, "read_endpoints": [f"{site}_DISK"], "write_endpoints": [f"{site}_DISK"]} for site in SITES],
}
FILES = [{"lfn": f"user.data.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 9)]


def catalog(*endpoints: str) -> dict:
    return {"datasets": [{"name": "data.analysis.in", "state": "closed", "files": FILES,
                          "replicas": [{"endpoint": endpoint} for endpoint in endpoints]}]}


TASK = {
    "taskName": "user.someone.follows.data/", "vo": "atlas", "prodSourceLabel": "user", "taskType": "anal",
    "processingType": "panda-client-jedi-run", "userName": "someone", "nFilesPerJob": 2, "skipScout": True, "maxAttempt": 5,
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "data.analysis.in", "value": "-i ${IN}"},
        {"type": "template", "param_type": "output", "dataset": "user.someone.follows.data_out/", "value": "user.someone.${SN}.root"},
    ],
    "log": {"type": "template", "param_type": "log", "dataset": "user.someone.follows.data.log/", "value": "user.someone.${SN}.log.tgz"},
}


def _import(cli, store, tmp_path, name: str, document: dict, kind: str = "data") -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    cli(kind, "import", str(path), db=store)


def _jobs(store) -> list:
    return run_sql(store, lambda conn: list(conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.site).order_by(jobs.c.id))))


def _live(store) -> list:
    return [job for job in _jobs(store) if job.status not in ("closed", "cancelled", "failed", "finished")]


def test_analysis_jobs_follow_the_data_then_move_with_a_transfer_after_analy_timeout(cli, store, tmp_path):
    _import(cli, store, tmp_path, "grid", GRID, kind="sites")
    _import(cli, store, tmp_path, "data", catalog("DATA_SITE_DISK"))
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK), env=at())["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store, env=at())
    explained = cli.json("explain", "task", str(task_id), db=store, env=at())
    data = {row["site"]: row["data"] for row in explained["brokerage"]}
    assert data["DATA_SITE"].startswith("holds the data") and data["IDLE_B"].startswith("no replica: holds 0 of")
    assert "jobs go to the data (held at DATA_SITE)" in explained["summary"]

    # 1. The jobs go to the data.
    made = cli.json("generate", "--seed", "1", db=store, env=at())
    assert made["counts"]["jobs"] == 4
    assert {(job.status, job.site) for job in _jobs(store)} == {("activated", "DATA_SITE")}

    # 2. Twelve hours without a CPU (ANALY_TIMEOUT): the watchdog closes them, their files go back.
    watched = cli.json("watch", db=store, env=at(timedelta(hours=12, minutes=5)))
    assert watched["counts"]["job_timeout"] == 4
    assert {job.status for job in _jobs(store)} == {"closed"}

    # 3. The only data site kept the task's jobs waiting: the next jobs go to an idle site with their input.
    later = timedelta(hours=12, minutes=10)
    explained = cli.json("explain", "task", str(task_id), db=store, env=at(later))
    rows = {row["site"]: row for row in explained["brokerage"]}
    assert rows["DATA_SITE"]["rule"] == "data_locality" and rows["DATA_SITE"]["message"].startswith("busy: 4 jobs of this task closed")
    assert "chosen after ANALY_TIMEOUT" in rows["IDLE_B"]["data"] and rows["IDLE_B"]["kept"]
    cli("generate", "--seed", "1", db=store, env=at(later))
    moved = _live(store)
    assert len(moved) == 4 and {job.status for job in moved} == {"assigned"}
    assert {job.site for job in moved} <= {"IDLE_B", "IDLE_C"}
    marked = run_sql(store, lambda conn: {(row.destination, row.type) for row in conn.execute(
        select(job_files.c.destination, job_files.c.type).where(job_files.c.job_id.in_([job.id for job in moved]),
                                                                job_files.c.type == "input"))})
    assert marked <= {("IDLE_B_DISK", "input"), ("IDLE_C_DISK", "input")} and marked
    listed = cli.json("jobs", "list", "--status", "assigned", db=store)
    assert len(listed) == 4 and {job["status"] for job in listed} == {"assigned"}
    shown = cli.json("task", "show", str(task_id), db=store)["jobs"]
    assert shown["by_status"] == {"assigned": 4, "closed": 4} and shown["state"] == "submitted"

    # 4. Not dispatchable while the input is on its way; the watchdog leaves them waiting.
    for site in ("IDLE_B", "IDLE_C"):
        assert cli.json("jobs", "dispatch", "--site", site, "--count", "10", db=store, env=at(later))["jobs"] == []
    assert cli.json("watch", db=store, env=at(later + timedelta(minutes=5)))["counts"]["activate"] == 0
    assert run_sql(store, check_all) == []

    # 5. The transfer is done (the catalog records the replica at the idle sites): activated, dispatchable.
    _import(cli, store, tmp_path, "arrived", catalog("DATA_SITE_DISK", "IDLE_B_DISK", "IDLE_C_DISK"))
    watched = cli.json("watch", db=store, env=at(later + timedelta(hours=1)))
    assert watched["counts"]["activate"] == 4
    assert {item["reason"] for item in watched["items"] if item["outcome"] == "activate"} <= {"input at IDLE_B_DISK", "input at IDLE_C_DISK"}
    assert {job.status for job in _live(store)} == {"activated"}
    handed = [job for site in ("IDLE_B", "IDLE_C")
              for job in cli.json("jobs", "dispatch", "--site", site, "--count", "10", db=store, env=at(later + timedelta(hours=1)))["jobs"]]
    assert len(handed) == 4
    assert run_sql(store, check_all) == []


def test_no_site_with_the_data_sends_the_jobs_with_a_transfer(cli, store, tmp_path):
    grid = {**GRID, "storage_endpoints": GRID["storage_endpoints"] + [{"name": "FAR_DISK", "kind": "disk", "free_gb": 1, "total_gb": 2}]}
    _import(cli, store, tmp_path, "grid", grid, kind="sites")
    _import(cli, store, tmp_path, "data", catalog("FAR_DISK"))
    cli("submit", "-", db=store, input=json.dumps(TASK), env=at())
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store, env=at())
    assert {job.status for job in _jobs(store)} == {"assigned"}
    # `check` sees an assigned job that waits for no transfer (here: its marks wiped by hand).
    first = _jobs(store)[0].id

    def wipe(conn):  # and put back, in the same transaction
        marked = job_files.c.job_id == first
        kept = conn.execute(select(job_files.c.id, job_files.c.destination).where(marked)).all()
        conn.execute(update(job_files).where(marked).values(destination=None))
        found = check_all(conn)
        for row_id, destination in kept:
            conn.execute(update(job_files).where(job_files.c.id == row_id).values(destination=destination))
        return found
    violations = run_sql(store, wipe)
    assert violations == [f"task 1 job {first} is assigned but waits for no input transfer"]
    # An assigned job that never gets its input is closed after 12 h, and its files placed again.
    watched = cli.json("watch", db=store, env=at(timedelta(hours=12, minutes=5)))
    assert watched["counts"]["job_timeout"] == 4 and watched["counts"]["activate"] == 0
    assert run_sql(store, check_all) == []


def test_a_paused_task_s_assigned_jobs_wait_for_its_resume(cli, store, tmp_path):
    grid = {**GRID, "storage_endpoints": GRID["storage_endpoints"] + [{"name": "FAR_DISK", "kind": "disk", "free_gb": 1, "total_gb": 2}]}
    _import(cli, store, tmp_path, "grid", grid, kind="sites")
    _import(cli, store, tmp_path, "data", catalog("FAR_DISK"))
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK), env=at())["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store, env=at())
    cli("task", "pause", str(task_id), db=store, env=at(timedelta(minutes=1)))
    _import(cli, store, tmp_path, "arrived", catalog("FAR_DISK", *(f"{site}_DISK" for site in SITES)))
    assert cli.json("watch", db=store, env=at(timedelta(minutes=5)))["counts"]["activate"] == 0
    assert {job.status for job in _jobs(store)} == {"assigned"}
    cli("task", "resume", str(task_id), db=store, env=at(timedelta(minutes=6)))
    assert cli.json("watch", db=store, env=at(timedelta(minutes=10)))["counts"]["activate"] == 4
    assert {job.status for job in _jobs(store)} == {"activated"}
    assert run_sql(store, check_all) == []
