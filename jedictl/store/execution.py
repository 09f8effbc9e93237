"""Named reads a real executor needs about where it runs: its site's way of reading data and running
containers, and the URLs of the storage endpoints it stages files from and to."""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import Connection, Row, select

from jedictl.store.job_outcomes import write_endpoints
from jedictl.store.schema import sites, storage_endpoints


def site_execution(conn: Connection, site: str) -> Row | None:
    """(name, status, direct_io, container_runtime) of `site`; None when the site is unknown."""
    return conn.execute(select(sites.c.name, sites.c.status, sites.c.direct_io, sites.c.container_runtime)
                        .where(sites.c.name == site)).first()


def endpoint_urls(conn: Connection, names: Iterable[str]) -> dict[str, str | None]:
    """Endpoint name -> its URL (None: catalog only); unknown names are absent."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows = conn.execute(select(storage_endpoints.c.name, storage_endpoints.c.url).where(storage_endpoints.c.name.in_(wanted)))
    return {row.name: row.url for row in rows}


def site_write_endpoint(conn: Connection, site: str) -> str | None:
    """Where an output with no destination of its own goes: the site's first write endpoint, the one a
    report registers it at (job_outcomes.write_endpoints -- one rule for both)."""
    return write_endpoints(conn, [site]).get(site)
