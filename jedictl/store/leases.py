"""Leases: how several agent processes share one store (DESIGN.md §3).

A row is taken by one conditional UPDATE that succeeds only while the row is free or its lease has
expired *and* it still matches what the claimer selected it for (its status): the UPDATE's rowcount
alone decides who has it. On PostgreSQL the candidates are picked `FOR UPDATE SKIP LOCKED`, so
concurrent claimers never wait on each other's rows; on SQLite the statement runs inside a
`BEGIN IMMEDIATE` transaction (store.database), which serialises writers -- `SKIP LOCKED` renders as
nothing there and is not relied on.

Every later write to a leased row is guarded the same way: `lease_owner = me` plus the status the
holder expects (`owned`, `renew(..., where=)`). A claim from a list read earlier (a pass's candidate
snapshot) must repeat the list's condition in `where`: between the read and the claim another process
may have handled the row, moved it on and released it -- free again, but no longer a candidate.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Sequence

from sqlalchemy import CTE, ColumnElement, Connection, Select, Table, and_, or_, select, update

from jedictl.errors import LeaseLost


def is_free(table: Table, now: datetime) -> ColumnElement[bool]:
    return or_(table.c.lease_owner.is_(None), table.c.lease_expires_at < now)


def claim(
    conn: Connection,
    table: Table,
    where: ColumnElement[bool],
    order_by: Sequence[Any],
    owner: str,
    now: datetime,
    seconds: float,
    limit: int,
) -> list[int]:
    """Lease up to `limit` free rows matching `where`, in `order_by` order; returns their ids."""
    candidates = claim_candidates(select(table.c.id).where(where, is_free(table, now)).order_by(*order_by).limit(limit))
    statement = (
        update(table)
        .where(table.c.id == candidates.c.id, is_free(table, now))
        .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds))
        .returning(table.c.id)
    )
    return sorted(conn.execute(statement).scalars().all())


def claim_candidates(query: Select) -> CTE:
    """The rows a claim may take, as a CTE the UPDATE joins (`UPDATE ... FROM candidates`).

    Not `WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`: PostgreSQL may run such a subquery
    more than once, and with SKIP LOCKED each run can return other rows, so more than n rows would be
    claimed. A materialized CTE is evaluated exactly once. SKIP LOCKED renders as nothing on SQLite,
    where BEGIN IMMEDIATE already makes the statement exclusive.
    """
    return query.with_for_update(skip_locked=True).cte("candidates").prefix_with("MATERIALIZED", dialect="postgresql")


def claim_one(conn: Connection, table: Table, row_id: int, owner: str, now: datetime, seconds: float,
              where: ColumnElement[bool] | None = None) -> bool:
    """Lease one known row if it is free and still matches `where`; False otherwise."""
    guard = [table.c.id == row_id, is_free(table, now)] + ([where] if where is not None else [])
    result = conn.execute(
        update(table)
        .where(*guard)
        .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds))
    )
    return result.rowcount == 1


def renew(conn: Connection, table: Table, row_id: int, owner: str, now: datetime, seconds: float,
          where: ColumnElement[bool] | None = None) -> None:
    """Heartbeat: extend our lease to `now + seconds`, or raise LeaseLost if it is no longer ours or
    the row no longer matches `where` (an operator's command moved the task while we worked on it).

    `now` is the current moment, not the pass's frozen start: a pass that renews from the time it
    started gives its lease up after `seconds` however often it renews (see `clock.PassClock`)."""
    guard = [table.c.id == row_id, table.c.lease_owner == owner] + ([where] if where is not None else [])
    result = conn.execute(
        update(table)
        .where(*guard)
        .values(lease_expires_at=now + timedelta(seconds=seconds))
    )
    if result.rowcount != 1:
        raise LeaseLost(f"{table.name} {row_id}: the lease of {owner} was taken over or the row moved on")


def release(conn: Connection, table: Table, row_id: int, owner: str) -> bool:
    result = conn.execute(
        update(table)
        .where(table.c.id == row_id, table.c.lease_owner == owner)
        .values(lease_owner=None, lease_expires_at=None)
    )
    return result.rowcount == 1


def release_all(conn: Connection, table: Table, owner: str) -> list[int]:
    """Give up every lease `owner` holds; the ids. A process's passes run one after the other, so at
    the end of a pass (or when a signal stops it) nothing of the owner's may stay leased."""
    statement = update(table).where(table.c.lease_owner == owner).values(lease_owner=None, lease_expires_at=None).returning(table.c.id)
    return sorted(conn.execute(statement).scalars().all())


def owned(table: Table, row_id: int, owner: str) -> ColumnElement[bool]:
    """WHERE clause of an update that must only happen while we still hold the lease."""
    return and_(table.c.id == row_id, table.c.lease_owner == owner)
