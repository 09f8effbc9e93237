"""The network matrix file of `jedictl network import` (docs/sites.md, "Network weight"), validated into
plain link records: YAML or JSON (`links:`, a list of mappings) or CSV (a header line naming the columns,
`source` first).

Each link names its two ends -- a site or a nucleus already in the catalog -- and gives at least one
figure: `queued` files, throughput `mbps_1h` / `mbps_1d` / `mbps_1w` (MB/s), `closeness` (CRIC's, 0 best to
11 worst), `blocked`. Validation is whole-file and the first fault is one line naming its place
(`links[3].closeness: must be at most 11`, `net.csv line 4, queued: must be an integer`), so a bad row
leaves the store as it was. Pure.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Collection, Mapping
from typing import Any, Callable

from jedictl.engine.input import fields
from jedictl.engine.input.documents import MAX_DOCUMENT_BYTES, parse_text
from jedictl.errors import BadInput

MIN_CLOSENESS = 0  # CRIC's closeness: 0 the best link ...
MAX_CLOSENESS = 11  # ... 11 the worst
#: The figures of a link (what a row gives besides its two ends), in the order they are printed.
FIGURES = ("queued", "mbps_1h", "mbps_1d", "mbps_1w", "closeness", "blocked")
COLUMNS = ("source", "destination", *FIGURES)
_USE = f"use {', '.join(COLUMNS)}"
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def _place(value: Any, path: str) -> str | None:
    return fields.catalog_name(value, path, "a site or nucleus name", required=True)


def _throughput(value: Any, path: str) -> float | None:
    return fields.number(value, path, minimum=0)


#: Each column: its reader (the documentation's field list too: docs/sites.md).
LINK_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "source": _place,
    "destination": _place,
    "queued": lambda v, p: fields.integer(v, p, minimum=0, maximum=fields.INT32_MAX),
    "mbps_1h": _throughput,
    "mbps_1d": _throughput,
    "mbps_1w": _throughput,
    "closeness": lambda v, p: fields.integer(v, p, minimum=MIN_CLOSENESS, maximum=MAX_CLOSENESS),
    "blocked": lambda v, p: None if v is None else fields.flag(v, p),
}


def parse_network(text: str, name: str, known_places: Collection[str]) -> list[dict[str, Any]]:
    """The links of a matrix file (`name` names it in messages), each a dict of COLUMNS; `known_places`
    are the site and nucleus names a link may join."""
    if is_csv(text, name):
        rows = _csv_rows(text, name)
    else:
        rows = _document_rows(parse_text(text, name), name)
    links: list[dict[str, Any]] = []
    first_at: dict[tuple[str, str], str] = {}
    for path, where, body in rows:
        link = _link(body, path, where, known_places)
        key = (link["source"], link["destination"])
        if key in first_at:
            raise BadInput(f"the link {key[0]} -> {key[1]} is listed twice (first at {first_at[key]})", path)
        first_at[key] = path
        links.append(link)
    return links


def is_csv(text: str, name: str) -> bool:
    """A CSV file: named *.csv, or its first line a header that starts with the `source` column."""
    first = text.lstrip("\ufeff\r\n\t ").split("\n", 1)[0].strip()
    return name.lower().endswith(".csv") or first.replace(" ", "").startswith("source,")


# Each row comes as (its place, a function naming one of its fields, its fields).
Row = tuple[str, Callable[[str], str], Mapping[str, Any]]


def _document_rows(document: Any, name: str) -> list[Row]:
    if document is None:
        return []
    if not isinstance(document, dict):
        raise BadInput("must be a mapping with a `links` list (or CSV with a header line)", name)
    body = document
    for key in body:
        if key != "links":
            raise BadInput("unknown section (use links)", str(key))
    rows: list[Row] = []
    for index, item in enumerate(fields.sequence(body.get("links"), "links")):
        path = f"links[{index}]"
        link = fields.mapping(item, path)
        for key in link:
            if key not in LINK_FIELDS:
                raise BadInput(f"unknown field ({_USE})", f"{path}.{key}")
        rows.append((path, lambda column, path=path: f"{path}.{column}", link))
    return rows


def _csv_rows(text: str, name: str) -> list[Row]:
    if len(text) > MAX_DOCUMENT_BYTES:  # as parse_text refuses a YAML or JSON file
        raise BadInput(f"is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB", name)
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        lines = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise BadInput(f"line {reader.line_num}: {exc} (invalid CSV)", name) from exc
    lines = [(number, row) for number, row in lines if any(cell.strip() for cell in row)]
    if not lines:
        return []
    header_line, header = lines[0]
    columns = [cell.strip() for cell in header]
    for column in columns:
        if column not in LINK_FIELDS:
            raise BadInput(f"unknown column {column!r} ({_USE})", f"{name} line {header_line}")
    if "source" not in columns or "destination" not in columns or len(set(columns)) != len(columns):
        raise BadInput("the header must name source and destination, and each column once", f"{name} line {header_line}")
    rows: list[Row] = []
    for number, cells in lines[1:]:
        path = f"{name} line {number}"
        if len(cells) > len(columns):
            raise BadInput(f"has {len(cells)} cells, the header names {len(columns)} columns", path)
        named = {column: _cell(column, cell, f"{path}, {column}") for column, cell in zip(columns, cells)}
        rows.append((path, lambda column, path=path: f"{path}, {column}", named))
    return rows


def _cell(column: str, cell: str, path: str) -> Any:
    """A CSV cell as the value a YAML file would hold: empty is absent, numbers are numbers, flags are flags."""
    value = cell.strip()
    if value == "":
        return None
    if column == "blocked":
        if value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise BadInput("must be true or false", path)
    if column in ("source", "destination"):
        return value
    try:
        number = float(value)
    except ValueError:
        raise BadInput("must be a number" if column.startswith("mbps") else "must be an integer", path) from None
    if column in ("queued", "closeness") and math.isfinite(number) and number.is_integer():
        return int(number)
    return number if column.startswith("mbps") else value  # "2.5" queued files: the reader refuses it


def _link(body: Mapping[str, Any], path: str, where: Callable[[str], str], known_places: Collection[str]) -> dict[str, Any]:
    link = {column: read(body.get(column), where(column)) for column, read in LINK_FIELDS.items()}
    for end in ("source", "destination"):
        if link[end] not in known_places:
            raise BadInput(f"unknown site or nucleus {link[end]!r} (`jedictl sites import` adds it)", where(end))
    if link["source"] == link["destination"]:
        raise BadInput("is the source too: a link joins two places", where("destination"))
    if all(link[figure] is None for figure in FIGURES):
        raise BadInput(f"gives no figure (one of {', '.join(FIGURES)})", path)
    link["blocked"] = bool(link["blocked"])
    return link
