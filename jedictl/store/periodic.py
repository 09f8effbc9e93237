"""Named operations on periodic templates and their instances (docs/periodic-tasks.md).

A template's due time is taken by one guarded UPDATE (`claim_due`): it moves `next_due_at` on only if
it still holds the time the pass read, so of two passes that read the same due time one claims it and
the other finds the row changed. The claim, the cap's count and the instance's insertion share the
caller's transaction (on PostgreSQL the claim's row lock holds back any other pass on the template
until it commits), so a kill midway leaves the due time unclaimed and no task.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from jedictl.errors import BadInput
from jedictl.store.schema import periodic_templates, tasks

T = periodic_templates.c


def insert_template(conn: Connection, values: dict[str, Any]) -> int:
    """A new template; a name already taken is refused (also when a concurrent `add` took it first)."""
    if get_template(conn, values["name"]) is not None:
        raise BadInput(f"a periodic template named {values['name']} exists (remove it first, or choose another --name)", "--name")
    row = {"n_instances": 0, "n_capped": 0, "n_refused": 0, "n_missed": 0, **values}
    try:
        with conn.begin_nested():
            return conn.execute(insert(periodic_templates).values(**row).returning(T.id)).scalar_one()
    except IntegrityError as exc:
        raise BadInput(f"a periodic template named {values['name']} exists (remove it first, or choose another --name)", "--name") from exc


def get_template(conn: Connection, name: str) -> Row | None:
    return conn.execute(select(periodic_templates).where(T.name == name)).first()


def list_templates(conn: Connection, status: str | None = None) -> list[Row]:
    query = select(periodic_templates).order_by(T.name)
    if status:
        query = query.where(T.status == status)
    return list(conn.execute(query))


def names_of(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """Template id -> name, for the ids that still have a template."""
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return {}
    return dict(conn.execute(select(T.id, T.name).where(T.id.in_(wanted))).all())


def due_templates(conn: Connection, now: datetime, limit: int) -> list[Row]:
    """Active templates whose next due time is not after `now`, the longest waiting first."""
    return list(conn.execute(select(periodic_templates).where(T.status == "active", T.next_due_at <= now)
                             .order_by(T.next_due_at, T.id).limit(limit)))


def claim_due(conn: Connection, template_id: int, expected: datetime, due_at: datetime, following: datetime | None, missed: int,
              now: datetime) -> bool:
    """Take the due time `due_at` of an active template whose `next_due_at` is still `expected`, moving
    it on to `following` -- one statement; False when another pass (or a pause, a removal) came first."""
    moved = conn.execute(update(periodic_templates).where(T.id == template_id, T.status == "active", T.next_due_at == expected)
                         .values(next_due_at=following, last_due_at=due_at, n_missed=T.n_missed + missed, modified_at=now))
    return moved.rowcount == 1


_COUNTERS = {"instantiated": T.n_instances, "capped": T.n_capped, "refused": T.n_refused}


def record_outcome(conn: Connection, template_id: int, outcome: str, reason: str | None, task_id: int | None) -> None:
    """What became of the due time just claimed (in the claim's transaction)."""
    counter = _COUNTERS[outcome]
    values = {counter: counter + 1, "last_outcome": outcome, "last_reason": reason}
    if task_id is not None:  # the newest instance stays named when later due times make none
        values["last_task_id"] = task_id
    conn.execute(update(periodic_templates).where(T.id == template_id).values(values))


def active_instances(conn: Connection, template_ids: Sequence[int], final: Iterable[str]) -> dict[int, int]:
    """Template id -> how many of its instances are in none of the `final` statuses."""
    if not template_ids:
        return {}
    rows = conn.execute(select(tasks.c.periodic_id, func.count()).where(tasks.c.periodic_id.in_(list(template_ids)),
                                                                         tasks.c.status.not_in([str(s) for s in final]))
                        .group_by(tasks.c.periodic_id))
    return {template_id: int(n) for template_id, n in rows}


def instances_of(conn: Connection, template_id: int, limit: int) -> list[Row]:
    """The newest instances of a template: (id, name, status, periodic_due_at, created_at)."""
    return list(conn.execute(select(tasks.c.id, tasks.c.name, tasks.c.status, tasks.c.periodic_due_at, tasks.c.created_at)
                             .where(tasks.c.periodic_id == template_id)
                             .order_by(tasks.c.periodic_due_at.desc(), tasks.c.id.desc()).limit(limit)))


def set_status(conn: Connection, name: str, status: str, expected: str, next_due_at: datetime | None, now: datetime) -> bool:
    """Pause or resume: `expected` -> `status`, with the due time to wait for next; False if it was not `expected`."""
    changed = conn.execute(update(periodic_templates).where(T.name == name, T.status == expected)
                           .values(status=status, next_due_at=next_due_at, modified_at=now))
    return changed.rowcount == 1


def delete_template(conn: Connection, name: str) -> int | None:
    """Remove a template; its id, or None when there was none. Its instances stay (they keep the id)."""
    row = conn.execute(delete(periodic_templates).where(T.name == name).returning(T.id)).first()
    return row.id if row is not None else None
