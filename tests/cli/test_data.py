"""`jedictl data ...`: the data catalog in the store."""

from __future__ import annotations

import json

import yaml

from tests.conftest import ROOT
from tests.helpers import row_counts


def _catalog(cli, store):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    return cli.json("data", "import", str(ROOT / "examples" / "data.yaml"), db=store)


def test_import_list_show(cli, store):
    report = _catalog(cli, store)
    assert sum(r["files_added"] for r in report) == 132
    assert {r["action"] for r in cli.json("data", "import", str(ROOT / "examples" / "data.yaml"), db=store)} == {"unchanged"}
    listed = {d["name"]: d for d in cli.json("data", "list", db=store)}
    assert listed["ddo.000001.Atlas.Ideal.DBRelease.v340101"]["n_files"] == 1
    assert [d["name"] for d in cli.json("data", "list", "--kind", "container", db=store)] == ["mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026"]
    assert len(cli.json("data", "list", "*minbias*", db=store)) == 2
    shown = cli.json("data", "show", "mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.evgen.EVNT.e8514", "--files", db=store)
    assert (shown["n_files"], shown["n_events"], shown["state"]) == (4, 40000, "closed")
    assert shown["replicas"] == [{"endpoint": "BNL-ATLAS_DATATAPE", "complete": True, "kind": "tape"},
                                 {"endpoint": "CERN-PROD_DATADISK", "complete": True, "kind": "disk"}]
    assert shown["files"][0]["lfn"] == "EVNT.00000020._000001.pool.root.1" and shown["files"][0]["events"] == 10000
    container = cli.json("data", "show", "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026", db=store)
    assert container["datasets"] == ["mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026_tid00000001_00",
                                     "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026_tid00000002_00"]


def test_add_remove_close_open(cli, store, tmp_path):
    _catalog(cli, store)
    open_name = "data24_13p6TeV.periodAllYear.physics_Main.PhysCont.DAOD_PHYS.grp24_v01_p6266"
    closed_name = "ddo.000001.Atlas.Ideal.DBRelease.v340101"
    new = tmp_path / "files.json"
    new.write_text(json.dumps([{"lfn": "new.1.root", "size": 10, "events": 5}]))
    assert cli.json("data", "add-files", open_name, str(new), db=store) == {"dataset": open_name, "files_added": 1}
    assert "is already a file of dataset" in cli("data", "add-files", open_name, str(new), db=store, code=2).stderr
    assert f"dataset {closed_name} is closed" in cli("data", "add-files", closed_name, str(new), db=store, code=2).stderr
    assert cli.json("data", "remove-files", open_name, "new.1.root", db=store) == {"dataset": open_name, "files_removed": 1}
    assert "'nope.root' is not a file of dataset" in cli("data", "remove-files", open_name, "nope.root", db=store, code=2).stderr
    assert cli.json("data", "close", open_name, db=store) == {"dataset": open_name, "state": "closed", "previous_state": "open"}
    assert cli.json("data", "open", open_name, db=store)["state"] == "open"
    assert cli("data", "close", "no.such.dataset", db=store, code=2).stderr.strip() == "jedictl: error: dataset no.such.dataset is not in the data catalog"


BAD_CATALOGS = [
    ("unknown-endpoint", {"datasets": [{"name": "d.1", "replicas": [{"endpoint": "MOON_DATADISK"}]}]},
     "datasets[1].replicas[0].endpoint: unknown storage endpoint 'MOON_DATADISK'"),
    ("duplicate-lfn", {"datasets": [{"name": "d.1", "files": [{"lfn": "a.root"}, {"lfn": "a.root"}]}]},
     "datasets[1].files[1].lfn: duplicate file name 'a.root' in the dataset"),
    ("negative-size", {"datasets": [{"name": "d.1", "files": [{"lfn": "a.root", "size": -5}]}]}, "datasets[1].files[0].size: must be at least 0"),
    ("bad-state", {"datasets": [{"name": "d.1", "state": "frozen"}]}, "datasets[1].state: must be one of open, closed"),
    ("unknown-member", {"containers": [{"name": "c.1", "datasets": ["missing.ds"]}]}, "containers[0].datasets[0]: unknown dataset 'missing.ds'"),
    ("bad-lumis", {"datasets": [{"name": "d.1", "files": [{"lfn": "a.root", "lumi_blocks": [-1]}]}]}, "datasets[1].files[0].lumi_blocks: must be a list"),
]


def test_bad_catalog_files_import_nothing(cli, store, tmp_path):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    before = row_counts(store)
    for name, document, message in BAD_CATALOGS:
        if "datasets" in document:  # a valid dataset first: nothing of the file may be imported
            document = {"datasets": [{"name": "fine.dataset", "files": [{"lfn": "ok.root"}]}] + document["datasets"]}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document))
        result = cli("data", "import", str(path), db=store, code=2)
        assert message in result.stderr, (name, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets:\n- name: x\n  files: [{lfn: a.root, size: 1}\n")
    assert "bad.yaml: line" in cli("data", "import", str(bad), db=store, code=2).stderr
    assert row_counts(store) == before


def test_list_refuses_unknown_kinds_and_states(cli, store):
    from tests.helpers import refused

    assert refused(cli, store, "data", "list", "--kind", "bogus") == \
        "jedictl: error: --kind: 'bogus' is not a catalog kind (allowed: dataset, container)"
    assert refused(cli, store, "data", "list", "--state", "Open") == \
        "jedictl: error: --state: 'Open' is not a dataset state (allowed: open, closed; did you mean 'open'?)"


def test_list_patterns_have_one_wildcard_the_star(cli, store):
    """`%` and `_` are characters of a pattern, not SQL LIKE wildcards; names match case and all."""
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    names = ["d_cs", "dxcs", "ds.in", "DS.IN", "a.b"]
    cli("data", "import", "-", db=store, input=json.dumps({"datasets": [{"name": name} for name in names]}))

    def listed(pattern):
        return sorted(d["name"] for d in cli.json("data", "list", pattern, db=store))

    assert listed("%") == [] and listed("_") == [] and listed("%%") == [] and listed("a%") == []
    assert listed("d_cs") == ["d_cs"]
    assert listed("d_*") == ["d_cs"]
    assert listed("____") == []
    assert listed("ds.*") == ["ds.in"]  # not DS.IN: names are case-sensitive, on SQLite too
    assert listed("*") == sorted(names)
    assert listed("*.*") == ["DS.IN", "a.b", "ds.in"]
    assert listed("a\\%") == [] and listed("*\\*") == []
    assert cli.json("data", "show", "d_cs", db=store)["name"] == "d_cs"
