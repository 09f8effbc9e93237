"""Named operations on the resource catalog: idempotent upsert with a change report, and queries."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Sequence

from sqlalchemy import Connection, Row, delete, insert, select, update

from jedictl.errors import NotFound
from jedictl.store.schema import nuclei, site_storage, sites, storage_endpoints


def known_names(conn: Connection) -> tuple[set[str], set[str]]:
    return (set(conn.execute(select(nuclei.c.name)).scalars()), set(conn.execute(select(storage_endpoints.c.name)).scalars()))


#: The tables of the resource catalog by the kind of row they hold (what `upsert_rows` writes).
TABLES = {"nucleus": nuclei, "endpoint": storage_endpoints, "site": sites}


def upsert_rows(conn: Connection, kind: str, rows: Sequence[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """Insert new rows of `kind` (nucleus, endpoint, site), update changed ones, leave equal ones alone;
    one report line per row."""
    table = TABLES[kind]
    names = [row["name"] for row in rows]
    existing = {row.name: row._mapping for row in conn.execute(select(table).where(table.c.name.in_(names)))} if names else {}
    report = []
    for row in rows:
        before = existing.get(row["name"])
        if before is None:
            conn.execute(insert(table).values(**row, modified_at=now))
            report.append({"kind": kind, "name": row["name"], "action": "created", "changed": []})
            continue
        changed = sorted(key for key, value in row.items() if before[key] != value)
        if changed:
            conn.execute(update(table).where(table.c.name == row["name"]).values(**{k: row[k] for k in changed}, modified_at=now))
        report.append({"kind": kind, "name": row["name"], "action": "updated" if changed else "unchanged", "changed": changed})
    return report


def replace_storage(conn: Connection, links: Iterable[tuple[str, str, str]], site_names: Iterable[str]) -> set[str]:
    """Make each listed site's endpoint links exactly `links`; returns the sites whose links changed."""
    wanted: dict[str, set[tuple[str, str]]] = {name: set() for name in site_names}
    for site, endpoint, role in links:
        wanted[site].add((endpoint, role))
    changed = set()
    for site, links_now in wanted.items():
        current = {(r.endpoint, r.role) for r in conn.execute(select(site_storage).where(site_storage.c.site == site))}
        if current != links_now:
            conn.execute(delete(site_storage).where(site_storage.c.site == site))
            if links_now:
                conn.execute(insert(site_storage), [{"site": site, "endpoint": e, "role": r} for e, r in sorted(links_now)])
            changed.add(site)
    return changed


def list_sites(conn: Connection, status: str | None = None, cloud: str | None = None) -> list[Row]:
    query = select(sites).order_by(sites.c.name)
    if status:
        query = query.where(sites.c.status == status)
    if cloud:
        query = query.where(sites.c.cloud == cloud)
    return list(conn.execute(query))


def get_site(conn: Connection, name: str) -> Row:
    row = conn.execute(select(sites).where(sites.c.name == name)).first()
    if row is None:
        raise NotFound(f"site {name} does not exist")
    return row


def storage_of(conn: Connection, site_names: Sequence[str] | None = None) -> list[Row]:
    query = select(site_storage).order_by(site_storage.c.site, site_storage.c.role, site_storage.c.endpoint)
    if site_names is not None:
        query = query.where(site_storage.c.site.in_(list(site_names)))
    return list(conn.execute(query))


def set_status(conn: Connection, name: str, status: str, now: datetime) -> str:
    """Set a site's status; returns the previous one."""
    previous = get_site(conn, name).status
    conn.execute(update(sites).where(sites.c.name == name).values(status=status, modified_at=now))
    return previous


def list_nuclei(conn: Connection) -> list[Row]:
    return list(conn.execute(select(nuclei).order_by(nuclei.c.name)))


def list_endpoints(conn: Connection) -> list[Row]:
    return list(conn.execute(select(storage_endpoints).order_by(storage_endpoints.c.name)))


def get_endpoint(conn: Connection, name: str) -> Row:
    row = conn.execute(select(storage_endpoints).where(storage_endpoints.c.name == name)).first()
    if row is None:
        raise NotFound(f"storage endpoint {name} does not exist (import it with `jedictl sites import` first)")
    return row
