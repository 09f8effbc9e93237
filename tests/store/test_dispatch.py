"""store/dispatch.py on a connection: `claim_jobs` hands each activated job out once, in dispatch order,
only for the site asked and within the offer's limits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from jedictl.store.dispatch import claim_jobs, dispatch_order, executing_hs06
from jedictl.store.schema import sites
from tests.store.rows import T0, add_job, add_task, job_row


@dataclass
class Offer:
    """What a pilot offers (the attributes of dispatch.DispatchFilterValues)."""

    memory_mb: int | None = None
    disk_mb: int | None = None
    walltime_s: int | None = None
    resource_type: str | None = None
    task_id: int | None = None
    labels: tuple[str, ...] | None = None

    @property
    def prod_source_labels(self) -> tuple[str, ...] | None:
        return self.labels


def test_claimed_jobs_move_to_sent_for_their_executor_and_are_never_handed_out_twice(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        ids = [add_job(conn, task_id, i, command_to_pilot="tobekilled" if i == 0 else None) for i in range(4)]
        elsewhere = add_job(conn, task_id, 10, site="BNL")
        waiting = add_job(conn, task_id, 11, status="defined")
    now = T0 + timedelta(minutes=5)
    with db.begin() as conn:
        assert claim_jobs(conn, "CERN", 3, "pilot-1", now, None) == ids[:3]  # sloppy order: oldest first
    with db.begin() as conn:
        assert claim_jobs(conn, "CERN", 10, "pilot-2", now, None) == ids[3:]  # the rest, none of pilot-1's
        assert claim_jobs(conn, "CERN", 10, "pilot-3", now, None) == []
        assert claim_jobs(conn, "BNL", 0, "pilot-3", now, None) == []  # a zero offer takes nothing
    with db.read() as conn:
        first = job_row(conn, ids[0])
        assert (first.status, first.executor, first.dispatched_at, first.heartbeat_at, first.command_to_pilot) == ("sent", "pilot-1", now, now, None)
        assert job_row(conn, ids[3]).executor == "pilot-2"
        assert (job_row(conn, elsewhere).status, job_row(conn, waiting).status) == ("activated", "defined")


def test_dispatch_order_is_share_rank_then_priority_then_age(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        low_express = add_job(conn, task_id, 0, gshare="Express", current_priority=1)
        high_express = add_job(conn, task_id, 1, gshare="Express", current_priority=900)
        unknown = add_job(conn, task_id, 2, gshare="Unknown", current_priority=1000)
        mc = add_job(conn, task_id, 3, gshare="MC", current_priority=1000)
        older_express = add_job(conn, task_id, 4, gshare="Express", current_priority=900)
    ranks = {"Express": 0, "MC": 1}
    taken = []
    for _ in range(5):  # one at a time: the ids come back sorted, the order is in which one is taken
        with db.begin() as conn:
            taken += claim_jobs(conn, "CERN", 1, "p", T0, ranks)
    assert taken == [high_express, older_express, low_express, mc, unknown]
    assert len(dispatch_order(None)) == 1 and len(dispatch_order({})) == 2  # sloppy: age only; no shares: priority, age


def test_the_offer_limits_which_jobs_fit(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        other_task = add_task(conn, "u")
        big = add_job(conn, task_id, 0, prod_source_label="managed", min_ram_count=4000, max_disk_count=100, max_walltime=100)
        unstated = add_job(conn, task_id, 1, prod_source_label="managed", min_ram_count=0)  # no stated need fits any offer
        long_job = add_job(conn, task_id, 2, prod_source_label="managed", max_walltime=90_000)
        user = add_job(conn, task_id, 3, prod_source_label="user", resource_type="MCORE")
        theirs = add_job(conn, other_task, 0, resource_type="MCORE")
    with db.begin() as conn:
        assert claim_jobs(conn, "CERN", 10, "p", T0, None, Offer(memory_mb=2000, walltime_s=3600, labels=("managed",))) == [unstated]
        assert claim_jobs(conn, "CERN", 10, "p", T0, None, Offer(resource_type="MCORE", task_id=other_task)) == [theirs]
        assert claim_jobs(conn, "CERN", 10, "p", T0, None, Offer(labels=("user",))) == [user]
        assert claim_jobs(conn, "CERN", 10, "p", T0, None, Offer(memory_mb=4000, disk_mb=100, walltime_s=100_000)) == [big, long_job]


def test_executing_hs06_counts_cores_times_core_power_of_sent_and_running_jobs(db):
    with db.begin() as conn:
        conn.execute(sites.insert(), [{"name": "CERN", "status": "online", "attributes": {}, "modified_at": T0, "core_power": 12.5},
                                      {"name": "BNL", "status": "online", "attributes": {}, "modified_at": T0, "core_power": None}])
        task_id = add_task(conn, "t")
        add_job(conn, task_id, 0, status="running", gshare="MC", core_count=8)
        add_job(conn, task_id, 1, status="sent", gshare="MC", site="BNL", core_count=None)  # one core at the default power 10
        add_job(conn, task_id, 2, status="activated", gshare="MC", core_count=8)  # not executing
        add_job(conn, task_id, 3, status="starting", gshare="Express", core_count=1)
        add_job(conn, task_id, 4, status="running", gshare=None, core_count=64)  # no share: left out
    with db.read() as conn:
        assert executing_hs06(conn) == {"MC": 8 * 12.5 + 10.0, "Express": 12.5}


@pytest.mark.parametrize("store_backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_two_dispatchers_at_once_on_postgresql_take_disjoint_jobs_without_waiting(db):
    with db.begin() as conn:
        task_id = add_task(conn, "t")
        ids = [add_job(conn, task_id, i) for i in range(5)]
    with db.engine.connect() as first, db.engine.connect() as second:
        with first.begin():
            mine = claim_jobs(first, "CERN", 2, "pilot-1", T0, None)
            with second.begin():
                second.exec_driver_sql("SET LOCAL lock_timeout = '5s'")
                theirs = claim_jobs(second, "CERN", 5, "pilot-2", T0, None)
    assert mine == ids[:2] and theirs == ids[2:]
    with db.read() as conn:
        assert [job_row(conn, i).executor for i in ids] == ["pilot-1"] * 2 + ["pilot-2"] * 3


def test_input_replicas_are_sorted_per_file_complete_replicas_shared_and_partial_ones_added(db):
    """A payload's replicas: every endpoint of a complete replica holds every file, an incomplete one only
    the files it lists; each file's endpoints come sorted, and a file held nowhere has none."""
    from jedictl.engine.catalogs.importer import import_data_catalog, import_resource_catalog
    from jedictl.store.dispatch import input_replicas

    with db.begin() as conn:
        import_resource_catalog(conn, {"storage_endpoints": [{"name": name, "kind": "disk"} for name in ("Z_DISK", "A_DISK", "M_DISK")]}, T0)
        import_data_catalog(conn, {"datasets": [
            {"name": "ds", "state": "closed", "files": [{"lfn": lfn, "size": 1} for lfn in ("f1", "f2", "f3")],
             "replicas": [{"endpoint": "Z_DISK"}, {"endpoint": "M_DISK", "complete": False, "files": ["f2"]}, {"endpoint": "A_DISK"}]},
            {"name": "only.part", "state": "closed", "files": [{"lfn": "g1", "size": 1}, {"lfn": "g2", "size": 1}],
             "replicas": [{"endpoint": "M_DISK", "complete": False, "files": ["g1"]}]},
        ]}, T0)
    with db.read() as conn:
        found = input_replicas(conn, {"ds": ["f1", "f2"], "only.part": ["g1", "g2"], "unknown": ["x"]})
    assert found == {("ds", "f1"): ("A_DISK", "Z_DISK"), ("ds", "f2"): ("A_DISK", "M_DISK", "Z_DISK"), ("only.part", "g1"): ("M_DISK",)}
