"""Named store operations that took the engine's last SQL (issue 15), on a connection, both backends: the
watchdog's task filters, the resource catalog's upsert by kind, ids reserved by table name, a container's
constituent rows, the events of the first records, the Task Broker's output destinations, and the demo's
reads."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import insert, update

from jedictl.store import brokerage as store_brokerage
from jedictl.store import datasets as store_datasets
from jedictl.store import files as store_files
from jedictl.store import jobs as store_jobs
from jedictl.store import sites as store_sites
from jedictl.store import tasks as store_tasks
from jedictl.store import views as store_views
from jedictl.store import watchdog as store_watchdog
from jedictl.store.schema import datasets, job_retry_history
from tests.store.rows import T0, add_dataset, add_job, add_task

LATER = T0 + timedelta(minutes=1)


def _ids(rows):
    return [row.id for row in rows]


def test_the_watchdog_filters_narrow_free_tasks(db):
    cutoff = T0 - timedelta(hours=1)
    with db.begin() as conn:
        retried = add_task(conn, "retried", status="pending", old_status="running")
        add_task(conn, "on parent", status="pending", old_status="registered")
        add_task(conn, "no old", status="pending")
        old = add_task(conn, "old", status="exhausted", modified_at=cutoff)
        add_task(conn, "recent", status="exhausted", modified_at=cutoff + timedelta(seconds=1))
        throttling = add_task(conn, "throttling", status="running", num_throttled=0)
        unassessed = add_task(conn, "unassessed", status="running")
        assessed_long_ago = add_task(conn, "assessed", status="running", assessed_at=cutoff)
        add_task(conn, "just assessed", status="running", assessed_at=LATER)
        leased = add_task(conn, "leased", status="running", num_throttled=0, lease_owner="x", lease_expires_at=LATER)
    with db.read() as conn:
        assert _ids(store_watchdog.free_tasks(conn, ["pending"], T0, 10, old_status_except="registered")) == [retried]
        assert _ids(store_watchdog.free_tasks(conn, ["exhausted"], T0, 10, untouched_since=cutoff)) == [old]
        assert _ids(store_watchdog.free_tasks(conn, ["running"], T0, 10, throttling=True)) == [throttling]
        assert _ids(store_watchdog.free_tasks(conn, ["running"], T0, 10, unassessed_since=cutoff)) == [throttling, unassessed, assessed_long_ago]
        assert leased not in _ids(store_watchdog.free_tasks(conn, ["running"], T0, 10))
        assert len(store_watchdog.free_tasks(conn, ["running"], T0, 2)) == 2


def test_the_resource_catalog_upserts_by_kind(db):
    with db.begin() as conn:
        report = store_sites.upsert_rows(conn, "nucleus", [{"name": "N1", "status": "active", "attributes": {}}], T0)
        report += store_sites.upsert_rows(conn, "endpoint", [{"name": "E1", "kind": "disk", "nucleus": "N1", "attributes": {}}], T0)
        report += store_sites.upsert_rows(conn, "site", [{"name": "S1", "status": "online", "nucleus": "N1", "attributes": {}}], T0)
    with db.begin() as conn:
        again = store_sites.upsert_rows(conn, "site", [{"name": "S1", "status": "offline", "nucleus": "N1", "attributes": {}}], LATER)
        with pytest.raises(KeyError):
            store_sites.upsert_rows(conn, "tasks", [], LATER)
    assert [(line["kind"], line["action"]) for line in report] == [("nucleus", "created"), ("endpoint", "created"), ("site", "created")]
    assert again == [{"kind": "site", "name": "S1", "action": "updated", "changed": ["status"]}]
    with db.read() as conn:
        assert store_sites.get_site(conn, "S1").status == "offline"
        assert store_sites.known_names(conn) == ({"N1"}, {"E1"})


def test_ids_are_reserved_by_table_name(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        job_id = add_job(conn, task_id, 1)
        job_ids = store_jobs.reserve_ids(conn, "jobs", 3)
        record_ids = store_jobs.reserve_ids(conn, "files", 2)
        assert store_jobs.reserve_ids(conn, "jobs", 0) == []
        with pytest.raises(KeyError):
            store_jobs.reserve_ids(conn, "tasks", 1)
    assert job_ids == list(range(job_ids[0], job_ids[0] + 3)) and job_ids[0] > job_id
    assert len(record_ids) == 2 and record_ids[1] == record_ids[0] + 1


def test_a_container_expands_into_constituent_rows(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        container = add_dataset(conn, task_id, "cont/")
        assert store_datasets.container_members(conn, task_id, "cont/") == []
        values = {k: v for k, v in store_datasets.get_dataset(conn, container)._mapping.items() if k != "id"}
        row = store_datasets.insert_dataset(conn, {**values, "name": "ds.1", "container_name": "cont/", "modified_at": LATER})
        assert (row.task_id, row.name, row.container_name, row.modified_at) == (task_id, "ds.1", "cont/", LATER)
        assert row.id != container
        assert [r.id for r in store_datasets.container_members(conn, task_id, "cont/")] == [row.id]
        assert store_datasets.get_dataset(conn, row.id) == row


def test_the_events_of_the_first_records_skip_lost_ones_and_count_ranges(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        dataset_id = add_dataset(conn, task_id, "in")
        records = [(f"f{n}", None, None, 10, None, 100, None, None, None, None) for n in range(3)]
        records.append(("f3", None, None, 10, None, 100, 1, 25, 1, None))  # an event range: 25 events
        store_files.insert_records(conn, task_id, dataset_id, "input", records, "ready", None, None, True, T0)
        store_files.mark_lost(conn, dataset_id, ["f1"])
        assert [store_files.events_of_first(conn, dataset_id, n) for n in (0, 1, 2, 3, 9)] == [0, 100, 200, 225, 225]


def test_the_broker_reads_output_tokens_and_sets_destinations(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        output = add_dataset(conn, task_id, "out", type="output")
        conn.execute(update(datasets).where(datasets.c.id == output).values(storage_token="DATADISK"))
        log = add_dataset(conn, task_id, "log", type="log")
        add_dataset(conn, task_id, "um", type="trn_output")
        add_dataset(conn, task_id, "in")
        rows = store_brokerage.dataset_tokens(conn, task_id, ("output", "log"))
        assert sorted((row.id, row.storage_token) for row in rows) == [(output, "DATADISK"), (log, None)]
        store_brokerage.set_destination(conn, output, "CERN-PROD_DATADISK", LATER)
        row = store_datasets.get_dataset(conn, output)
        assert (row.destination, row.modified_at) == ("CERN-PROD_DATADISK", LATER)
        assert store_datasets.get_dataset(conn, log).destination is None


def test_the_demo_reads(db, store):
    assert store_views.holds_tasks(store) is False
    with db.begin() as conn:
        first = add_task(conn, "a", status="done")
        second = add_task(conn, "b", status="running")
        master = add_dataset(conn, first, "in")
        conn.execute(update(datasets).where(datasets.c.id == master).values(n_files=4, n_files_finished=3, n_files_failed=1))
        add_dataset(conn, first, "out", type="output")
        jobs = [add_job(conn, first, 1, site="A", status="finished", gshare="Express"), add_job(conn, first, 2, site="A", status="failed"),
                add_job(conn, second, 1, site=None, status="activated")]
        conn.execute(insert(job_retry_history).values(task_id=first, old_job_id=jobs[1], new_job_id=jobs[0], relation_type="retry",
                                                      created_at=T0))
    assert store_views.holds_tasks(store) is True
    with db.read() as conn:
        assert [tuple(row) for row in store_views.task_names(conn)] == [(first, "a", "done"), (second, "b", "running")]
        totals = store_views.master_input_totals(conn)
        assert list(totals) == [first] and (totals[first].files, totals[first].done, totals[first].failed) == (4, 3, 1)
        assert sorted(map(tuple, store_views.job_status_counts_by(conn, "task"))) == [
            (first, "failed", 1), (first, "finished", 1), (second, "activated", 1)]
        assert sorted(map(tuple, store_views.job_status_counts_by(conn, "site")), key=str) == [
            ("A", "failed", 1), ("A", "finished", 1), (None, "activated", 1)]
        assert sorted(map(tuple, store_views.job_status_counts_by(conn, "gshare")), key=str) == [
            ("Express", "finished", 1), (None, "activated", 1), (None, "failed", 1)]
        assert store_views.retry_count(conn) == 1
        assert (store_tasks.status_of(conn, first), store_tasks.status_of(conn, second)) == ("done", "running")
        assert store_tasks.count_not_in_status(conn, ["done", "finished"]) == 1
        assert store_tasks.count_not_in_status(conn, ["done", "running"]) == 0
