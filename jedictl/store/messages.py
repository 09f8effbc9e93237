"""Named operations behind messages (docs/messages.md): the ids of the messages `jedictl listen` acted
on, the datasets a dataset message names, and the outbox of task status changes.

Processed messages: `claim` inserts the message's row first thing in the action's transaction, so a
second listener handed the same message (a redelivery after a lost connection) waits on that row and
then finds it; `settle` gives the row its outcome in the same transaction. A failed attempt is
recorded on its own (`failed_attempt`), and only the `error` outcome may be claimed again.

The outbox: a store opened with `task_events` (store.database.open_store, when a broker is configured)
writes one `message_outbox` row for every status history line, in the status change's transaction
(`queue_status_events`, called by the two writers of history lines). Publishers take rows under a
lease (store.leases, as tasks are taken), publish them, and delete them once the broker confirmed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, Row, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from jedictl.model import TaskStatus
from jedictl.store import leases
from jedictl.store.bulk import slices
from jedictl.store.database import TASK_EVENTS
from jedictl.store.schema import catalog_container_members, catalog_datasets, datasets, message_outbox, processed_messages, tasks

#: The outcome of a message that failed and may be tried again when it comes back.
ERROR = "error"


# ------------------------------------------------------------------------------ processed messages

def seen(conn: Connection, message_id: str) -> Row | None:
    """The row of a message acted on before (outcome, detail, attempts), or None."""
    return conn.execute(select(processed_messages).where(processed_messages.c.message_id == message_id)).first()


def claim(conn: Connection, message_id: str, msg_type: str, now: datetime) -> bool:
    """Take a message for its action in the caller's transaction: True when it is new (a row is inserted,
    outcome `applied` until `settle` says otherwise) or its earlier attempts failed; False when it was
    acted on already -- also when another listener's transaction committed it while this one waited."""
    row = seen(conn, message_id)
    if row is not None:
        if row.outcome != ERROR:
            return False
        result = conn.execute(update(processed_messages).where(processed_messages.c.message_id == message_id,
                                                               processed_messages.c.outcome == ERROR)
                              .values(outcome="applied", processed_at=now))
        return result.rowcount == 1
    try:
        with conn.begin_nested():
            conn.execute(insert(processed_messages).values(message_id=message_id, msg_type=msg_type, outcome="applied", attempts=0,
                                                           received_at=now, processed_at=now))
    except IntegrityError:  # another listener acted on it meanwhile (its row committed while we waited)
        return False
    return True


def settle(conn: Connection, message_id: str, outcome: str, detail: str | None, now: datetime) -> None:
    """The outcome of a claimed message, in its action's transaction."""
    conn.execute(update(processed_messages).where(processed_messages.c.message_id == message_id)
                 .values(outcome=outcome, detail=detail, processed_at=now))


def failed_attempt(conn: Connection, message_id: str, msg_type: str, detail: str, now: datetime) -> int:
    """Count one failed attempt of a message whose action rolled back; the attempts so far. A message
    already settled by someone else is left alone (0)."""
    row = seen(conn, message_id)
    if row is None:
        conn.execute(insert(processed_messages).values(message_id=message_id, msg_type=msg_type, outcome=ERROR, detail=detail,
                                                       attempts=1, received_at=now, processed_at=now))
        return 1
    if row.outcome != ERROR:
        return 0
    conn.execute(update(processed_messages).where(processed_messages.c.message_id == message_id)
                 .values(attempts=processed_messages.c.attempts + 1, detail=detail, processed_at=now))
    return row.attempts + 1


def forget_before(conn: Connection, moment: datetime) -> int:
    """Delete the records of messages acted on before `moment` (a broker redelivers within minutes, not
    days); the rows deleted."""
    return conn.execute(delete(processed_messages).where(processed_messages.c.processed_at < moment)).rowcount


# ---------------------------------------------------------------------------- dataset messages

def containers_of(conn: Connection, name: str) -> list[str]:
    """The catalog containers that hold the dataset `name`."""
    member = catalog_datasets.alias("member")
    return list(conn.execute(
        select(catalog_datasets.c.name)
        .join(catalog_container_members, catalog_container_members.c.container_id == catalog_datasets.c.id)
        .join(member, member.c.id == catalog_container_members.c.dataset_id)
        .where(member.c.name == name).order_by(catalog_datasets.c.name)).scalars())


def reading_tasks(conn: Connection, names: Collection[str], feedable: Collection[str], task_statuses: Collection[str]) -> list[int]:
    """The tasks in `task_statuses` with a `feedable` dataset named one of `names` (or expanded from one
    of them, a container), oldest first."""
    if not names:
        return []
    d = datasets.c
    query = (select(d.task_id).distinct().join(tasks, tasks.c.id == d.task_id)
             .where(d.type.in_(list(feedable)), or_(d.name.in_(list(names)), d.container_name.in_(list(names))),
                    tasks.c.status.in_(list(task_statuses)))
             .order_by(d.task_id))
    return list(conn.execute(query).scalars())


def rescan_now(conn: Connection, task_ids: Iterable[int], feedable: Collection[str], states: Collection[str],
               names: Collection[str] | None = None) -> int:
    """Make the open inputs of these tasks due for the feeder's re-scan at once (`state_checked_at`
    cleared: the feeder's rescan filter takes a dataset never checked); only those named `names` (or
    expanded from one of them), if given. The datasets made due."""
    d = datasets.c
    changed = 0
    for part in slices(sorted(set(task_ids))):
        where = [d.task_id.in_(list(part)), d.type.in_(list(feedable)), d.state.in_(list(states))]
        if names is not None:
            where.append(or_(d.name.in_(list(names)), d.container_name.in_(list(names))))
        changed += conn.execute(update(datasets).where(*where).values(state_checked_at=None)).rowcount
    return changed


def wake_pending(conn: Connection, task_ids: Iterable[int], now: datetime) -> list[int]:
    """Tasks among these that wait in `pending` for their input (old status `defined`), free of any
    lease, made due for the feeder now (`wait_until` cleared); their ids. Their status and the time they
    have been pending are left alone: the feeder decides again, as when their wait ends."""
    t = tasks.c
    woken: list[int] = []
    for part in slices(sorted(set(task_ids))):
        woken += conn.execute(update(tasks).where(t.id.in_(list(part)), t.status == TaskStatus.PENDING.value,
                                                  t.old_status == TaskStatus.DEFINED.value, leases.is_free(tasks, now))
                              .values(wait_until=None).returning(t.id)).scalars().all()
    return sorted(woken)


# ------------------------------------------------------------------------------------- the outbox

def events_on(conn: Connection) -> bool:
    """Whether status changes on this connection are queued for publishing."""
    return bool(conn.get_execution_options().get(TASK_EVENTS))


def queue_status_events(conn: Connection, rows: Sequence[tuple[int, str, str | None, str | None, datetime, str]]) -> None:
    """Outbox rows (task id, status, previous status, reason, changed at, changed by) for status changes
    written in this transaction, when this store publishes task events."""
    if rows and events_on(conn):
        conn.execute(insert(message_outbox), [
            {"task_id": task_id, "status": str(status), "previous_status": str(previous) if previous else None, "reason": reason,
             "changed_at": changed_at, "changed_by": by} for task_id, status, previous, reason, changed_at, by in rows])


def claim_events(conn: Connection, owner: str, now: datetime, seconds: float, limit: int) -> list[Row]:
    """Lease up to `limit` outbox rows nobody holds (or whose holder's lease expired), oldest first; the
    rows with their task's name and owner."""
    ids = leases.claim(conn, message_outbox, message_outbox.c.id > 0, (message_outbox.c.id,), owner, now, seconds, limit)
    if not ids:
        return []
    o = message_outbox.c
    return list(conn.execute(
        select(o.id, o.task_id, o.status, o.previous_status, o.reason, o.changed_at, o.changed_by,
               tasks.c.name.label("task_name"), tasks.c.user_name)
        .select_from(message_outbox.outerjoin(tasks, tasks.c.id == o.task_id))
        .where(o.id.in_(ids), o.lease_owner == owner).order_by(o.id)))


def delete_events(conn: Connection, ids: Sequence[int], owner: str) -> int:
    """Delete published outbox rows that `owner` still holds; the rows deleted."""
    return sum(conn.execute(delete(message_outbox).where(message_outbox.c.id.in_(list(part)), message_outbox.c.lease_owner == owner)).rowcount
               for part in slices(sorted(ids)))


def release_events(conn: Connection, ids: Sequence[int], owner: str) -> None:
    """Give back outbox rows that were not published, for the next publisher."""
    for part in slices(sorted(ids)):
        conn.execute(update(message_outbox).where(message_outbox.c.id.in_(list(part)), message_outbox.c.lease_owner == owner)
                     .values(lease_owner=None, lease_expires_at=None))


def waiting_events(conn: Connection) -> int:
    """Outbox rows not published yet."""
    return conn.execute(select(func.count()).select_from(message_outbox)).scalar_one()


def oldest_waiting_event(conn: Connection) -> datetime | None:
    """When the oldest unpublished status change happened."""
    return conn.execute(select(func.min(message_outbox.c.changed_at))).scalar_one()

