"""The pass framework's leases (engine/agent.py, generate, feed): a long pass keeps its lease by renewing
from its current moment, a task that moved under our lease is let go, and a pass that forgets a lease
has it released and reported as an error."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

import jedictl.clock
from jedictl.config import load_settings
from jedictl.engine.agent import PassReport, ending_leases, leased_pass
from jedictl.errors import LeaseLost
from jedictl.store import leases
from jedictl.store.database import open_store
from jedictl.store.schema import tasks
from tests.concurrency.test_run_overlap import evgen_task

NOW = datetime(2030, 1, 1, 12, 0, 0)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def ready_store(cli, store, tmp_path):
    """A store with the example grid and one no-input task without scouts, brokered and ready."""
    import yaml

    spec = {**evgen_task(0), "scouts": {"skip_scout": True}}
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(spec))
    cli("sites", "import", str(EXAMPLES / "sites.yaml"), db=store)
    cli("submit", str(path), "--now", NOW.isoformat(), db=store)
    for agent in ("refine", "feed", "broker"):
        cli(agent, "--now", NOW.isoformat(), db=store)
    return store


class _Steps:
    """A monotonic clock that moves 400 s each time it is read: a pass that takes long."""

    def __init__(self) -> None:
        self.value = 0.0

    def monotonic(self) -> float:
        self.value += 400.0
        return self.value


def test_a_long_generate_pass_renews_its_lease_from_its_current_moment(ready_store, monkeypatch):
    """Issue 15 item 4: chunk after chunk the lease moves on with the pass (lease 600 s, 400 s a chunk);
    renewed from the frozen start it would end 600 s after the start however long the pass ran."""
    from jedictl.engine.generate.generator import generate_pass

    settings = load_settings({"db": ready_store}, environ={"JEDICTL_GENERATE__BATCH_SIZE": "4"}).settings
    monkeypatch.setattr(jedictl.clock, "time", _Steps())
    seen: list[datetime] = []
    real_renew = leases.renew

    def renew(conn, table, row_id, owner, now, seconds, where=None):
        real_renew(conn, table, row_id, owner, now, seconds, where=where)
        seen.append(conn.execute(select(tasks.c.lease_expires_at).where(tasks.c.id == row_id)).scalar_one())

    monkeypatch.setattr(leases, "renew", renew)
    store = open_store(ready_store)
    try:
        report = generate_pass(store, settings, "me", NOW)
    finally:
        store.close()
    assert report.counts.get("jobs", 0) >= 8, report.as_dict()
    assert len(seen) >= 3, seen
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen  # each renewal later than the one before
    assert seen[-1] > NOW + timedelta(seconds=settings.lease.seconds + 400 * (len(seen) - 1)), seen


def test_a_task_moved_under_our_lease_is_let_go(cli, store):
    """A LeaseLost because an operator moved the task while we still hold its lease: the pass releases it."""
    from jedictl.engine.task.submission import parse_definition, register_task

    handle_store = open_store(store)
    try:
        with handle_store.begin() as conn:
            task_id = register_task(conn, parse_definition(evgen_task(0), user="u", default_user="u"), evgen_task(0), NOW, "test")

        def handle(task_id: int):
            with handle_store.begin() as conn:
                conn.execute(update(tasks).where(tasks.c.id == task_id).values(status="aborted"))
            raise LeaseLost(f"task {task_id} changed")

        report = leased_pass(handle_store, PassReport("t"), tasks.c.status == "registered", [tasks.c.id], handle,
                             owner="me", now=NOW, lease_seconds=600, limit=10, claim_batch=5)
        with handle_store.read() as conn:
            owner = conn.execute(select(tasks.c.lease_owner).where(tasks.c.id == task_id)).scalar_one()
    finally:
        handle_store.close()
    assert report.counts == {"skipped": 1}
    assert owner is None


def test_a_lease_left_at_the_end_of_a_pass_is_released_and_reported(cli, store):
    from jedictl.engine.task.submission import parse_definition, register_task

    handle_store = open_store(store)
    try:
        with handle_store.begin() as conn:
            task_id = register_task(conn, parse_definition(evgen_task(0), user="u", default_user="u"), evgen_task(0), NOW, "test")
            assert leases.claim_one(conn, tasks, task_id, "me", NOW, 600)
        report = PassReport("forgetful")
        assert ending_leases(handle_store, "me", report) == [task_id]
        assert ending_leases(handle_store, "me", report) == []
    finally:
        handle_store.close()
    assert report.errors == 1 and "1 task leases still held" in report.items[0]["reason"]


def test_a_batch_claimed_late_in_a_long_pass_holds_its_lease_from_then(cli, store, monkeypatch):
    """Each batch of a leased pass is claimed from the pass's current moment: the second batch, claimed
    after the first took 400 s, holds its leases until then + lease (from the frozen start it would be
    left with less than the lease, or none at all in a pass longer than the lease)."""
    from jedictl.engine.task.submission import parse_definition, register_task

    handle_store = open_store(store)
    expiries: dict[int, datetime] = {}
    try:
        with handle_store.begin() as conn:
            for n in range(2):
                document = {**evgen_task(n)}
                register_task(conn, parse_definition(document, user="u", default_user="u"), document, NOW, "test")
        monkeypatch.setattr(jedictl.clock, "time", _Steps())

        def handle(task_id: int):
            with handle_store.read() as conn:
                expiries[task_id] = conn.execute(select(tasks.c.lease_expires_at).where(tasks.c.id == task_id)).scalar_one()
            return "done", None

        leased_pass(handle_store, PassReport("t"), tasks.c.status == "registered", [tasks.c.id], handle,
                    owner="me", now=NOW, lease_seconds=600, limit=10, claim_batch=1)
    finally:
        handle_store.close()
    first, second = (expiries[task_id] for task_id in sorted(expiries))
    assert first > NOW + timedelta(seconds=600) and second >= first + timedelta(seconds=400), (first, second)


def test_a_pass_reads_its_candidates_once_and_claims_them_a_batch_at_a_time(cli, store, monkeypatch):
    """The filter is looked at once for the whole pass (and once more to find it empty), not once per
    claimed batch: finalize's 10,000 tasks in batches of 50 read every candidate 200 times before. A
    task that left the filter after the look is not claimed (each claim checks the filter again)."""
    from jedictl.engine.task.submission import parse_definition, register_task
    from jedictl.store import task_leases

    looks: list[int] = []
    real = task_leases.candidate_ids

    def counted(*args, **kwargs):
        found = real(*args, **kwargs)
        looks.append(len(found))
        return found

    monkeypatch.setattr(task_leases, "candidate_ids", counted)
    handle_store = open_store(store)
    try:
        with handle_store.begin() as conn:
            ids = [register_task(conn, parse_definition(evgen_task(n), user="u", default_user="u"), evgen_task(n), NOW, "test")
                   for n in range(7)]
        batches: list[int] = []

        def handle(task_id: int):
            if task_id == ids[0]:  # while the first batch is handled, a later task leaves the filter
                with handle_store.begin() as conn:
                    conn.execute(update(tasks).where(tasks.c.id == ids[5]).values(status="aborted"))
            batches.append(task_id)
            return "done", None

        report = leased_pass(handle_store, PassReport("t"), tasks.c.status == "registered", [tasks.c.id], handle,
                             owner="me", now=NOW, lease_seconds=600, limit=100, claim_batch=2)
        with handle_store.read() as conn:
            held = conn.execute(select(tasks.c.id).where(tasks.c.lease_owner.is_not(None)).order_by(tasks.c.id)).scalars().all()
    finally:
        handle_store.close()
    assert looks == [7, 0]
    assert batches == [i for i in ids if i != ids[5]] and report.counts == {"done": 6}
    assert held == ids[:5] + ids[6:]  # the handle leaves its leases to the caller's ending_leases
