"""Consistency checks over the whole store: every counter equals the rows it counts.

Used by the tests after every agent pass, by the chaos test, and by `jedictl check` for operators.
Each check returns human-readable violations; an empty list means the store is consistent.
"""

from __future__ import annotations

from sqlalchemy import Connection, case, func, select

from jedictl.model import FileStatus
from jedictl.store.files import record_events
from jedictl.store.schema import datasets, files, tasks

INPUT_TYPES = ("input", "pseudo_input")
#: Records a job has taken (or that reached a final state): what n_files_used counts.
USED = (FileStatus.PICKED.value, FileStatus.RUNNING.value, FileStatus.FINISHED.value, FileStatus.FAILED.value)


def dataset_counters(conn: Connection) -> list[str]:
    """Input datasets: n_files, n_files_missing and n_events agree with the file records; the
    release watermark lies between what was used and what exists."""
    lost = files.c.status == FileStatus.LOST.value
    taken = files.c.status.in_(USED)
    counted = (
        select(
            files.c.dataset_id,
            func.sum(case((lost, 0), else_=1)).label("records"),
            func.sum(case((lost, 1), else_=0)).label("lost"),
            func.sum(case((lost, 0), else_=record_events())).label("events"),
            func.sum(case((taken, 1), else_=0)).label("used"),
            func.sum(case((files.c.status == FileStatus.FINISHED.value, 1), else_=0)).label("finished"),
            func.sum(case((files.c.status == FileStatus.FAILED.value, 1), else_=0)).label("failed"),
        ).where(files.c.keep_track.is_(True)).group_by(files.c.dataset_id).subquery()
    )
    rows = conn.execute(
        select(datasets.c.id, datasets.c.task_id, datasets.c.n_files, datasets.c.n_files_missing, datasets.c.n_events,
               datasets.c.n_files_to_be_used, datasets.c.n_files_used, datasets.c.n_files_finished, datasets.c.n_files_failed,
               func.coalesce(counted.c.records, 0), func.coalesce(counted.c.lost, 0), func.coalesce(counted.c.events, 0),
               func.coalesce(counted.c.used, 0), func.coalesce(counted.c.finished, 0), func.coalesce(counted.c.failed, 0),
               datasets.c.name)
        .outerjoin(counted, counted.c.dataset_id == datasets.c.id)
        .where(datasets.c.type.in_(INPUT_TYPES))
    )
    problems = []
    for (d_id, task_id, n_files, missing, events, to_use, used, finished, failed, records, lost_rows, event_rows,
         used_rows, finished_rows, failed_rows, name) in rows:
        where = f"task {task_id} dataset {d_id}"
        if records == 0 and n_files and name:  # an untracked secondary: its records are shared, not counted
            continue
        for label, counter, actual in (("n_files_used", used, used_rows), ("n_files_finished", finished, finished_rows),
                                       ("n_files_failed", failed, failed_rows)):
            if counter != actual:
                problems.append(f"{where}: {label} {counter} but {actual} records")
        if n_files != records:
            problems.append(f"{where}: n_files {n_files} but {records} records")
        if missing != lost_rows:
            problems.append(f"{where}: n_files_missing {missing} but {lost_rows} lost records")
        if events != event_rows:
            problems.append(f"{where}: n_events {events} but records hold {event_rows}")
        if not (used <= to_use <= n_files or (to_use == used and used <= n_files)):
            problems.append(f"{where}: n_files_to_be_used {to_use} outside [n_files_used {used}, n_files {n_files}]")
    return problems


def leases_of_final_tasks(conn: Connection) -> list[str]:
    from jedictl.model import TASK_FINAL

    rows = conn.execute(select(tasks.c.id, tasks.c.status, tasks.c.lease_owner).where(
        tasks.c.status.in_([s.value for s in TASK_FINAL]), tasks.c.lease_owner.is_not(None)))
    return [f"task {r.id} is {r.status} but leased by {r.lease_owner}" for r in rows]


def files_in_one_live_job(conn: Connection) -> list[str]:
    """No master input record is in two jobs that are not final (secondaries may be shared by design)."""
    from jedictl.model import JOB_FINAL
    from jedictl.store.schema import job_files, jobs

    rows = conn.execute(
        select(job_files.c.file_id, func.count(func.distinct(job_files.c.job_id)))
        .join(jobs, jobs.c.id == job_files.c.job_id)
        .where(job_files.c.type.in_(INPUT_TYPES), jobs.c.status.notin_([s.value for s in JOB_FINAL]), jobs.c.kind == "normal",
               job_files.c.dataset_id.in_(select(datasets.c.id).where(datasets.c.master_id.is_(None))))
        .group_by(job_files.c.file_id).having(func.count(func.distinct(job_files.c.job_id)) > 1)
    )
    return [f"file {file_id} is in {n} live jobs" for file_id, n in rows]


CHECKS = (dataset_counters, leases_of_final_tasks, files_in_one_live_job)


def check_all(conn: Connection) -> list[str]:
    return [problem for check in CHECKS for problem in check(conn)]
