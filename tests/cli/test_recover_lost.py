"""`jedictl recover-lost` (docs/recovery.md; seed 000 "Lost file recovery" steps 1-4): a task runs with the
simulator, files of its output are declared lost in the catalog, recover-lost makes a recovery task that
re-runs the jobs that made them -- chained to a recovery of their inputs when those are lost too -- and
once it has run the dataset holds a replacement for every lost file and `check` is consistent."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, catalog_files, files, recovered_files, tasks
from tests.cli.test_generate import DS_IN
from tests.conftest import ROOT
from tests.helpers import row_counts, run_sql

NOW = "2026-11-21T12:00:00"
TASK_A = """
name: reco.a
label: managed
processing_type: reco
transformation: Reco_tf.py
command: --in=${IN} --out=${OUTPUT0}
inputs: [{dataset: ds.in}]
outputs: [{dataset: ds.a, file_template: "A.${SN}.root"}]
log: {dataset: ds.a.log, file_template: "log.a.${SN}.tgz"}
split: {n_files_per_job: 2}
scouts: {skip_scout: true}
"""
TASK_B = """
name: deriv.b
label: managed
processing_type: deriv
transformation: Deriv_tf.py
command: --in=${IN} --out=${OUTPUT0}
inputs: [{dataset: ds.a}]
outputs: [{dataset: ds.b, file_template: "B.${SN}.root"}]
log: {dataset: ds.b.log, file_template: "log.b.${SN}.tgz"}
split: {n_files_per_job: 3}
scouts: {skip_scout: true}
"""


def _grid(cli, store, tmp_path) -> None:
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(DS_IN))
    cli("data", "import", str(path), db=store)


def _run_to_end(cli, store, rounds: int = 12) -> None:
    """Every agent and the simulator, round after round, until no task is left to act on."""
    for round_nr in range(rounds):
        cli("run", "--once", "--seed", str(round_nr), "--now", NOW, db=store)
        cli("simulate", "--seed", str(round_nr), "--failure-rate", "0", "--now", NOW, db=store)
        statuses = run_sql(store, lambda conn: set(conn.execute(select(tasks.c.status)).scalars()))
        if statuses <= {"done", "finished", "failed", "broken", "aborted"}:
            cli("run", "--once", "--now", NOW, db=store)
            return
    raise AssertionError(f"tasks not ended after {rounds} rounds: {statuses}")


def _task(cli, store, spec: str) -> int:
    task_id = cli.json("submit", "-", db=store, input=spec)["task_id"]
    _run_to_end(cli, store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    return task_id


def _catalog(store, dataset: str) -> dict[str, str]:
    """lfn -> availability of a catalog dataset's files."""
    return dict(run_sql(store, lambda conn: conn.execute(
        select(catalog_files.c.lfn, catalog_files.c.availability).join(catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id)
        .where(catalog_datasets.c.name == dataset)).all()))


def _made_by(store, dataset: str) -> dict[str, int]:
    """lfn -> producing job of the finished output records of the dataset."""
    from jedictl.store.schema import datasets

    return dict(run_sql(store, lambda conn: conn.execute(
        select(files.c.lfn, files.c.out_job_id).join(datasets, datasets.c.id == files.c.dataset_id)
        .where(datasets.c.name == dataset, files.c.status == "finished")).all()))


def _inputs_of_job(store, job_id: int) -> list[str]:
    from jedictl.store.schema import job_files

    return sorted(run_sql(store, lambda conn: conn.execute(select(job_files.c.lfn).where(
        job_files.c.job_id == job_id, job_files.c.type == "input")).scalars().all()))


def _inputs_of_jobs(store, task_id: int, status: str = "finished") -> list[list[str]]:
    from jedictl.store.schema import jobs

    ids = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.task_id == task_id, jobs.c.status == status)
                                                   .order_by(jobs.c.id)).scalars().all())
    return [_inputs_of_job(store, job_id) for job_id in ids]


def test_a_lost_file_is_made_again_by_a_recovery_task_that_reruns_its_job(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_a = _task(cli, store, TASK_A)
    before = _catalog(store, "ds.a")
    assert len(before) == 13 and set(before.values()) == {"available"}
    lost = "A.000003.root"
    marked = cli.json("data", "mark-lost", "ds.a", lost, db=store)
    assert marked == {"dataset": "ds.a", "files_marked_lost": 1, "already_lost": 0}
    assert _catalog(store, "ds.a")[lost] == "lost"
    job = _made_by(store, "ds.a")[lost]

    planned = cli.json("recover-lost", "ds.a", "--dry-run", db=store)
    counts = row_counts(store)
    assert planned["dry_run"] is True and planned["lost_files"] == [lost]
    [unit] = planned["recoveries"]
    assert unit["task_id"] is None and unit["original_task_id"] == task_a and unit["jobs"] == [job] and unit["inputs"] == 2
    assert unit["status"] == "ready" and unit["files"] == [{"dataset": "ds.a", "lfn": lost, "job_id": job}]
    assert row_counts(store) == counts  # a dry run writes nothing

    made = cli.json("recover-lost", "ds.a", "--files", lost, db=store)
    [unit] = made["recoveries"]
    recovery = unit["task_id"]
    assert recovery and made["dry_run"] is False
    shown = cli.json("task", "show", str(recovery), db=store)
    assert shown["status"] == "ready" and shown["recovery"]["recovery_of"] == task_a
    assert shown["recovery"]["recovered_files"] == [{"dataset": "ds.a", "lfn": lost, "job_id": job, "replacement": None}]
    assert cli.json("task", "show", str(task_a), db=store)["recovery"]["recovered_by"] == [{"task_id": recovery, "status": "ready", "dataset": "ds.a"}]
    assert run_sql(store, check_all) == []

    # Running it again makes no second recovery task: the file is taken care of.
    again = cli.json("recover-lost", "ds.a", db=store)
    assert again["recoveries"] == [] and again["already_recovering"] == [{"lfn": lost, "task_id": recovery, "status": "ready", "replacement": None}]

    _run_to_end(cli, store)
    shown = cli.json("task", "show", str(recovery), db=store)
    assert shown["status"] == "done"
    [entry] = shown["recovery"]["recovered_files"]
    replacement = entry["replacement"]
    after = _catalog(store, "ds.a")
    assert replacement and replacement not in before and after[replacement] == "available"  # a new file in the same dataset
    assert after[lost] == "lost" and len(after) == 14
    # the recovery's one job read exactly the inputs of the job it re-ran
    assert _inputs_of_jobs(store, recovery) == [_inputs_of_job(store, job)]
    assert run_sql(store, check_all) == []
    third = cli.json("recover-lost", "ds.a", db=store)
    assert third["recoveries"] == [] and third["already_recovering"][0]["replacement"] == replacement
