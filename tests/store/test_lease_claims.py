"""store/leases.py on a connection, beside test_leases.py: claims take free rows in order up to their limit,
only the owner renews or releases, `owned` guards an update, and on PostgreSQL concurrent claims skip
each other's locked rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from jedictl.errors import LeaseLost
from jedictl.store import leases
from jedictl.store.schema import tasks
from tests.store.rows import T0, add_task, task_row


def _lease(conn, task_id):
    row = task_row(conn, task_id)
    return row.lease_owner, row.lease_expires_at


def test_claim_takes_free_rows_in_order_up_to_the_limit(db):
    with db.begin() as conn:
        ids = [add_task(conn, f"t{i}", task_priority=i) for i in range(5)]
        other = add_task(conn, "other", status="defined")
    with db.begin() as conn:
        taken = leases.claim(conn, tasks, tasks.c.status == "registered", [tasks.c.task_priority.desc()], "a", T0, 60, 3)
    assert taken == sorted(ids[2:])  # the three of highest priority, returned in id order
    with db.read() as conn:
        assert {_lease(conn, i) for i in taken} == {("a", T0 + timedelta(seconds=60))}
        assert {_lease(conn, i) for i in ids[:2] + [other]} == {(None, None)}  # not taken, or not matching `where`


def test_a_lease_held_by_another_owner_cannot_be_taken_before_it_expires(db):
    with db.begin() as conn:
        ids = [add_task(conn, f"t{i}") for i in range(3)]
    with db.begin() as conn:
        assert leases.claim(conn, tasks, tasks.c.status == "registered", [tasks.c.id], "a", T0, 60, 2) == ids[:2]
    with db.begin() as conn:  # b, 59 s later: only the row a did not take
        assert leases.claim(conn, tasks, tasks.c.status == "registered", [tasks.c.id], "b", T0 + timedelta(seconds=59), 60, 10) == ids[2:]
    with db.begin() as conn:
        assert leases.claim_one(conn, tasks, ids[0], "b", T0 + timedelta(seconds=59), 60) is False
    with db.read() as conn:
        assert _lease(conn, ids[0]) == ("a", T0 + timedelta(seconds=60))  # a's lease untouched by the failed attempts
    # The moment it has expired (strictly after lease_expires_at), b may take it over.
    with db.begin() as conn:
        assert leases.claim_one(conn, tasks, ids[0], "b", T0 + timedelta(seconds=60), 60) is False  # at expiry: still a's
        assert leases.claim_one(conn, tasks, ids[0], "b", T0 + timedelta(seconds=61), 60) is True
        assert leases.claim(conn, tasks, tasks.c.status == "registered", [tasks.c.id], "c", T0 + timedelta(seconds=61), 60, 10) == [ids[1]]
    with db.read() as conn:
        assert _lease(conn, ids[0]) == ("b", T0 + timedelta(seconds=121))
        assert _lease(conn, ids[1]) == ("c", T0 + timedelta(seconds=121))


def test_only_the_owner_renews_and_a_stranger_is_told_the_lease_is_lost(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        assert leases.claim_one(conn, tasks, task_id, "a", T0, 60)
    with db.begin() as conn:
        leases.renew(conn, tasks, task_id, "a", T0 + timedelta(seconds=30), 60)
    with db.read() as conn:
        assert _lease(conn, task_id) == ("a", T0 + timedelta(seconds=90))
    with pytest.raises(LeaseLost, match=f"tasks {task_id}: the lease of b was taken over"):
        with db.begin() as conn:
            leases.renew(conn, tasks, task_id, "b", T0 + timedelta(seconds=40), 600)
    with db.read() as conn:
        assert _lease(conn, task_id) == ("a", T0 + timedelta(seconds=90))


def test_only_the_owner_releases(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        assert leases.claim_one(conn, tasks, task_id, "a", T0, 60)
    with db.begin() as conn:
        assert leases.release(conn, tasks, task_id, "b") is False
    with db.read() as conn:
        assert _lease(conn, task_id) == ("a", T0 + timedelta(seconds=60))
    with db.begin() as conn:
        assert leases.release(conn, tasks, task_id, "a") is True
        assert leases.release(conn, tasks, task_id, "a") is False  # released once
    with db.read() as conn:
        assert _lease(conn, task_id) == (None, None)
    with db.begin() as conn:  # free again: anyone may take it at once
        assert leases.claim_one(conn, tasks, task_id, "b", T0, 60) is True


def test_an_update_guarded_by_owned_changes_nothing_for_a_stranger(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        assert leases.claim_one(conn, tasks, task_id, "a", T0, 60)
    with db.begin() as conn:
        assert conn.execute(update(tasks).where(leases.owned(tasks, task_id, "b")).values(status="defined")).rowcount == 0
        assert conn.execute(update(tasks).where(leases.owned(tasks, task_id + 1, "a")).values(status="defined")).rowcount == 0
    with db.read() as conn:
        assert conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar_one() == "registered"
    with db.begin() as conn:
        assert conn.execute(update(tasks).where(leases.owned(tasks, task_id, "a")).values(status="defined")).rowcount == 1


@pytest.mark.parametrize("store_backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_concurrent_claims_on_postgresql_skip_locked_rows_and_never_share_one(db):
    """Two open transactions claim at once: the second neither waits for the first's rows nor takes them,
    and the first's CTE ran once, so it holds exactly its limit."""
    with db.begin() as conn:
        ids = [add_task(conn, f"t{i}") for i in range(6)]
    with db.engine.connect() as first, db.engine.connect() as second:
        with first.begin():
            mine = leases.claim(first, tasks, tasks.c.status == "registered", [tasks.c.id], "a", T0, 60, 2)
            with second.begin():
                second.exec_driver_sql("SET LOCAL lock_timeout = '5s'")  # waiting on a's rows would fail, not hang
                theirs = leases.claim(second, tasks, tasks.c.status == "registered", [tasks.c.id], "b", T0, 60, 10)
    assert mine == ids[:2] and theirs == ids[2:]
    with db.read() as conn:
        assert [_lease(conn, i)[0] for i in ids] == ["a", "a", "b", "b", "b", "b"]
