"""`jedictl sites ...`: the resource catalog import is idempotent, reports changes, refuses bad files whole."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT
from tests.helpers import row_counts

GRID = ROOT / "examples" / "sites.yaml"


def test_import_is_an_idempotent_upsert_that_reports_changes(cli, store, tmp_path):
    first = cli.json("sites", "import", str(GRID), db=store)
    assert {(r["kind"], r["action"]) for r in first} == {("nucleus", "created"), ("endpoint", "created"), ("site", "created")}
    assert len(first) == 2 + 7 + 7
    assert {r["action"] for r in cli.json("sites", "import", str(GRID), db=store)} == {"unchanged"}

    grid = yaml.safe_load(GRID.read_text())
    grid["sites"][0]["max_memory"] = 6000
    grid["sites"][1]["write_endpoints"] = ["CERN-PROD_DATATAPE"]
    grid["storage_endpoints"][0]["free_gb"] = 1
    changed = tmp_path / "grid.yaml"
    changed.write_text(yaml.safe_dump(grid))
    report = {(r["kind"], r["name"]): (r["action"], r["changed"]) for r in cli.json("sites", "import", str(changed), db=store)}
    assert report[("site", "CERN-PROD_GRID")] == ("updated", ["max_memory"])
    assert report[("site", "CERN-PROD_MCORE")] == ("updated", ["storage"])
    assert report[("endpoint", "CERN-PROD_DATADISK")] == ("updated", ["free_gb"])
    assert report[("site", "MWT2")] == ("unchanged", [])
    shown = cli.json("sites", "show", "CERN-PROD_MCORE", db=store)
    assert shown["storage"] == [{"endpoint": "CERN-PROD_DATADISK", "role": "read"}, {"endpoint": "CERN-PROD_DATATAPE", "role": "write"}]


def test_list_show_set_status(cli, store):
    cli("sites", "import", str(GRID), db=store)
    assert [s["name"] for s in cli.json("sites", "list", "--cloud", "US", db=store)] == ["AGLT2_TEST", "BNL_PROD", "BNL_PROD_MCORE", "MWT2"]
    assert cli.json("sites", "set-status", "MWT2", "brokeroff", db=store) == {"site": "MWT2", "status": "brokeroff", "previous_status": "online"}
    assert [s["name"] for s in cli.json("sites", "list", "--status", "brokeroff", db=store)] == ["MWT2"]
    assert cli.json("sites", "show", "BNL_PROD", db=store)["releases"] is None
    assert cli.json("sites", "show", "CERN-PROD_GRID", db=store)["releases"] == ["Athena,24.0.40", "AthGeneration,23.6.31"]
    assert [n["name"] for n in cli.json("sites", "nuclei", db=store)] == ["BNL-ATLAS", "CERN-PROD"]
    assert len(cli.json("sites", "endpoints", db=store)) == 7
    assert cli("sites", "set-status", "MWT2", "busy", db=store, code=2).stderr.strip() == (
        "jedictl: error: STATUS: 'busy' is not a site status (allowed: online, brokeroff, offline, test)")
    assert cli("sites", "show", "NOWHERE", db=store, code=2).stderr.strip() == "jedictl: error: site NOWHERE does not exist"


BAD_GRIDS = [
    ("unknown-nucleus", {"sites": [{"name": "X", "nucleus": "NOPE"}]}, "sites[0].nucleus: unknown nucleus 'NOPE'"),
    ("unknown-endpoint", {"sites": [{"name": "X", "read_endpoints": ["NOPE_DATADISK"]}]}, "sites[0].read_endpoints[0]: unknown storage endpoint"),
    ("bad-status", {"sites": [{"name": "X", "status": "sleeping"}]}, "sites[0].status: must be one of online, brokeroff, offline, test"),
    ("negative", {"sites": [{"name": "X", "max_memory": -1}]}, "sites[0].max_memory: must be at least 0"),
    ("min-over-max", {"sites": [{"name": "X", "min_memory": 10, "max_memory": 5}]}, "sites[0].min_memory: is larger than max_memory"),
    ("duplicate", {"nuclei": [{"name": "N"}, {"name": "N"}]}, "nuclei[1].name: 'N' is listed twice"),
    # was an IntegrityError, exit 1 (issue 17)
    ("duplicate-site", {"sites": [{"name": "NEW_SITE"}]}, "sites[1].name: 'NEW_SITE' is listed twice"),  # after the NEW_SITE below
    ("unknown-field", {"sites": [{"name": "X", "colour": "red"}]}, "sites[0].colour: unknown field"),
    ("unknown-section", {"queues": []}, "queues: unknown section"),
]


def test_bad_files_are_refused_whole(cli, store, tmp_path):
    cli("sites", "import", str(GRID), db=store)
    before = row_counts(store)
    for name, document, message in BAD_GRIDS:
        path = tmp_path / f"{name}.yaml"
        # a valid new site first: nothing of the file may be imported
        document = {**document, "sites": [{"name": "NEW_SITE"}] + document.get("sites", [])} if "sites" in document else document
        path.write_text(yaml.safe_dump(document))
        result = cli("sites", "import", str(path), db=store, code=2)
        expected = message.replace("sites[0]", "sites[1]") if "sites" in document and message.startswith("sites[0]") else message
        assert result.stderr.strip() == f"jedictl: error: {expected}" or expected in result.stderr, (name, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("sites:\n  - name: X\n   status: online\n")
    assert "bad.yaml: line 3 column" in cli("sites", "import", str(bad_yaml), db=store, code=2).stderr
    assert row_counts(store) == before


def test_list_refuses_an_unknown_status(cli, store):
    from tests.helpers import refused

    assert refused(cli, store, "sites", "list", "--status", "bogus") == \
        "jedictl: error: --status: 'bogus' is not a site status (allowed: online, brokeroff, offline, test)"
    assert refused(cli, store, "sites", "list", "--status", "Online").endswith("did you mean 'online'?)")


def test_a_section_given_twice_is_refused(cli, store):
    """YAML keeps the last of two equal keys: the first `nuclei:` list was dropped without a word."""
    from tests.helpers import refused

    text = ("nuclei:\n  - {name: N1}\nsites:\n  - {name: S1, nucleus: N1}\n"
            "nuclei:\n  - {name: N2}\n")
    assert refused(cli, store, "sites", "import", "-", input=text) == \
        "jedictl: error: stdin: line 5 column 1: found duplicate key 'nuclei' (first at line 1) (invalid YAML)"
