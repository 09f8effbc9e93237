"""Named queries behind the per-user caps of analysis (engine.shares.user_caps, engine.watch.user_caps):
each account's jobs by state, the guarded moves `activated <-> throttled` of an account's jobs, the
input its assigned jobs still wait for, and the tasks throttled for that backlog.

An account is a working group (its tasks with that working group) or a user (his tasks without one);
`account` arguments are (kind, name) pairs. Paused tasks are left out of every move: their jobs are the
pause's (throttled without a sub_status) until `task resume`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, and_, case, func, select, update

from jedictl.model import SLOT_PENDING, SLOT_RUNNING, THROTTLED_FOR_PRESTAGING, THROTTLED_FOR_TRANSFER, USER_CAP, JobStatus, TaskStatus
from jedictl.store.bulk import slices
from jedictl.store.leases import is_free
from jedictl.store.schema import datasets, job_files, jobs, tasks

INPUT_TYPES = ("input", "pseudo_input")
TRANSFER_REASONS = (THROTTLED_FOR_PRESTAGING, THROTTLED_FOR_TRANSFER)


def account_job_counts(conn: Connection, labels: Sequence[str]) -> list[Row]:
    """Per account (user_name, working_group) and kind of job -- `running` (sent, starting, running),
    `queued` (defined, assigned, activated, throttled), of which `activated` and `capped` (throttled by
    a user cap, task not paused) -- the number of jobs and of cores (a job without a core count is one)."""
    paused = tasks.c.status == TaskStatus.PAUSED.value
    kind = case(
        (jobs.c.status.in_(SLOT_RUNNING), "running"),
        (and_(jobs.c.status == JobStatus.ACTIVATED.value, ~paused), "activated"),
        (and_(jobs.c.status == JobStatus.THROTTLED.value, jobs.c.sub_status == USER_CAP, ~paused), "capped"),
        else_="queued").label("kind")
    return list(conn.execute(
        select(tasks.c.user_name, tasks.c.working_group, kind, func.count().label("jobs"),
               func.sum(func.coalesce(jobs.c.core_count, 1)).label("cores"))
        .join(tasks, tasks.c.id == jobs.c.task_id)
        .where(jobs.c.status.in_((*SLOT_RUNNING, *SLOT_PENDING)), tasks.c.prod_source_label.in_(list(labels)))
        .group_by(tasks.c.user_name, tasks.c.working_group, kind)))


def capped_jobs_of_task(conn: Connection, task_id: int) -> int:
    """How many jobs of the task are throttled by a user cap."""
    return int(conn.execute(select(func.count()).select_from(jobs).where(
        jobs.c.task_id == task_id, jobs.c.status == JobStatus.THROTTLED.value, jobs.c.sub_status == USER_CAP)).scalar_one())


def _tasks_of(account: tuple[str, str], labels: Sequence[str]) -> Any:
    """The ids of the account's analysis tasks that are not paused."""
    kind, name = account
    owner: ColumnElement[bool] = tasks.c.working_group == name if kind == "group" else and_(
        tasks.c.user_name == name, tasks.c.working_group.is_(None))
    return select(tasks.c.id).where(owner, tasks.c.prod_source_label.in_(list(labels)), tasks.c.status != TaskStatus.PAUSED.value)


def throttle_jobs(conn: Connection, account: tuple[str, str], labels: Sequence[str], now: datetime) -> list[Row]:
    """activated -> throttled (sub_status user_cap) for every activated job of the account's tasks that
    are not paused, in one UPDATE guarded by the status; (id, task_id) of the jobs that moved."""
    return list(conn.execute(
        update(jobs).where(jobs.c.status == JobStatus.ACTIVATED.value, jobs.c.task_id.in_(_tasks_of(account, labels)))
        .values(status=JobStatus.THROTTLED.value, sub_status=USER_CAP, state_changed_at=now, modified_at=now)
        .returning(jobs.c.id, jobs.c.task_id)))


def release_jobs(conn: Connection, account: tuple[str, str], labels: Sequence[str], now: datetime) -> list[Row]:
    """throttled (by a user cap) -> activated for the account's tasks that are not paused; (id, task_id)."""
    return list(conn.execute(
        update(jobs).where(jobs.c.status == JobStatus.THROTTLED.value, jobs.c.sub_status == USER_CAP,
                           jobs.c.task_id.in_(_tasks_of(account, labels)))
        .values(status=JobStatus.ACTIVATED.value, sub_status=None, state_changed_at=now, modified_at=now)
        .returning(jobs.c.id, jobs.c.task_id)))


def awaited_inputs(conn: Connection, labels: Sequence[str]) -> list[Row]:
    """The input files assigned analysis jobs wait for (job_files naming a destination), with the owner
    of their task: task_id, user_name, working_group, dataset (its name), lfn, size."""
    return list(conn.execute(
        select(jobs.c.task_id, tasks.c.user_name, tasks.c.working_group, datasets.c.name.label("dataset"), job_files.c.lfn,
               job_files.c.size)
        .select_from(job_files.join(jobs, jobs.c.id == job_files.c.job_id).join(tasks, tasks.c.id == jobs.c.task_id)
                     .join(datasets, datasets.c.id == job_files.c.dataset_id))
        .where(jobs.c.status == JobStatus.ASSIGNED.value, tasks.c.prod_source_label.in_(list(labels)),
               job_files.c.type.in_(INPUT_TYPES), job_files.c.destination.is_not(None))
        .order_by(jobs.c.task_id, job_files.c.lfn)))


def transfer_throttled(conn: Connection) -> list[Row]:
    """Tasks throttled for their account's backlog of input to move: id, user_name, working_group,
    throttle_reason (prestaging | transfer), old_status."""
    return list(conn.execute(
        select(tasks.c.id, tasks.c.user_name, tasks.c.working_group, tasks.c.throttle_reason, tasks.c.old_status)
        .where(tasks.c.status == TaskStatus.THROTTLED.value, tasks.c.throttle_reason.in_(TRANSFER_REASONS)).order_by(tasks.c.id)))


def free_tasks_among(conn: Connection, task_ids: Collection[int], statuses: Sequence[str], now: datetime) -> list[Row]:
    """Of `task_ids`, those in `statuses` that nobody holds: id, status, user_name, working_group."""
    found: list[Row] = []
    for part in slices(sorted(set(task_ids))):
        found.extend(conn.execute(
            select(tasks.c.id, tasks.c.status, tasks.c.user_name, tasks.c.working_group)
            .where(tasks.c.id.in_(list(part)), tasks.c.status.in_(list(statuses)), is_free(tasks, now))))
    return sorted(found, key=lambda row: row.id)
