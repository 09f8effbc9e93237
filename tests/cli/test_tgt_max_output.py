"""tgtMaxOutputForNG (split rule TN; issue 19 item 8, seed 000 "tgtMaxOutputForNG"), end to end on both
backends: the scouts' outputs reset nGBPerJob so that the largest output of a job reaches the target,
and the jobs made after the avalanche are sized by the new nGBPerJob."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import func, select

from jedictl.store.invariants import check_all
from jedictl.store.schema import job_files, jobs
from tests.helpers import run_sql

NOW = "2030-05-01T08:00:00"
GiB = 1024**3
MiB = 1024**2
GRID = {
    "storage_endpoints": [{"name": "WIDE_DISK", "kind": "disk", "free_gb": 100000, "total_gb": 200000}],
    "sites": [{"name": "WIDE", "cloud": "WORLD", "core_count": 1, "core_power": 10.0, "max_memory": 4000, "max_walltime": 172800,
               "max_scratch_mb": 200_000, "read_endpoints": ["WIDE_DISK"], "write_endpoints": ["WIDE_DISK"]}],
}
DATA = {"datasets": [{"name": "data.big.in", "state": "closed", "replicas": [{"endpoint": "WIDE_DISK"}],
                      "files": [{"lfn": f"big.{i:03d}.root", "size": GiB, "events": 100} for i in range(1, 41)]}]}
# What each scout writes: the hist output 400 MiB, the tree output 100 MiB, the log 1 MiB, per GiB of input.
SIZES = {"user.someone.tn_hist.root": 400 * MiB, "user.someone.tn_tree.root": 100 * MiB, "user.someone.tn.log": MiB}


def task(**params) -> dict:
    return {"taskName": "user.someone.tn", "vo": "atlas", "prodSourceLabel": "user", "taskType": "anal", "userName": "someone",
            "nGBPerJob": 3, "tgtMaxOutputForNG": 2,
            "jobParameters": [
                {"type": "template", "param_type": "input", "dataset": "data.big.in", "value": "-i ${IN}"},
                {"type": "template", "param_type": "output", "dataset": "user.someone.tn_hist.root", "value": "hist.${SN}.root"},
                {"type": "template", "param_type": "output", "dataset": "user.someone.tn_tree.root", "value": "tree.${SN}.root"}],
            "log": {"type": "template", "param_type": "log", "dataset": "user.someone.tn.log", "value": "tn.${SN}.log.tgz"},
            **params}


def _import(cli, store, tmp_path) -> None:
    for kind, document in (("sites", GRID), ("data", DATA)):
        path = tmp_path / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(document))
        cli(kind, "import", str(path), db=store)


def _report_all(cli, store) -> int:
    """Every activated job finished, its outputs SIZES per GiB of input."""
    handed = cli.json("jobs", "dispatch", "--site", "WIDE", "--count", "100", "--now", NOW, db=store)["jobs"]
    lines = [{"job_id": job["job_id"], "status": "finished", "attempt_nr": job["attempt_nr"], "wall_time": 4000, "cpu_time": 3900,
              "max_pss": 900_000, "n_events": 100,
              "outputs": [{"lfn": o["lfn"], "size": SIZES[o["dataset"]] * len(job["inputs"]), "checksum": "ad:00000001"}
                          for o in job["outputs"]]}
             for job in handed]
    cli("jobs", "report", "-", "--now", NOW, db=store, input="".join(json.dumps(line) + "\n" for line in lines))
    return len(lines)


def _inputs_per_job(store, task_id: int, scouts: bool) -> list[int]:
    return run_sql(store, lambda conn: list(conn.execute(
        select(func.count()).select_from(job_files.join(jobs, jobs.c.id == job_files.c.job_id))
        .where(jobs.c.task_id == task_id, jobs.c.is_scout.is_(scouts), job_files.c.type == "input")
        .group_by(job_files.c.job_id).order_by(job_files.c.job_id)).scalars()))


def test_n_gb_per_job_is_reset_after_the_scouts_and_sizes_the_later_jobs(cli, store, tmp_path):
    _import(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task()))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), "--split-rule", db=store)["split_rule"].split(",").count("TN=2") == 1
    assert _report_all(cli, store) > 0
    assert set(_inputs_per_job(store, task_id, scouts=True)) == {1}  # scouts: one file each
    cli("finalize", "--now", NOW, db=store)
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["status"] == "running"
    # The scout that set outDiskCount wrote 500 MiB of outputs per GiB, the largest (hist) 400 MiB: a job
    # whose hist output is 2 GB writes 2.5 GiB of outputs, from 2.5 GiB / 501 kB per MB = 5232 MB of input.
    # nGBPerJob = 2.5 GiB + 5232 MiB - the 1500 MiB default output = 6.1 -> 6 (it was 3).
    assert shown["options"]["n_gb_per_job"] == 6
    rule = cli.json("task", "show", str(task_id), "--split-rule", db=store)["split_rule"].split(",")
    assert "NG=6" in rule and "TN=2" in rule
    # After the avalanche: 6 GB + the 1.5 GB default output + the 300 MB work margin hold five 1 GiB
    # inputs with their 0.49 GiB of output each (with nGBPerJob 3 it was two), so a job's hist
    # output is 5 x 400 MiB, just under the 2 GB target.
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    later = _inputs_per_job(store, task_id, scouts=False)
    assert later and max(later) == 5 and set(later[:-1]) == {5}
    assert run_sql(store, check_all) == []


def test_a_task_without_scouts_resets_it_from_its_first_finished_jobs(cli, store, tmp_path):
    """JEDI measures a task that skipped the scouts on its first finished jobs ("scout data only"), and
    resets nGBPerJob there too."""
    _import(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task(skipScout=True)))["task_id"]
    four_files = {"JEDICTL_GENERATE__N_FILES": "4"}  # this pass takes four files
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store, env=four_files)
    assert _inputs_per_job(store, task_id, scouts=False) == [3, 1]  # no output model yet: three 1 GiB files fit 3 GB
    _report_all(cli, store)
    cli("finalize", "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["options"]["n_gb_per_job"] == 6
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert set(_inputs_per_job(store, task_id, scouts=False)[2:-1]) == {5}
    assert run_sql(store, check_all) == []


def test_the_option_is_accepted_in_both_formats_and_refused_with_files_per_job(cli, store):
    own = {"name": "user.someone.tn2", "label": "user", "command": "run ${IN} ${OUTPUT0}", "inputs": [{"dataset": "data.big.in"}],
           "outputs": [{"dataset": "user.someone.tn2.out", "file_template": "out.${SN}.root"}],
           "split": {"n_gb_per_job": 3}, "scouts": {"tgt_max_output_for_ng": 10}}
    submitted = cli.json("submit", "-", db=store, input=yaml.safe_dump(own))["task_id"]
    assert cli.json("task", "show", str(submitted), "--split-rule", db=store)["split_rule"] == "NG=3,TN=10,US=2"
    panda = cli.json("submit", "-", db=store, input=json.dumps(task(taskName="user.someone.tn3")))["task_id"]
    assert "TN=2" in cli.json("task", "show", str(panda), "--split-rule", db=store)["split_rule"].split(",")
    refused = cli("submit", "-", db=store, input=json.dumps(task(taskName="user.someone.tn4", nFilesPerJob=2)), code=2)
    assert refused.stderr.strip() == "jedictl: error: tgtMaxOutputForNG: cannot be combined with nFilesPerJob (it sets n_gb_per_job)"
