"""store/task_leases.py on a connection, both backends: each pass's candidate filter names exactly the tasks
that pass takes, a claim skips the ids a pass has seen and follows its order, the generator's claim of one
task repeats its candidate condition, and renewals, releases and lease-guarded writes (store/tasks.py
update_leased) hold only for the owner and the expected status."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from jedictl.errors import LeaseLost
from jedictl.store import task_leases
from jedictl.store import tasks as store_tasks
from jedictl.store.schema import datasets, tasks
from tests.store.rows import T0, add_dataset, add_task, history, task_row

LATER = T0 + timedelta(minutes=1)
GENERATING = ("ready", "running", "scouting")


def _claim_all(conn, candidates, order_by=task_leases.BY_ID, exclude=(), owner="me", limit=100):
    return task_leases.claim(conn, candidates, order_by, set(exclude), owner, T0, 60, limit)


def test_refine_takes_registered_tasks_and_those_pending_on_their_parent(db):
    with db.begin() as conn:
        registered = add_task(conn, "r")
        on_parent = add_task(conn, "p", status="pending", old_status="registered")
        add_task(conn, "fed", status="pending", old_status="defined")
        add_task(conn, "d", status="defined")
    with db.begin() as conn:
        assert _claim_all(conn, task_leases.refine_candidates()) == [registered, on_parent]


def test_broker_takes_assigning_tasks_whose_wait_is_over(db):
    with db.begin() as conn:
        free = add_task(conn, "a", status="assigning")
        over = add_task(conn, "b", status="assigning", wait_until=T0)
        add_task(conn, "c", status="assigning", wait_until=T0 + timedelta(seconds=1))
        add_task(conn, "d", status="ready")
    with db.begin() as conn:
        assert _claim_all(conn, task_leases.broker_candidates(T0)) == [free, over]


def test_feed_takes_new_input_inputs_due_for_a_rescan_and_pending_tasks_whose_wait_is_over(db):
    due = T0 - timedelta(minutes=10)
    with db.begin() as conn:
        fresh = add_task(conn, "new", status="defined")
        add_dataset(conn, fresh, "in.new")
        fed = add_task(conn, "fed", status="defined")
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, fed, "in.fed")).values(status="ready", state="closed"))
        stale = add_task(conn, "stale", status="running")
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, stale, "in.stale"))
                     .values(status="ready", state="open", state_checked_at=due - timedelta(seconds=1)))
        checked = add_task(conn, "checked", status="running")
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, checked, "in.checked"))
                     .values(status="ready", state="open", state_checked_at=due))
        outputs_only = add_task(conn, "out", status="defined")
        add_dataset(conn, outputs_only, "out.x", type="output")
        waited = add_task(conn, "waited", status="pending", old_status="defined", wait_until=T0)
        add_task(conn, "waiting", status="pending", old_status="defined", wait_until=LATER)
    candidates = task_leases.feed_candidates(T0, due, ("input", "pseudo_input"), ("open", "mutable"), ("defined", "ready", "scouting", "running"))
    with db.begin() as conn:
        # `fed`: every input fed and closed but the task still defined -- a feeder killed before the task's step
        assert _claim_all(conn, candidates) == [fresh, fed, stale, waited]


def test_a_claim_follows_its_order_and_skips_what_the_pass_has_seen(db):
    with db.begin() as conn:
        low = add_task(conn, "low", current_priority=100)
        high = add_task(conn, "high", current_priority=900)
        middle = add_task(conn, "middle", current_priority=500)
    with db.begin() as conn:
        assert task_leases.claim(conn, task_leases.refine_candidates(), task_leases.BY_PRIORITY, {high}, "me", T0, 60, 1) == [middle]
    with db.begin() as conn:  # the order decides which one a limit of one takes
        assert task_leases.claim(conn, task_leases.refine_candidates(), task_leases.BY_PRIORITY, set(), "other", T0, 60, 1) == [high]
        assert task_leases.claim(conn, task_leases.refine_candidates(), task_leases.BY_ID, set(), "other", T0, 60, 5) == [low]


def test_the_generator_finds_tasks_with_work_or_merges_left_and_claims_only_what_is_still_its(db):
    with db.begin() as conn:
        working = add_task(conn, "work", status="running")
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, working, "in.w")).values(n_files_to_be_used=3, n_files_used=1))
        merging = add_task(conn, "merge", status="running")
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, merging, "um.log", type="trn_log"))
                     .values(n_files_to_be_used=2, n_files_used=0))
        done = add_task(conn, "done", status="running")
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, done, "in.d")).values(n_files_to_be_used=3, n_files_used=3))
        waiting = add_task(conn, "waiting", status="ready", wait_until=LATER)
        conn.execute(update(datasets).where(datasets.c.id == add_dataset(conn, waiting, "in.x")).values(n_files_to_be_used=3))
    with db.read() as conn:
        rows = task_leases.generation_candidates(conn, T0, GENERATING, ("input", "pseudo_input"))
    assert sorted((row.id, bool(row.merge_left)) for row in rows) == [(working, False), (merging, True)]
    with db.begin() as conn:
        assert task_leases.claim_for_generation(conn, waiting, "me", T0, 60, GENERATING) is False  # still waiting
        conn.execute(update(tasks).where(tasks.c.id == working).values(status="pending"))  # moved on since the list was read
        assert task_leases.claim_for_generation(conn, working, "me", T0, 60, GENERATING) is False
        assert task_leases.claim_for_generation(conn, merging, "me", T0, 60, GENERATING) is True
        assert task_leases.claim_for_generation(conn, merging, "other", T0, 60, GENERATING) is False  # leased


def test_a_renewal_holds_only_for_the_owner_and_an_expected_status(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t", status="running")
        assert task_leases.claim_one(conn, task_id, "me", T0, 60)
        assert task_leases.claim_one(conn, task_id, "other", T0, 60) is False
    with db.begin() as conn:
        task_leases.renew(conn, task_id, "me", LATER, 600, GENERATING)
        assert task_row(conn, task_id).lease_expires_at == LATER + timedelta(seconds=600)
        with pytest.raises(LeaseLost):
            task_leases.renew(conn, task_id, "other", LATER, 600, GENERATING)
        with pytest.raises(LeaseLost):
            task_leases.renew(conn, task_id, "me", LATER, 600, ["defined"])


def test_releases_give_back_only_the_owners_leases(db):
    with db.begin() as conn:
        mine = [add_task(conn, f"m{n}") for n in range(2)]
        theirs = add_task(conn, "t")
        assert _claim_all(conn, task_leases.refine_candidates(), exclude=[theirs]) == mine
        assert _claim_all(conn, task_leases.refine_candidates(), owner="other") == [theirs]
    with db.begin() as conn:
        assert task_leases.release(conn, theirs, "me") is False
        assert task_leases.release(conn, mine[0], "me") is True
        assert task_leases.release_all(conn, "me") == [mine[1]]
        assert [task_row(conn, t).lease_owner for t in (*mine, theirs)] == [None, None, "other"]


def test_a_leased_write_needs_the_lease_and_an_expected_status_and_writes_no_history(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t", status="assigning")
        assert task_leases.claim_one(conn, task_id, "me", T0, 60)
    with db.begin() as conn:
        assert store_tasks.update_leased(conn, task_id, "other", ["assigning"], error_dialog="x", modified_at=LATER) is False
        assert store_tasks.update_leased(conn, task_id, "me", ["ready", "pending"], error_dialog="x", modified_at=LATER) is False
        assert task_row(conn, task_id).error_dialog is None
        assert store_tasks.update_leased(conn, task_id, "me", ["ready", "assigning"], error_dialog="no nucleus", modified_at=LATER,
                                         lease_owner=None, lease_expires_at=None) is True
        row = task_row(conn, task_id)
        assert (row.status, row.error_dialog, row.modified_at, row.state_changed_at, row.lease_owner) == ("assigning", "no nucleus", LATER, T0, None)
        assert history(conn, task_id) == []
