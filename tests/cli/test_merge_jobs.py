"""Merge jobs (jedi-inventory.md §6.12): a mergeOutput task's jobs write unmerged files; once they wait
at a site, merge jobs combine them into the final dataset, site by site, with the merge limits."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, job_files, job_retry_history, jobs
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.cli.test_jobs_report import _dispatch_all, _failed, _finished, _report
from tests.helpers import run_sql

MERGE_TASK = {
    **WORKED_EXAMPLE, "taskName": "merge.example", "skipScout": True, "nFilesPerJob": 1, "mergeOutput": True,
    "nFilesPerMergeJob": 4,
    "mergeSpec": {"transPath": "merge.py", "jobParameters": "merge --in=${TRN_OUTPUT0/L} --out=${OUTPUT0} --logs=${TRN_LOG0/L} --log=${LOG0}"},
}


def _task(cli, store, tmp_path, **params) -> int:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**MERGE_TASK, **params}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store)
    return task_id


def _jobs(conn):
    return [dict(r._mapping) for r in conn.execute(select(jobs).order_by(jobs.c.id))]


def _by_type(conn, kind: str):
    rows = conn.execute(select(files).join(datasets, datasets.c.id == files.c.dataset_id).where(datasets.c.type == kind).order_by(files.c.id))
    return [dict(r._mapping) for r in rows]


def test_pre_merge_jobs_write_unmerged_files_and_merge_jobs_combine_them_per_site(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    assert cli.json("generate", "--seed", "1", db=store)["counts"]["jobs"] == 25
    # Two sites ran the pre-merge jobs (the odd ones moved by hand): merges must not mix them.
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.id % 2 == 1).values(site="CERN-PROD_GRID")))
    pre = _dispatch_all(cli, store)
    assert all(o["lfn"].startswith("panda.um.") for job in pre for o in job["outputs"])
    # The first ten finish: their unmerged files wait at their sites; the last, short group of a site
    # waits for more while input is still running.
    done, running = pre[:10], pre[10:]
    _report(cli, store, *[_finished(job) for job in done])
    merging = run_sql(store, lambda conn: _by_type(conn, "trn_log"))
    assert sum(1 for f in merging if f["status"] == "merging") == len(done)
    report = cli.json("generate", "--seed", "2", db=store)
    merges = [j for j in run_sql(store, _jobs) if j["kind"] == "merge"]
    per_site = Counter(job["site"] for job in done)
    assert report["counts"]["jobs"] == len(merges) == sum(n // 4 for n in per_site.values())  # full groups of nFilesPerMergeJob only
    for merge in merges:
        assert merge["current_priority"] == 5000 and merge["processing_type"] == "pmerge"
        assert merge["transformation"] == "merge.py" and merge["status"] == "activated"
        assert merge["job_parameters"].startswith("merge --in=panda.um.ds.out.") and "--out=ds.out." in merge["job_parameters"]
        assert "--logs=panda.um.ds.log." in merge["job_parameters"] and "--log=ds.log." in merge["job_parameters"]
    assert run_sql(store, check_all) == []

    # Every other job finishes: now the short last merges are made too.
    _report(cli, store, *[_finished(job) for job in running])
    cli("generate", "--seed", "3", db=store)
    state = run_sql(store, lambda conn: (_jobs(conn), _by_type(conn, "trn_log"), _by_type(conn, "trn_output")))
    all_jobs, logs, outputs = state
    merges = [j for j in all_jobs if j["kind"] == "merge"]
    assert all(f["status"] == "running" for f in logs + outputs)
    per_job = run_sql(store, lambda conn: conn.execute(select(job_files.c.job_id, job_files.c.file_id, job_files.c.type)
                                                       .where(job_files.c.job_id.in_([m["id"] for m in merges]))).all())
    inputs = defaultdict(set)
    for job_id, file_id, kind in per_job:
        if kind == "input":
            inputs[job_id].add(file_id)
    # Each merge job takes one log and one output per producer, at most 4 producers, all from one site.
    producers_site = {j["id"]: j["site"] for j in all_jobs if j["kind"] == "normal"}
    boundary = {f["id"]: f["boundary_id"] for f in logs + outputs}
    for merge in merges:
        producers = {boundary[f] for f in inputs[merge["id"]]}
        assert len(inputs[merge["id"]]) == 2 * len(producers) <= 8
        assert {producers_site[p] for p in producers} == {merge["site"]}
    assert sum(len(v) for v in inputs.values()) == 50  # every unmerged file in exactly one merge job
    history = run_sql(store, lambda conn: {(r.old_job_id, r.new_job_id, r.relation_type) for r in conn.execute(select(job_retry_history))})
    assert history == {(boundary[f], m["id"], "merge") for m in merges for f in inputs[m["id"]]}

    # A failed merge job puts its unmerged inputs back to wait; the retry merges them again.
    jobs_out = _dispatch_all(cli, store)
    first, rest = jobs_out[0], jobs_out[1:]
    _report(cli, store, _failed(first, source="trans", code=1, diag="hadd crashed"))
    again = run_sql(store, lambda conn: [f for f in _by_type(conn, "trn_log") if f["status"] == "merging"])
    assert again and all(f["attempt_nr"] == 1 for f in again)
    _report(cli, store, *[_finished(job) for job in rest])
    cli("generate", "--seed", "4", db=store)
    _report(cli, store, *[_finished(job) for job in _dispatch_all(cli, store)])
    logs, outputs, finals = run_sql(store, lambda conn: (_by_type(conn, "trn_log"), _by_type(conn, "trn_output"), _by_type(conn, "output")))
    assert {f["status"] for f in logs + outputs} == {"finished"}
    merged = [f for f in finals if f["status"] == "finished"]
    assert merged and all(f["lfn"].startswith("ds.out.") for f in merged)
    counters = run_sql(store, lambda conn: {r.type: r for r in conn.execute(select(datasets).where(datasets.c.task_id == task_id))})
    log_master = counters["trn_log"]
    assert log_master.n_files_to_be_used == log_master.n_files_finished == 25
    assert run_sql(store, check_all) == []


def test_a_throttled_queue_still_gets_merge_jobs(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    pre = _dispatch_all(cli, store)
    _report(cli, store, *[_finished(job) for job in pre[:10]])
    # A running cap below what runs throttles the share: only merge work may pass (merge-only mode).
    throttled = {"JEDICTL_THROTTLE__LIMITS": json.dumps({"NRUNNINGCAP_Production default": 1})}
    assert "running_cap" in json.dumps(cli.json("explain", "task", "1", db=store, env=throttled))
    report = cli.json("generate", "--seed", "2", db=store, env=throttled)
    merges = [j for j in run_sql(store, _jobs) if j["kind"] == "merge"]
    assert merges and report["counts"]["jobs"] == len(merges) == 2  # ten unmerged files: two full merges of four


def test_a_failed_producer_does_not_let_the_task_end_before_every_unmerged_file_is_merged(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    pre = _dispatch_all(cli, store)
    # Five producers fail once (their unmerged outputs were never released) and are retried.
    _report(cli, store, *[_failed(job, source="trans", code=1, diag="segfault") for job in pre[:5]],
            *[_finished(job) for job in pre[5:]])
    _run_until_quiet(cli, store, 2)
    waiting = run_sql(store, lambda conn: [f for f in _by_type(conn, "trn_log") if f["status"] == "merging"])
    assert waiting == []
    log_master = run_sql(store, lambda conn: conn.execute(select(datasets).where(datasets.c.task_id == task_id,
                                                                                 datasets.c.type == "trn_log")).one())
    assert (log_master.n_files_to_be_used, log_master.n_files_finished, log_master.n_files_failed) == (25, 25, 0)
    cli("finalize", db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    assert run_sql(store, check_all) == []


def _run_until_quiet(cli, store, first_seed: int) -> None:
    """generate, dispatch and finish every job, finalize; until nothing is left to dispatch."""
    for seed in range(first_seed, first_seed + 12):
        cli("generate", "--seed", str(seed), db=store)
        dispatched = _dispatch_all(cli, store)
        if not dispatched:
            return
        _report(cli, store, *[_finished(job) for job in dispatched])
        cli("finalize", db=store)


def test_a_merge_task_run_again_by_incexec_does_not_end_before_its_new_merges(cli, store, tmp_path):
    """Issue 14, found by the chaos test: a mergeOutput task that ended (or was killed) and was sent
    back by incexec kept its unmerged datasets closed (`done`, `failed`), so "phase complete" skipped
    the merge master and the task ended while its new merges waited or ran -- their outputs never
    counted, their inputs left `running`, and a report landing during the final step written over."""
    task_id = _task(cli, store, tmp_path)
    _run_until_quiet(cli, store, 1)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    new_files = tmp_path / "new.yaml"
    new_files.write_text(json.dumps([{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(26, 34)]))
    for args in (("open", "ds.in"), ("add-files", "ds.in", str(new_files)), ("close", "ds.in")):
        cli("data", *args, db=store)
    changes = tmp_path / "changes.yaml"
    changes.write_text("nFilesPerJob: 1\n")
    cli("task", "incexec", str(task_id), str(changes), db=store)
    unmerged = run_sql(store, lambda conn: conn.execute(select(datasets.c.type, datasets.c.status).where(
        datasets.c.task_id == task_id, datasets.c.type.in_(["trn_output", "trn_log"]))).all())
    assert {status for _, status in unmerged} == {"defined"}  # open again, as they were made

    cli("feed", db=store)
    cli("generate", "--seed", "20", db=store)
    producers = _dispatch_all(cli, store)
    assert len(producers) == 8 and all(j["outputs"][0]["lfn"].startswith("panda.um.") for j in producers)
    _report(cli, store, *[_finished(job) for job in producers])
    cli("finalize", db=store)  # eight unmerged files wait for their merges: the task goes on
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "running"
    assert run_sql(store, check_all) == []

    _run_until_quiet(cli, store, 21)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    log_master = run_sql(store, lambda conn: conn.execute(select(datasets).where(datasets.c.task_id == task_id,
                                                                                 datasets.c.type == "trn_log")).one())
    assert log_master.n_files_to_be_used == log_master.n_files_finished == 33
    assert run_sql(store, check_all) == []
