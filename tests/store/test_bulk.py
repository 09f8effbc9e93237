"""store/bulk.py on a connection: tuples written at the driver (executemany on SQLite, COPY on PostgreSQL)
read back exactly as SQLAlchemy writes them, a duplicate fails as an IntegrityError on both backends
and leaves nothing, guarded updates count only the rows they changed, and insert-new returns only what
was new."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError

from jedictl.store.bulk import insert_new_returning, insert_tuples, slices, update_tuples
from jedictl.store.schema import catalog_datasets, catalog_files, files
from tests.store.rows import T0, add_dataset, add_task

#: The bulk path bypasses SQLAlchemy's Python-side defaults: attempt_nr and failed_attempt are given.
COLUMNS = ("task_id", "dataset_id", "lfn", "type", "status", "attempt_nr", "failed_attempt", "n_events", "start_event", "end_event",
           "keep_track", "created_at")


def _records(task_id, dataset_id, n, first=0):
    return [(task_id, dataset_id, f"f.{i:05d}.root", "input", "ready", 0, 0, 2**40 + i, None if i % 2 else i, None if i % 2 else i + 9,
             bool(i % 3), T0 + timedelta(microseconds=i)) for i in range(first, first + n)]


def _read(conn, dataset_id):
    return [tuple(row) for row in conn.execute(select(*(files.c[name] for name in COLUMNS)).where(files.c.dataset_id == dataset_id)
                                               .order_by(files.c.lfn))]


def test_insert_tuples_round_trips_every_value(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        dataset_id = add_dataset(conn, task_id, "ds.in")
    rows = _records(task_id, dataset_id, 1200) + [(task_id, dataset_id, "ünï\tcode 'quoted' \\ back", "input", "ready", 0, 0, None, None,
                                                   None, True, T0.replace(microsecond=0))]
    with db.begin() as conn:
        assert insert_tuples(conn, files, COLUMNS, iter(rows)) == len(rows)  # any iterable
        assert insert_tuples(conn, files, COLUMNS, []) == 0
    with db.read() as conn:
        assert _read(conn, dataset_id) == sorted(rows, key=lambda row: row[2])
        # Times written by the driver compare with times SQLAlchemy binds (SQLite compares text).
        assert conn.execute(select(func.count()).select_from(files).where(files.c.created_at >= T0 + timedelta(microseconds=600))).scalar_one() == 600
        assert conn.execute(select(func.count()).select_from(files).where(files.c.created_at == T0)).scalar_one() == 2


def test_insert_tuples_writes_json_columns_as_json(db):
    attributes = [{"nested": {"list": [1, 2.5, None, "x"]}, "unicode": "é"}, {}]
    with db.begin() as conn:
        insert_tuples(conn, catalog_datasets, ("name", "kind", "state", "attributes", "created_at", "modified_at"),
                      [(f"ds.{i}", "dataset", "open", value, T0, T0) for i, value in enumerate(attributes)])
        catalog_id = conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == "ds.0")).scalar_one()
        insert_tuples(conn, catalog_files, ("dataset_id", "lfn", "lumi_blocks", "created_at"),
                      [(catalog_id, "a", [1, 2], T0), (catalog_id, "b", None, T0)])
    with db.read() as conn:
        assert conn.execute(select(catalog_datasets.c.attributes).order_by(catalog_datasets.c.name)).scalars().all() == attributes
        assert conn.execute(select(catalog_files.c.lumi_blocks).order_by(catalog_files.c.lfn)).scalars().all() == [[1, 2], None]


def test_a_duplicate_in_a_bulk_insert_is_an_integrity_error_and_writes_nothing(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        dataset_id = add_dataset(conn, task_id, "ds.in")
        insert_tuples(conn, files, COLUMNS, _records(task_id, dataset_id, 3))
    with pytest.raises(IntegrityError):
        with db.begin() as conn:
            insert_tuples(conn, files, COLUMNS, _records(task_id, dataset_id, 10, first=2))  # f.00002 is there already
    with db.read() as conn:
        assert [row[2] for row in _read(conn, dataset_id)] == ["f.00000.root", "f.00001.root", "f.00002.root"]


def test_update_tuples_changes_only_rows_that_match_keys_and_guard(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        dataset_id = add_dataset(conn, task_id, "ds.in")
        insert_tuples(conn, files, COLUMNS, _records(task_id, dataset_id, 4))
        ids = conn.execute(select(files.c.id).order_by(files.c.lfn)).scalars().all()
        conn.execute(files.update().where(files.c.id == ids[1]).values(status="running"))
    with db.begin() as conn:
        changed = update_tuples(conn, files, ("status", "attempt_nr"), ("id", "lfn"),
                                [("finished", 1, ids[0], "f.00000.root"), ("finished", 1, ids[1], "f.00001.root"),
                                 ("finished", 1, ids[2], "not its lfn"), ("finished", 1, ids[3], "f.00003.root")],
                                guard="status = 'ready'")
        assert changed == 2  # ids[1] is not ready, ids[2]'s key does not match
        assert update_tuples(conn, files, ("status",), ("id",), []) == 0
    with db.read() as conn:
        assert conn.execute(select(files.c.status, files.c.attempt_nr).order_by(files.c.lfn)).all() == [
            ("finished", 1), ("running", 0), ("ready", 0), ("finished", 1)]


def test_insert_new_returning_returns_only_the_new_rows_across_slices(db):
    with db.begin() as conn:
        catalog_id = conn.execute(insert(catalog_datasets).values(name="ds.in", kind="dataset", state="open", attributes={},
                                                                   created_at=T0, modified_at=T0).returning(catalog_datasets.c.id)).scalar_one()
    columns = ("dataset_id", "scope", "lfn", "size", "created_at")
    old = [(catalog_id, "mc", f"f.{i:04d}", i, T0) for i in range(0, 1100, 2)]  # the even ones
    with db.begin() as conn:
        first = insert_new_returning(conn, catalog_files, columns, old, ("dataset_id", "lfn"), ("lfn", "id"))
    assert sorted(lfn for lfn, _ in first) == [row[2] for row in old]
    everything = [(catalog_id, "mc", f"f.{i:04d}", 10_000 + i, T0) for i in range(1100)]
    with db.begin() as conn:
        second = insert_new_returning(conn, catalog_files, columns, everything, ("dataset_id", "lfn"), ("lfn", "id"))
    assert sorted(lfn for lfn, _ in second) == [f"f.{i:04d}" for i in range(1, 1100, 2)]  # only the odd ones were new
    with db.read() as conn:
        stored = dict(conn.execute(select(catalog_files.c.lfn, catalog_files.c.id)).all())
        sizes = dict(conn.execute(select(catalog_files.c.lfn, catalog_files.c.size)).all())
    assert stored == dict(first) | dict(second)  # the ids returned are the rows' ids
    assert sizes["f.0002"] == 2 and sizes["f.0003"] == 10_003  # a known row is left as it was


def test_slices_cover_every_item_once_in_bounded_parts():
    assert [list(part) for part in slices(list(range(7)), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(slices([], 3)) == []
    assert [len(part) for part in slices(list(range(2000)))] == [1000, 1000]
