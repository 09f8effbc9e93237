"""Named operations for operator commands on tasks (kill, finish, retry, incexec, pause, resume,
avalanche, reassign): the task row under lock, the audit row in `task_commands`, and the set-based
writes a command makes to jobs, file records and dataset counters.

Everything runs in the caller's transaction, so a command is all-or-nothing together with its
status guard (`tasks.change_status`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, func, insert, select, update

from jedictl.errors import NotFound
from jedictl.model import JOB_FINAL, CommandStatus
from jedictl.store.bulk import slices, update_tuples
from jedictl.store.files import count_records
from jedictl.store.schema import datasets, files, jobs, task_commands, tasks

#: The `files` columns a command reads (model.files.FileRecord's fields a command needs).
FILE_COLUMNS = (files.c.id, files.c.dataset_id, files.c.type, files.c.status, files.c.attempt_nr, files.c.max_attempt, files.c.failed_attempt,
                files.c.max_failure, files.c.keep_track, files.c.ram_count)
#: Dataset columns the commands' policies read (final_status.DatasetRecord's fields).
DATASET_COLUMNS = (datasets.c.id, datasets.c.type, datasets.c.status, datasets.c.master_id, datasets.c.state, datasets.c.n_files,
                   datasets.c.n_files_to_be_used, datasets.c.n_files_used, datasets.c.n_files_finished, datasets.c.n_files_failed,
                   datasets.c.n_files_missing, datasets.c.n_events, datasets.c.n_events_used)
#: Counters a command may change by a delta.
DELTA_COLUMNS = frozenset({"n_files", "n_files_to_be_used", "n_files_used", "n_files_finished", "n_files_failed", "n_files_missing"})


def lock_task(conn: Connection, task_id: int) -> Row:
    """The task row, locked until the end of the transaction (`FOR UPDATE` on PostgreSQL; SQLite's
    BEGIN IMMEDIATE already holds the write lock)."""
    query = select(tasks).where(tasks.c.id == task_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        raise NotFound(f"task {task_id} does not exist")
    return row


def update_task(conn: Connection, task_id: int, values: Mapping[str, Any]) -> None:
    if values:
        conn.execute(update(tasks).where(tasks.c.id == task_id).values(**values))


def record_command(conn: Connection, task_id: int, command: str, *, qualifier: str | None, parameters: Mapping[str, Any] | None,
                   comment: str | None, by: str, now: datetime, outcome: str, status: str = CommandStatus.DONE.value) -> int:
    """The audit row: who asked for what, when, why, and what came of it."""
    return conn.execute(insert(task_commands).values(
        task_id=task_id, command=command, qualifier=qualifier, parameters=dict(parameters) if parameters else None,
        comment=comment, requested_by=by, requested_at=now, status=status, outcome=outcome, executed_at=now, executed_by=by,
    ).returning(task_commands.c.id)).scalar_one()


def commands_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(task_commands).where(task_commands.c.task_id == task_id).order_by(task_commands.c.id)))


def children_of(conn: Connection, task_id: int) -> list[tuple[int, str]]:
    return [(r.id, r.status) for r in conn.execute(select(tasks.c.id, tasks.c.status).where(tasks.c.parent_id == task_id).order_by(tasks.c.id))]


# -------------------------------------------------------------------------------------------- jobs

def jobs_in(conn: Connection, task_id: int, statuses: Iterable[str]) -> list[tuple[int, str]]:
    """(id, status) of the task's jobs in `statuses`, in id order."""
    wanted = sorted(str(s) for s in statuses)
    if not wanted:
        return []
    return [(r.id, r.status) for r in conn.execute(
        select(jobs.c.id, jobs.c.status).where(jobs.c.task_id == task_id, jobs.c.status.in_(wanted)).order_by(jobs.c.id))]


def settled_finishing_tasks(conn: Connection, limit: int) -> list[int]:
    """Tasks in `finishing` none of whose jobs is live any more, oldest first."""
    live = select(jobs.c.id).where(jobs.c.task_id == tasks.c.id, jobs.c.status.notin_([s.value for s in JOB_FINAL])).exists()
    return list(conn.execute(select(tasks.c.id).where(tasks.c.status == "finishing", ~live).order_by(tasks.c.id).limit(limit)).scalars())


def count_live_jobs(conn: Connection, task_id: int) -> int:
    return conn.execute(select(func.count()).select_from(jobs).where(
        jobs.c.task_id == task_id, jobs.c.status.notin_([s.value for s in JOB_FINAL]))).scalar_one()


def flip_jobs(conn: Connection, task_id: int, old: str, new: str, now: datetime) -> int:
    """Every job of the task in `old` moves to `new` (pause: activated -> throttled; resume: back). The
    sub_status goes: a resumed job held by a user cap as well is activated, and the next watch pass
    throttles it again if its user is still at the cap."""
    # A co-jumbo job waiting for a jumbo job (sub_status jumbo) stays: the jumbo job's end releases it.
    return conn.execute(update(jobs).where(jobs.c.task_id == task_id, jobs.c.status == str(old),
                                           func.coalesce(jobs.c.sub_status, "") != "jumbo").values(
        status=str(new), sub_status=None, modified_at=now, state_changed_at=now)).rowcount


# ---------------------------------------------------------------------------------- files, datasets

def datasets_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(*DATASET_COLUMNS, datasets.c.name, datasets.c.storage_token).where(datasets.c.task_id == task_id).order_by(datasets.c.id)))


def input_files(conn: Connection, dataset_ids: Sequence[int]) -> list[Row]:
    """File records of the given datasets (the inputs a retry or finish looks at), in id order."""
    found: list[Row] = []
    for part in slices(sorted(set(dataset_ids))):
        found.extend(conn.execute(select(*FILE_COLUMNS).where(files.c.dataset_id.in_(list(part))).order_by(files.c.id)))
    return sorted(found, key=lambda r: r.id)


def update_files(conn: Connection, changes: Sequence[tuple[int, Mapping[str, Any]]]) -> int:
    """(file id, new column values); changes with the same columns share one executemany."""
    groups: dict[tuple[str, ...], list[tuple]] = defaultdict(list)
    for file_id, values in changes:
        names = tuple(sorted(values))
        groups[names].append(tuple(str(values[n]) if n == "status" else values[n] for n in names) + (file_id,))
    return sum(update_tuples(conn, files, names, ("id",), rows) for names, rows in groups.items())


def change_datasets(conn: Connection, changes: Sequence[tuple[int, Mapping[str, int], str | None]], now: datetime) -> None:
    """(dataset id, counter deltas, new status or None), one UPDATE per dataset in id order (the lock
    order of every writer)."""
    for dataset_id, deltas, status in sorted(changes, key=lambda c: c[0]):
        values: dict[str, Any] = {"modified_at": now}
        for name, delta in deltas.items():
            if name not in DELTA_COLUMNS:
                raise ValueError(f"{name} is not a dataset counter")
            values[name] = datasets.c[name] + delta
        if status is not None:
            values["status"] = str(status)
        conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(**values))


def set_dataset_statuses(conn: Connection, statuses: Mapping[int, str], now: datetime) -> None:
    for dataset_id, status in sorted(statuses.items()):
        conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(status=str(status), modified_at=now))


def recount_inputs(conn: Connection, dataset_ids: Iterable[int], now: datetime) -> None:
    """n_files, n_files_missing and n_events from the records (after lost files came back)."""
    for dataset_id in sorted(set(dataset_ids)):
        counts = count_records(conn, dataset_id)
        conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(
            n_files=counts.records, n_files_missing=counts.lost, n_events=counts.events, modified_at=now))


def set_destinations(conn: Connection, destinations: Mapping[int, str], now: datetime) -> None:
    for dataset_id, endpoint in sorted(destinations.items()):
        conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(destination=endpoint, modified_at=now))
