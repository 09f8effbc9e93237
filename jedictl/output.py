"""The one place that renders what commands print: table | json | yaml | tsv.

A command hands over plain data -- a list of row mappings, or one mapping for a single object -- and
never formats by itself. JSON and YAML keys are the data's snake_case keys; times are ISO-8601 UTC.
Tables are drawn with rich only when stdout is a terminal: piped, rich would cut long cells ("…"), so
plain tabulate output is written instead, whole.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any, Iterable, Mapping, Sequence, TextIO

Row = Mapping[str, Any]


_PLAIN = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:  # the common case first: a report of 100,000 items is mostly these
        return value
    if kind is dict:
        if all(type(k) is str and type(v) in _PLAIN for k, v in value.items()):
            return value  # already plain: not copied (a report's items would be held twice)
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if kind is list:
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds") + ("Z" if value.tzinfo is None else "")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):  # PostgreSQL's SUM and AVG
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value


def render(
    data: Row | Sequence[Row],
    fmt: str,
    *,
    columns: Sequence[str] | None = None,
    stream: TextIO | None = None,
    title: str | None = None,
) -> None:
    """Write `data` to `stream` (stdout) in `fmt`. `columns` picks and orders table/tsv columns."""
    stream = stream or sys.stdout
    plain = to_jsonable(data)
    if fmt == "json":
        json.dump(plain, stream, indent=2, ensure_ascii=False)  # written as it is encoded: never the whole text at once
        stream.write("\n")
    elif fmt == "yaml":
        import yaml

        stream.write(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, default_flow_style=False))
    elif fmt == "tsv":
        _write_tsv(plain, columns, stream)
    else:
        _write_table(plain, columns, stream, title)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _columns_of(rows: Sequence[Row], columns: Sequence[str] | None) -> list[str]:
    if columns:
        return list(columns)
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def _write_tsv(data: Any, columns: Sequence[str] | None, stream: TextIO) -> None:
    rows = data if isinstance(data, list) else [{"key": k, "value": v} for k, v in data.items()]
    names = _columns_of(rows, columns)
    stream.write("\t".join(names) + "\n")
    for row in rows:
        stream.write("\t".join(_cell(row.get(name)).replace("\t", " ").replace("\n", " ") for name in names) + "\n")


def _write_table(data: Any, columns: Sequence[str] | None, stream: TextIO, title: str | None) -> None:
    if isinstance(data, list):
        _table(data, columns, stream, title)
        return
    # One object: its scalar fields as a two-column table, then each list of rows as its own table.
    scalars = [{"field": k, "value": v} for k, v in data.items() if not _is_rows(v)]
    _table(scalars, ["field", "value"], stream, title, headers=False)
    for key, value in data.items():
        if _is_rows(value) and value:
            stream.write("\n")
            _table(value, None, stream, key.replace("_", " "))


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _table(rows: list[Row], columns: Sequence[str] | None, stream: TextIO, title: str | None, headers: bool = True) -> None:
    names = _columns_of(rows, columns)
    cells = [[_cell(row.get(name)) for name in names] for row in rows]
    if stream.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_header=headers, header_style="bold", title_justify="left")
        for name in names:
            table.add_column(name, overflow="fold")
        for line in cells:
            table.add_row(*line)
        # NO_COLOR (no-color.org): no escape sequences at all; rich alone would still write bold.
        import os

        Console(file=stream, color_system=None if os.environ.get("NO_COLOR") else "auto").print(table)
        return
    from tabulate import tabulate

    if title:
        stream.write(f"{title}\n")
    if not rows:
        stream.write("(none)\n")
        return
    text = tabulate(cells, headers=names if headers else (), tablefmt="simple", disable_numparse=True)
    stream.write(text + "\n")


def iter_rows(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Database rows (SQLAlchemy `Row` or mappings) as plain dicts."""
    return [dict(getattr(row, "_mapping", row)) for row in rows]
