"""Importing the two catalogs (resource: nuclei, endpoints, sites, and the network matrix between them;
data: datasets, files, replicas) from a parsed document into the store, in the caller's transaction --
for `sites import`, `network import`, `data import` and `demo`. All or nothing: the document is fully
validated before any row is written."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from jedictl.engine.catalogs.data import parse_catalog_import
from jedictl.engine.catalogs.network import parse_network
from jedictl.engine.catalogs.sites import parse_resource_catalog
from jedictl.store import data_catalog as store_catalog
from jedictl.store import network as network_store
from jedictl.store import sites as site_store


def import_resource_catalog(conn: Any, document: Mapping[str, Any], now: datetime) -> list[dict[str, Any]]:
    """Create or update nuclei, storage endpoints and sites; one report line per row."""

    catalog = parse_resource_catalog(document, *site_store.known_names(conn))
    report = site_store.upsert_rows(conn, "nucleus", catalog.nuclei, now)
    report += site_store.upsert_rows(conn, "endpoint", catalog.endpoints, now)
    site_report = site_store.upsert_rows(conn, "site", catalog.sites, now)
    relinked = site_store.replace_storage(conn, catalog.site_storage, [s["name"] for s in catalog.sites])
    for line in site_report:
        if line["name"] in relinked:
            line["changed"] = sorted(line["changed"] + ["storage"])
            line["action"] = "updated" if line["action"] == "unchanged" else line["action"]
    return report + site_report


def import_data_catalog(conn: Any, document: Mapping[str, Any], now: datetime) -> list[dict[str, Any]]:
    """Add datasets, containers, files and replicas; files already known are skipped."""

    data = parse_catalog_import(document, store_catalog.known_endpoints(conn), store_catalog.known_datasets(conn))
    return store_catalog.import_catalog(conn, data, now)


def import_network(conn: Any, text: str, name: str, replace: bool, now: datetime) -> list[dict[str, Any]]:
    """Create or update the links of a network matrix file (YAML, JSON or CSV); with `replace`, remove
    the links it does not list. One report line per link."""

    links = parse_network(text, name, network_store.known_places(conn))
    return network_store.import_links(conn, links, replace, now)
