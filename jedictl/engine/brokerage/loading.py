"""Loading what brokerage decides on: the resource catalog, the live load of sites, the remaining work
of active tasks, and the input of a task's next chunk with its replicas. Shared by the task broker,
the job generator and `explain`.
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import Connection, func, select

from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.brokerage.model import BrokerageCatalog, ChunkInput, SiteLoad, catalog_from_rows, chunk_input, site_loads_from_rows
from jedictl.engine.brokerage.task_brokerage import ACTIVE_FOR_RW, TaskWork
from jedictl.model import FileStatus
from jedictl.store.schema import datasets, files, jobs, nuclei, site_storage, sites, storage_endpoints, tasks


def load_catalog(conn: Connection) -> BrokerageCatalog:
    return catalog_from_rows(
        (r._mapping for r in conn.execute(select(sites).order_by(sites.c.name))),
        (r._mapping for r in conn.execute(select(site_storage))),
        (r._mapping for r in conn.execute(select(storage_endpoints))),
        (r._mapping for r in conn.execute(select(nuclei))),
    )


def load_site_loads(conn: Connection) -> dict[str, SiteLoad]:
    """Live job counts per site, status and resource type (one GROUP BY over the jobs table)."""
    rows = conn.execute(
        select(jobs.c.site, jobs.c.status, jobs.c.resource_type, func.count().label("n"))
        .where(jobs.c.site.is_not(None), jobs.c.status.in_(["running", "activated", "assigned", "starting", "defined", "transferring"]))
        .group_by(jobs.c.site, jobs.c.status, jobs.c.resource_type)
    )
    return site_loads_from_rows(r._mapping for r in rows)


def load_task_works(conn: Connection) -> list[TaskWork]:
    """Remaining-work figures of every task with a nucleus that still loads it (master input events)."""
    events = (select(datasets.c.task_id, func.sum(datasets.c.n_events).label("n_events"), func.sum(datasets.c.n_events_used).label("used"))
              .where(datasets.c.master_id.is_(None), datasets.c.type.in_(["input", "pseudo_input"]))
              .group_by(datasets.c.task_id).subquery())
    rows = conn.execute(
        select(tasks.c.id, tasks.c.nucleus, tasks.c.status, tasks.c.current_priority, tasks.c.cpu_time, tasks.c.cpu_time_unit,
               tasks.c.work_queue, func.coalesce(events.c.n_events, 0), func.coalesce(events.c.used, 0))
        .outerjoin(events, events.c.task_id == tasks.c.id)
        .where(tasks.c.nucleus.is_not(None), tasks.c.status.in_(list(ACTIVE_FOR_RW)))
    )
    return [TaskWork(task_id=r[0], nucleus=r[1], status=r[2], priority=r[3], cpu_time=r[4], cpu_time_unit=r[5], work_queue=r[6],
                     n_events=int(r[7]), n_events_used=int(r[8])) for r in rows]


def next_chunk_files(conn: Connection, task_id: int, limit: int) -> list[Any]:
    """The master input records the generator would take next: released, ready, still attemptable."""
    masters = select(datasets.c.id).where(datasets.c.task_id == task_id, datasets.c.master_id.is_(None),
                                          datasets.c.type.in_(["input", "pseudo_input"]))
    return list(conn.execute(
        select(files.c.lfn, files.c.size, files.c.n_events, datasets.c.name.label("dataset"))
        .join(datasets, datasets.c.id == files.c.dataset_id)
        .where(files.c.dataset_id.in_(masters), files.c.status == FileStatus.READY.value,
               (files.c.max_attempt.is_(None)) | (files.c.attempt_nr < files.c.max_attempt))
        .order_by(files.c.id).limit(limit)
    ))


def chunk_of(records: Sequence[Any], catalog: DataCatalog, **flags: Any) -> ChunkInput:
    """A ChunkInput for brokerage from (lfn, size, n_events, dataset name) records: one entry per file
    (the ranges of one file count once), with its replicas."""
    seen: dict[str, tuple[str, int, int | None]] = {}
    by_dataset: dict[str, list[str]] = {}
    for lfn, size, n_events, dataset in records:
        if lfn not in seen:
            seen[lfn] = (lfn, size or 0, n_events)
            by_dataset.setdefault(dataset, []).append(lfn)
    replicas = []
    for dataset, lfns in by_dataset.items():
        for endpoint, held in catalog.replica_map(dataset, lfns).items():
            replicas.extend((lfn, endpoint) for lfn in held)
    return chunk_input(list(seen.values()), replicas, **flags)


NOT_RUNNING = ("assigned", "activated", "starting", "sent")
GENERATOR_STATUSES = ("ready", "running", "scouting")


def load_throttle_input(conn: Connection, share: str, resource_type: str | None, label: str, limits_config: dict) -> Any:
    """The throttler's view of one global share x resource type: job counts, limits, top priorities."""
    from jedictl.engine.shares.throttler import QueueCounts, QueueLimits, ThrottleInput, resolve_limit

    limits = {tag: resolve_limit(limits_config, tag, share, resource_type) for tag in ("NQUEUELIMIT", "NRUNNINGCAP", "NQUEUECAP")}
    # Count at the level the limit was found: per resource type only when it was configured so.
    per_type = any(level in ("rt", "ms") for _, level in limits.values())
    scope = [jobs.c.gshare == share] + ([jobs.c.resource_type == resource_type] if per_type and resource_type else [])
    counts = dict(conn.execute(select(jobs.c.status, func.count()).where(*scope).group_by(jobs.c.status)).all())
    queued_priorities = conn.execute(
        select(jobs.c.current_priority, func.count()).where(*scope, jobs.c.status.in_(NOT_RUNNING + ("defined",)))
        .group_by(jobs.c.current_priority).order_by(jobs.c.current_priority.desc()).limit(1)).first()
    waiting = conn.execute(select(func.max(tasks.c.current_priority)).where(
        tasks.c.gshare == share, tasks.c.status.in_(GENERATOR_STATUSES))).scalar()
    return ThrottleInput(
        queue=share, resource_type=resource_type, prod_source_label=label,
        counts=QueueCounts(running=counts.get("running", 0), not_running=sum(counts.get(s, 0) for s in NOT_RUNNING),
                           defined=counts.get("defined", 0), waiting=counts.get("waiting", 0)),
        limits=QueueLimits(queue_limit=limits["NQUEUELIMIT"][0], running_cap=limits["NRUNNINGCAP"][0], queued_cap=limits["NQUEUECAP"][0]),
        highest_waiting_priority=waiting,
        highest_queued_job_priority=queued_priorities[0] if queued_priorities else None,
        n_jobs_at_highest_priority=queued_priorities[1] if queued_priorities else 0,
    )
