"""Named operations of WMCore-split tasks (docs/splitting.md, "WMCore splitting for real tasks"): the
algorithm a task is split by and the state it keeps between generate passes, the masks of its jobs,
and what the generator reads from the data catalog for its input files (runs, lumis, parents).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Connection, func, insert, select, update

from jedictl.model import JOB_FINAL
from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.schema import (
    catalog_datasets,
    catalog_file_parents,
    catalog_file_replicas,
    catalog_files,
    catalog_replicas,
    job_files,
    job_masks,
    jobs,
    task_splitting,
)

MASK_COLUMNS = ("job_id", "task_id", "first_event", "last_event", "first_run", "last_run", "first_lumi", "last_lumi", "lumis")


def save_splitting(conn: Connection, task_id: int, algorithm: str, params: Mapping[str, Any]) -> None:
    conn.execute(insert(task_splitting).values(task_id=task_id, algorithm=algorithm, params=dict(params), state=None))


def splitting_of(conn: Connection, task_id: int) -> Any | None:
    """The task's row (algorithm, params, state), None when JEDI's rules split it."""
    return conn.execute(select(task_splitting).where(task_splitting.c.task_id == task_id)).first()


def set_state(conn: Connection, task_id: int, state: Mapping[str, Any], now: datetime) -> None:
    conn.execute(update(task_splitting).where(task_splitting.c.task_id == task_id).values(state=dict(state), updated_at=now))


def live_jobs(conn: Connection, task_id: int) -> int:
    """The task's jobs not yet final (Harvest's "an earlier job still holds files")."""
    return conn.execute(select(func.count()).select_from(jobs).where(jobs.c.task_id == task_id, jobs.c.status.notin_(JOB_FINAL))).scalar_one()


def last_job_change(conn: Connection, task_id: int) -> datetime | None:
    """When one of the task's jobs last changed state (WMCore's ReleasePeriodicJob reads it from WMBS)."""
    return conn.execute(select(func.max(jobs.c.state_changed_at)).where(jobs.c.task_id == task_id)).scalar_one()


def write_masks(conn: Connection, rows: Sequence[Sequence[Any]]) -> int:
    """Job masks as tuples in MASK_COLUMNS order, written with their jobs."""
    return insert_tuples(conn, job_masks, MASK_COLUMNS, rows)


def masks_of(conn: Connection, job_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """job id -> its mask (MASK_COLUMNS without the ids); jobs without a mask are absent."""
    found: dict[int, dict[str, Any]] = {}
    for chunk in slices(list(job_ids)):
        for row in conn.execute(select(job_masks).where(job_masks.c.job_id.in_(chunk))):
            found[row.job_id] = {name: getattr(row, name) for name in MASK_COLUMNS[2:]}
    return found


def catalog_details(conn: Connection, dataset_name: str, lfns: Sequence[str]) -> dict[str, tuple[int | None, list[int] | None, datetime, tuple[str, ...]]]:
    """lfn -> (run, lumi_blocks, when it joined the catalog, parent LFNs) for files of a catalog dataset."""
    dataset_id = conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == dataset_name)).scalar_one_or_none()
    if dataset_id is None:
        return {}
    c = catalog_files.c
    found: dict[str, tuple[int | None, list[int] | None, datetime, tuple[str, ...]]] = {}
    ids: dict[int, str] = {}
    for chunk in slices(list(dict.fromkeys(lfns))):
        for row in conn.execute(select(c.id, c.lfn, c.run, c.lumi_blocks, c.created_at).where(c.dataset_id == dataset_id, c.lfn.in_(chunk))):
            found[row.lfn] = (row.run, row.lumi_blocks, row.created_at, ())
            ids[row.id] = row.lfn
    parents: dict[str, list[str]] = {}
    for chunk in slices(list(ids)):
        for file_id, parent in conn.execute(select(catalog_file_parents.c.file_id, catalog_file_parents.c.parent_lfn)
                                            .where(catalog_file_parents.c.file_id.in_(chunk))
                                            .order_by(catalog_file_parents.c.file_id, catalog_file_parents.c.parent_lfn)):
            parents.setdefault(ids[file_id], []).append(parent)
    for lfn, names in parents.items():
        run, lumis, created, _ = found[lfn]
        found[lfn] = (run, lumis, created, tuple(names))
    return found


def parent_files(conn: Connection, lfns: Sequence[str]) -> dict[str, Any]:
    """lfn -> (scope, guid, size, checksum) of parent files the catalog knows (the first dataset holding it)."""
    c = catalog_files.c
    found: dict[str, Any] = {}
    for chunk in slices(list(dict.fromkeys(lfns))):
        for row in conn.execute(select(c.lfn, c.scope, c.guid, c.size, c.checksum).where(c.lfn.in_(chunk)).order_by(c.id)):
            found.setdefault(row.lfn, row)
    return found


def write_parent_files(conn: Connection, rows: Sequence[Sequence[Any]]) -> int:
    """Parent files attached to jobs (include_parents): job_files rows in store.jobs.JOB_FILE_COLUMNS order."""
    from jedictl.store.jobs import JOB_FILE_COLUMNS

    return insert_tuples(conn, job_files, JOB_FILE_COLUMNS, rows)


def replicas_by_lfn(conn: Connection, lfns: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Endpoints holding each of `lfns` in any catalog dataset (parents live outside the task's datasets):
    a complete replica of a dataset holding it, or a replica of the file itself."""
    found: dict[str, set[str]] = {}
    c = catalog_files.c
    for chunk in slices(list(dict.fromkeys(lfns))):
        complete = (select(c.lfn, catalog_replicas.c.endpoint).join(catalog_replicas, catalog_replicas.c.dataset_id == c.dataset_id)
                    .where(c.lfn.in_(chunk), catalog_replicas.c.complete.is_(True)))
        partial = (select(c.lfn, catalog_file_replicas.c.endpoint).join(catalog_file_replicas, catalog_file_replicas.c.file_id == c.id)
                   .where(c.lfn.in_(chunk)))
        for query in (complete, partial):
            for lfn, endpoint in conn.execute(query):
                found.setdefault(lfn, set()).add(endpoint)
    return {lfn: tuple(sorted(endpoints)) for lfn, endpoints in found.items()}


def back_to_defined(conn: Connection, job_ids: Sequence[int]) -> int:
    """Jobs just written that their algorithm created failed: `defined` (WMCore's `created`) until the
    same transaction ends them failed -- never dispatchable in between."""
    return conn.execute(update(jobs).where(jobs.c.id.in_(list(job_ids)), jobs.c.status.in_(("activated", "assigned")))
                        .values(status="defined")).rowcount
