"""The network matrix in the store (store/network.py), both backends: import creates, updates, leaves
alone and (with replace) removes links, in bulk and in the caller's transaction; list filters; one link;
the whole matrix for brokerage."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jedictl.engine.brokerage.loading import load_catalog
from jedictl.errors import NotFound
from jedictl.store import network as store_network
from jedictl.store import sites as store_sites
from tests.store.rows import T0

LATER = T0 + timedelta(hours=1)


def _link(source: str, destination: str, **figures) -> dict:
    return {"source": source, "destination": destination, "queued": None, "mbps_1h": None, "mbps_1d": None, "mbps_1w": None,
            "closeness": None, "blocked": False, **figures}


def _places(db) -> None:
    with db.begin() as conn:
        store_sites.upsert_rows(conn, "nucleus", [{"name": "NUC", "status": "active", "attributes": {}}], T0)
        store_sites.upsert_rows(conn, "site", [{"name": name, "status": "online", "attributes": {}} for name in ("A", "B")], T0)


def _stored(db) -> list[tuple]:
    with db.read() as conn:
        return [(r.source, r.destination, r.queued, r.mbps_1h, r.closeness, r.blocked, r.modified_at)
                for r in store_network.list_links(conn)]


def test_import_creates_updates_and_leaves_equal_links_alone(db):
    _places(db)
    with db.read() as conn:
        assert store_network.known_places(conn) == {"NUC", "A", "B"}
    first = [_link("A", "NUC", queued=30, mbps_1h=12.5), _link("B", "NUC", closeness=4), _link("NUC", "A", blocked=True)]
    with db.begin() as conn:
        report = store_network.import_links(conn, first, replace=False, now=T0)
    assert [(line["source"], line["destination"], line["action"]) for line in report] == [
        ("A", "NUC", "created"), ("B", "NUC", "created"), ("NUC", "A", "created")]
    assert _stored(db) == [("A", "NUC", 30, 12.5, None, False, T0), ("B", "NUC", None, None, 4, False, T0),
                           ("NUC", "A", None, None, None, True, T0)]
    # Again with one link changed: only that one is written; a figure left out becomes unknown.
    second = [_link("A", "NUC", queued=30, mbps_1h=12.5), _link("B", "NUC", queued=7), _link("NUC", "A", blocked=True)]
    with db.begin() as conn:
        report = store_network.import_links(conn, second, replace=False, now=LATER)
    assert [(line["action"], line["changed"]) for line in report] == [
        ("unchanged", []), ("updated", ["queued", "closeness"]), ("unchanged", [])]
    assert _stored(db)[1] == ("B", "NUC", 7, None, None, False, LATER) and _stored(db)[0][-1] == T0


def test_replace_removes_the_links_the_file_does_not_list(db):
    _places(db)
    with db.begin() as conn:
        store_network.import_links(conn, [_link("A", "NUC", queued=1), _link("B", "NUC", queued=2), _link("NUC", "B", queued=3)],
                                   replace=False, now=T0)
    with db.begin() as conn:
        kept = store_network.import_links(conn, [_link("B", "NUC", queued=2)], replace=False, now=LATER)
    assert len(_stored(db)) == 3 and [line["action"] for line in kept] == ["unchanged"]
    with db.begin() as conn:
        report = store_network.import_links(conn, [_link("B", "NUC", queued=2), _link("B", "A", closeness=1)], replace=True, now=LATER)
    assert [(line["source"], line["destination"], line["action"]) for line in report] == [
        ("B", "NUC", "unchanged"), ("B", "A", "created"), ("A", "NUC", "removed"), ("NUC", "B", "removed")]
    assert [(row[0], row[1]) for row in _stored(db)] == [("B", "A"), ("B", "NUC")]
    with db.begin() as conn:
        assert [line["action"] for line in store_network.import_links(conn, [], replace=True, now=LATER)] == ["removed", "removed"]
    assert _stored(db) == []


def test_an_import_that_fails_midway_leaves_the_matrix_as_it_was(db):
    _places(db)
    with db.begin() as conn:
        store_network.import_links(conn, [_link("A", "NUC", queued=1)], replace=False, now=T0)
    before = _stored(db)
    with pytest.raises(RuntimeError):
        with db.begin() as conn:
            store_network.import_links(conn, [_link("A", "NUC", queued=9), _link("B", "NUC", queued=2)], replace=True, now=LATER)
            raise RuntimeError("the process died before the commit")
    assert _stored(db) == before


def test_list_show_and_the_matrix_brokerage_loads(db):
    _places(db)
    with db.begin() as conn:
        store_network.import_links(conn, [_link("B", "NUC", mbps_1d=80.0), _link("A", "NUC", queued=4), _link("NUC", "A", closeness=2)],
                                   replace=False, now=T0)
    with db.read() as conn:
        assert [(r.source, r.destination) for r in store_network.list_links(conn)] == [("A", "NUC"), ("B", "NUC"), ("NUC", "A")]
        assert [r.source for r in store_network.list_links(conn, destination="NUC")] == ["A", "B"]
        assert [r.destination for r in store_network.list_links(conn, source="NUC")] == ["A"]
        assert store_network.list_links(conn, source="A", destination="B") == []
        assert store_network.get_link(conn, "B", "NUC").mbps_1d == 80.0
        with pytest.raises(NotFound, match="no network link A -> B"):
            store_network.get_link(conn, "A", "B")
        network = load_catalog(conn).network
    assert len(network) == 3 and network.queued_to() == {"NUC": 4}
    assert network.find(("B",), ("NUC",)).throughput() == ("mbps_1d", 80.0)
    assert network.find(("NUC",), ("A",)).closeness == 2
