"""`jedictl watch` through the CLI with a test clock: one test per watchdog action, and the paths
pending -> timed out (exhausted) and throttled -> released."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select, update

from jedictl.clock import parse_time
from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, jobs, tasks
from tests.cli.test_finalize import NOW, SKIP_SCOUTS, dataset_rows, prepare_grid, statuses, submit, task_row, to_ready
from tests.helpers import run_sql


def at(**delta: float) -> str:
    return (parse_time(NOW) + timedelta(**delta)).isoformat()


def watch(cli, store, now: str, env: dict | None = None) -> dict:
    report = cli.json("watch", "--now", now, db=store, env=env)
    assert run_sql(store, check_all) == []
    return report


def actions(report: dict, task_id: int | None = None) -> list[tuple]:
    return [(i["outcome"], i.get("status")) for i in report["items"] if task_id is None or i.get("task_id") == task_id]


def init(cli, url, tmp_path) -> str:
    cli("db", "init", db=url)
    prepare_grid(cli, url, tmp_path)
    return url


# -------------------------------------------------------------------------------- pending, timeout

def test_pending_task_is_retried_then_exhausted_after_seven_days(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "waits.for.input", **SKIP_SCOUTS, waitInput=True, jobParameters=[
        {"type": "template", "param_type": "input", "dataset": "ds.not.yet", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"}])
    to_ready(cli, store)
    task = task_row(store, task_id)
    assert (task.status, task.old_status, task.frozen_at) == ("pending", "defined", parse_time(NOW))
    assert watch(cli, store, at(minutes=59))["items"] == []  # its wait is not over
    report = watch(cli, store, at(minutes=60))
    assert report["items"] == [{"outcome": "reactivate", "task_id": task_id, "status": "defined",
                                "reason": "pending since 2026-11-21 12:00:00: back to defined"}]
    # Still missing: pending again, and the time it has been pending still counts from the first time.
    cli("feed", "--now", at(minutes=61), db=store)
    assert task_row(store, task_id).frozen_at == parse_time(NOW)
    assert actions(watch(cli, store, at(days=6, hours=23)), task_id) == [("reactivate", "defined")]
    cli("feed", "--now", at(days=6, hours=23, minutes=1), db=store)
    report = watch(cli, store, at(days=7, hours=1))
    assert report["items"] == [{"outcome": "pending_timeout", "task_id": task_id, "status": "exhausted",
                                "reason": "timeout while in pending since 2026-11-21 12:00:00"}]
    assert statuses(cli, store, task_id)[-2:] == ["pending", "exhausted"]


def test_pending_on_a_generator_problem_goes_back_to_its_old_status(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    task_id = submit(cli, store, "nosite", **SKIP_SCOUTS)
    to_ready(cli, store)
    for site in ("CERN-PROD_GRID", "BNL_PROD"):  # the single-core sites go down: no site can run its jobs
        cli("sites", "set-status", site, "offline", db=store)
    cli("generate", "--now", NOW, db=store)
    assert (task_row(store, task_id).status, task_row(store, task_id).old_status) == ("pending", "ready")
    assert actions(watch(cli, store, at(minutes=61)), task_id) == [("reactivate", "ready")]
    assert task_row(store, task_id).old_status is None


# ------------------------------------------------------------------------------- throttle, release

def test_task_whose_files_keep_failing_is_throttled_then_released(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "keeps.failing", maxAttempt=20, **SKIP_SCOUTS)
    to_ready(cli, store)
    for seed in range(1, 6):  # every file fails five times
        cli("generate", "--seed", str(seed), "--now", NOW, db=store)
        cli("simulate", "--seed", str(seed), "--failure-rate", "1", "--error", "pilot:1234", "--now", NOW, db=store)
        if seed < 5:
            assert actions(watch(cli, store, NOW), task_id) == []
    report = watch(cli, store, NOW)
    assert report["items"] == [{"outcome": "throttle", "task_id": task_id, "status": "throttled",
                                "reason": "input files failed 5.0 times on average: throttled until 2026-11-21 14:00:00"}]
    task = task_row(store, task_id)
    assert (task.old_status, task.num_throttled, task.wait_until) == ("running", 1, parse_time(at(minutes=120)))
    assert cli.json("generate", "--now", at(minutes=10), db=store)["items"] == []  # no jobs while throttled
    assert actions(watch(cli, store, at(minutes=119)), task_id) == []
    report = watch(cli, store, at(minutes=120))
    assert report["items"] == [{"outcome": "release_throttled", "task_id": task_id, "status": "running",
                                "reason": "throttle period over"}]
    assert (task_row(store, task_id).old_status, task_row(store, task_id).num_throttled) == (None, 1)
    assert statuses(cli, store, task_id)[-2:] == ["throttled", "running"]


# -------------------------------------------------------------------------------------------- boost

def test_nearly_done_task_is_boosted_to_900_and_express(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    task_id = submit(cli, store, "nearly.done", **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert cli.json("simulate", "--failure-rate", "0", "--jobs", "12", "--now", NOW, db=store)["counts"]["finished"] == 12
    # 12 of 13 jobs done: 24 of 25 files, one job left
    assert watch(cli, store, NOW)["items"] == [{"outcome": "boost", "task_id": task_id, "reason": "96.0% of input done and 0 jobs left"}]
    task = task_row(store, task_id)
    assert (task.current_priority, task.gshare) == (900, "Express")
    queued = run_sql(store, lambda conn: conn.execute(select(jobs.c.current_priority, jobs.c.gshare).where(jobs.c.status == "activated")).all())
    assert [tuple(row) for row in queued] == [(900, "Express")]
    assert actions(watch(cli, store, NOW), task_id) == []  # boosted once


# -------------------------------------------------------------------------------------- auto pause

def test_tasks_failing_too_often_are_paused_with_their_siblings(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    first = submit(cli, store, "fails.a", nFilesPerJob=1, maxAttempt=10, **SKIP_SCOUTS)
    second = submit(cli, store, "fails.b", nFilesPerJob=1, maxAttempt=10, **SKIP_SCOUTS)  # same payload
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "1", "--jobs", "10", "--now", NOW, db=store)
    env = {"JEDICTL_WATCHDOG__PAUSE_FAILURE_RATE": "0.5", "JEDICTL_WATCHDOG__PAUSE_MIN_JOBS": "5",
           "JEDICTL_WATCHDOG__PAUSE_MIN_REMAINING_JOBS": "1"}
    assert watch(cli, store, NOW)["items"] == []  # off by default
    report = watch(cli, store, NOW, env=env)
    paused = {i["task_id"]: i["reason"] for i in report["items"] if i["outcome"] == "pause"}
    assert set(paused) == {first, second}
    assert any(reason.startswith("watchdog due to high job failure rate") for reason in paused.values())
    assert task_row(store, first).status == task_row(store, second).status == "paused"
    assert run_sql(store, lambda conn: conn.execute(select(func.count()).where(jobs.c.status == "activated")).scalar()) == 0
    shown = cli.json("task", "show", str(first), db=store)["commands"]
    assert [(c["command"], c["by"], c["status"]) for c in shown] == [("pause", "jedictl watch", "done")]


# ------------------------------------------------------------------------------------- goal reached

def test_task_that_reached_its_goal_is_finished_softly(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "goal.90", nFilesPerJob=1, goal=90, **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "1", "--jobs", "2", "--now", NOW, db=store)  # 2 files back to ready
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--now", NOW, db=store)
    report = watch(cli, store, NOW)  # 23 of 25 done: the goal, but not yet a boost
    assert actions(report, task_id) == [("goal_reached", "passed")]
    assert next(i for i in report["items"] if i.get("task_id") == task_id)["reason"] == "JEDI. Goal reached (92.0% >= 90%)"
    assert statuses(cli, store, task_id)[-2:] == ["finishing", "passed"]
    assert cli.json("finalize", "--now", NOW, db=store)["items"][0]["outcome"] == "finished"
    assert dataset_rows(store, task_id)["ds.in"]["n_files_finished"] == 23


def test_goal_is_checked_at_most_once_an_hour(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    task_id = submit(cli, store, "goal.far", goal=90, **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert actions(watch(cli, store, NOW), task_id) == []
    assert task_row(store, task_id).assessed_at == parse_time(NOW)
    watch(cli, store, at(minutes=59))
    assert task_row(store, task_id).assessed_at == parse_time(NOW)
    watch(cli, store, at(minutes=60))
    assert task_row(store, task_id).assessed_at == parse_time(at(minutes=60))


# --------------------------------------------------------------------------- leases, picked files

def test_files_left_picked_by_a_dead_process_are_rescued(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    dead = submit(cli, store, "dead.owner", **SKIP_SCOUTS)
    idle = submit(cli, store, "idle.unleased", **SKIP_SCOUTS)
    to_ready(cli, store)

    def crash(conn):  # what a process that picked files and died would leave
        for task_id in (dead, idle):
            dataset_id = conn.execute(select(datasets.c.id).where(datasets.c.task_id == task_id, datasets.c.type == "input")).scalar()
            picked = conn.execute(select(files.c.id).where(files.c.dataset_id == dataset_id).order_by(files.c.id).limit(4)).scalars().all()
            conn.execute(update(files).where(files.c.id.in_(picked)).values(status="picked"))
            conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(n_files_used=4))
        conn.execute(update(tasks).where(tasks.c.id == dead).values(lease_owner="host:1:dead", lease_expires_at=datetime(2026, 11, 21, 11)))
        conn.execute(update(tasks).where(tasks.c.id == idle).values(modified_at=datetime(2026, 11, 21, 11, 45)))

    run_sql(store, crash)
    assert run_sql(store, check_all) == []
    report = watch(cli, store, NOW)
    assert report["items"] == [{"outcome": "rescue_picked", "task_id": dead, "files": 4,
                                "reason": "4 picked files back to ready: lease of host:1:dead expired at 2026-11-21 11:00:00"}]
    assert task_row(store, dead).lease_owner is None
    assert dataset_rows(store, dead)["ds.in"]["n_files_used"] == 0
    assert dataset_rows(store, idle)["ds.in"]["n_files_used"] == 4  # idle for 15 min only
    report = watch(cli, store, at(minutes=15))
    assert [(i["outcome"], i["task_id"], i["files"]) for i in report["items"]] == [("rescue_picked", idle, 4)]
    assert dataset_rows(store, idle)["ds.in"]["n_files_used"] == 0
    assert cli.json("generate", "--now", at(minutes=16), db=store)["counts"]["jobs"] == 26  # every file is made into a job again


def test_expired_leases_are_released_and_live_ones_kept(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    expired = submit(cli, store, "expired.lease", **SKIP_SCOUTS)
    live = submit(cli, store, "live.lease", **SKIP_SCOUTS)
    cli("refine", "--now", NOW, db=store)
    run_sql(store, lambda conn: (
        conn.execute(update(tasks).where(tasks.c.id == expired).values(lease_owner="gone", lease_expires_at=datetime(2026, 11, 21, 11, 59))),
        conn.execute(update(tasks).where(tasks.c.id == live).values(lease_owner="busy", lease_expires_at=datetime(2026, 11, 21, 12, 5)))))
    report = watch(cli, store, NOW)
    assert report["items"] == [{"outcome": "release_lease", "task_id": expired, "reason": "lease of gone expired at 2026-11-21 11:59:00"}]
    assert task_row(store, expired).lease_owner is None and task_row(store, live).lease_owner == "busy"


# ------------------------------------------------------------------------------------- job timeouts

def test_job_timeouts_are_applied(cli, store, tmp_path):
    prepare_grid(cli, store, tmp_path)
    submit(cli, store, "stuck.jobs", **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    site = run_sql(store, lambda conn: conn.execute(select(jobs.c.site).limit(1)).scalar())
    sent = cli.json("jobs", "dispatch", "--site", site, "--count", "1", "--now", NOW, db=store)["jobs"][0]
    assert [i for i in watch(cli, store, at(minutes=30))["items"] if i["outcome"] == "job_timeout"] == []
    report = watch(cli, store, at(minutes=31))
    assert [(i["outcome"], i["job_id"]) for i in report["items"]] == [("job_timeout", sent["job_id"])]
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.status).where(jobs.c.id == sent["job_id"])).scalar()) == "closed"


def test_an_exhausted_task_with_disable_auto_finish_stays(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    kept = submit(cli, store, "df", disableAutoFinish=True, **SKIP_SCOUTS)
    kicked = submit(cli, store, "no.df", **SKIP_SCOUTS)
    cli("refine", "--now", NOW, db=store)
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id.in_([kept, kicked]))
                                             .values(status="exhausted", modified_at=datetime(2026, 11, 19, 12))))
    report = watch(cli, store, NOW)
    assert actions(report) == [("kick_exhausted", "finishing"), ("settle", "passed")]
    assert task_row(store, kept).status == "exhausted"


def test_a_child_waiting_for_its_parent_is_left_to_refine(cli, sqlite_url, tmp_path):
    store = init(cli, sqlite_url, tmp_path)
    parent = submit(cli, store, "slow.parent", **SKIP_SCOUTS)
    child = submit(cli, store, "waiting.child", parent_tid=parent, **SKIP_SCOUTS)
    to_ready(cli, store)
    assert (task_row(store, child).status, task_row(store, child).old_status) == ("pending", "registered")
    assert actions(watch(cli, store, at(days=9)), child) == []
    assert task_row(store, child).status == "pending"
