"""Set-based guarded writes: one UPDATE per batch joined on the batch's rows (issue 18).

`update_from_rows` changes many rows, each to its own values, in one statement per slice: the rows
are joined to the table as a VALUES list on SQLite and as `unnest` of one array per column on
PostgreSQL -- a short statement whatever the batch's size, which psycopg parses once and caches
(a VALUES list of thousands of placeholders is re-parsed in Python on every execute, performance.md
pitfall 1), and one round trip instead of one per row. Every row keeps its guard: the key columns
(id, the status and attempt the decision was made on) are part of the join, and the statement's
rowcount is the number of rows whose guard held, for the caller to compare with the rows it meant.

`ids_in` reads by id lists with the driver's own placeholders (no expanding bind parameters to
compile per call). Both run in the caller's transaction; statement text is built from the schema's
own column names and the engine's constants, never from input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

from sqlalchemy import Connection, Table

#: SQLite binds at most 32,766 parameters per statement (3.32+); stay well below.
_SQLITE_PARAMETERS = 30_000
#: Rows per statement on PostgreSQL (arrays: the statement does not grow with them).
_PG_ROWS = 5_000


def update_from_rows(conn: Connection, table: Table, set_columns: Sequence[str], key_columns: Sequence[str],
                     rows: Sequence[Sequence[Any]], guard: str = "") -> int:
    """`UPDATE table SET c = v.c, ... FROM <rows> v WHERE table.k = v.k AND ... [AND guard]`: each row
    holds the set values, then the key values (as `bulk.update_tuples` takes them); returns the rows
    changed. Rows must not repeat a key: a row matched twice is changed once, and counted once."""
    if not rows:
        return 0
    width = len(set_columns) + len(key_columns)
    name = table.name
    if conn.dialect.name == "postgresql":
        types = [_pg_array_type(conn, table, column) for column in (*set_columns, *key_columns)]
        aliases = [f"s{i}" for i in range(len(set_columns))] + [f"k{i}" for i in range(len(key_columns))]
        unnest = ", ".join(f"%s::{kind}[]" for kind in types)
        statement = (f"UPDATE {name} SET {', '.join(f'{column} = v.s{i}' for i, column in enumerate(set_columns))} "
                     f"FROM unnest({unnest}) AS v({', '.join(aliases)}) "
                     f"WHERE {' AND '.join(f'{name}.{column} = v.k{i}' for i, column in enumerate(key_columns))}"
                     f"{f' AND {guard}' if guard else ''}")
        touched = 0
        for part in _slices(rows, _PG_ROWS):
            touched += conn.exec_driver_sql(statement, tuple([row[i] for row in part] for i in range(width))).rowcount
        return touched
    assignments = ", ".join(f"{column} = v.column{i + 1}" for i, column in enumerate(set_columns))
    keys = " AND ".join(f"{name}.{column} = v.column{len(set_columns) + i + 1}" for i, column in enumerate(key_columns))
    row_marks = "(" + ", ".join("?" for _ in range(width)) + ")"
    touched = 0
    for part in _slices(rows, max(1, _SQLITE_PARAMETERS // width)):
        statement = (f"UPDATE {name} SET {assignments} FROM (VALUES {', '.join(row_marks for _ in part)}) AS v "
                     f"WHERE {keys}{f' AND {guard}' if guard else ''}")
        touched += conn.exec_driver_sql(statement, tuple(chain.from_iterable(part))).rowcount
    return touched


def ids_in(conn: Connection, statement: str, ids: Sequence[int], size: int = 900) -> Iterator[tuple]:
    """Rows of `statement` (SQL text with one `{ids}` where the id list goes) for `ids`, in slices."""
    mark = "%s" if conn.dialect.name == "postgresql" else "?"
    for part in _slices(ids, size):
        # fetchall: one call per slice, not one fetchone per row behind the iterator
        yield from conn.exec_driver_sql(statement.format(ids=", ".join([mark] * len(part))), tuple(part)).fetchall()


def _slices(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


_PG_TYPES: dict[tuple[str, str], str] = {}


def _pg_array_type(conn: Connection, table: Table, column: str) -> str:
    """The column's PostgreSQL type as the element type of an array cast (`VARCHAR(32)`, `BIGINT`, ...)."""
    key = (table.name, column)
    found = _PG_TYPES.get(key)
    if found is None:
        found = _PG_TYPES[key] = table.c[column].type.compile(dialect=conn.dialect)
    return found
