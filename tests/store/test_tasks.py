"""store/tasks.py on a connection: a guarded status change moves a task only from the expected status
(and only for the lease holder), says whether it did, and writes history in the same transaction; a
duplicate unique name is refused by the database without losing the caller's transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from jedictl.errors import BadInput, LeaseLost
from jedictl.model import NewDataset
from jedictl.store import leases
from jedictl.store import tasks as store_tasks
from jedictl.store.schema import datasets, job_param_templates, output_templates, task_params, tasks
from tests.store.rows import T0, add_task, history, task_row

LATER = T0 + timedelta(minutes=1)


def test_a_guarded_update_with_the_wrong_status_changes_nothing_and_says_so(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t", status="defined")
        before = task_row(conn, task_id)
    with db.begin() as conn:
        assert store_tasks.change_status(conn, task_id, "ready", ["registered", "pending"], "fed", "feeder", LATER) is False
        assert store_tasks.change_status(conn, task_id + 1, "ready", ["defined"], "fed", "feeder", LATER) is False  # no such task
    with db.read() as conn:
        assert task_row(conn, task_id) == before
        assert history(conn, task_id) == []


def test_a_guarded_update_by_a_stranger_to_the_lease_changes_nothing(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t", status="defined")
        assert leases.claim_one(conn, tasks, task_id, "a", T0, 60)
        before = task_row(conn, task_id)
    with db.begin() as conn:
        assert store_tasks.change_status(conn, task_id, "ready", ["defined"], "fed", "b", LATER, owner="b") is False
    with db.read() as conn:
        assert task_row(conn, task_id) == before and history(conn, task_id) == []
    with db.begin() as conn:
        assert store_tasks.change_status(conn, task_id, "ready", ["defined"], "fed", "a", LATER, owner="a", current_priority=7) is True
    with db.read() as conn:
        row = task_row(conn, task_id)
        assert (row.status, row.current_priority, row.modified_at, row.state_changed_at) == ("ready", 7, LATER, LATER)
        assert history(conn, task_id) == [("defined", "ready", "fed", "a")]


def test_a_change_to_the_same_status_keeps_state_changed_at_and_writes_history_only_with_a_reason(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t", status="running")
    with db.begin() as conn:
        assert store_tasks.change_status(conn, task_id, "running", ["running"], None, "watch", LATER) is True
        assert store_tasks.change_status(conn, task_id, "running", ["running"], "throttled", "watch", LATER + timedelta(seconds=1)) is True
    with db.read() as conn:
        row = task_row(conn, task_id)
        assert (row.state_changed_at, row.modified_at) == (T0, LATER + timedelta(seconds=1))
        assert history(conn, task_id) == [("running", "running", "throttled", "watch")]


def _task_values(name):
    return {"name": name, "user_name": "alice", "vo": "atlas", "prod_source_label": "managed", "task_type": "prod", "options": {},
            "unique_name_key": store_tasks.unique_key("alice", name)}


def test_a_duplicate_unique_name_is_refused_and_the_callers_transaction_goes_on(db):
    with db.begin() as conn:
        first = store_tasks.insert_task(conn, _task_values("t"), {"taskName": "t"}, "jedi", ["odd"], T0, "alice")
    with db.begin() as conn:
        with pytest.raises(BadInput, match=f"task {first} \\(registered\\) already has this name for user alice"):
            store_tasks.insert_task(conn, _task_values("t"), {"taskName": "t"}, "jedi", [], LATER, "alice")
        # The savepoint kept the outer transaction usable: this write commits with it.
        other = store_tasks.insert_task(conn, _task_values("u"), {"taskName": "u"}, "jedi", [], LATER, "alice")
    with db.read() as conn:
        assert conn.execute(select(func.count()).select_from(tasks)).scalar_one() == 2
        assert conn.execute(select(task_params.c.task_id, task_params.c.unknown_keys).order_by(task_params.c.task_id)).all() == [
            (first, ["odd"]), (other, [])]
        assert history(conn, first) == [(None, "registered", "submitted", "alice")]
        assert store_tasks.find_same_name(conn, "alice", "t").id == first


def test_write_refinement_writes_nothing_unless_the_writer_holds_the_lease(db):
    planned = [NewDataset(key=1, name="ds.in", type="input", stream_name="IN"),
               NewDataset(key=2, name="ds.out", type="output", stream_name="OUT", provenance_key=1, file_template="out.${SN}.root")]
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        assert leases.claim_one(conn, tasks, task_id, "a", T0, 60)
    with pytest.raises(LeaseLost):
        with db.begin() as conn:
            store_tasks.write_refinement(conn, task_id, "b", {"status": "defined"}, planned, {"normal": "--in"}, LATER)
    with db.read() as conn:
        assert task_row(conn, task_id).status == "registered"
        assert conn.execute(select(func.count()).select_from(datasets)).scalar_one() == 0
    with db.begin() as conn:
        store_tasks.write_refinement(conn, task_id, "a", {"status": "defined"}, list(reversed(planned)), {"normal": "--in"}, LATER)
    with db.read() as conn:
        assert task_row(conn, task_id).status == "defined"
        rows = {row.name: row for row in conn.execute(select(datasets))}
        assert rows["ds.out"].provenance_id == rows["ds.in"].id  # inserted after the dataset it points to
        assert conn.execute(select(output_templates.c.filename_template)).scalars().all() == ["out.${SN}.root"]
        assert conn.execute(select(job_param_templates.c.kind, job_param_templates.c.template)).all() == [("normal", "--in")]
