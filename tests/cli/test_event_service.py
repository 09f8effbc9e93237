"""Event service (issue 20, item 1; seed 000 "Event server", "Transition of event status", "Final status of
Event Service jobs"): ranges per input record, handed out by `jobs dispatch`, reported in bulk by `jobs
events report`, the ES merge job, and the final statuses of jobs and records -- `partial` included."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, events, files, jobs
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.cli.test_jobs_report import _dispatch_all, _failed, _finished, _report
from tests.helpers import run_sql

ES_TASK = {**WORKED_EXAMPLE, "taskName": "es.example", "skipScout": True, "nFilesPerJob": 1, "nEventsPerWorker": 30, "maxAttemptES": 2}


def _task(cli, store, tmp_path, **params) -> int:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**ES_TASK, **params}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store)
    return task_id


def _events(store, **where):
    def read(conn):
        query = select(events).order_by(events.c.id)
        for name, value in where.items():
            query = query.where(events.c[name] == value)
        return [dict(r._mapping) for r in conn.execute(query)]
    return run_sql(store, read)


def _job(store, job_id):
    return run_sql(store, lambda conn: dict(conn.execute(select(jobs).where(jobs.c.id == job_id)).one()._mapping))


def _record(store, lfn):
    return run_sql(store, lambda conn: dict(conn.execute(select(files).join(datasets, datasets.c.id == files.c.dataset_id)
                                                         .where(files.c.lfn == lfn, datasets.c.type == "input")).one()._mapping))


def _events_report(cli, store, *lines, code=0):
    text = "".join(json.dumps(line) + "\n" for line in lines)
    return json.loads(cli("jobs", "events", "report", "-", "-o", "json", db=store, input=text, code=code).stdout)


def _done(job, rng=None, fail=()):
    return [{"event_id": r["event_id"], "job_id": job["job_id"], "status": "failed" if r["event_id"] in fail else "finished",
             "attempt_nr": job["attempt_nr"], **({} if r["event_id"] in fail else {"output_lfn": f"{r['lfn']}.{r['start_event']}.es",
                                                                                    "output_size": 10})}
            for r in job["event_ranges"]]


def test_an_event_service_task_makes_ranges_per_record_and_jobs_of_one_file(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    report = cli.json("generate", "--seed", "1", db=store)
    assert report["counts"]["jobs"] == 25
    ranges = _events(store, task_id=task_id)
    # 100 events per file, 30 per range: 0-29, 30-59, 60-89, 90-99.
    assert len(ranges) == 100
    first = [(r["start_event"], r["end_event"]) for r in ranges if r["file_id"] == ranges[0]["file_id"]]
    assert first == [(0, 29), (30, 59), (60, 89), (90, 99)]
    assert {r["status"] for r in ranges} == {"ready"} and {r["max_attempt"] for r in ranges} == {2}
    all_jobs = run_sql(store, lambda conn: conn.execute(select(jobs.c.kind)).scalars().all())
    assert set(all_jobs) == {"es"}
    assert run_sql(store, check_all) == []


def test_dispatch_hands_out_ranges_and_a_full_run_merges_and_finishes(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    payloads = _dispatch_all(cli, store)
    assert all(p["event_service"] and len(p["event_ranges"]) == 4 for p in payloads)
    assert {r["status"] for r in _events(store)} == {"sent"}
    job = payloads[0]
    # Range reports: running, then finished with the pre-merged files; a repeat is a duplicate.
    running = [{"event_id": r["event_id"], "job_id": job["job_id"], "status": "running"} for r in job["event_ranges"]]
    assert _events_report(cli, store, *running)["counts"]["applied"] == 4
    result = _events_report(cli, store, *_done(job), *_done(job)[:1])
    assert result["counts"] == {"applied": 4, "duplicate": 1, "refused": 0}
    assert {r["status"] for r in _events(store, job_id=job["job_id"])} == {"finished"}
    # The job ends: ranges done, the job merging, an ES merge job activated at its site.
    out = _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})
    assert out["items"][0]["status"] == "merging"
    assert {r["status"] for r in _events(store, job_id=job["job_id"])} == {"done"}
    es_job = _job(store, job["job_id"])
    assert (es_job["status"], es_job["sub_status"]) == ("merging", "es_merge")
    assert run_sql(store, check_all) == []
    merges = cli.json("jobs", "dispatch", "--site", job["site"], "--count", "100", db=store)["jobs"]
    merge = next(m for m in merges if m["kind"] == "esmerge")
    assert merge["inputs"][0]["lfn"] == job["inputs"][0]["lfn"]
    assert [o["lfn"] for o in merge["outputs"]] == [o["lfn"] for o in job["outputs"]]
    assert [r["output_lfn"] for r in merge["event_ranges"]] == [f"{r['lfn']}.{r['start_event']}.es" for r in job["event_ranges"]]
    _report(cli, store, _finished(merge))
    assert _job(store, job["job_id"])["status"] == "finished"
    assert {r["status"] for r in _events(store, file_id=_record(store, job["inputs"][0]["lfn"])["id"])} == {"merged"}
    assert _record(store, job["inputs"][0]["lfn"])["status"] == "finished"
    assert run_sql(store, check_all) == []


def test_simulated_task_runs_to_the_end(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    for round_ in range(12):
        for agent in (("generate", "--seed", str(round_)), ("simulate", "--seed", str(round_), "--failure-rate", "0.1"), ("finalize",)):
            cli(*agent, db=store)
        assert run_sql(store, check_all) == []
        status = cli.json("task", "show", str(task_id), db=store)["status"]
        if status in ("done", "finished", "failed"):
            break
    assert status in ("done", "finished")
    assert {r["status"] for r in _events(store, task_id=task_id)} <= {"merged", "fatal"}
