"""Leases: how several agent processes share one store (DESIGN.md §3).

A row is taken by one conditional UPDATE that succeeds only while the row is free or its lease has
expired. On PostgreSQL the candidates are picked `FOR UPDATE SKIP LOCKED`, so concurrent claimers
never wait on each other's rows; on SQLite the statement runs inside a `BEGIN IMMEDIATE` transaction
(store.database), which serialises writers -- `SKIP LOCKED` renders as nothing there and is not
relied on.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Sequence

from sqlalchemy import ColumnElement, Connection, Table, and_, or_, select, update

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
    candidates = (
        select(table.c.id)
        .where(where, is_free(table, now))
        .order_by(*order_by)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    statement = (
        update(table)
        .where(table.c.id.in_(candidates), is_free(table, now))
        .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds))
        .returning(table.c.id)
    )
    return sorted(conn.execute(statement).scalars().all())


def claim_one(conn: Connection, table: Table, row_id: int, owner: str, now: datetime, seconds: float) -> bool:
    """Lease one known row; False when another process holds it."""
    result = conn.execute(
        update(table)
        .where(table.c.id == row_id, is_free(table, now))
        .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds))
    )
    return result.rowcount == 1


def renew(conn: Connection, table: Table, row_id: int, owner: str, now: datetime, seconds: float) -> None:
    """Heartbeat: extend our lease, or raise LeaseLost if it is no longer ours."""
    result = conn.execute(
        update(table)
        .where(table.c.id == row_id, table.c.lease_owner == owner)
        .values(lease_expires_at=now + timedelta(seconds=seconds))
    )
    if result.rowcount != 1:
        raise LeaseLost(f"{table.name} {row_id}: the lease of {owner} was taken over")


def release(conn: Connection, table: Table, row_id: int, owner: str) -> bool:
    result = conn.execute(
        update(table)
        .where(table.c.id == row_id, table.c.lease_owner == owner)
        .values(lease_owner=None, lease_expires_at=None)
    )
    return result.rowcount == 1


def owned(table: Table, row_id: int, owner: str) -> ColumnElement[bool]:
    """WHERE clause of an update that must only happen while we still hold the lease."""
    return and_(table.c.id == row_id, table.c.lease_owner == owner)
