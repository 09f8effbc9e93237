"""`finalize` and `watch` processes killed at random points (SIGKILL, real processes): the passes that
follow complete every task correctly, nothing is done twice, and every counter equals its rows
(issue 7 acceptance)."""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select

from jedictl.clock import parse_time
from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, task_status_history, tasks
from tests.cli.test_finalize import NOW, SKIP_SCOUTS, prepare_grid, submit, task_row, to_ready
from tests.helpers import jedictl_process, run_sql

WAITS_FOR_INPUT = [
    {"type": "template", "param_type": "input", "dataset": "ds.never", "value": "--in=${IN}"},
    {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"},
]


def day(n: int) -> str:
    return (parse_time(NOW) + timedelta(days=n)).isoformat()


def _tasks(conn):
    return {row.id: row for row in conn.execute(select(tasks))}


def _history(conn):
    return [(row.task_id, row.status) for row in conn.execute(select(task_status_history.c.task_id, task_status_history.c.status)
                                                              .order_by(task_status_history.c.id))]


def _masters(conn):
    return {row.task_id: row for row in conn.execute(select(datasets).where(datasets.c.type == "input", datasets.c.master_id.is_(None)))}


def _setup(cli, store, tmp_path) -> dict[str, list[int]]:
    """Tasks waiting for finalize and watch: scouts done (-> done), all jobs failed (-> failed),
    all scouts failed (-> broken), an input that never appears (-> exhausted after 7 days,
    finished by the watchdog 48 h later -> failed, no input)."""
    prepare_grid(cli, store, tmp_path)
    kinds: dict[str, list[int]] = {"failed": [], "broken": [], "done": [], "exhausted": []}
    for n in range(2):
        kinds["failed"].append(submit(cli, store, f"fails.{n}", maxAttempt=1, **SKIP_SCOUTS))
        kinds["broken"].append(submit(cli, store, f"bad.scouts.{n}", maxAttempt=1))
    to_ready(cli, store)
    for seed in range(1, 6):  # every job of these tasks fails, until none is left to make
        made = cli.json("generate", "--seed", str(seed), "--no-throttle", "--now", NOW, db=store)["jobs"]
        if not cli.json("simulate", "--seed", str(seed), "--failure-rate", "1", "--now", NOW, db=store)["jobs"] and not made:
            break
    for n in range(5):
        kinds["done"].append(submit(cli, store, f"scouts.{n}"))
    # waitInput: an unknown input makes the task wait (and exhaust) instead of breaking it at once
    kinds["exhausted"].append(submit(cli, store, "never.fed", jobParameters=WAITS_FOR_INPUT, waitInput=True, **SKIP_SCOUTS))
    to_ready(cli, store)
    cli("generate", "--seed", "9", "--no-throttle", "--now", NOW, db=store)
    cli("simulate", "--seed", "9", "--failure-rate", "0", "--now", NOW, db=store)
    return kinds


def _killed_round(store: str, now: str, rng: random.Random) -> list[int]:
    """finalize and watch started together and SIGKILLed: finalize a moment after it took a lease
    (in the middle of a task) or after a random delay, watch after a random delay. Returns the exit
    codes (-9: killed; 0: the pass ended first)."""
    from jedictl.store.database import open_store

    finalize, watch = (jedictl_process([command, "--db", store, "--now", now, "-q"]) for command in ("finalize", "watch"))
    started = time.monotonic()
    deadline = started + rng.uniform(0.3, 2.5)
    reader = open_store(store)
    try:
        while time.monotonic() < deadline and finalize.poll() is None:
            with reader.read() as conn:  # a lease of this round's clock: finalize is working on a task
                if conn.execute(select(tasks.c.id).where(tasks.c.lease_expires_at > parse_time(now))).first() is not None:
                    time.sleep(rng.uniform(0.0, 0.2))
                    break
            time.sleep(0.01)
    finally:
        reader.close()
    codes = []
    for worker, extra in ((finalize, 0.0), (watch, rng.uniform(0.0, 1.0))):
        time.sleep(extra)
        if worker.poll() is None:
            worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=120)
        codes.append(worker.returncode)
    return codes


@pytest.mark.slow
def test_killed_finalize_and_watch_leave_nothing_the_next_passes_cannot_complete(cli, store, tmp_path):
    kinds = _setup(cli, store, tmp_path)
    rng = random.Random(7)
    codes: list[int] = []
    # Each round: both passes killed somewhere (or finishing first), then the pilots run what was
    # released. The clock moves a day per round, so dead leases expire and the watchdog's waits end.
    for n in range(8):
        codes.extend(_killed_round(store, day(n), rng))
        cli("feed", "--now", day(n), db=store)
        cli("generate", "--seed", str(10 + n), "--now", day(n), db=store)
        cli("simulate", "--seed", str(10 + n), "--failure-rate", "0", "--now", day(n), db=store)
        assert run_sql(store, check_all) == [], f"round {n}"
    assert -signal.SIGKILL in codes, "at least one pass must have been killed"
    # Normal passes until every task is final.
    for n in range(8, 20):
        cli("finalize", "--now", day(n), db=store)
        cli("watch", "--now", day(n), db=store)
        cli("finalize", "--now", day(n), db=store)
        cli("feed", "--now", day(n), db=store)
        cli("generate", "--seed", str(10 + n), "--now", day(n), db=store)
        cli("simulate", "--seed", str(10 + n), "--failure-rate", "0", "--now", day(n), db=store)
        if all(row.status in ("done", "finished", "failed", "broken", "aborted") for row in run_sql(store, _tasks).values()):
            break

    rows, history, masters = run_sql(store, _tasks), run_sql(store, _history), run_sql(store, _masters)
    expected = {task_id: kind for kind, ids in kinds.items() for task_id in ids}
    ended = {"done": "done", "failed": "failed", "broken": "broken", "exhausted": "failed"}
    assert {task_id: rows[task_id].status for task_id in expected} == {task_id: ended[kind] for task_id, kind in expected.items()}
    assert all(row.lease_owner is None for row in rows.values())
    assert run_sql(store, check_all) == []
    # Nothing was done twice: every status a task went through is recorded once.
    counts = Counter(history)
    for task_id, kind in expected.items():
        path = [status for tid, status in history if tid == task_id]
        assert all(counts[(task_id, status)] <= 1 for status in ("scouted", "prepared", "tobroken", "finishing", "passed")), path
        assert counts[(task_id, ended[kind])] == 1, path
        if kind == "done":
            assert path[-4:] == ["scouted", "running", "prepared", "done"], path
            master = masters[task_id]
            assert master.n_files_finished == master.n_files == master.n_files_to_be_used == 25
        if kind == "exhausted":
            assert path[-4:] == ["exhausted", "finishing", "passed", "failed"], path
    assert task_row(store, kinds["done"][0]).walltime_unit == "kSI2kseconds"


def test_a_finalize_that_dies_between_two_steps_is_completed_once_its_lease_expires(cli, sqlite_url, tmp_path, monkeypatch):
    """The deterministic half: the process dies after writing `prepared` (its lease still held); a pass
    at the same moment leaves the task alone, one after the lease expired ends it."""
    from jedictl.config import load_settings
    from jedictl.engine.finalize import postprocessor
    from jedictl.store.database import open_store

    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_id = submit(cli, store, "dies", **SKIP_SCOUTS)
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--no-throttle", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    real = postprocessor.TaskFinalizer._final

    def dying(self, *args, **kwargs):
        raise SystemExit("killed")  # after the prepared step's transaction committed

    monkeypatch.setattr(postprocessor.TaskFinalizer, "_final", dying)
    monkeypatch.setattr(postprocessor, "finalize_batch", lambda *args: {})  # the one-task path, step by step
    live = open_store(store)
    try:
        with pytest.raises(SystemExit):
            postprocessor.finalize_pass(live, load_settings({"db": store}).settings, "dead-finalizer", parse_time(NOW))
    finally:
        live.close()
    monkeypatch.setattr(postprocessor.TaskFinalizer, "_final", real)
    monkeypatch.undo()
    task = task_row(store, task_id)
    assert (task.status, task.lease_owner) == ("prepared", "dead-finalizer")
    assert run_sql(store, check_all) == []
    assert cli.json("finalize", "--now", NOW, db=store)["items"] == []  # its lease still holds
    report = cli.json("finalize", "--now", (parse_time(NOW) + timedelta(minutes=11)).isoformat(), db=store)
    assert [(i["task_id"], i["outcome"]) for i in report["items"]] == [(task_id, "done")]
    assert task_row(store, task_id).lease_owner is None
    assert run_sql(store, check_all) == []


def test_a_batched_finalize_that_dies_in_its_transaction_writes_nothing(cli, sqlite_url, tmp_path, monkeypatch):
    """The batch (issue 18) writes every task of a claim in one transaction: a process killed in it
    leaves the tasks as they were, leased; a pass after the lease expired ends them."""
    from jedictl.config import load_settings
    from jedictl.engine.finalize import postprocessor
    from jedictl.store import completion
    from jedictl.store.database import open_store

    store = sqlite_url
    cli("db", "init", db=store)
    prepare_grid(cli, store, tmp_path)
    task_ids = [submit(cli, store, f"dies{n}", **SKIP_SCOUTS) for n in range(3)]
    to_ready(cli, store)
    cli("generate", "--seed", "1", "--no-throttle", "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)

    def dying(*args, **kwargs):
        raise SystemExit("killed")  # the tasks and datasets are written, the history not yet

    monkeypatch.setattr(completion, "record_statuses", dying)
    live = open_store(store)
    try:
        with pytest.raises(SystemExit):
            postprocessor.finalize_pass(live, load_settings({"db": store}).settings, "dead-finalizer", parse_time(NOW))
    finally:
        live.close()
    monkeypatch.undo()
    assert {(task_row(store, t).status, task_row(store, t).lease_owner) for t in task_ids} == {("running", "dead-finalizer")}
    assert run_sql(store, check_all) == []
    assert cli.json("finalize", "--now", NOW, db=store)["items"] == []  # the leases still hold
    report = cli.json("finalize", "--now", (parse_time(NOW) + timedelta(minutes=11)).isoformat(), db=store)
    assert sorted((i["task_id"], i["outcome"]) for i in report["items"]) == [(t, "done") for t in sorted(task_ids)]
    assert all(task_row(store, t).lease_owner is None for t in task_ids)
    assert run_sql(store, check_all) == []
