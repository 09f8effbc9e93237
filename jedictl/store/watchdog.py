"""Named queries of the watch pass: the tasks each watchdog action looks at, the figures it decides on,
and the few writes that are not a status change (picked files put back, a boost on queued jobs).

Everything runs in the caller's transaction; the engine (engine.watch.watchdog) decides and applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, func, or_, select, update

from jedictl.model import FileStatus, JobStatus
from jedictl.store.bulk import slices
from jedictl.store.leases import is_free
from jedictl.store.schema import datasets, files, global_shares, jobs, tasks

INPUT_TYPES = ("input", "pseudo_input", "random_seed")
MASTER_TYPES = ("input", "pseudo_input")
#: Jobs not yet taken by an executor: a boost raises their priority too (JEDI changeTaskPriorityPanda).
QUEUED_JOBS = (JobStatus.DEFINED.value, JobStatus.ASSIGNED.value, JobStatus.ACTIVATED.value, JobStatus.THROTTLED.value)


def expired_leases(conn: Connection, now: datetime, limit: int) -> list[Row]:
    """Tasks whose lease has run out (its holder died or hung)."""
    return list(conn.execute(select(tasks).where(tasks.c.lease_owner.is_not(None), tasks.c.lease_expires_at < now)
                             .order_by(tasks.c.id).limit(limit)))


def free_tasks(conn: Connection, statuses: Sequence[str], now: datetime, limit: int, *, old_status_except: str | None = None,
               untouched_since: datetime | None = None, throttling: bool = False, unassessed_since: datetime | None = None) -> list[Row]:
    """Unleased (or lease-expired) tasks in `statuses`, oldest id first, narrowed by each filter given: an old
    status set and other than `old_status_except`; `modified_at` at or before `untouched_since`; throttling
    on (`num_throttled` set); `assessed_at` unset or at or before `unassessed_since`."""
    conditions: list[Any] = []
    if old_status_except is not None:
        conditions += [tasks.c.old_status.is_not(None), tasks.c.old_status != str(old_status_except)]
    if untouched_since is not None:
        conditions.append(tasks.c.modified_at <= untouched_since)
    if throttling:
        conditions.append(tasks.c.num_throttled.is_not(None))
    if unassessed_since is not None:
        conditions.append(due(tasks.c.assessed_at, unassessed_since))
    return list(conn.execute(select(tasks).where(tasks.c.status.in_([str(s) for s in statuses]), is_free(tasks, now), *conditions)
                             .order_by(tasks.c.id).limit(limit)))


def tasks_by_id(conn: Connection, task_ids: Iterable[int]) -> dict[int, Row]:
    return {row.id: row for part in slices(sorted(set(task_ids))) for row in conn.execute(select(tasks).where(tasks.c.id.in_(list(part))))}


def parent_statuses(conn: Connection, rows: Iterable[Any]) -> dict[int, str]:
    """Parent id -> status for the parents of `rows`."""
    ids = sorted({row.parent_id for row in rows if row.parent_id is not None})
    return dict(row for part in slices(ids) for row in conn.execute(select(tasks.c.id, tasks.c.status).where(tasks.c.id.in_(list(part)))))


def picked_counts(conn: Connection, statuses: Sequence[str]) -> dict[int, dict[int, int]]:
    """Tracked input files left `picked`, per task and dataset, of tasks in `statuses`."""
    query = (select(datasets.c.task_id, files.c.dataset_id, func.count())
             .select_from(datasets.join(tasks, tasks.c.id == datasets.c.task_id)
                          .join(files, and_(files.c.dataset_id == datasets.c.id, files.c.status == FileStatus.PICKED.value)))
             .where(tasks.c.status.in_([str(s) for s in statuses]), datasets.c.type.in_(INPUT_TYPES), files.c.keep_track.is_(True))
             .group_by(datasets.c.task_id, files.c.dataset_id))
    found: dict[int, dict[int, int]] = {}
    for task_id, dataset_id, count in conn.execute(query):
        found.setdefault(task_id, {})[dataset_id] = count
    return found


def unpick_files(conn: Connection, task_id: int, dataset_id: int, now: datetime) -> int:
    """Picked tracked files of one dataset back to `ready`, and `n_files_used` down by as many."""
    moved = conn.execute(update(files).where(files.c.dataset_id == dataset_id, files.c.task_id == task_id,
                                             files.c.status == FileStatus.PICKED.value, files.c.keep_track.is_(True))
                         .values(status=FileStatus.READY.value)).rowcount
    if moved:
        conn.execute(update(datasets).where(datasets.c.id == dataset_id)
                     .values(n_files_used=datasets.c.n_files_used - moved, modified_at=now))
    return moved


def datasets_by_task(conn: Connection, task_ids: Iterable[int]) -> dict[int, list[Row]]:
    found: dict[int, list[Row]] = {}
    for part in slices(sorted(set(task_ids))):
        for row in conn.execute(select(datasets).where(datasets.c.task_id.in_(list(part))).order_by(datasets.c.id)):
            found.setdefault(row.task_id, []).append(row)
    return found


def failed_attempt_averages(conn: Connection, task_ids: Iterable[int]) -> dict[int, float]:
    """Average failed attempts of the ready or running tracked files of each task's master inputs."""
    found: dict[int, float] = {}
    for part in slices(sorted(set(task_ids))):
        query = (select(datasets.c.task_id, func.avg(files.c.failed_attempt))
                 .select_from(datasets.join(files, files.c.dataset_id == datasets.c.id))
                 .where(datasets.c.task_id.in_(list(part)), datasets.c.master_id.is_(None), datasets.c.type.in_(MASTER_TYPES),
                        files.c.status.in_((FileStatus.READY.value, FileStatus.RUNNING.value)), files.c.keep_track.is_(True))
                 .group_by(datasets.c.task_id))
        found.update({task_id: float(average or 0) for task_id, average in conn.execute(query)})
    return found


def job_counts(conn: Connection, task_ids: Iterable[int]) -> dict[int, tuple[int, int, int]]:
    """Per task: (jobs, finished jobs, failed jobs), merge jobs excluded."""
    found: dict[int, list[int]] = {}
    for part in slices(sorted(set(task_ids))):
        for task_id, status, count in conn.execute(
                select(jobs.c.task_id, jobs.c.status, func.count()).where(jobs.c.task_id.in_(list(part)), jobs.c.kind == "normal")
                .group_by(jobs.c.task_id, jobs.c.status)):
            totals = found.setdefault(task_id, [0, 0, 0])
            totals[0] += count
            if status == JobStatus.FINISHED.value:
                totals[1] += count
            elif status == JobStatus.FAILED.value:
                totals[2] += count
    return {task_id: (t[0], t[1], t[2]) for task_id, t in found.items()}


def fresh_ready_files(conn: Connection, task_id: int) -> int:
    """Master input files waiting that never failed (the goal check waits for them)."""
    return conn.execute(select(func.count()).select_from(files.join(datasets, datasets.c.id == files.c.dataset_id)).where(
        datasets.c.task_id == task_id, datasets.c.master_id.is_(None), datasets.c.type.in_(MASTER_TYPES),
        files.c.status == FileStatus.READY.value, files.c.failed_attempt == 0, files.c.keep_track.is_(True))).scalar_one()


def set_task(conn: Connection, task_id: int, status: str, now: datetime, values: dict[str, Any]) -> bool:
    """Bookkeeping columns of an unleased task still in `status` -- not a change of the task, so
    `modified_at` (what the pending and exhausted waits count from) is left alone."""
    return conn.execute(update(tasks).where(tasks.c.id == task_id, tasks.c.status == str(status), is_free(tasks, now))
                        .values(**values)).rowcount == 1


def boost_jobs(conn: Connection, task_id: int, priority: int | None, share: str | None, now: datetime) -> int:
    """The task's queued jobs get the boosted priority (never lowered) and share."""
    values: dict[str, Any] = {}
    if priority is not None:
        values["current_priority"] = func.max(jobs.c.current_priority, priority) if conn.dialect.name == "sqlite" \
            else func.greatest(jobs.c.current_priority, priority)
    if share is not None:
        values["gshare"] = share
    if not values:
        return 0
    return conn.execute(update(jobs).where(jobs.c.task_id == task_id, jobs.c.status.in_(QUEUED_JOBS))
                        .values(**values, modified_at=now)).rowcount


def share_defined(conn: Connection, name: str) -> bool | None:
    """Whether the global-share table holds a share of this name (None: the table is empty, the
    configured tree applies)."""
    if conn.execute(select(global_shares.c.id).limit(1)).first() is None:
        return None
    return conn.execute(select(global_shares.c.id).where(global_shares.c.name == name)).first() is not None


def due(column: Any, cutoff: datetime) -> Any:
    """The moment in `column` is unset or at or before `cutoff`."""
    return or_(column.is_(None), column <= cutoff)
