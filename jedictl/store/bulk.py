"""Bulk writes at the driver's speed (performance.md, C.4).

SQLAlchemy Core with dict parameters costs ~7-10 us of Python per row and `INSERT ... RETURNING`
executemany crawls on psycopg 3, so bulk paths pass plain tuples: `executemany` through the SQLite
driver, `COPY ... FROM STDIN` on PostgreSQL. Both run inside the caller's transaction.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any, Iterable, Iterator, Sequence, TypeVar

from sqlalchemy import JSON, Connection, Table
from sqlalchemy.exc import IntegrityError

T = TypeVar("T")


def insert_tuples(conn: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert `rows` (tuples in `columns` order) into `table`; returns how many were written."""
    rows = rows if isinstance(rows, list) else list(rows)
    if not rows:
        return 0
    names = ", ".join(columns)
    json_columns = [i for i, name in enumerate(columns) if isinstance(table.c[name].type, JSON)]
    if json_columns:  # the driver sees text; SQLAlchemy's JSON type is bypassed on this path
        rows = [tuple(json.dumps(v) if i in json_columns and v is not None else v for i, v in enumerate(row)) for row in rows]
    if conn.dialect.name == "postgresql":
        statement = f"COPY {table.name} ({names}) FROM STDIN"
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            with cursor.copy(statement) as copy:
                for row in rows:
                    copy.write_row(row)
        except conn.dialect.dbapi.IntegrityError as exc:
            # COPY runs on the raw driver: raise what SQLAlchemy raises for the same fault elsewhere.
            raise IntegrityError(statement, None, exc) from exc
        finally:
            cursor.close()
    else:
        placeholders = ", ".join("?" for _ in columns)
        conn.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({placeholders})", rows)
    return len(rows)


def update_tuples(conn: Connection, table: Table, set_columns: Sequence[str], key_columns: Sequence[str], rows: Sequence[Sequence[Any]],
                  guard: str = "") -> int:
    """`UPDATE table SET c = ?, ... WHERE k = ? AND ... [AND guard]` once per row (the set values, then
    the key values), through the driver's executemany; returns the rows changed. `guard` is SQL text
    built from the engine's own constants, never from input."""
    if not rows:
        return 0
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    assignments = ", ".join(f"{name} = {mark}" for name in set_columns)
    keys = " AND ".join(f"{name} = {mark}" for name in key_columns)
    statement = f"UPDATE {table.name} SET {assignments} WHERE {keys}{f' AND {guard}' if guard else ''}"
    return conn.exec_driver_sql(statement, list(rows) if not isinstance(rows, list) else rows).rowcount


def slices(items: Sequence[T], size: int = 1000) -> Iterator[Sequence[T]]:
    """Bound IN lists: SQLite limits bound parameters, and psycopg re-parses long statements."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def insert_new_returning(conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                         unique: Sequence[str], returning: Sequence[str]) -> list[tuple]:
    """INSERT rows that do not exist yet (by the `unique` columns) and return `returning` of the new
    ones: one multi-row statement per slice in the driver's own SQL, because SQLAlchemy compiles a
    multi-row VALUES afresh for every row count (it cost more than the insert itself)."""
    marker = "%s" if conn.dialect.name == "postgresql" else "?"
    row_marks = "(" + ", ".join(marker for _ in columns) + ")"
    found: list[tuple] = []
    for part in slices(rows, 500):
        statement = (f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES {', '.join(row_marks for _ in part)} "
                     f"ON CONFLICT ({', '.join(unique)}) DO NOTHING RETURNING {', '.join(returning)}")
        found.extend(tuple(row) for row in conn.exec_driver_sql(statement, tuple(chain.from_iterable(part))))
    return found
