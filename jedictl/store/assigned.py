"""Named queries behind the activation of `assigned` jobs (engine.watch.activation): the jobs waiting for
their input to be transferred, the input files each waits for (the job_files rows that name the endpoint
they must reach), and the guarded move `assigned -> activated`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, Row, select, update

from jedictl.model import JobStatus
from jedictl.store.bulk import slices
from jedictl.store.schema import datasets, job_files, jobs, tasks

INPUT_TYPES = ("input", "pseudo_input")


def assigned_jobs(conn: Connection, limit: int, skip_task_statuses: Collection[str] = ()) -> list[Row]:
    """The oldest `limit` assigned jobs of tasks not in `skip_task_statuses`: id, task, site, priority
    and since when they wait."""
    where = [jobs.c.status == JobStatus.ASSIGNED.value]
    if skip_task_statuses:
        where.append(jobs.c.task_id.notin_(select(tasks.c.id).where(tasks.c.status.in_(list(skip_task_statuses)))))
    return list(conn.execute(
        select(jobs.c.id, jobs.c.task_id, jobs.c.site, jobs.c.current_priority, jobs.c.state_changed_at)
        .where(*where).order_by(jobs.c.id).limit(limit)))


def awaited_inputs(conn: Connection, job_ids: Collection[int]) -> list[Row]:
    """(job_id, dataset, lfn, destination) of the input each job waits for: the rows whose destination
    names the endpoint the file is to be transferred to."""
    found: list[Row] = []
    for part in slices(sorted(job_ids)):
        found.extend(conn.execute(
            select(job_files.c.job_id, datasets.c.name.label("dataset"), job_files.c.lfn, job_files.c.destination)
            .join(datasets, datasets.c.id == job_files.c.dataset_id)
            .where(job_files.c.job_id.in_(part), job_files.c.type.in_(INPUT_TYPES), job_files.c.destination.is_not(None))
            .order_by(job_files.c.job_id, job_files.c.lfn)))
    return found


def activate(conn: Connection, job_ids: Collection[int], now: datetime) -> list[int]:
    """assigned -> activated for these jobs, each guarded by the status (a job killed or timed out
    meanwhile stays so); the ids that moved. One UPDATE per slice, telling the jobs apart by RETURNING:
    a large transfer landing activates thousands at once."""
    moved: list[int] = []
    for part in slices(sorted(job_ids)):
        moved.extend(conn.execute(update(jobs).where(jobs.c.id.in_(part), jobs.c.status == JobStatus.ASSIGNED.value)
                                  .values(status=JobStatus.ACTIVATED.value, state_changed_at=now, modified_at=now)
                                  .returning(jobs.c.id)).scalars())
    return sorted(moved)
