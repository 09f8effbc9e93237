"""Job timeouts applied (engine.jobs.expiry): expired jobs are closed and their files placed again."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from jedictl.clock import parse_time
from jedictl.config import load_settings
from jedictl.engine.jobs.expiry import close_expired_jobs
from jedictl.store.database import open_store
from jedictl.store.schema import job_retry_history, jobs
from tests.cli.test_jobs_report import _consistent, _files, _task
from tests.helpers import run_sql

NOW = "2026-11-21T12:00:00"


def _expire(store_url: str, at: str):
    settings = load_settings({"db": store_url}).settings
    store = open_store(store_url)
    try:
        return close_expired_jobs(store, settings, parse_time(at))
    finally:
        store.close()


def _job(store, job_id):
    return run_sql(store, lambda conn: conn.execute(select(jobs).where(jobs.c.id == job_id)).one())


def test_expired_jobs_are_closed_and_rebrokered(cli, store, tmp_path):
    env = {"JEDICTL_NOW": NOW}
    _task(cli, store, tmp_path)
    sent, running, silent = _dispatch_three(cli, store, env)
    late = (parse_time(NOW) + timedelta(minutes=20)).isoformat()
    cli("jobs", "heartbeat", str(running["job_id"]), str(silent["job_id"]), db=store, env={"JEDICTL_NOW": late})
    # 2 h 15 min on: the sent job waited > 30 min; the silent one has not beaten for > 2 h; the
    # running one beats again just before.
    beat = (parse_time(NOW) + timedelta(hours=2, minutes=10)).isoformat()
    cli("jobs", "heartbeat", str(running["job_id"]), db=store, env={"JEDICTL_NOW": beat})
    report = _expire(store, (parse_time(NOW) + timedelta(hours=2, minutes=25)).isoformat())
    closed = {item["job_id"]: item["reason"] for item in report.items if item["outcome"] == "closed"}
    assert closed[sent["job_id"]].startswith("sent for 2h25m (limit 30m)")
    assert closed[silent["job_id"]].startswith("no heartbeat for 2h5m (limit 2h)")
    assert running["job_id"] not in closed
    row = _job(store, sent["job_id"])
    assert (row.status, row.sub_status, row.error_source, row.error_code) == ("closed", "toreassign", "kill", 51)
    # Closed: an attempt used, no failure; the files are generated again (elsewhere if need be).
    inputs = _files(store, [i["lfn"] for i in sent["inputs"]])
    assert {(f["status"], f["attempt_nr"], f["failed_attempt"]) for f in inputs.values()} == {("ready", 1, 0)}
    _consistent(store)
    assert _expire(store, (parse_time(NOW) + timedelta(hours=2, minutes=26)).isoformat()).items == []  # nothing twice
    made = cli.json("generate", "--seed", "4", db=store, env={"JEDICTL_NOW": (parse_time(NOW) + timedelta(hours=3)).isoformat()})
    assert made["counts"]["jobs"] >= 2  # the two closed jobs are made again (and whatever the throttle held back)
    history = run_sql(store, lambda conn: sorted(r.old_job_id for r in conn.execute(select(job_retry_history))))
    assert history == sorted([sent["job_id"], silent["job_id"]])
    _consistent(store)


def test_activated_jobs_expire_after_two_days(cli, store, tmp_path):
    _task(cli, store, tmp_path)  # generated at the wall clock's now
    waiting = cli.json("jobs", "list", "--status", "activated", "--limit", "1000", db=store)
    report = _expire(store, (parse_time(waiting[0]["modified_at"].rstrip("Z")) + timedelta(hours=47)).isoformat())
    assert report.items == []
    report = _expire(store, (parse_time(waiting[0]["modified_at"].rstrip("Z")) + timedelta(hours=49)).isoformat())
    assert len(report.items) == len(waiting) and {i["outcome"] for i in report.items} == {"closed"}
    _consistent(store)


def _dispatch_three(cli, store, env):
    site = cli.json("jobs", "list", "--status", "activated", "--limit", "1", db=store)[0]["site"]
    return cli.json("jobs", "dispatch", "--site", site, "--count", "3", db=store, env=env)["jobs"]
