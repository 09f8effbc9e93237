"""Loading what brokerage decides on: the resource catalog, the live load of sites, the remaining work
of active tasks, and the input of a task's next chunk with its replicas. Shared by the task broker,
the job generator and `explain`. The rows come from the store's named reads (store.brokerage).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.brokerage.model import (
    NO_SLOTS,
    SLOT_PENDING,
    SLOT_RUNNING,
    BrokerageCatalog,
    ChunkInput,
    ManyTimeInput,
    SecondaryRecords,
    SiteLoad,
    SlotLoad,
    catalog_from_rows,
    chunk_input_held,
    job_atom,
    site_loads_from_rows,
    slot_loads_from_rows,
)
from jedictl.engine.brokerage.task_brokerage import ACTIVE_FOR_RW, TaskWork
from jedictl.engine.shares.throttler import QueueCounts, QueueLimits, ThrottleInput, resolve_limit
from jedictl.engine.task.definition import DatasetAttributes
from jedictl.store import brokerage as store

#: Job statuses that load a site.
LOAD_STATUSES = ("running", "activated", "assigned", "starting", "defined", "transferring")


def load_catalog(conn: Any) -> BrokerageCatalog:
    return catalog_from_rows(*store.catalog_rows(conn))


def load_site_loads(conn: Any) -> dict[str, SiteLoad]:
    """Live job counts per site, status and resource type (one GROUP BY over the jobs table)."""
    # The slot model's view (site caps): per job type, with the highest priority for the overflow.
    slots = slot_loads_from_rows(store.slot_load_rows(conn, SLOT_PENDING + SLOT_RUNNING))
    return site_loads_from_rows(store.site_load_rows(conn, LOAD_STATUSES), slots=slots)


def locked_slot_loads(conn: Any, site_names: Sequence[str]) -> dict[str, SlotLoad]:
    """The slot loads of these sites as the store holds them now, their rows locked until the caller's
    transaction ends: jobs written meanwhile by another process are counted, and no other process adds
    any at these sites before this transaction commits."""
    store.lock_sites(conn, site_names)
    loads = slot_loads_from_rows(store.slot_load_rows(conn, SLOT_PENDING + SLOT_RUNNING, site_names))
    return {name: loads.get(name, NO_SLOTS) for name in site_names}


def load_task_works(conn: Any) -> list[TaskWork]:
    """Remaining-work figures of every task with a nucleus that still loads it (master input events)."""
    return [TaskWork(task_id=r[0], nucleus=r[1], status=r[2], priority=r[3], cpu_time=r[4], cpu_time_unit=r[5], work_queue=r[6],
                     n_events=int(r[7]), n_events_used=int(r[8])) for r in store.task_work_rows(conn, ACTIVE_FOR_RW)]


def recently_closed(conn: Any, task_id: int, since: Any) -> dict[str, int]:
    """The task's jobs closed per site since `since` (analysis brokerage: busy data sites)."""
    return store.closed_jobs_by_site(conn, task_id, since)


def next_chunk_files(conn: Any, task_id: int, limit: int) -> list[Any]:
    """The master input records the generator would take next: released, ready, still attemptable."""
    return store.next_chunk_files(conn, task_id, limit)


def chunk_of(records: Sequence[Any], catalog: DataCatalog, *, secondaries: Sequence[SecondaryRecords] = (),
             files_per_job: int | None = None, events_per_job: int | None = None, **flags: Any) -> ChunkInput:
    """A ChunkInput for brokerage from the master's (lfn, size, n_events, dataset name) records and the
    secondaries the chunk's jobs read: one entry per one-time file (the ranges of one file count once) --
    the master's, then the one-time secondaries' -- with its replicas and, for a cvmfs-resident
    dataset, its place on cvmfs; each many-time secondary by its availability (ManyTimeInput). With the
    task's nFilesPerJob or nEventsPerJob the filters judge the work of one job as the splitter will
    build it from the master (`job_atom`)."""
    seen: dict[str, tuple[str, int, int | None]] = {}
    by_dataset: dict[str, list[str]] = {}
    one_time = [record for secondary in secondaries if not secondary.many_time for record in secondary.records]
    n_master = 0
    for part in (records, one_time):
        for lfn, size, n_events, dataset in part:
            if lfn not in seen:
                seen[lfn] = (lfn, size or 0, n_events)
                by_dataset.setdefault(dataset, []).append(lfn)
        n_master = n_master or len(seen)
    position = {lfn: i for i, lfn in enumerate(seen)}
    held_at: dict[str, set[int]] = {}
    cvmfs: set[int] = set()
    cvmfs_datasets: list[str] = []
    for dataset, lfns in by_dataset.items():
        every: list[int] | None = None
        for endpoint, held in catalog.replica_map(dataset, lfns).items():
            if len(held) >= len(lfns) and held.issuperset(lfns):  # a complete replica: every file, found once per dataset
                every = every if every is not None else [position[lfn] for lfn in lfns]
                held_at.setdefault(endpoint, set()).update(every)
            else:
                held_at.setdefault(endpoint, set()).update(position[lfn] for lfn in held if lfn in position)
        on_cvmfs = catalog.cvmfs_map(dataset, lfns)
        if on_cvmfs:
            cvmfs.update(position[lfn] for lfn in on_cvmfs if lfn in position)
            cvmfs_datasets.append(dataset)
    many_time = tuple(many_time_input(secondary, catalog) for secondary in secondaries if secondary.many_time and secondary.records)
    cvmfs_datasets.extend(item.name for item in many_time if item.cvmfs)
    entries = list(seen.values())
    masters = entries[:n_master]
    atom_bytes, atom_events = job_atom([int(size or 0) for _, size, _ in masters], [int(n or 0) for _, _, n in masters],
                                       files_per_job, events_per_job)
    return chunk_input_held(entries, held_at, cvmfs, max_atom_bytes=atom_bytes, max_atom_events=atom_events,
                            many_time=many_time, cvmfs_datasets=tuple(dict.fromkeys(cvmfs_datasets)), **flags)


def many_time_input(secondary: SecondaryRecords, catalog: DataCatalog) -> ManyTimeInput:
    """A many-time secondary as brokerage weighs it: available at the endpoints that hold every file the
    jobs read of it, or -- every file on cvmfs -- wherever cvmfs is mounted."""
    sizes = {record[0]: int(record[1] or 0) for record in secondary.records}
    held = catalog.replica_map(secondary.name, list(sizes))
    complete = frozenset(endpoint for endpoint, lfns in held.items() if len(set(lfns) & sizes.keys()) == len(sizes))
    on_cvmfs = len(catalog.cvmfs_map(secondary.name, list(sizes))) == len(sizes)
    return ManyTimeInput(secondary.name, len(sizes), sum(sizes.values()), complete, on_cvmfs)


def task_secondaries(conn: Any, task_id: int, n_master: int, max_shared_files: int) -> list[SecondaryRecords]:
    """The secondary records the next chunk's jobs would read, for a brokerage that claims nothing
    (`explain`, the Task Broker): a one-time secondary's next ready records by its ratio (or np) to the
    `n_master` master files, a many-time one's first records (every chunk reads it from its start)."""
    found = []
    for dataset_id, name, attributes in store.secondary_datasets(conn, task_id):
        values = DatasetAttributes.from_dict(attributes or {})
        if values.is_many_time:
            rows = store.shared_records(conn, dataset_id, max_shared_files)
        else:
            per_master = values.n_files_per_job or max(1, math.ceil(values.ratio or 1))
            rows = store.ready_records(conn, dataset_id, per_master * max(n_master, 1))
        found.append(SecondaryRecords(name, values.is_many_time, tuple(tuple(row) for row in rows)))
    return found


NOT_RUNNING = ("assigned", "activated", "starting", "sent")
GENERATOR_STATUSES = ("ready", "running", "scouting")


def load_throttle_input(conn: Any, share: str, resource_type: str | None, label: str, limits_config: dict) -> Any:
    """The throttler's view of one global share x resource type: job counts, limits, top priorities."""

    limits = {tag: resolve_limit(limits_config, tag, share, resource_type) for tag in ("NQUEUELIMIT", "NRUNNINGCAP", "NQUEUECAP")}
    # Count at the level the limit was found: per resource type only when it was configured so.
    per_type = any(level in ("rt", "ms") for _, level in limits.values())
    scoped_type = resource_type if per_type and resource_type else None
    counts = store.share_job_counts(conn, share, scoped_type)
    queued_priorities = store.top_queued_priority(conn, share, scoped_type, NOT_RUNNING + ("defined",))
    waiting = store.top_task_priority(conn, share, GENERATOR_STATUSES)
    return ThrottleInput(
        queue=share, resource_type=resource_type, prod_source_label=label,
        counts=QueueCounts(running=counts.get("running", 0), not_running=sum(counts.get(s, 0) for s in NOT_RUNNING),
                           defined=counts.get("defined", 0), waiting=counts.get("waiting", 0)),
        limits=QueueLimits(queue_limit=limits["NQUEUELIMIT"][0], running_cap=limits["NRUNNINGCAP"][0], queued_cap=limits["NQUEUECAP"][0]),
        highest_waiting_priority=waiting,
        highest_queued_job_priority=queued_priorities[0] if queued_priorities else None,
        n_jobs_at_highest_priority=queued_priorities[1] if queued_priorities else 0,
    )
