"""Named operations on `network_matrix`: the links `jedictl network import` writes (created, updated,
unchanged, removed with `--replace`), the listing, one link, and the whole matrix for brokerage.

An import is bulk: one SELECT of the stored links, then one executemany each for the new rows, the changed
rows and (with `replace`) the rows the file no longer lists -- never one round trip per link. The caller's
transaction holds it all: a failure leaves the matrix as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, bindparam, delete, insert, select, union, update

from jedictl.errors import NotFound
from jedictl.store.schema import network_matrix, nuclei, sites

#: The figures of a link, in the order they are printed.
FIGURES = ("queued", "mbps_1h", "mbps_1d", "mbps_1w", "closeness", "blocked")


def known_places(conn: Connection) -> set[str]:
    """The names a link may join: every site and every nucleus."""
    return set(conn.execute(union(select(sites.c.name), select(nuclei.c.name))).scalars())


def import_links(conn: Connection, links: Sequence[Mapping[str, Any]], replace: bool, now: datetime) -> list[dict[str, Any]]:
    """Create the file's new links, update the changed ones (a figure the file leaves out becomes
    unknown), leave equal ones alone; with `replace`, remove the stored links the file does not list.
    One report line per link: {source, destination, action, changed}."""
    stored = {(row.source, row.destination): row._mapping for row in conn.execute(select(network_matrix))}
    report: list[dict[str, Any]] = []
    new_rows: list[dict[str, Any]] = []
    changed_rows: list[dict[str, Any]] = []
    for link in links:
        key = (link["source"], link["destination"])
        values = {name: link.get(name) for name in FIGURES}
        values["blocked"] = bool(values["blocked"])
        before = stored.get(key)
        if before is None:
            new_rows.append({"source": key[0], "destination": key[1], **values, "modified_at": now})
            report.append({"source": key[0], "destination": key[1], "action": "created", "changed": []})
            continue
        changed = [name for name in FIGURES if before[name] != values[name]]
        if changed:
            changed_rows.append({"b_source": key[0], "b_destination": key[1], **values, "modified_at": now})
        report.append({"source": key[0], "destination": key[1], "action": "updated" if changed else "unchanged", "changed": changed})
    if new_rows:
        conn.execute(insert(network_matrix), new_rows)
    if changed_rows:
        conn.execute(update(network_matrix)
                     .where(and_(network_matrix.c.source == bindparam("b_source"),
                                 network_matrix.c.destination == bindparam("b_destination")))
                     .values({name: bindparam(name) for name in (*FIGURES, "modified_at")}), changed_rows)
    if replace:
        listed = {(link["source"], link["destination"]) for link in links}
        gone = sorted(key for key in stored if key not in listed)
        if gone:
            conn.execute(delete(network_matrix)
                         .where(and_(network_matrix.c.source == bindparam("b_source"),
                                     network_matrix.c.destination == bindparam("b_destination"))),
                         [{"b_source": source, "b_destination": destination} for source, destination in gone])
        report.extend({"source": source, "destination": destination, "action": "removed", "changed": []} for source, destination in gone)
    return report


def list_links(conn: Connection, source: str | None = None, destination: str | None = None) -> list[Row]:
    """Links by source, then destination; only those from `source` / to `destination` when given."""
    query = select(network_matrix).order_by(network_matrix.c.source, network_matrix.c.destination)
    if source:
        query = query.where(network_matrix.c.source == source)
    if destination:
        query = query.where(network_matrix.c.destination == destination)
    return list(conn.execute(query))


def get_link(conn: Connection, source: str, destination: str) -> Row:
    row = conn.execute(select(network_matrix).where(network_matrix.c.source == source,
                                                    network_matrix.c.destination == destination)).first()
    if row is None:
        raise NotFound(f"no network link {source} -> {destination} (`jedictl network list` shows the links)")
    return row


def matrix_rows(conn: Connection) -> list[Mapping[str, Any]]:
    """Every link, for brokerage (engine.brokerage.network.matrix_from_rows)."""
    return [row._mapping for row in conn.execute(select(network_matrix))]
