"""The generator's reads and its one write per record (issue 18), on both backends: claim_files reads
ready, attemptable records in id order above a given id and writes nothing; start_files moves each
record to running with its job only if it is still ready, and a record taken meanwhile makes it raise
LeaseLost (the chunk's transaction then rolls back)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select, update

from jedictl.errors import LeaseLost
from jedictl.store import jobs as store_jobs
from jedictl.store.schema import files
from tests.store.rows import T0, add_dataset, add_task


def _records(conn, n: int) -> tuple[int, list[int]]:
    task_id = add_task(conn, "t", status="running")
    dataset_id = add_dataset(conn, task_id, "ds")
    conn.execute(insert(files), [{"task_id": task_id, "dataset_id": dataset_id, "lfn": f"f.{i:03d}", "type": "input", "status": "ready",
                                  "attempt_nr": 0, "max_attempt": 3, "failed_attempt": 0, "keep_track": True, "created_at": T0}
                                 for i in range(n)])
    ids = list(conn.execute(select(files.c.id).where(files.c.dataset_id == dataset_id).order_by(files.c.id)).scalars())
    return dataset_id, ids


def _statuses(conn, ids):
    return dict(conn.execute(select(files.c.id, files.c.status).where(files.c.id.in_(ids))).all())


def test_claim_reads_ready_records_in_order_above_an_id_and_writes_nothing(db):
    with db.begin() as conn:
        dataset_id, ids = _records(conn, 8)
        conn.execute(update(files).where(files.c.id == ids[1]).values(status="running"))
        conn.execute(update(files).where(files.c.id == ids[2]).values(attempt_nr=3))  # no attempt left
    with db.begin() as conn:
        assert [row.id for row in store_jobs.claim_files(conn, dataset_id, 3)] == [ids[0], ids[3], ids[4]]
        assert [row.id for row in store_jobs.claim_files(conn, dataset_id, 10, after_id=ids[4])] == ids[5:]
        assert store_jobs.claim_files(conn, dataset_id, 0) == []
        assert set(_statuses(conn, ids).values()) == {"ready", "running"} and list(_statuses(conn, ids).values()).count("running") == 1


def test_start_files_writes_each_record_once_with_its_job(db):
    with db.begin() as conn:
        _, ids = _records(conn, 4)
    with db.begin() as conn:
        store_jobs.start_files(conn, [(70, T0, "running", ids[0]), (71, T0, "running", ids[2])])
    with db.begin() as conn:
        rows = {r.id: (r.status, r.job_id, r.last_attempt_at) for r in conn.execute(select(files).where(files.c.id.in_(ids)))}
    assert rows == {ids[0]: ("running", 70, T0), ids[1]: ("ready", None, None), ids[2]: ("running", 71, T0), ids[3]: ("ready", None, None)}


def test_start_files_refuses_a_record_that_is_not_ready_any_more(db):
    with db.begin() as conn:
        _, ids = _records(conn, 2)
        conn.execute(update(files).where(files.c.id == ids[1]).values(status="running", job_id=5))
    with pytest.raises(LeaseLost):
        with db.begin() as conn:
            store_jobs.start_files(conn, [(70, T0, "running", ids[0]), (71, T0, "running", ids[1])])
    with db.begin() as conn:  # rolled back whole: the first record is still ready, the other keeps its job
        assert _statuses(conn, ids) == {ids[0]: "ready", ids[1]: "running"}
        assert conn.execute(select(files.c.job_id).where(files.c.id == ids[1])).scalar_one() == 5
