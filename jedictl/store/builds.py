"""Named operations behind build jobs and lib files (engine.generate.build_jobs, engine.jobs.builds;
docs/build-jobs.md): a task's lib dataset at a site and the lib file its run jobs read there, the run
jobs waiting (`defined`) for a lib file, their guarded release once it is built, and the failed build
jobs of a task.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, exists, func, insert, or_, select, update

from jedictl.model import JOB_FINAL, BUILD_JOB_KIND, LIB_JOB_FILE_TYPE, DatasetStatus, DatasetType, FileStatus, JobStatus
from jedictl.store.bulk import slices
from jedictl.store.schema import datasets, files, job_files, jobs, tasks

#: A lib file a run job may still count on: being built, or built.
LIVE_LIB = (FileStatus.DEFINED.value, FileStatus.FINISHED.value)


def site_libs(conn: Connection, task_id: int, sites: Iterable[str]) -> dict[str, Any]:
    """Per site: the task's newest lib file there that is being built or built -- (dataset_id, file_id,
    lfn, status, site) -- or nothing when every build there failed (or none was made yet)."""
    wanted = sorted(set(sites))
    if not wanted:
        return {}
    rows = conn.execute(
        select(datasets.c.site, datasets.c.id.label("dataset_id"), files.c.id.label("file_id"), files.c.lfn, files.c.status)
        .join(files, files.c.dataset_id == datasets.c.id)
        .where(datasets.c.task_id == task_id, datasets.c.type == DatasetType.LIB.value, datasets.c.site.in_(wanted),
               files.c.status.in_(LIVE_LIB))
        .order_by(files.c.id))
    return {row.site: row for row in rows}  # the newest wins


def lib_datasets(conn: Connection, task_id: int, sites: Iterable[str]) -> dict[str, int]:
    """The task's lib dataset id per site, for the sites that have one."""
    wanted = sorted(set(sites))
    if not wanted:
        return {}
    return {row.site: row.id for row in conn.execute(
        select(datasets.c.site, datasets.c.id).where(datasets.c.task_id == task_id, datasets.c.type == DatasetType.LIB.value,
                                                     datasets.c.site.in_(wanted)))}


def add_lib_dataset(conn: Connection, task_id: int, site: str, name: str, now: datetime) -> int:
    """A lib dataset for the task at `site` (the caller found none, under the task's lease)."""
    return conn.execute(insert(datasets).values(
        task_id=task_id, name=name, type=DatasetType.LIB.value, status=DatasetStatus.READY.value, stream_name="LIB", attributes={},
        site=site, created_at=now, modified_at=now).returning(datasets.c.id)).scalar_one()


def waiting_libs(conn: Connection, limit: int) -> list[Any]:
    """The lib files that run jobs wait for (a run job `defined` with a lib reference) and that are no
    longer being built: (file_id, status, task_id, site) -- finished ones release their run jobs,
    failed or cancelled ones close them."""
    waiting = (select(job_files.c.file_id).join(jobs, jobs.c.id == job_files.c.job_id)
               .where(jobs.c.status == JobStatus.DEFINED.value, job_files.c.type == LIB_JOB_FILE_TYPE).distinct().subquery())
    return list(conn.execute(
        select(files.c.id.label("file_id"), files.c.status, files.c.task_id, datasets.c.site)
        .join(datasets, datasets.c.id == files.c.dataset_id)
        .where(files.c.id.in_(select(waiting.c.file_id)), files.c.status != FileStatus.DEFINED.value)
        .order_by(files.c.id).limit(limit)))


def jobs_waiting_for(conn: Connection, lib_file_ids: Collection[int]) -> list[Any]:
    """(job_id, file_id, transfer) of the `defined` run jobs that read these lib files; `transfer`: the
    job also waits for input to be transferred (a job file naming the endpoint it must reach)."""
    found: list[Any] = []
    transfer = exists().where(job_files.c.job_id == jobs.c.id, job_files.c.destination.is_not(None),
                              job_files.c.type.in_(("input", "pseudo_input")))
    for part in slices(sorted(lib_file_ids)):
        ref = job_files.alias("ref")
        found.extend(conn.execute(
            select(jobs.c.id.label("job_id"), ref.c.file_id, transfer.label("transfer"))
            .join(ref, and_(ref.c.job_id == jobs.c.id, ref.c.type == LIB_JOB_FILE_TYPE))
            .where(ref.c.file_id.in_(part), jobs.c.status == JobStatus.DEFINED.value).order_by(jobs.c.id)))
    return found


def release_jobs(conn: Connection, job_ids: Collection[int], status: str, now: datetime) -> list[int]:
    """defined -> `status` (activated, or assigned while input is on its way) for these run jobs, each
    guarded by `defined` (a job killed or timed out meanwhile stays so), and their lib reference
    `ready`; the ids that moved."""
    moved: list[int] = []
    for part in slices(sorted(job_ids)):
        ids = list(conn.execute(update(jobs).where(jobs.c.id.in_(part), jobs.c.status == JobStatus.DEFINED.value)
                                .values(status=status, state_changed_at=now, modified_at=now).returning(jobs.c.id)).scalars())
        if ids:
            conn.execute(update(job_files).where(job_files.c.job_id.in_(ids), job_files.c.type == LIB_JOB_FILE_TYPE)
                         .values(status=FileStatus.READY.value))
        moved.extend(ids)
    return sorted(moved)


def failed_builds(conn: Connection, task_ids: Collection[int]) -> dict[int, tuple[int, str]]:
    """Per task: (its failed build jobs, its status)."""
    if not task_ids:
        return {}
    rows = conn.execute(
        select(tasks.c.id, tasks.c.status, func.count(jobs.c.id))
        .select_from(tasks.outerjoin(jobs, and_(jobs.c.task_id == tasks.c.id, jobs.c.kind == BUILD_JOB_KIND,
                                                jobs.c.status == JobStatus.FAILED.value)))
        .where(tasks.c.id.in_(sorted(task_ids))).group_by(tasks.c.id, tasks.c.status))
    return {row[0]: (row[2], row[1]) for row in rows}


def tasks_with_failed_builds(conn: Connection, statuses: Collection[str]) -> list[int]:
    """Tasks in one of `statuses` with at least one failed build job."""
    return list(conn.execute(
        select(tasks.c.id).where(tasks.c.status.in_(list(statuses)),
                                 exists().where(jobs.c.task_id == tasks.c.id, jobs.c.kind == BUILD_JOB_KIND,
                                                jobs.c.status == JobStatus.FAILED.value)).order_by(tasks.c.id)).scalars())


def live_job_ids(conn: Connection, task_ids: Collection[int]) -> dict[int, list[int]]:
    """Per task: the ids of its jobs not in a final status and not yet told to stop."""
    found: dict[int, list[int]] = {}
    if not task_ids:
        return found
    for task_id, job_id in conn.execute(select(jobs.c.task_id, jobs.c.id).where(
            jobs.c.task_id.in_(sorted(task_ids)), jobs.c.status.notin_([s.value for s in JOB_FINAL]),
            or_(jobs.c.command_to_pilot.is_(None), jobs.c.command_to_pilot != "tobekilled")).order_by(jobs.c.id)):
        found.setdefault(task_id, []).append(job_id)
    return found
