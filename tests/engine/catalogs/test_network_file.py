"""The network matrix file of `jedictl network import` (docs/sites.md, "Network weight"): YAML, JSON and
CSV read the same, and every bad row is one line naming its place."""

from __future__ import annotations

import json

import pytest

from jedictl.engine.catalogs.network import is_csv, parse_network
from jedictl.errors import BadInput

KNOWN = {"MWT2", "DESY-HH", "CERN-PROD", "BNL-ATLAS"}
EXPECTED = [
    {"source": "MWT2", "destination": "CERN-PROD", "queued": 30, "mbps_1h": 12.5, "mbps_1d": None, "mbps_1w": None,
     "closeness": 4, "blocked": False},
    {"source": "DESY-HH", "destination": "BNL-ATLAS", "queued": None, "mbps_1h": None, "mbps_1d": None, "mbps_1w": 3.0,
     "closeness": None, "blocked": True},
]
YAML = """links:
  - {source: MWT2, destination: CERN-PROD, queued: 30, mbps_1h: 12.5, closeness: 4}
  - {source: DESY-HH, destination: BNL-ATLAS, mbps_1w: 3, blocked: true}
"""
CSV = "\ufeffsource, destination,queued,mbps_1h,mbps_1w,closeness,blocked\nMWT2,CERN-PROD,30,12.5,,4,\n\nDESY-HH,BNL-ATLAS,,,3,,yes\n"


def test_yaml_json_and_csv_read_the_same():
    document = {"links": [{k: v for k, v in row.items() if v not in (None, False)} for row in EXPECTED]}
    assert parse_network(YAML, "net.yaml", KNOWN) == EXPECTED
    assert parse_network(json.dumps(document), "net.json", KNOWN) == EXPECTED
    assert parse_network(CSV, "net.csv", KNOWN) == EXPECTED
    assert parse_network(CSV, "stdin", KNOWN) == EXPECTED  # a header starting with `source` is CSV wherever it comes from
    assert parse_network("", "stdin", KNOWN) == [] and parse_network("links: []", "net.yaml", KNOWN) == []


def test_a_csv_file_has_the_size_limit_of_every_document(monkeypatch):
    from jedictl.engine.catalogs import network

    monkeypatch.setattr(network, "MAX_DOCUMENT_BYTES", 100)
    with pytest.raises(BadInput, match="^big.csv: is larger than 0 MB$"):
        parse_network("source,destination,queued\n" + "MWT2,CERN-PROD,1\n" * 10, "big.csv", KNOWN)


def test_csv_is_recognised_by_its_name_or_its_header():
    assert is_csv("anything", "LINKS.CSV") and is_csv("source ,destination\n", "stdin")
    assert not is_csv(YAML, "stdin") and not is_csv('{"links": []}', "x.json")


@pytest.mark.parametrize("text,name,message", [
    ("links:\n  - {source: MWT2, destination: CERN-PROD, queued: -1}", "f", "links[0].queued: must be at least 0"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, queued: 2.5}", "f", "links[0].queued: must be an integer"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, mbps_1d: fast}", "f", "links[0].mbps_1d: must be a number"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, mbps_1h: -2}", "f", "links[0].mbps_1h: must be at least 0"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, closeness: 12}", "f", "links[0].closeness: must be at most 11"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, closeness: -1}", "f", "links[0].closeness: must be at least 0"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, blocked: maybe}", "f", "links[0].blocked: must be true or false"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, speed: 1}", "f", "links[0].speed: unknown field (use source,"),
    ("links:\n  - {destination: CERN-PROD, queued: 1}", "f", "links[0].source: is required"),
    ("links:\n  - {source: MWT2, destination: CERN, queued: 1}", "f",
     "links[0].destination: unknown site or nucleus 'CERN' (`jedictl sites import` adds it)"),
    ("links:\n  - {source: MWT2, destination: MWT2, queued: 1}", "f", "links[0].destination: is the source too"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD}", "f", "links[0]: gives no figure (one of queued, mbps_1h,"),
    ("links:\n  - {source: '../x', destination: CERN-PROD, queued: 1}", "f", "links[0].source: a site or nucleus name must be"),
    ("links:\n  - {source: MWT2, destination: CERN-PROD, queued: 1}\n  - {source: MWT2, destination: CERN-PROD, queued: 2}", "f",
     "links[1]: the link MWT2 -> CERN-PROD is listed twice (first at links[0])"),
    ("link: []", "f", "link: unknown section (use links)"),
    ("- {source: MWT2}", "f", "f: must be a mapping with a `links` list"),
    ("links: {source: MWT2}", "f", "links: must be a list"),
    ("links:\n  - {source: MWT2, destination: [", "f", "f: line 3 column 1: did not find expected node content (invalid YAML)"),
    ("source,destination,queued\nMWT2,CERN-PROD,abc\n", "net.csv", "net.csv line 2, queued: must be an integer"),
    ("source,destination,queued\nMWT2,CERN-PROD,1.5\n", "net.csv", "net.csv line 2, queued: must be an integer"),
    ("source,destination,mbps_1h\nMWT2,CERN-PROD,nan\n", "net.csv", "net.csv line 2, mbps_1h: must be a finite number"),
    ("source,destination,blocked\nMWT2,CERN-PROD,perhaps\n", "net.csv", "net.csv line 2, blocked: must be true or false"),
    ("source,destination,latency\n", "net.csv", "net.csv line 1: unknown column 'latency'"),
    ("source,queued\nMWT2,1\n", "net.csv", "net.csv line 1: the header must name source and destination"),
    ("source,destination,queued,queued\n", "net.csv", "net.csv line 1: the header must name source and destination, and each column once"),
    ("source,destination,queued\nMWT2,CERN-PROD,1,2\n", "net.csv", "net.csv line 2: has 4 cells, the header names 3 columns"),
    ("source,destination,queued\nMWT2,CERN-PROD\n", "net.csv", "net.csv line 2: gives no figure"),
    ("source,destination,queued\n\nMWT2,CERN-PROD,1\nMWT2,CERN-PROD,3\n", "net.csv",
     "net.csv line 4: the link MWT2 -> CERN-PROD is listed twice (first at net.csv line 3)"),
])
def test_each_bad_row_is_one_line_naming_its_place(text, name, message):
    with pytest.raises(BadInput) as caught:
        parse_network(text, name, KNOWN)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)
