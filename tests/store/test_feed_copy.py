"""A first feed written inside the store (StoreDataCatalog.copy_records, issue 18) writes exactly the
records the streamed path writes (engine.feed.records.expand over the catalog's files, inserted as
tuples): every column, the ${FIRSTEVENT} numbering, nEventsPerInputFile with and without
useRealNumEvents, the first lumi block, the nFiles cap -- on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from jedictl.engine.feed.records import FeedSpec, copyable, expand, select_files
from jedictl.store import files as file_store
from jedictl.store.data_catalog import CopyTarget, StoreDataCatalog
from jedictl.store.schema import catalog_datasets, catalog_files, files
from tests.store.rows import T0, add_dataset, add_task

COMPARED = ("lfn", "guid", "scope", "size", "checksum", "type", "status", "attempt_nr", "max_attempt", "failed_attempt", "max_failure",
            "keep_track", "n_events", "start_event", "end_event", "first_event", "lumi_block_nr", "created_at")


def _catalog(conn) -> None:
    dataset_id = conn.execute(insert(catalog_datasets).values(name="mc.ds", scope="mc", kind="dataset", state="closed", attributes={},
                                                              created_at=T0, modified_at=T0).returning(catalog_datasets.c.id)).scalar_one()
    rows = []
    for i in (7, 3, 11, 1, 5, 9, 2):  # not inserted in LFN order: both paths sort by LFN
        rows.append({"dataset_id": dataset_id, "scope": "mc", "lfn": f"f.{i:03d}.root", "guid": f"g{i}", "size": 1000 + i,
                     "checksum": f"ad:{i:08x}", "n_events": None if i % 3 == 0 else 100 * i,
                     "lumi_blocks": [i, i + 1] if i % 2 else ([] if i == 2 else None), "created_at": T0})
    conn.execute(insert(catalog_files), rows)


def _read(conn, dataset_id) -> list[tuple]:
    return [tuple(r) for r in conn.execute(select(*(files.c[c] for c in COMPARED)).where(files.c.dataset_id == dataset_id)
                                          .order_by(files.c.id))]


@pytest.mark.parametrize("spec", [
    FeedSpec(is_master=True),
    FeedSpec(is_master=True, first_event_base=101, max_attempt=5, max_failure=2),
    FeedSpec(is_master=True, n_events_per_file=50),
    FeedSpec(is_master=True, n_events_per_file=50, use_real_num_events=True, keep_track=False, max_attempt=None),
    FeedSpec(is_master=True, max_files=3),
    FeedSpec(is_master=True, max_files=0),
], ids=["plain", "offsets", "events-per-file", "real-events", "n-files", "no-files"])
def test_the_in_store_copy_writes_what_the_streamed_path_writes(db, spec):
    assert copyable(spec)
    with db.begin() as conn:
        _catalog(conn)
        task_id = add_task(conn, "t")
        streamed, copied = add_dataset(conn, task_id, "ds.streamed"), add_dataset(conn, task_id, "ds.copied")
    with db.begin() as conn:
        catalog = StoreDataCatalog(conn)
        records = list(expand(select_files(catalog.iter_files("mc.ds", 2), spec), spec, spec.first_event_base))
        file_store.insert_records(conn, task_id, streamed, "input", records, "ready", spec.max_attempt, spec.max_failure,
                                  spec.keep_track, T0)
        written = catalog.copy_records("mc.ds", CopyTarget(
            task_id=task_id, dataset_id=copied, type="input", status="ready", max_attempt=spec.max_attempt, max_failure=spec.max_failure,
            keep_track=spec.keep_track, first_event=spec.first_event_base, created_at=T0, events_per_file=spec.n_events_per_file,
            use_real_num_events=spec.use_real_num_events, max_files=spec.max_files))
    with db.begin() as conn:
        assert written == len(records)
        assert _read(conn, copied) == _read(conn, streamed)


def test_an_unknown_catalog_dataset_copies_nothing(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        dataset_id = add_dataset(conn, task_id, "ds")
        assert StoreDataCatalog(conn).copy_records("no.such", CopyTarget(task_id, dataset_id, "input", "ready", 3, None, True, 1, T0)) == 0


@pytest.mark.parametrize("spec", [
    FeedSpec(is_master=True, n_events_per_job=10), FeedSpec(is_master=True, include=("a",)), FeedSpec(is_master=True, offset=1),
    FeedSpec(is_master=True, random_order=True), FeedSpec(is_master=True, max_events=10), FeedSpec(is_master=True, skip_short_input=True),
    FeedSpec(is_master=True, skip_lfns=frozenset({"a"})), FeedSpec(is_master=True, files=("a",)),
])
def test_specs_that_reshape_the_file_list_take_the_streamed_path(spec):
    assert not copyable(spec)
