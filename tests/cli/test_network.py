"""`jedictl network import|list|show` and the network weight end to end, both backends (issue 19, item 6;
docs/sites.md "Network weight"): the matrix round trip, a bad row that changes nothing, a WORLD task whose
jobs move to the satellite with the better link once the matrix is imported, the rule for urgent tasks,
the task brokerage's output transfer queue, and an analysis task's input link in `explain`."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import jobs
from tests.helpers import run_sql

NOW = "2030-03-01T08:00:00"
HEADER = re.compile(r"^site +kept +rule .* network *$", re.M)  # the brokerage table's header with the network column
SATELLITES = ("FAR", "NEAR")


def _site(name: str, nucleus: str | None = None) -> dict:
    return {"name": name, "cloud": "WORLD", "nucleus": nucleus, "core_count": 1, "core_power": 10.0, "max_memory": 4000,
            "max_walltime": 172800, "max_scratch_mb": 60000, "read_endpoints": [f"{name}_DISK"], "write_endpoints": [f"{name}_DISK"]}


GRID = {
    "nuclei": [{"name": "NUC"}, {"name": "OTHER"}],
    "storage_endpoints": [{"name": f"{name}_DISK", "kind": "disk", "nucleus": nucleus, "free_gb": 800000, "total_gb": 2000000}
                          for name, nucleus in (("NUC_SITE", "NUC"), ("OTHER_SITE", "OTHER"), ("FAR", None), ("NEAR", None))],
    "sites": [_site("NUC_SITE", "NUC"), _site("OTHER_SITE", "OTHER"), _site("FAR"), _site("NEAR")],
}
DATA = {"datasets": [{"name": "net.in", "state": "closed",
                      "replicas": [{"endpoint": f"{name}_DISK"} for name in ("NUC_SITE", "OTHER_SITE", "FAR", "NEAR")],
                      "files": [{"lfn": f"net.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 21)]}]}
TASK = {
    "taskName": "network.weight.1", "vo": "atlas", "prodSourceLabel": "managed", "taskType": "prod", "processingType": "simul",
    "nFilesPerJob": 1, "skipScout": True, "taskPriority": 500,  # above 150: empty sites are not bootstrapped first
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "net.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "net.out", "value": "--out=net.out.${SN}.root"},
    ],
    "log": {"type": "template", "param_type": "log", "dataset": "net.log", "value": "net.log.${SN}.log.tgz"},
}
#: NEAR has a fast idle link to NUC, FAR a far one; OTHER's link (by the nucleus' name) serves OTHER_SITE.
MATRIX = {"links": [
    {"source": "NEAR", "destination": "NUC", "queued": 5, "mbps_1h": 150.0},
    {"source": "FAR", "destination": "NUC", "queued": 20, "closeness": 9},
    {"source": "OTHER", "destination": "NUC", "mbps_1w": 30.0},
]}


def _file(tmp_path, name: str, document) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return str(path)


def _grid(cli, store, tmp_path) -> None:
    cli("sites", "import", _file(tmp_path, "grid.yaml", GRID), db=store)
    cli("data", "import", _file(tmp_path, "data.yaml", DATA), db=store)


def _submit(cli, store, **changes) -> int:
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**TASK, **changes}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    return task_id


def _sites_of_jobs(store) -> set[str]:
    return set(run_sql(store, lambda conn: conn.execute(select(jobs.c.site).distinct()).scalars().all()))


# ------------------------------------------------------------------------------------- the matrix

def test_import_list_show_and_replace(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    report = cli.json("network", "import", _file(tmp_path, "net.yaml", MATRIX), db=store)
    assert [(line["source"], line["action"]) for line in report] == [("NEAR", "created"), ("FAR", "created"), ("OTHER", "created")]
    listed = cli.json("network", "list", db=store)
    assert [(row["source"], row["destination"], row["weight"], row["basis"], row["state"]) for row in listed] == [
        ("FAR", "NUC", round(0.5 * (2 - 20 / 150) + 0.5 * (1 + 2 / 11), 4), "closeness", "usable"),
        ("NEAR", "NUC", round(0.5 * (2 - 5 / 150) + 0.5 * 1.9, 4), "mbps_1h", "usable"),
        ("OTHER", "NUC", 1.75, "mbps_1w", "usable")]
    assert [row["source"] for row in cli.json("network", "list", "--source", "NEAR", db=store)] == ["NEAR"]
    shown = cli.json("network", "show", "FAR", "NUC", db=store)
    assert (shown["closeness"], shown["queued_weight"], shown["throughput_weight"]) == (9, round(2 - 20 / 150, 4), round(1 + 2 / 11, 4))
    refused = cli("network", "show", "NUC", "FAR", db=store, code=2)
    assert refused.stderr == "jedictl: error: no network link NUC -> FAR (`jedictl network list` shows the links)\n"
    # The same matrix as CSV, with NEAR's link now full: one update, the rest unchanged; --replace drops OTHER's.
    csv = "source,destination,queued,mbps_1h,mbps_1w,closeness\nNEAR,NUC,150,150,,\nFAR,NUC,20,,,9\n"
    report = cli.json("network", "import", _file(tmp_path, "net.csv", csv), "--replace", db=store)
    assert [(line["source"], line["action"], line["changed"]) for line in report] == [
        ("NEAR", "updated", ["queued"]), ("FAR", "unchanged", []), ("OTHER", "removed", [])]
    assert cli.json("network", "show", "NEAR", "NUC", db=store)["state"] == "full (150 queued >= 150)"
    assert run_sql(store, check_all) == []


def test_a_bad_row_is_one_line_and_changes_nothing(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("network", "import", _file(tmp_path, "net.yaml", MATRIX), db=store)
    before = cli.json("network", "list", db=store)
    bad = {"links": [{"source": "NEAR", "destination": "NUC", "queued": 99}, {"source": "FAR", "destination": "NUC", "closeness": 12}]}
    result = cli("network", "import", _file(tmp_path, "bad.yaml", bad), "--replace", db=store, code=2)
    assert result.stderr == "jedictl: error: links[1].closeness: must be at most 11\n"
    csv = "source,destination,queued\nNEAR,NUC,1\nMARS,NUC,3\n"
    result = cli("network", "import", "-", db=store, input=csv, code=2)
    assert result.stderr == "jedictl: error: stdin line 3, source: unknown site or nucleus 'MARS' (`jedictl sites import` adds it)\n"
    assert cli.json("network", "list", db=store) == before


# ---------------------------------------------------------------------------------------- brokerage

def test_the_network_term_moves_a_world_tasks_jobs_to_the_satellite_with_the_better_link(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    two = {"JEDICTL_BROKERAGE__MAX_CANDIDATES": "2", "JEDICTL_GENERATE__JOBS_PER_SITE_ROUND": "2"}
    task_id = _submit(cli, store, nucleus="NUC")
    explained = cli.json("explain", "task", str(task_id), db=store, env=two)
    assert [row["site"] for row in explained["brokerage"] if row["kept"]] == ["FAR", "NEAR"]  # all equal: by name
    assert all(row["network"] is None for row in explained["brokerage"])
    assert not HEADER.search(cli("explain", "task", str(task_id), db=store, env=two).stdout)  # no column without a term

    cli("network", "import", _file(tmp_path, "net.yaml", MATRIX), db=store)
    explained = cli.json("explain", "task", str(task_id), db=store, env=two)
    rows = {row["site"]: row for row in explained["brokerage"]}
    assert [row["site"] for row in explained["brokerage"] if row["kept"]] == ["NEAR", "NUC_SITE"]  # (rows by name)
    assert rows["NUC_SITE"]["network"] == "2.5: at the nucleus NUC (no output to transfer)"
    assert rows["NEAR"]["network"].startswith("1.93 = 0.5 x queued 1.97 (5 files) + 0.5 x throughput 1.9 (150 MB/s, 1h); output NEAR -> NUC")
    assert "closeness 1.18 (closeness 9, no throughput measured); output FAR -> NUC" in rows["FAR"]["network"]
    assert rows["OTHER_SITE"]["network"].endswith("output OTHER -> NUC")  # OTHER_SITE's link by its nucleus' name
    assert rows["FAR"]["rule"] == "rank" and "network_weight=1.5242" in rows["FAR"]["values"]
    assert rows["NEAR"]["message"].endswith("x locality 2 x network 1.93")
    table = cli("explain", "task", str(task_id), db=store, env=two).stdout
    assert HEADER.search(table) and "output NEAR -> NUC" in table
    cli("generate", "--seed", "1", "--now", NOW, db=store, env=two)
    assert _sites_of_jobs(store) == {"NUC_SITE", "NEAR"}  # FAR's poor link keeps it out of the two best
    assert run_sql(store, check_all) == []


def test_an_urgent_task_avoids_satellites_with_a_poor_link_unless_the_rule_is_off(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("network", "import", _file(tmp_path, "net.yaml", MATRIX), db=store)
    task_id = _submit(cli, store, nucleus="NUC", processingType="urgent")
    rows = {row["site"]: row for row in cli.json("explain", "task", str(task_id), db=store)["brokerage"]}
    assert rows["FAR"]["rule"] == "network"
    assert rows["FAR"]["message"] == ("network: weight 1.52 < 1.7 (nw_threshold x nw_weight_multiplier) "
                                      "for an urgent or priority >= 1000 task (FAR -> NUC)")
    assert {site for site, row in rows.items() if row["kept"]} == {"NUC_SITE", "NEAR", "OTHER_SITE"}  # 2.5, 1.93, 1.75
    passive = cli.json("explain", "task", str(task_id), db=store, env={"JEDICTL_BROKERAGE__NW_ACTIVE": "false"})
    assert all(row["kept"] for row in passive["brokerage"])
    assert all(row["network"].endswith("(passive: brokerage.nw_active is off)") for row in passive["brokerage"])
    lowered = cli.json("explain", "task", str(task_id), db=store, env={"JEDICTL_BROKERAGE__NW_WEIGHT_MULTIPLIER": "0.8"})
    assert all(row["kept"] for row in lowered["brokerage"])  # 1.52 >= 1.7 x 0.8


def test_task_brokerage_skips_a_nucleus_with_2000_output_files_queued_towards_it(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    full = {"links": [{"source": "FAR", "destination": "NUC", "queued": 1200}, {"source": "NEAR", "destination": "NUC", "queued": 800},
                      {"source": "FAR", "destination": "OTHER", "queued": 100}]}
    cli("network", "import", _file(tmp_path, "full.yaml", full), db=store)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK))["task_id"]
    cli("refine", db=store)
    cli("feed", db=store)
    explained = cli.json("explain", "task", str(task_id), db=store)
    nuclei = {row["nucleus"]: row for row in explained["nucleus_brokerage"]}
    assert nuclei["NUC"]["rule"] == "transfer_queue" and nuclei["NUC"]["message"] == "transfer queue: 2000 output files queued, limit 2000"
    assert nuclei["OTHER"]["kept"]
    cli("broker", "--seed", "1", db=store)
    assert cli.json("task", "show", str(task_id), db=store)["nucleus"] == "OTHER"


def test_an_analysis_task_weighs_transfer_sites_by_the_link_from_its_data(cli, store, tmp_path):
    grid = {"storage_endpoints": [{"name": f"{name}_DISK", "kind": "disk", "free_gb": 100000, "total_gb": 200000}
                                  for name in ("DATA_SITE", "IDLE_B", "IDLE_C")],
            "sites": [{**_site(name), "status": "offline" if name == "DATA_SITE" else "online"} for name in ("DATA_SITE", "IDLE_B", "IDLE_C")]}
    cli("sites", "import", _file(tmp_path, "grid.yaml", grid), db=store)
    data = {"datasets": [{**DATA["datasets"][0], "name": "user.in", "replicas": [{"endpoint": "DATA_SITE_DISK"}]}]}
    cli("data", "import", _file(tmp_path, "data.yaml", data), db=store)
    cli("network", "import", "-", db=store, input="source,destination,queued,mbps_1h\nDATA_SITE,IDLE_C,0,250\n")
    analysis = {**TASK, "taskName": "user.someone.net/", "prodSourceLabel": "user", "taskType": "anal", "userName": "someone",
                "jobParameters": [{**TASK["jobParameters"][0], "dataset": "user.in"},
                                  {**TASK["jobParameters"][1], "dataset": "user.someone.net_out/"}],
                "log": {**TASK["log"], "dataset": "user.someone.net.log/"}}
    task_id = _submit(cli, store, **analysis)
    explained = cli.json("explain", "task", str(task_id), db=store)
    rows = {row["site"]: row for row in explained["brokerage"]}
    assert "no candidate holds the data" in rows["IDLE_B"]["data"]
    assert rows["IDLE_C"]["network"].startswith("2 = 0.5 x queued 2 (0 files) + 0.5 x throughput 2 (250 MB/s, 1h); input DATA_SITE -> IDLE_C")
    assert rows["IDLE_B"]["network"].startswith("1.5 = ") and "no link DATA_SITE -> IDLE_B (worst assumed)" in rows["IDLE_B"]["network"]
    assert rows["IDLE_C"]["weight"] / rows["IDLE_B"]["weight"] == pytest.approx(2 / 1.5)
