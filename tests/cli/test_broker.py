"""`jedictl broker` (Task Broker pass) and `jedictl explain task`."""

from __future__ import annotations

import yaml

from tests.cli.test_feed import feed, submit
from tests.cli.test_refine import EXAMPLES as SPEC_EXAMPLES
from tests.conftest import ROOT

SITES = ["AGLT2_TEST", "BNL_PROD", "BNL_PROD_MCORE", "CERN-PROD_GRID", "CERN-PROD_MCORE", "DESY-HH", "MWT2"]


def _grid(cli, store):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    cli("data", "import", str(ROOT / "examples" / "data.yaml"), db=store)


def test_broker_assigns_a_nucleus_and_output_destinations(cli, store):
    _grid(cli, store)
    task_id = submit(cli, store, SPEC_EXAMPLES["event-split"])
    feed(cli, store)
    report = cli.json("broker", "--seed", "7", db=store)
    assert report["counts"]["ready"] == 1
    task = cli.json("task", "show", str(task_id), db=store)
    assert task["status"] == "ready" and task["nucleus"] in ("CERN-PROD", "BNL-ATLAS")
    outputs = {d["type"]: d for d in task["datasets"] if d["type"] in ("output", "log")}
    endpoint = {"CERN-PROD": "CERN-PROD_DATADISK", "BNL-ATLAS": "BNL-ATLAS_DATADISK"}[task["nucleus"]]
    assert {d["destination"] for d in outputs.values()} == {endpoint}  # the nucleus' disk with most space
    assert task["status_history"][-1]["reason"] == f"nucleus {task['nucleus']}"


def test_same_seed_same_choices(cli, tmp_path, store):
    _grid(cli, store)
    for index in range(6):
        submit(cli, store, SPEC_EXAMPLES["generation"], name=f"gen.{index}", dependencies={"allow_task_duplication": True})
    feed(cli, store)
    first = [item["reason"] for item in cli.json("broker", "--seed", "3", "--now", "2030-01-01T00:00:00", db=store)["items"]]
    # undo and repeat: the same seed over the same store state draws the same nuclei
    from sqlalchemy import update

    from jedictl.store.schema import tasks
    from tests.helpers import run_sql

    run_sql(store, lambda conn: conn.execute(update(tasks).values(status="assigning", nucleus=None)))
    second = [item["reason"] for item in cli.json("broker", "--seed", "3", "--now", "2030-01-01T00:00:00", db=store)["items"]]
    assert first == second and len(first) == 6


def test_a_task_no_nucleus_fits_keeps_assigning_and_says_why(cli, store):
    _grid(cli, store)
    spec = yaml.safe_load(SPEC_EXAMPLES["generation"])
    spec["resources"] = {"core_count": 64}
    task_id = cli.json("submit", "-", db=store, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, store)
    report = cli.json("broker", db=store)
    assert report["counts"]["waiting"] == 1
    task = cli.json("task", "show", str(task_id), db=store)
    assert task["status"] == "assigning" and "runnable" in task["error_dialog"]
    assert cli.json("broker", db=store)["items"] == []  # brokered again only after task_broker.retry_minutes
    assert cli.json("broker", "--now", "2099-01-01T00:00:00", db=store)["counts"]["waiting"] == 1


def test_explain_names_the_first_rule_that_dropped_each_site(cli, store):
    _grid(cli, store)
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["resources"] = {"ram_count": 64000, "ram_unit": "MB"}  # fits no site's memory
    task_id = cli.json("submit", "-", db=store, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, store)
    report = cli.json("explain", "task", str(task_id), db=store)
    rules = {row["site"]: (row["kept"], row["rule"]) for row in report["brokerage"]}
    assert set(rules) == set(SITES)
    # The first rule that failed, in JEDI's filter order: a test queue is refused on status, the
    # 8-core queues on core count (a single-core task), the single-core ones on memory.
    assert rules == {"AGLT2_TEST": (False, "status"), "BNL_PROD": (False, "memory"), "CERN-PROD_GRID": (False, "memory"),
                     "BNL_PROD_MCORE": (False, "core_count"), "CERN-PROD_MCORE": (False, "core_count"),
                     "DESY-HH": (False, "core_count"), "MWT2": (False, "core_count")}
    memory = next(row for row in report["brokerage"] if row["site"] == "CERN-PROD_GRID")
    assert memory["message"] == "memory: needs 57600 MB, site max 4000 MB"  # 64000 MB x 0.9
    assert report["summary"].startswith("no site can run its next jobs")
    assert [(f["status"], f["files"]) for f in report["files"]] == [("ready", 23)]
    assert report["throttle"]["rule"] and report["throttle"]["throttled"] is False


def test_explain_a_pending_task_and_a_leased_one(cli, store):
    _grid(cli, store)
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["inputs"][0]["dataset"] = "not.in.the.catalog"
    spec["dependencies"] = {"wait_input": True}
    task_id = cli.json("submit", "-", db=store, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, store)
    report = cli.json("explain", "task", str(task_id), db=store)
    assert report["status"] == "pending"
    assert report["summary"].startswith("pending: input dataset not.in.the.catalog is not in the data catalog (waiting for it: waitInput) (re-checked after")
    table = cli("explain", "task", str(task_id), db=store).stdout
    assert "summary" in table and "pending: input dataset" in table
    assert cli("explain", "task", "99", db=store, code=2).stderr.strip() == "jedictl: error: task 99 does not exist"
