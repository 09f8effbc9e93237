"""Named operations on tasks: insertion, status changes with history, guarded writes under a lease, refinement writes, queries."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Sequence

from sqlalchemy import Connection, Row, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from jedictl.errors import BadInput, LeaseLost, NotFound
from jedictl.model import NewDataset, TaskStatus
from jedictl.store import leases, messages
from jedictl.store.schema import datasets, job_param_templates, output_templates, task_outputs, task_params, task_status_history, tasks


class NameTaken(BadInput):
    """Another task of the user has this name (uniqueTaskName): a submission that raced past the check."""

    def __init__(self, task_id: int, status: str, user_name: str):
        self.task_id, self.status = task_id, status
        super().__init__(f"task {task_id} ({status}) already has this name for user {user_name}", "name")


def unique_key(user_name: str, name: str) -> str:
    return f"{user_name}\n{name}"


def find_same_name(conn: Connection, user_name: str, name: str) -> Row | None:
    return conn.execute(
        select(tasks.c.id, tasks.c.status).where(tasks.c.user_name == user_name, tasks.c.name == name).order_by(tasks.c.id.desc()).limit(1)
    ).first()


def insert_task(
    conn: Connection, values: dict[str, Any], document: dict[str, Any], fmt: str, unknown_keys: Sequence[str], now: datetime, by: str,
    output_names: Sequence[str] = (),
) -> int:
    """Insert a `registered` task with its parameters, the names of the datasets it writes and its first
    history line; returns its id.

    A duplicate name under uniqueTaskName is refused by the database itself (unique_name_key), so two
    concurrent submissions cannot both succeed: the loser gets NameTaken, naming the winner.
    """
    row = {**values, "status": TaskStatus.REGISTERED.value, "created_at": now, "modified_at": now, "state_changed_at": now}
    try:
        with conn.begin_nested():
            task_id = conn.execute(insert(tasks).values(**row).returning(tasks.c.id)).scalar_one()
    except IntegrityError as exc:
        existing = find_same_name(conn, values["user_name"], values["name"]) if values.get("unique_name_key") else None
        if existing is not None:
            raise NameTaken(existing.id, existing.status, values["user_name"]) from exc
        raise
    conn.execute(insert(task_params).values(task_id=task_id, format=fmt, document=document, unknown_keys=list(unknown_keys)))
    if output_names:
        conn.execute(insert(task_outputs), [{"task_id": task_id, "name": name} for name in sorted(set(output_names))])
    record_status(conn, task_id, TaskStatus.REGISTERED, None, "submitted", by, now)
    return task_id


def record_status(conn: Connection, task_id: int, status: str, previous: str | None, reason: str | None, by: str, now: datetime) -> None:
    """A status history line, and its event in the outbox when this store publishes task events."""
    conn.execute(insert(task_status_history).values(
        task_id=task_id, status=str(status), previous_status=str(previous) if previous else None,
        reason=reason, changed_at=now, changed_by=by,
    ))
    messages.queue_status_events(conn, [(task_id, status, previous, reason, now, by)])


def change_status(
    conn: Connection,
    task_id: int,
    new: str,
    expected: Iterable[str],
    reason: str | None,
    by: str,
    now: datetime,
    owner: str | None = None,
    **values: Any,
) -> bool:
    """Move a task to `new` only from one of `expected` (and only while `owner` holds its lease, if given).

    Returns False when the guard did not match (someone else moved it first). History is written in
    the same transaction.
    """
    expected = [str(s) for s in expected]
    current = conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar_one_or_none()
    if current is None or current not in expected:
        return False
    guard = [tasks.c.id == task_id, tasks.c.status == current]
    if owner is not None:
        guard.append(tasks.c.lease_owner == owner)
    changed = {"status": str(new), "modified_at": now, **values}
    if str(new) != current:
        changed["state_changed_at"] = now
    result = conn.execute(update(tasks).where(*guard).values(**changed))
    if result.rowcount != 1:
        return False
    if str(new) != current or reason:
        record_status(conn, task_id, new, current, reason, by, now)
    return True


def update_leased(conn: Connection, task_id: int, owner: str, expected: Iterable[str], **values: Any) -> bool:
    """Set task columns exactly as given (no history line), only while `owner` holds the lease and the task
    is in one of `expected`; False when that guard matched no row."""
    result = conn.execute(update(tasks).where(leases.owned(tasks, task_id, owner), tasks.c.status.in_([str(s) for s in expected]))
                          .values(**values))
    return result.rowcount == 1


def active_tasks_of(conn: Connection, user_name: str, prod_source_label: str, statuses: Iterable[str]) -> int:
    """How many tasks of `user_name` with this label are in `statuses`, after serialising the submissions
    of the user until the caller commits (a transaction-level advisory lock per user on PostgreSQL;
    SQLite's BEGIN IMMEDIATE already makes writers take turns): two submissions at once cannot both
    count the same number and both pass a cap."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended("active-tasks\n" + user_name, 0))))
    return int(conn.execute(select(func.count()).select_from(tasks).where(
        tasks.c.user_name == user_name, tasks.c.prod_source_label == prod_source_label,
        tasks.c.status.in_([str(s) for s in statuses]))).scalar_one())


def get_task(conn: Connection, task_id: int) -> Row:
    row = conn.execute(select(tasks).where(tasks.c.id == task_id)).first()
    if row is None:
        raise NotFound(f"task {task_id} does not exist")
    return row


def get_params(conn: Connection, task_id: int) -> Row:
    row = conn.execute(select(task_params).where(task_params.c.task_id == task_id)).first()
    if row is None:
        raise NotFound(f"task {task_id} has no stored parameters")
    return row


def parent_status(conn: Connection, parent_id: int) -> str | None:
    return conn.execute(select(tasks.c.status).where(tasks.c.id == parent_id)).scalar_one_or_none()


def status_of(conn: Connection, task_id: int) -> str:
    """The status of a task that exists."""
    return conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar_one()


def list_tasks(conn: Connection, status: Sequence[str] = (), user: str | None = None, limit: int = 100,
               periodic_id: int | None = None) -> list[Row]:
    query = select(tasks).order_by(tasks.c.id.desc()).limit(limit)
    if periodic_id is not None:
        query = query.where(tasks.c.periodic_id == periodic_id)
    if status:
        query = query.where(tasks.c.status.in_(list(status)))
    if user:
        query = query.where(tasks.c.user_name == user)
    return list(conn.execute(query))


def status_history(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(
        select(task_status_history).where(task_status_history.c.task_id == task_id).order_by(task_status_history.c.id)
    ))


def count_by_status(conn: Connection) -> dict[str, int]:
    return dict(conn.execute(select(tasks.c.status, func.count()).group_by(tasks.c.status)).all())


def count_not_in_status(conn: Connection, statuses: Iterable[str]) -> int:
    """How many tasks are in none of `statuses`."""
    return conn.execute(select(func.count()).where(tasks.c.status.notin_([str(s) for s in statuses]))).scalar_one()


def write_refinement(
    conn: Connection,
    task_id: int,
    owner: str,
    task_values: dict[str, Any],
    new_datasets: Sequence[NewDataset],
    job_templates: dict[str, str],
    now: datetime,
) -> None:
    """Write what the refiner built, in the caller's transaction, only while `owner` holds the lease.

    Any datasets or templates a crashed earlier attempt might have left are impossible: this runs in
    one transaction with the status change, which is guarded by status and lease.
    """
    result = conn.execute(
        update(tasks)
        .where(leases.owned(tasks, task_id, owner), tasks.c.status.in_([TaskStatus.REGISTERED.value, TaskStatus.PENDING.value]))
        .values(**task_values, modified_at=now, state_changed_at=now)
    )
    if result.rowcount != 1:
        raise LeaseLost(f"task {task_id} is no longer leased by {owner}")
    ids: dict[int, int] = {}
    pending = list(new_datasets)
    while pending:
        # Sweep in the planned order, deferring a dataset until those it points to have ids.
        before = len(pending)
        for dataset in list(pending):
            if all(ref is None or ref in ids for ref in (dataset.master_key, dataset.provenance_key)):
                ids[dataset.key] = _insert_dataset(conn, task_id, dataset, ids, now)
                pending.remove(dataset)
        if len(pending) == before:
            raise ValueError(f"task {task_id}: dataset references form a cycle")
    for kind, template in job_templates.items():
        conn.execute(insert(job_param_templates).values(task_id=task_id, kind=kind, template=template))


def _insert_dataset(conn: Connection, task_id: int, dataset: NewDataset, ids: dict[int, int], now: datetime) -> int:
    dataset_id = conn.execute(insert(datasets).values(
        task_id=task_id, name=dataset.name, container_name=dataset.container_name, type=dataset.type,
        status="defined", master_id=ids.get(dataset.master_key) if dataset.master_key is not None else None,
        provenance_id=ids.get(dataset.provenance_key) if dataset.provenance_key is not None else None,
        stream_name=dataset.stream_name, attributes=dataset.attributes, destination=dataset.destination,
        storage_token=dataset.storage_token, created_at=now, modified_at=now,
    ).returning(datasets.c.id)).scalar_one()
    if dataset.file_template:
        conn.execute(insert(output_templates).values(
            task_id=task_id, dataset_id=dataset_id, filename_template=dataset.file_template,
            serial_nr=dataset.serial_nr, stream_name=dataset.stream_name, out_type=dataset.type,
        ))
    return dataset_id
