"""Named reads for brokerage (engine.brokerage.loading turns them into its values): the resource catalog
with the network matrix, the live load of sites, the remaining work of tasks with a nucleus, the next
chunk's input records, the job and task counts the throttler weighs, and a task's output datasets, whose
destination the Task Broker sets. Statuses arrive from the engine as plain strings."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, func, select, update

from jedictl.model import FileStatus
from jedictl.store.schema import datasets, files, jobs, network_matrix, nuclei, site_storage, sites, storage_endpoints, tasks


def catalog_rows(conn: Connection) -> tuple[list[Mapping[str, Any]], ...]:
    """Rows of sites (by name), site storage, storage endpoints, nuclei and the network matrix's links."""
    return tuple([r._mapping for r in conn.execute(query)]
                 for query in (select(sites).order_by(sites.c.name), select(site_storage), select(storage_endpoints), select(nuclei),
                               select(network_matrix)))


def site_load_rows(conn: Connection, statuses: Collection[str]) -> list[Mapping[str, Any]]:
    """Job counts (`n`) per site, status and resource type of jobs in `statuses` (one GROUP BY)."""
    rows = conn.execute(
        select(jobs.c.site, jobs.c.status, jobs.c.resource_type, func.count().label("n"))
        .where(jobs.c.site.is_not(None), jobs.c.status.in_(list(statuses)))
        .group_by(jobs.c.site, jobs.c.status, jobs.c.resource_type)
    )
    return [r._mapping for r in rows]


def slot_load_rows(conn: Connection, statuses: Collection[str], site_names: Collection[str] | None = None) -> list[Mapping[str, Any]]:
    """Job counts (`n`) and the highest current priority (`priority`) per site, prodSourceLabel and status
    of jobs in `statuses` (of `site_names` only, if given): what a site's caps are measured against
    (one GROUP BY)."""
    where = [jobs.c.site.is_not(None), jobs.c.status.in_(list(statuses))]
    if site_names is not None:
        where.append(jobs.c.site.in_(sorted(site_names)))
    rows = conn.execute(
        select(jobs.c.site, jobs.c.prod_source_label, jobs.c.status, func.count().label("n"),
               func.max(jobs.c.current_priority).label("priority"))
        .where(*where).group_by(jobs.c.site, jobs.c.prod_source_label, jobs.c.status)
    )
    return [r._mapping for r in rows]


def lock_sites(conn: Connection, site_names: Collection[str]) -> None:
    """Lock these sites' rows until the transaction ends, in name order (PostgreSQL: FOR UPDATE; SQLite's
    BEGIN IMMEDIATE already holds the write lock): writers of jobs at a capped site take turns, each
    counting what the other wrote -- as dispatchers of a capped site do (store.dispatch)."""
    if site_names:
        conn.execute(select(sites.c.name).where(sites.c.name.in_(sorted(site_names))).order_by(sites.c.name).with_for_update()).all()


def task_work_rows(conn: Connection, statuses: Collection[str]) -> list[Row]:
    """(id, nucleus, status, current_priority, cpu_time, cpu_time_unit, work_queue, master input events,
    master input events used) of every task in `statuses` with a nucleus."""
    events = (select(datasets.c.task_id, func.sum(datasets.c.n_events).label("n_events"), func.sum(datasets.c.n_events_used).label("used"))
              .where(datasets.c.master_id.is_(None), datasets.c.type.in_(["input", "pseudo_input"]))
              .group_by(datasets.c.task_id).subquery())
    return list(conn.execute(
        select(tasks.c.id, tasks.c.nucleus, tasks.c.status, tasks.c.current_priority, tasks.c.cpu_time, tasks.c.cpu_time_unit,
               tasks.c.work_queue, func.coalesce(events.c.n_events, 0), func.coalesce(events.c.used, 0))
        .outerjoin(events, events.c.task_id == tasks.c.id)
        .where(tasks.c.nucleus.is_not(None), tasks.c.status.in_(list(statuses)))
    ))


def closed_jobs_by_site(conn: Connection, task_id: int, since: datetime) -> dict[str, int]:
    """A task's jobs closed by the system (timeouts, rebrokerage) per site since `since`: the analysis
    brokerage's sign that a data site kept the task's jobs waiting (seed 000 "Input data transfer")."""
    rows = conn.execute(
        select(jobs.c.site, func.count()).where(jobs.c.task_id == task_id, jobs.c.status == "closed", jobs.c.site.is_not(None),
                                                jobs.c.state_changed_at >= since).group_by(jobs.c.site))
    return {site: int(n) for site, n in rows}


def next_chunk_files(conn: Connection, task_id: int, limit: int) -> list[Row]:
    """(lfn, size, n_events, dataset) of the master input records the generator would take next:
    released, ready, still attemptable, in id order."""
    masters = select(datasets.c.id).where(datasets.c.task_id == task_id, datasets.c.master_id.is_(None),
                                          datasets.c.type.in_(["input", "pseudo_input"]))
    return list(conn.execute(
        select(files.c.lfn, files.c.size, files.c.n_events, datasets.c.name.label("dataset"))
        .join(datasets, datasets.c.id == files.c.dataset_id)
        .where(files.c.dataset_id.in_(masters), files.c.status == FileStatus.READY.value,
               (files.c.max_attempt.is_(None)) | (files.c.attempt_nr < files.c.max_attempt))
        .order_by(files.c.id).limit(limit)
    ))


def secondary_datasets(conn: Connection, task_id: int) -> list[Row]:
    """(id, name, attributes) of a task's secondary input datasets, in id order."""
    return list(conn.execute(select(datasets.c.id, datasets.c.name, datasets.c.attributes).where(
        datasets.c.task_id == task_id, datasets.c.master_id.is_not(None), datasets.c.type == "input").order_by(datasets.c.id)))


def ready_records(conn: Connection, dataset_id: int, limit: int) -> list[Row]:
    """(lfn, size, n_events, dataset) of a one-time secondary's next records a job would consume: ready,
    still attemptable, in id order (what the generator claims; read here without a claim)."""
    return list(conn.execute(
        select(files.c.lfn, files.c.size, files.c.n_events, datasets.c.name.label("dataset"))
        .join(datasets, datasets.c.id == files.c.dataset_id)
        .where(files.c.dataset_id == dataset_id, files.c.status == FileStatus.READY.value,
               (files.c.max_attempt.is_(None)) | (files.c.attempt_nr < files.c.max_attempt))
        .order_by(files.c.id).limit(limit)))


def shared_records(conn: Connection, dataset_id: int, limit: int) -> list[Row]:
    """(lfn, size, n_events, dataset) of a many-time secondary's records as every chunk reads them: the
    first `limit` not lost, in id order (store.jobs.read_files)."""
    return list(conn.execute(
        select(files.c.lfn, files.c.size, files.c.n_events, datasets.c.name.label("dataset"))
        .join(datasets, datasets.c.id == files.c.dataset_id)
        .where(files.c.dataset_id == dataset_id, files.c.status != FileStatus.LOST.value)
        .order_by(files.c.id).limit(limit)))


def dataset_tokens(conn: Connection, task_id: int, types: Collection[str]) -> list[Row]:
    """(id, storage_token) of a task's datasets of these types."""
    return list(conn.execute(select(datasets.c.id, datasets.c.storage_token).where(
        datasets.c.task_id == task_id, datasets.c.type.in_(types))))


def set_destination(conn: Connection, dataset_id: int, destination: str, now: datetime) -> None:
    """Where a dataset's files go (the nucleus endpoint the Task Broker chose for its storage token)."""
    conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(destination=destination, modified_at=now))


def share_job_counts(conn: Connection, share: str, resource_type: str | None) -> dict[str, int]:
    """Jobs per status of one global share (and resource type, when given)."""
    return dict(conn.execute(select(jobs.c.status, func.count()).where(*_share_scope(share, resource_type))
                             .group_by(jobs.c.status)).all())


def top_queued_priority(conn: Connection, share: str, resource_type: str | None, statuses: Collection[str]) -> Row | None:
    """(priority, job count) of the highest priority among the share's jobs in `statuses`, or None."""
    return conn.execute(
        select(jobs.c.current_priority, func.count()).where(*_share_scope(share, resource_type), jobs.c.status.in_(list(statuses)))
        .group_by(jobs.c.current_priority).order_by(jobs.c.current_priority.desc()).limit(1)).first()


def top_task_priority(conn: Connection, share: str, statuses: Collection[str]) -> int | None:
    """The highest current priority among the share's tasks in `statuses`."""
    return conn.execute(select(func.max(tasks.c.current_priority)).where(
        tasks.c.gshare == share, tasks.c.status.in_(list(statuses)))).scalar()


def _share_scope(share: str, resource_type: str | None) -> list[Any]:
    return [jobs.c.gshare == share] + ([jobs.c.resource_type == resource_type] if resource_type else [])
