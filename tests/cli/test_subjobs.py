"""Ganga's subjob operations on a task's jobs (docs/subjobs.md), through the CLI on both backends:
`jobs resubmit` (one job, --task, --subjob), the keep_going hint of bulk kill and resubmit, the
emulated-bulk rule (jobs not resubmitted stay as they were; when none is, the task keeps its status),
Ganga's subjob ids, and the `check` invariant that a resubmission gave its input back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sqlalchemy import insert, select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import files, job_resubmissions, job_retry_history, jobs, retry_rules, tasks
from tests.cli.test_jobs_report import TASK, _dispatch_all, _failed, _finished, _report
from tests.cli.test_generate import _grid
from tests.helpers import refused, run_sql, store_dump

#: One attempt per file: a failed job's input is failed for good, the automatic retry gives up.
ONCE = {**TASK, "taskName": "subjobs.tests", "maxAttempt": 1}


def _task(cli, store, tmp_path, **params) -> int:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**ONCE, **params}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    return task_id


def _inputs(store, job_id: int) -> list[dict]:
    """The job's input records as they are now."""
    def read(conn):
        query = select(files).where(files.c.type == "input", files.c.id.in_(
            select(files.c.id).where(files.c.job_id == job_id)))
        return [dict(row._mapping) for row in conn.execute(query.order_by(files.c.id))]
    return run_sql(store, read)


def _task_status(store, task_id: int) -> str:
    return run_sql(store, lambda conn: conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar_one())


def _resubmit(cli, store, *args: str, code: int = 0) -> dict:
    return json.loads(cli("jobs", "resubmit", *args, "-o", "json", db=store, code=code).stdout)


def _consistent(store) -> None:
    assert run_sql(store, check_all) == []


def test_resubmit_gives_a_failed_jobs_input_one_more_attempt_once(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    jobs_out = _dispatch_all(cli, store)
    failed, done = jobs_out[0], jobs_out[1]
    _report(cli, store, _failed(failed), _finished(done))
    assert {f["status"] for f in _inputs(store, failed["job_id"])} == {"failed"}  # maxAttempt 1: no automatic retry

    report = _resubmit(cli, store, failed["task_job"])
    (item,) = report["items"]
    assert (item["outcome"], item["job_id"], item["status"], item["task_status"]) == ("resubmitted", failed["job_id"], "failed", "running")
    assert report["counts"]["resubmitted"] == 1 and report["errors"] == 0
    inputs = _inputs(store, failed["job_id"])
    assert [(f["status"], f["attempt_nr"], f["max_attempt"]) for f in inputs] == [("ready", 1, 2)] * 2
    _consistent(store)

    assert cli.json("jobs", "show", failed["task_job"], db=store)["resubmitted_at"] is not None
    assert cli.json("jobs", "show", done["task_job"], db=store)["resubmitted_at"] is None

    # The same job again: refused (it was resubmitted once), and nothing is written.
    before = store_dump(store)
    again = _resubmit(cli, store, str(failed["job_id"]), code=1)
    assert again["items"][0]["outcome"] == "refused" and "already resubmitted" in again["items"][0]["reason"]
    assert store_dump(store) == before

    # The next generate makes the new job from the input given back, linked to the old job as every retry is.
    cli("generate", "--seed", "1", db=store)
    (new_job,) = set(run_sql(store, lambda conn: conn.execute(select(files.c.job_id).where(
        files.c.id.in_([f["id"] for f in inputs]))).scalars().all()))
    assert new_job != failed["job_id"]
    history = run_sql(store, lambda conn: conn.execute(select(job_retry_history.c.old_job_id, job_retry_history.c.new_job_id)).all())
    assert (failed["job_id"], new_job) in history
    assert {f["status"] for f in run_sql(store, lambda conn: [dict(r._mapping) for r in conn.execute(
        select(files).where(files.c.id.in_([f["id"] for f in inputs]))).all()])} == {"running"}
    _consistent(store)
    assert task_id


def test_resubmit_refuses_what_it_cannot_resubmit_and_writes_nothing(cli, store, tmp_path):
    _task(cli, store, tmp_path, maxAttempt=3)
    first, second, third = _dispatch_all(cli, store)[:3]
    _report(cli, store, _finished(first), _failed(second))
    before = store_dump(store)
    reasons = {}
    for job in (first, second, third):
        report = _resubmit(cli, store, job["task_job"], code=1)
        assert report["items"][0]["outcome"] == "refused" and report["errors"] == 1
        reasons[job["task_job"]] = report["items"][0]["reason"]
    assert "finished: only a failed or killed job is resubmitted" in reasons[first["task_job"]]
    # attempts remain: the automatic retry has the input already
    assert "back in the pool with attempts left" in reasons[second["task_job"]]
    assert "is sent: only a job that ended failed, cancelled or closed" in reasons[third["task_job"]]
    assert "unknown job 999999" in _resubmit(cli, store, "999999", code=1)["items"][0]["reason"]
    assert store_dump(store) == before

    # Bad references: one error line, exit 2, nothing written.
    assert "Ganga's subjob 0 of task 1 is job 1.1 (resubmit, kill and copy also take Ganga's ids as --task 1 --subjob 0)" in refused(
        cli, store, "jobs", "resubmit", "1.0")
    assert "--subjob" in refused(cli, store, "jobs", "resubmit", "--subjob", "0")
    assert "does not exist" in refused(cli, store, "jobs", "resubmit", "--task", "1", "--subjob", "500")
    assert "does not exist" in refused(cli, store, "jobs", "resubmit", "--task", "77")
    assert "name the jobs" in refused(cli, store, "jobs", "resubmit")


def test_a_no_retry_rule_keeps_a_job_from_being_resubmitted(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    rules = tmp_path / "rules.yaml"
    rules.write_text("- {error_source: pilot, error_code: 1099, action: no_retry}\n")
    cli("retry-rules", "import", str(rules), db=store)
    _report(cli, store, _failed(job, code=1099))
    before = store_dump(store)
    reason = _resubmit(cli, store, job["task_job"], code=1)["items"][0]["reason"]
    assert "says no_retry for its error" in reason and "jedictl task retry" in reason
    assert store_dump(store) == before
    # A passive rule only reports: the job is resubmitted.
    run_sql(store, lambda conn: conn.execute(update(retry_rules).values(active=False)))
    assert _resubmit(cli, store, job["task_job"])["items"][0]["outcome"] == "resubmitted"
    _consistent(store)


def _ended_task(cli, store, tmp_path) -> tuple[int, list[dict]]:
    """A task all of whose jobs failed for good, ended by finalize: failed."""
    task_id = _task(cli, store, tmp_path)
    dispatched = _dispatch_all(cli, store)
    _report(cli, store, *[_failed(job) for job in dispatched])
    cli("finalize", db=store)
    assert _task_status(store, task_id) == "failed"
    return task_id, dispatched


def test_bulk_resubmission_reopens_an_ended_task_or_leaves_it_as_it_was(cli, store, tmp_path):
    task_id, dispatched = _ended_task(cli, store, tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text("- {error_source: pilot, error_code: 1099, action: no_retry}\n")
    cli("retry-rules", "import", str(rules), db=store)

    # No job can be resubmitted: every one stays as it was and the task keeps its status (Ganga's rollback).
    before = store_dump(store)
    report = _resubmit(cli, store, "--task", str(task_id), code=1)
    assert report["counts"]["refused"] == len(dispatched) and report["counts"]["resubmitted"] == 0
    assert store_dump(store) == before and _task_status(store, task_id) == "failed"

    run_sql(store, lambda conn: conn.execute(retry_rules.delete()))
    report = _resubmit(cli, store, "--task", str(task_id))
    assert report["counts"]["resubmitted"] == len(dispatched)
    assert [item["task_job"] for item in report["items"]] == [f"{task_id}.{n}" for n in range(1, len(dispatched) + 1)]
    assert report["items"][0]["task_status"] == "ready" and _task_status(store, task_id) == "ready"
    _consistent(store)

    # The task runs again to its end: the new jobs finish, and so does the task.
    cli("generate", "--seed", "1", db=store)
    _report(cli, store, *[_finished(job) for job in _dispatch_all(cli, store)])
    cli("finalize", db=store)
    assert _task_status(store, task_id) == "done"
    assert _resubmit(cli, store, "--task", str(task_id))["items"] == []  # nothing left to resubmit
    _consistent(store)


def test_no_keep_going_stops_at_the_first_failure_and_says_which(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    a, b, c, d = _dispatch_all(cli, store)[:4]
    _report(cli, store, _failed(a), _finished(b), _failed(c), _failed(d))

    report = _resubmit(cli, store, a["task_job"], b["task_job"], c["task_job"], "--no-keep-going", code=1)
    assert [(i["job_id"], i["outcome"]) for i in report["items"]] == [
        (a["job_id"], "resubmitted"), (b["job_id"], "refused"), (c["job_id"], "not_attempted")]
    assert f"job {b['task_job']} failed first" in report["items"][2]["reason"]
    assert {f["status"] for f in _inputs(store, c["job_id"])} == {"failed"}  # left alone

    # keep going (the default): every job is tried, the failures are listed, exit 1.
    report = _resubmit(cli, store, b["task_job"], c["task_job"], d["task_job"], code=1)
    assert [i["outcome"] for i in report["items"]] == ["refused", "resubmitted", "resubmitted"]
    assert report["errors"] == 1
    _consistent(store)


def test_kill_keep_going_and_subjob_ids(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    listed = sorted(cli.json("jobs", "list", "--task", str(task_id), db=store), key=lambda j: j["job_id"])
    assert [j["task_job"] for j in listed][:3] == [f"{task_id}.1", f"{task_id}.2", f"{task_id}.3"]
    first = listed[0]
    cli("jobs", "kill", first["task_job"], db=store)

    # Without keep_going the kill stops at the job refused (already ended) and leaves the rest alone.
    report = json.loads(cli("jobs", "kill", first["task_job"], listed[1]["task_job"], "--no-keep-going", "-o", "json", db=store,
                            code=1).stdout)
    assert [i["outcome"] for i in report["items"]] == ["refused", "not_attempted"]
    assert cli.json("jobs", "show", listed[1]["task_job"], db=store)["status"] == "activated"

    # Ganga's subjob 1 of the task is its job TASK.2; keep going kills it past the refusal.
    report = json.loads(cli("jobs", "kill", "--task", str(task_id), "--subjob", "0", "--subjob", "1", "-o", "json", db=store,
                            code=1).stdout)
    assert [(i["job_id"], i["outcome"]) for i in report["items"]] == [(first["job_id"], "refused"), (listed[1]["job_id"], "killed")]
    assert cli.json("jobs", "show", listed[2]["task_job"], db=store)["status"] == "activated"  # only the subjobs named

    # A killed job used its input's one attempt (maxAttempt 1): it is resubmitted as Ganga resubmits a killed subjob.
    (item,) = _resubmit(cli, store, "--task", str(task_id), "--subjob", "1")["items"]
    assert (item["task_job"], item["status"], item["outcome"]) == (f"{task_id}.2", "cancelled", "resubmitted")
    _consistent(store)


def test_check_catches_a_resubmission_that_did_not_give_the_input_back(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    failed, done = _dispatch_all(cli, store)[:2]
    _report(cli, store, _failed(failed), _finished(done))
    _consistent(store)

    def record(conn, job, status):
        conn.execute(insert(job_resubmissions).values(job_id=job["job_id"], task_id=1, job_status=status, task_status="running",
                                                      n_files=2, resubmitted_by="t", resubmitted_at=conn.execute(
                                                          select(jobs.c.created_at).where(jobs.c.id == job["job_id"])).scalar_one()))
    # A broken guard: the job marked resubmitted without its input given back, and a finished job resubmitted.
    run_sql(store, lambda conn: (record(conn, failed, "failed"), record(conn, done, "finished")))
    problems = run_sql(store, check_all)
    assert any(f"job {failed['job_id']} (task 1) was resubmitted but 2 of its input records" in p for p in problems)
    assert any(f"job {done['job_id']} (task 1) was resubmitted but is finished" in p for p in problems)
    shown = cli("check", "-o", "json", db=store, code=1).stdout
    assert "resubmitted_jobs_gave_their_input_back" in shown


def test_two_racing_resubmissions_resubmit_a_job_once(cli, store, tmp_path):
    """Real processes: both commands judge the job resubmittable, one wins the job's row, the other is told."""
    _task(cli, store, tmp_path)
    failed = _dispatch_all(cli, store)[0]
    _report(cli, store, _failed(failed))
    env = {**os.environ, "JEDICTL_DB": store}
    procs = [subprocess.Popen([sys.executable, "-m", "jedictl", "jobs", "resubmit", failed["task_job"], "-o", "json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        outcomes.append((proc.returncode, json.loads(out)["items"][0]["outcome"]))
    assert sorted(outcomes) == [(0, "resubmitted"), (1, "refused")]
    assert run_sql(store, lambda conn: conn.execute(select(job_resubmissions.c.job_id)).scalars().all()) == [failed["job_id"]]
    inputs = _inputs(store, failed["job_id"])
    assert [(f["status"], f["max_attempt"]) for f in inputs] == [("ready", 2)] * 2  # one attempt more, not two
    _consistent(store)


def test_copy_makes_a_new_task_of_one_jobs_input(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path, maxAttempt=3)
    job = cli.json("jobs", "show", f"{task_id}.3", db=store)
    lfns = sorted(f["lfn"] for f in job["files"] if f["type"] == "input")
    before = store_dump(store)
    text = cli("jobs", "copy", "--task", str(task_id), "--subjob", "2", db=store).stdout  # Ganga's subjob 2 = 12.3
    assert store_dump(store) == before  # a copy is new: nothing is submitted
    document = json.loads(text)
    assert document["taskName"] == f"{ONCE['taskName']}.copy{task_id}_3"
    master = next(item for item in document["jobParameters"] if item.get("param_type") == "input")
    assert master["files"] == lfns
    assert {item["dataset"] for item in document["jobParameters"] if item.get("param_type") == "output"} == {f"ds.out.copy{task_id}_3"}
    assert document["log"]["dataset"] == f"ds.log.copy{task_id}_3"
    import yaml
    assert yaml.safe_load(cli("jobs", "copy", f"{task_id}.3", "-o", "yaml", db=store).stdout) == document

    # Submitted as it is, it runs the job's files and nothing else.
    copy_id = cli.json("submit", "-", db=store, input=text)["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    made = cli.json("jobs", "list", "--task", str(copy_id), db=store)
    taken = sorted(f["lfn"] for j in made for f in cli.json("jobs", "show", str(j["job_id"]), db=store)["files"] if f["type"] == "input")
    assert taken == lfns
    _consistent(store)

    assert "name the job once" in refused(cli, store, "jobs", "copy", f"{task_id}.3", "--task", str(task_id))
    assert "name the job to copy" in refused(cli, store, "jobs", "copy", "--task", str(task_id))
    assert "does not exist" in refused(cli, store, "jobs", "copy", "999999")




def test_a_resubmission_that_loses_the_race_in_a_batch_is_told_and_the_others_go_through(cli, store, tmp_path, monkeypatch):
    """The guard under the judgement: a batch judged on rows read before another command committed (the
    first job looked failed and not yet resubmitted) meets that job's row at its INSERT; the batch is
    rolled back and each job is tried on its own -- the one resubmitted meanwhile is refused, the other
    goes through, and no input is given back twice."""
    from datetime import datetime

    from jedictl.config import load_settings
    from jedictl.engine.commando import subjobs
    from jedictl.store import subjobs as subjob_store
    from jedictl.store.database import open_store

    _task(cli, store, tmp_path)
    first, second = _dispatch_all(cli, store)[:2]
    _report(cli, store, _failed(first), _failed(second))
    opened = open_store(store)
    try:
        with opened.read() as conn:  # what the slower command read before the faster one committed
            stale_jobs = subjob_store.read_jobs(conn, [first["job_id"]])
            stale_inputs = subjob_store.inputs_of_jobs(conn, [first["job_id"]])
        assert _resubmit(cli, store, first["task_job"])["items"][0]["outcome"] == "resubmitted"
        live_jobs, live_inputs = subjob_store.read_jobs, subjob_store.inputs_of_jobs
        monkeypatch.setattr(subjob_store, "read_jobs", lambda conn, ids: {**live_jobs(conn, ids), **{
            k: v for k, v in stale_jobs.items() if k in ids}})
        monkeypatch.setattr(subjob_store, "inputs_of_jobs", lambda conn, ids: {**live_inputs(conn, ids), **{
            k: v for k, v in stale_inputs.items() if k in ids}})
        results = subjobs.resubmit_jobs(opened, [first["job_id"], second["job_id"]], load_settings().settings, datetime(2030, 1, 1),
                                        by="t")
    finally:
        opened.close()
    assert [(r.job_id, r.outcome) for r in results] == [(first["job_id"], "refused"), (second["job_id"], "resubmitted")]
    assert results[0].reason == f"job {first['task_job']} was already resubmitted (just now)"
    assert [(f["status"], f["max_attempt"]) for f in _inputs(store, first["job_id"])] == [("ready", 2)] * 2  # given back once
    _consistent(store)


def test_generate_keeps_unsubmitted_input_new_and_rolls_the_task_back_when_no_job_is_made(cli, store, tmp_path):
    """Ganga's emulated-bulk rule in the Job Generator (docs/subjobs.md): input made into no job stays
    `ready`, and a task none of whose jobs could be made does not move on -- it waits in `pending` with
    its previous status recorded, and `watch` returns it there; then generation goes ahead."""
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(ONCE))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store)
    now = "2026-11-21T12:00:00"
    for site in ("CERN-PROD_GRID", "BNL_PROD"):  # the single-core sites go down: no site can run its jobs
        cli("sites", "set-status", site, "offline", db=store)
    before = run_sql(store, lambda conn: conn.execute(select(tasks.c.status)).scalar_one())
    assert cli.json("generate", "--seed", "1", "--now", now, db=store)["counts"]["jobs"] == 0
    row = run_sql(store, lambda conn: conn.execute(select(tasks.c.status, tasks.c.old_status).where(tasks.c.id == task_id)).one())
    assert tuple(row) == ("pending", before)
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.id)).all()) == []
    assert set(run_sql(store, lambda conn: conn.execute(select(files.c.status).where(files.c.type == "input")).scalars().all())) == {"ready"}
    _consistent(store)

    for site in ("CERN-PROD_GRID", "BNL_PROD"):
        cli("sites", "set-status", site, "online", db=store)
    cli("watch", "--now", "2026-11-21T13:01:00", db=store)
    assert _task_status(store, task_id) == before
    assert cli.json("generate", "--seed", "1", "--now", "2026-11-21T13:02:00", db=store)["counts"]["jobs"] > 0
    assert _task_status(store, task_id) == "running"
    _consistent(store)
