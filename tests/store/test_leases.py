"""Leases on a connection, both backends (store/leases.py): a claim is one guarded UPDATE whose
rowcount decides, it repeats the condition the row was selected for, a renewal keeps the lease only
while it is ours and the row has not moved on, and extends it from the pass's current moment."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update

from jedictl.clock import PassClock
from jedictl.errors import LeaseLost
from jedictl.store import leases
from jedictl.store.schema import tasks
from tests.concurrency.test_run_overlap import evgen_task
from tests.helpers import run_sql

NOW = datetime(2030, 1, 1, 12, 0, 0)
LEASE = 600


@pytest.fixture
def task_id(store):
    """One registered task."""
    from jedictl.engine.task.submission import parse_definition, register_task

    spec = evgen_task(0)
    return run_sql(store, lambda conn: register_task(conn, parse_definition(spec, user="u", default_user="u"), spec, NOW, "test"))


def _lease(conn, task_id):
    return conn.execute(select(tasks.c.lease_owner, tasks.c.lease_expires_at).where(tasks.c.id == task_id)).one()


def test_a_claim_repeats_the_condition_the_row_was_chosen_for(store, task_id):
    """The generator's race: its candidate list said `ready`; another process generated, moved the task to
    pending and released it. Free again -- but the claim must not take it for a status it no longer has."""
    def race(conn):
        conn.execute(update(tasks).where(tasks.c.id == task_id).values(status="pending"))
        stale = leases.claim_one(conn, tasks, task_id, "late", NOW, LEASE, where=tasks.c.status == "ready")
        fresh = leases.claim_one(conn, tasks, task_id, "late", NOW, LEASE, where=tasks.c.status == "pending")
        return stale, fresh, _lease(conn, task_id)

    stale, fresh, (owner, expires) = run_sql(store, race)
    assert (stale, fresh, owner, expires) == (False, True, "late", NOW + timedelta(seconds=LEASE))


def test_a_held_lease_is_not_claimed_until_it_expires(store, task_id):
    def claims(conn):
        return [leases.claim_one(conn, tasks, task_id, "a", NOW, LEASE),
                leases.claim_one(conn, tasks, task_id, "b", NOW + timedelta(seconds=LEASE - 1), LEASE),
                leases.claim_one(conn, tasks, task_id, "b", NOW + timedelta(seconds=LEASE + 1), LEASE)]

    assert run_sql(store, claims) == [True, False, True]


def test_a_renewal_fails_when_the_lease_is_gone_or_the_row_moved_on(store, task_id):
    def renewals(conn):
        assert leases.claim_one(conn, tasks, task_id, "a", NOW, LEASE)
        leases.renew(conn, tasks, task_id, "a", NOW, LEASE, where=tasks.c.status == "registered")
        with pytest.raises(LeaseLost):
            leases.renew(conn, tasks, task_id, "b", NOW, LEASE)  # not b's
        conn.execute(update(tasks).where(tasks.c.id == task_id).values(status="aborted"))  # an operator's kill
        with pytest.raises(LeaseLost):
            leases.renew(conn, tasks, task_id, "a", NOW, LEASE, where=tasks.c.status == "registered")

    run_sql(store, renewals)


def test_release_all_gives_back_every_lease_of_one_owner_only(store, task_id):
    from jedictl.engine.task.submission import parse_definition, register_task

    def scene(conn):
        others = [register_task(conn, parse_definition(evgen_task(n), user="u", default_user="u"), evgen_task(n), NOW, "test") for n in (1, 2)]
        assert leases.claim_one(conn, tasks, task_id, "me", NOW, LEASE)
        assert leases.claim_one(conn, tasks, others[0], "me", NOW, LEASE)
        assert leases.claim_one(conn, tasks, others[1], "someone", NOW, LEASE)
        released = leases.release_all(conn, tasks, "me")
        return released, sorted((row.id, row.lease_owner) for row in conn.execute(select(tasks.c.id, tasks.c.lease_owner)))

    released, owners = run_sql(store, scene)
    assert released == [task_id, task_id + 1]
    assert owners == [(task_id, None), (task_id + 1, None), (task_id + 2, "someone")]


def test_the_pass_clock_moves_on_from_the_frozen_now():
    """A pass under `--now 2030-01-01T12:00` that has run for 15 minutes renews from 12:15, not 12:00
    and not the wall clock."""
    clock = PassClock(NOW, started=time.monotonic() - 900)
    assert NOW + timedelta(seconds=899) < clock.current() < NOW + timedelta(seconds=960)
