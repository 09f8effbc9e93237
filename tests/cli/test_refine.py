"""`jedictl refine`: every documented example, parents and children, broken tasks, pass reports."""

from __future__ import annotations

import re

import yaml
from sqlalchemy import update

from jedictl.store.schema import tasks
from tests.conftest import ROOT
from tests.helpers import run_sql

DOC = (ROOT / "docs" / "task-spec.md").read_text()
EXAMPLES = dict(re.findall(r"<!-- example: (\S+) -->\n```yaml\n(.*?)```", DOC, re.S))


def test_docs_have_one_example_per_kind_of_task():
    assert set(EXAMPLES) == {"analysis", "event-split", "generation", "secondaries", "merge", "event-service", "child"}


def _submit_example(cli, store, name):
    return cli.json("submit", "-", db=store, input=EXAMPLES[name])["task_id"]


def test_every_documented_example_is_refined(cli, store):
    # The event-split task is submitted first: it is the child example's parent (task 1).
    ids = {name: _submit_example(cli, store, name)
           for name in ["event-split", "analysis", "generation", "secondaries", "merge", "child", "event-service"]}
    report = cli.json("refine", db=store)
    assert (report["counts"]["defined"], report["counts"]["pending"]) == (6, 1)
    shown = {name: cli.json("task", "show", str(task_id), db=store) for name, task_id in ids.items()}

    assert shown["event-service"]["status"] == "defined" and shown["event-service"]["options"]["event_service"] is True
    simul = shown["event-split"]
    assert (simul["status"], simul["work_queue"], simul["gshare"], simul["resource_type"]) == ("defined", "evgensimul", "MC Simulation", "MCORE")
    # 500 events per job from 10 000-event files: event-level splitting, so no files-per-job is derived.
    assert simul["options"] == {"n_events_per_job": 500, "n_events_per_input_file": 10000, "core_count": 8, "ram_count": 2000,
                                "ram_unit": "MBPerCore", "cpu_time": 250.0, "cpu_time_unit": "HS06sPerEvent"}
    assert simul["split_rule"] == "EI=10000,NE=500,US=2"
    assert (simul["resources"]["core_count"], simul["resources"]["cpu_time"]) == (8, 250.0)

    generation = shown["generation"]
    names = [d["name"] for d in generation["datasets"]]
    assert names[:2] == ["pseudo_dataset", "RNDMSEED"]
    assert generation["options"]["random_seed_offset"] == 100
    assert "RS=100" in generation["split_rule"]

    secondaries = {d["stream"]: d for d in shown["secondaries"]["datasets"]}
    master_id = secondaries["IN"]["dataset_id"]
    assert secondaries["MINBIAS_LOW"]["attributes"] == {"ratio": 2.0} and secondaries["MINBIAS_LOW"]["master_id"] == master_id
    assert secondaries["MINBIAS_HIGH"]["attributes"] == {"n_files_per_job": 1, "repeat": True}
    assert secondaries["DBR"]["attributes"] == {"nosplit": True, "repeat": True}

    merge = shown["merge"]
    by_name = {d["name"]: d for d in merge["datasets"]}
    twin = by_name["panda.um.user.bob.zmumu.ntuple.v2_ntuple.root/"]
    log_twin = by_name["panda.um.user.bob.zmumu.ntuple.v2.log/"]
    assert (twin["type"], log_twin["type"]) == ("trn_output", "trn_log")
    assert twin["master_id"] == log_twin["dataset_id"] and log_twin["master_id"] is None
    assert by_name["user.bob.zmumu.ntuple.v2_ntuple.root/"]["provenance_id"] == twin["dataset_id"]
    assert twin["file_templates"][0]["template"] == "panda.um.user.bob.${JEDITASKID}._${SN/P}.ntuple.root"
    assert merge["job_parameters"]["merge"] == '-i "${TRN_OUTPUT0/L}" -o "${OUTPUT0}" --mergeType hadd'
    assert "MO=1" in merge["split_rule"] and "ZF=20" in merge["split_rule"]

    child = shown["child"]
    assert child["status"] == "pending"
    assert child["error_dialog"] == "pending until parent task 1 is done"
    assert child["datasets"] == []


def test_child_is_refined_once_its_parent_is_done(cli, store):
    parent = _submit_example(cli, store, "event-split")
    child = _submit_example(cli, store, "child")
    cli("refine", db=store)
    again = cli.json("refine", db=store)  # still waiting: no new history line
    assert again["counts"]["pending"] == 1
    history = cli.json("task", "show", str(child), db=store)["status_history"]
    assert [h["status"] for h in history] == ["registered", "pending"]

    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == parent).values(status="done")))
    assert cli.json("refine", db=store)["counts"]["defined"] == 1
    shown = cli.json("task", "show", str(child), db=store)
    assert shown["status"] == "defined" and shown["old_status"] is None and shown["error_dialog"] is None
    assert [h["status"] for h in shown["status_history"]] == ["registered", "pending", "defined"]


def test_child_of_a_failed_parent_breaks(cli, store):
    parent = _submit_example(cli, store, "event-split")
    child = _submit_example(cli, store, "child")
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == parent).values(status="aborted")))
    report = cli.json("refine", db=store)
    assert report["counts"]["broken"] == 1
    shown = cli.json("task", "show", str(child), db=store)
    assert (shown["status"], shown["error_dialog"]) == ("broken", "parent task 1 is aborted")


def test_no_wait_parent_child_starts_once_the_parent_is_refined(cli, store):
    parent = _submit_example(cli, store, "event-split")
    spec = yaml.safe_load(EXAMPLES["child"])
    spec["dependencies"] = {"no_wait_parent": True}
    child = cli.json("submit", "-", db=store, input=yaml.safe_dump(spec))["task_id"]
    report = cli.json("refine", "--limit", "1", db=store)  # only the parent this time
    assert report["counts"]["defined"] == 1
    cli("refine", db=store)
    assert cli.json("task", "show", str(child), db=store)["status"] == "defined"
    assert parent == 1


def test_unrefinable_task_breaks_and_the_pass_goes_on(cli, store, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"work_queues": [{"name": "only-evgen", "queue_type": "managed", "criteria": "processingType = 'evgen'"}]}))
    bad = _submit_example(cli, store, "secondaries")  # processing_type pile: no queue
    good = _submit_example(cli, store, "generation")  # evgen
    report = cli.json("refine", "--config", str(config), db=store)
    assert (report["counts"]["broken"], report["counts"]["defined"]) == (1, 1)
    broken = cli.json("task", "show", str(bad), db=store)
    assert broken["status"] == "broken"
    assert broken["error_dialog"] == "no work queue serves vo wlcg and label managed for this task"
    assert broken["datasets"] == [] and broken["lease_owner"] is None
    assert cli.json("task", "show", str(good), db=store)["work_queue"] == "only-evgen"


def test_bad_queue_configuration_stops_before_touching_tasks(cli, store, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "colour = 'red'"}]}))
    _submit_example(cli, store, "generation")
    result = cli("refine", "--config", str(config), db=store, code=2)
    assert "work_queues[0].criteria: unknown attribute 'colour'" in result.stderr
    assert cli.json("task", "show", "1", db=store)["status"] == "registered"


def test_nothing_to_do_is_exit_0(cli, store):
    result = cli("refine", db=store)
    assert "refine: nothing to do" in result.stderr


def test_requested_share_and_queue_are_honoured(cli, store):
    spec = yaml.safe_load(EXAMPLES["generation"])
    spec.update(gshare="Test", work_queue="managed")
    cli("submit", "-", db=store, input=yaml.safe_dump(spec))
    cli("refine", db=store)
    shown = cli.json("task", "show", "1", db=store)
    assert (shown["gshare"], shown["work_queue"]) == ("Test", "managed")
