"""`jedictl generate` (Job Generator pass) and `jedictl jobs list|show`."""

from __future__ import annotations

import json
import random

import yaml
from sqlalchemy import select, update

from jedictl.engine.generate.task_order import Candidate, order_tasks
from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, tasks
from tests.cli.test_refine import EXAMPLES as SPEC_EXAMPLES
from tests.conftest import ROOT
from tests.helpers import run_sql

# jedi-inventory.md §16.1, as PanDA task parameters
WORKED_EXAMPLE = {
    "taskName": "worked.example.16.1", "vo": "wlcg", "prodSourceLabel": "managed", "taskType": "prod", "processingType": "sim",
    "nFilesPerJob": 2,
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"},
        {"type": "constant", "value": "--n 10"},
    ],
    "log": {"type": "template", "param_type": "log", "dataset": "ds.log", "value": "ds.log.${SN}.log.tgz"},
}
DS_IN = {"datasets": [{"name": "ds.in", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}, {"endpoint": "BNL-ATLAS_DATADISK"}],
                       "files": [{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 26)]}]}


def _grid(cli, store, tmp_path):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    cli("data", "import", str(ROOT / "examples" / "data.yaml"), db=store)
    catalog = tmp_path / "ds.yaml"
    catalog.write_text(yaml.safe_dump(DS_IN))
    cli("data", "import", str(catalog), db=store)


def _pipeline(cli, store):
    cli("refine", db=store)
    cli("feed", db=store)
    cli("broker", "--seed", "1", db=store)
    report = cli.json("generate", "--seed", "1", db=store)
    assert run_sql(store, check_all) == []
    return report


def _jobs(cli, store, task_id):
    listed = sorted(cli.json("jobs", "list", "--task", str(task_id), "--limit", "1000", db=store), key=lambda j: j["job_id"])
    return [cli.json("jobs", "show", j["task_job"], db=store) for j in listed]


def test_worked_example_16_1_scouts_then_avalanche(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps(WORKED_EXAMPLE))
    report = _pipeline(cli, store)
    assert report["counts"]["jobs"] == 10
    scouts = _jobs(cli, store, 1)
    assert [j["job_parameters"] for j in scouts] == [
        f"--in=f.[{2 * i + 1:03d},{2 * i + 2:03d}].root --out=ds.out.{i + 1:06d}.root --n 10" for i in range(10)]
    assert [(f["type"], f["lfn"]) for f in scouts[0]["files"]] == [
        ("input", "f.001.root"), ("input", "f.002.root"), ("output", "ds.out.000001.root"), ("log", "ds.log.000001.log.tgz")]
    assert {(j["scout"], j["priority"], j["attempt_nr"], j["status"]) for j in scouts} == {(True, 901, 1, "activated")}  # max(901, 0 + 1)
    sites = [j["site"] for j in scouts]
    assert all(sites[i] == sites[i + 1] for i in range(0, 10, 2))  # two scout jobs per site before the next draw
    task = cli.json("task", "show", "1", db=store)
    assert task["status"] == "scouting"
    assert {t["next_serial"] for d in task["datasets"] for t in d["file_templates"]} == {11}
    master = next(d for d in task["datasets"] if d["type"] == "input")
    assert (master["n_files"], master["n_files_to_be_used"], master["n_files_used"]) == (25, 20, 20)

    # The avalanche (finalize, once scouts are done) releases everything and the task runs on.
    run_sql(store, lambda conn: (conn.execute(update(datasets).where(datasets.c.id == master["dataset_id"]).values(n_files_to_be_used=25)),
                                 conn.execute(update(tasks).where(tasks.c.id == 1).values(status="running"))))
    assert cli.json("generate", "--seed", "1", db=store)["counts"]["jobs"] == 3
    avalanche = _jobs(cli, store, 1)[10:]
    assert [j["job_parameters"] for j in avalanche] == [
        "--in=f.[021,022].root --out=ds.out.000011.root --n 10",
        "--in=f.[023,024].root --out=ds.out.000012.root --n 10",
        "--in=f.025.root --out=ds.out.000013.root --n 10",  # the short last chunk
    ]
    assert {(j["scout"], j["priority"]) for j in avalanche} == {(False, 0)}
    assert [j["task_job"] for j in avalanche] == ["1.11", "1.12", "1.13"]
    assert run_sql(store, check_all) == []
    assert cli.json("task", "show", "1", db=store)["status"] == "running"


def test_files_become_running_with_their_job(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps(WORKED_EXAMPLE))
    _pipeline(cli, store)
    rows = run_sql(store, lambda conn: conn.execute(select(files.c.lfn, files.c.status, files.c.job_id)
                                                    .where(files.c.task_id == 1, files.c.type == "input").order_by(files.c.id)).all())
    assert [(r.status, r.job_id is not None) for r in rows[:20]] == [("running", True)] * 20
    assert [(r.status, r.job_id) for r in rows[20:]] == [("ready", None)] * 5  # not released while scouting
    outputs = run_sql(store, lambda conn: conn.execute(select(files.c.lfn, files.c.status, files.c.out_job_id)
                                                       .where(files.c.task_id == 1, files.c.type == "output").order_by(files.c.id)).all())
    assert outputs[0] == ("ds.out.000001.root", "defined", 1) and len(outputs) == 10


def test_an_unresolved_placeholder_makes_the_task_pend(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    params = {**WORKED_EXAMPLE, "prodSourceLabel": "user", "jobParameters": WORKED_EXAMPLE["jobParameters"] + [
        {"type": "constant", "value": "--url ${SURL}"}]}  # no sourceURL in the task
    cli("submit", "-", db=store, input=json.dumps(params))
    report = _pipeline(cli, store)
    assert report["counts"]["pending"] == 1 and report["counts"]["jobs"] == 0
    task = cli.json("task", "show", "1", db=store)
    assert task["status"] == "pending" and "SURL" in task["error_dialog"]
    assert cli.json("jobs", "list", db=store) == []
    assert run_sql(store, lambda conn: conn.execute(select(files.c.status).where(files.c.task_id == 1, files.c.type == "input")
                                                    .distinct()).scalars().all()) == ["ready"]


def test_no_site_makes_the_task_pend_with_the_brokerage_summary(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["resources"] = {"core_count": 64}
    cli("submit", "-", db=store, input=yaml.safe_dump(spec))
    report = _pipeline(cli, store)
    assert report["counts"]["pending"] == 1
    task = cli.json("task", "show", "1", db=store)
    assert task["status"] == "pending" and task["error_dialog"].startswith("no site can run the jobs: 0 candidates; dropped:")
    assert "core_count" in task["error_dialog"]


def test_a_throttled_queue_gets_no_jobs(cli, store, tmp_path):
    """JEDI's queued cap (NQUEUECAP): with 10 scout jobs queued and a cap of 2, the share is throttled."""
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps(WORKED_EXAMPLE))
    _pipeline(cli, store)  # 10 scout jobs, activated
    assert cli.json("task", "show", "1", db=store)["gshare"] == "Production default"
    master_id = next(d["dataset_id"] for d in cli.json("task", "show", "1", db=store)["datasets"] if d["type"] == "input")
    run_sql(store, lambda conn: (conn.execute(update(datasets).where(datasets.c.id == master_id).values(n_files_to_be_used=25)),
                                 conn.execute(update(tasks).where(tasks.c.id == 1).values(status="running"))))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"throttle": {"limits": {"NQUEUECAP_Production default": 2}}}))
    blocked = cli.json("generate", "--config", str(config), db=store)
    assert (blocked["counts"]["throttled"], blocked["counts"]["jobs"]) == (1, 0)
    assert "Production default" in blocked["items"][0]["reason"]
    explained = cli.json("explain", "task", "1", "--config", str(config), db=store)
    assert explained["throttle"]["throttled"] is True
    config.write_text(yaml.safe_dump({"throttle": {"limits": {"NQUEUECAP_Production default": 100}}}))
    assert cli.json("generate", "--config", str(config), db=store)["counts"]["jobs"] == 3
    assert cli.json("generate", "--no-throttle", db=store)["counts"]["jobs"] == 0  # nothing released is left


def test_jobs_list_and_show(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps(WORKED_EXAMPLE))
    _pipeline(cli, store)
    assert [j["task_job"] for j in cli.json("jobs", "list", "--task", "1", "--limit", "3", db=store)] == ["1.10", "1.9", "1.8"]
    by_index = cli.json("jobs", "show", "1.4", db=store)
    assert cli.json("jobs", "show", str(by_index["job_id"]), db=store) == by_index
    assert cli("jobs", "show", "1.99", db=store, code=2).stderr.strip() == "jedictl: error: job 1.99 does not exist"
    assert "JOB: must be a job id" in cli("jobs", "show", "x.y", db=store, code=2).stderr
    assert len(cli.json("jobs", "list", "--status", "activated", db=store)) == 10


def test_task_order_is_round_robin_across_users_with_an_express_lane():
    candidates = [Candidate(1, "ann", 500), Candidate(2, "ann", 900), Candidate(3, "ann", 700), Candidate(4, "bob", 100),
                  Candidate(5, "bob", 100, scouting=True), Candidate(6, "cy", 2000)]
    order = order_tasks(candidates, random.Random(1), express_priority=1500, express_ratio=0.0)
    assert sorted(order) == [1, 2, 3, 4, 5, 6]
    regular = [t for t in order if t != 6]
    assert [t for t in regular if t in (1, 2, 3)] == [2, 3, 1]  # by priority inside a user
    assert [t for t in regular if t in (4, 5)] == [5, 4]  # scouting counts one higher
    first_round = set(regular[:2])
    assert first_round in ({2, 5},)  # one task of each user before anyone's second
    always_express = order_tasks(candidates, random.Random(1), express_priority=1500, express_ratio=1.0)
    assert always_express[0] == 6




def test_candidates_that_became_full_leave_the_task_pending_with_that_reason(cli, store, tmp_path, monkeypatch):
    from jedictl.engine.generate import generator
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "skipScout": True}))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store)
    # Candidates pass every filter, but each is at its queued cap in this pass (pick_site finds none).
    with monkeypatch.context() as patch:
        patch.setattr(generator, "pick_site", lambda candidates, state, rng, **_: (None, state))
        report = cli.json("generate", "--seed", "1", db=store)
    assert report["counts"]["jobs"] == 0 and "candidates became full" in report["items"][0]["reason"], report
    status, files_used = run_sql(store, lambda conn: (conn.execute(select(tasks.c.status)).scalar_one(),
                                                      conn.execute(select(datasets.c.n_files_used).where(datasets.c.name == "ds.in")).scalar_one()))
    assert (status, files_used) == ("pending", 0)  # JEDI: no jobs -> pending; nothing is left claimed
    assert run_sql(store, check_all) == []
