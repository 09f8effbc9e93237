"""Event service (issue 20, item 1; seed 000 "Event server", "Transition of event status", "Final status of
Event Service jobs"): ranges per input record, handed out by `jobs dispatch`, reported in bulk by `jobs
events report`, the ES merge job, and the final statuses of jobs and records -- `partial` included."""

from __future__ import annotations

import json

from sqlalchemy import func, select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, events, files, jobs, sites
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


def _first_job(cli, store):
    payloads = _dispatch_all(cli, store)
    return payloads[0], payloads


def _merge_of(cli, store, site):
    return next(m for m in cli.json("jobs", "dispatch", "--site", site, "--count", "100", db=store)["jobs"] if m["kind"] == "esmerge")


def test_ranges_left_to_do_are_retried_by_the_next_job_and_merged_with_the_done_ones(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    job, _ = _first_job(cli, store)
    lfn = job["inputs"][0]["lfn"]
    ids = [r["event_id"] for r in job["event_ranges"]]
    # Two ranges finished, one failed (an attempt left), one never reported: the job ends closed es_retry.
    lines = _done(job, fail={ids[2]})[:3]
    assert _events_report(cli, store, *lines)["counts"]["applied"] == 3
    out = _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})
    assert out["items"][0]["status"] == "closed"
    assert _job(store, job["job_id"])["sub_status"] == "es_retry"
    record = _record(store, lfn)
    assert (record["status"], record["attempt_nr"], record["failed_attempt"]) == ("ready", 1, 0)
    statuses = {r["id"]: (r["status"], r["attempt_nr"]) for r in _events(store, file_id=record["id"])}
    assert statuses == {ids[0]: ("done", 0), ids[1]: ("done", 0), ids[2]: ("ready", 1), ids[3]: ("ready", 0)}
    assert run_sql(store, check_all) == []
    # The next job takes the record: only the two ranges left to do are handed out.
    cli("generate", "--seed", "2", db=store)
    again = next(p for p in _dispatch_all(cli, store) if p["inputs"][0]["lfn"] == lfn)
    assert [r["event_id"] for r in again["event_ranges"]] == ids[2:]
    _events_report(cli, store, *_done(again))
    _report(cli, store, {"job_id": again["job_id"], "status": "finished", "attempt_nr": again["attempt_nr"]})
    merge = _merge_of(cli, store, again["site"])
    assert [r["event_id"] for r in merge["event_ranges"]] == ids  # every done range, from both jobs
    _report(cli, store, _finished(merge))
    assert _record(store, lfn)["status"] == "finished"
    assert (_job(store, again["job_id"])["status"], _job(store, job["job_id"])["status"]) == ("finished", "closed")
    assert run_sql(store, check_all) == []


def test_a_range_out_of_attempts_is_fatal_and_its_record_ends_partial(cli, store, tmp_path):
    _task(cli, store, tmp_path, maxAttemptES=1)
    cli("generate", "--seed", "1", db=store)
    job, _ = _first_job(cli, store)
    ids = [r["event_id"] for r in job["event_ranges"]]
    result = _events_report(cli, store, *_done(job, fail={ids[0]}))
    assert result["items"][0]["status"] == "fatal" and "no attempt left" in result["items"][0]["reason"]
    assert _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})["items"][0]["status"] == "merging"
    merge = _merge_of(cli, store, job["site"])
    assert [r["event_id"] for r in merge["event_ranges"]] == ids[1:]
    _report(cli, store, _finished(merge))
    record = _record(store, job["inputs"][0]["lfn"])
    assert record["status"] == "partial"
    counters = run_sql(store, lambda conn: conn.execute(select(datasets.c.n_files_finished, datasets.c.n_events_used)
                                                        .where(datasets.c.id == record["dataset_id"])).one())
    assert tuple(counters) == (1, 70)  # a partial record counts as processed, with the events of its merged ranges
    assert run_sql(store, check_all) == []


def test_every_range_failed_for_good_fails_the_job_and_its_record(cli, store, tmp_path):
    _task(cli, store, tmp_path, maxAttemptES=1)
    cli("generate", "--seed", "1", db=store)
    job, _ = _first_job(cli, store)
    _events_report(cli, store, *_done(job, fail={r["event_id"] for r in job["event_ranges"]}))
    out = _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})
    assert out["items"][0]["status"] == "failed"
    assert _job(store, job["job_id"])["sub_status"] == "es_fatal"
    record = _record(store, job["inputs"][0]["lfn"])
    assert record["status"] == "failed"
    assert {r["status"] for r in _events(store, file_id=record["id"])} == {"fatal"}
    assert run_sql(store, check_all) == []


def test_a_failed_merge_is_tried_again_then_fails_the_job_and_its_record(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    job, _ = _first_job(cli, store)
    _events_report(cli, store, *_done(job))
    _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})
    for attempt in (1, 2, 3):
        merge = _merge_of(cli, store, job["site"])
        assert merge["attempt_nr"] == attempt
        _report(cli, store, _failed(merge))
        assert run_sql(store, check_all) == []
    es_job = _job(store, job["job_id"])
    assert (es_job["status"], es_job["sub_status"]) == ("failed", "es_merge_failed")
    record = _record(store, job["inputs"][0]["lfn"])
    assert record["status"] == "failed"
    assert {r["status"] for r in _events(store, file_id=record["id"])} == {"discarded"}
    assert run_sql(store, check_all) == []


def test_killing_a_merging_job_discards_its_ranges_and_closes_its_merge_job(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    job, _ = _first_job(cli, store)
    _events_report(cli, store, *_done(job))
    _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})
    merge_id = max(run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.kind == "esmerge")).scalars().all()))
    killed = cli.json("jobs", "kill", str(job["job_id"]), db=store)
    assert killed["items"][0]["outcome"] == "killed"
    assert _job(store, merge_id)["status"] == "closed"
    record = _record(store, job["inputs"][0]["lfn"])
    assert record["status"] == "failed"
    assert {r["status"] for r in _events(store, file_id=record["id"])} == {"discarded"}
    assert run_sql(store, check_all) == []


def test_range_reports_that_do_not_fit_are_refused_and_change_nothing(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    payloads = _dispatch_all(cli, store)
    job, other = payloads[0], payloads[1]
    mine = job["event_ranges"][0]["event_id"]
    before = _events(store)
    text = "\n".join([
        json.dumps({"event_id": 999999, "job_id": job["job_id"], "status": "finished"}),
        json.dumps({"event_id": mine, "job_id": other["job_id"], "status": "finished"}),
        json.dumps({"event_id": mine, "job_id": job["job_id"], "status": "finished", "attempt_nr": 7}),
        json.dumps({"event_id": mine, "job_id": job["job_id"], "status": "done"}),
        "{not json",
    ]) + "\n"
    result = json.loads(cli("jobs", "events", "report", "-", "-o", "json", db=store, input=text, code=1).stdout)
    reasons = [item["reason"] for item in result["items"]]
    assert result["counts"] == {"applied": 0, "duplicate": 0, "refused": 5}
    assert "unknown event range 999999" in reasons[0]
    assert f"held by job {job['job_id']}" in reasons[1]
    assert "attempt mismatch" in reasons[2]
    assert "status must be one of" in reasons[3] and reasons[4].startswith("not JSON")
    assert _events(store) == before
    # A move backwards is refused too, and a report for a job that ended.
    _events_report(cli, store, {"event_id": mine, "job_id": job["job_id"], "status": "finished"})
    back = _events_report(cli, store, {"event_id": mine, "job_id": job["job_id"], "status": "failed"}, code=1)
    assert "cannot become failed" in back["items"][0]["reason"]
    _report(cli, store, {"job_id": job["job_id"], "status": "failed", "attempt_nr": 1, "error_source": "pilot", "error_code": 1099})
    late = _events_report(cli, store, {"event_id": job["event_ranges"][1]["event_id"], "job_id": job["job_id"], "status": "finished"}, code=1)
    assert "take no more reports" in late["items"][0]["reason"]
    # An empty input is bad usage.
    cli("jobs", "events", "report", "-", db=store, input="\n", code=2)
    assert run_sql(store, check_all) == []


def test_event_service_options_that_contradict_it_are_refused(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    for extra, field in (({"nEventsPerJob": 10}, "nEventsPerJob"), ({"nFilesPerJob": 2}, "nFilesPerJob"),
                         ({"mergeOutput": True}, "mergeOutput"), ({"eventService": False}, "eventService")):
        result = cli("submit", "-", db=store, input=json.dumps({**ES_TASK, **extra}), code=2)
        assert field in result.stderr
    result = cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "maxAttemptES": 2}), code=2)
    assert "maxAttemptES" in result.stderr and "eventService" in result.stderr
    assert cli.json("task", "list", db=store) == []
    # eventService alone makes an event-service task with the default ranges.
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "eventService": 1, "nFilesPerJob": 1}))["task_id"]
    options = cli.json("task", "show", str(task_id), db=store)["options"]
    assert options["event_service"] is True and options["n_files_per_job"] == 1


def test_check_catches_ranges_that_escaped_their_jobs(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    job, _ = _first_job(cli, store)
    # A guard broken by hand: the job ended but its ranges still say an executor holds them.
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.id == job["job_id"]).values(status="finished")))
    problems = run_sql(store, check_all)
    assert any(f"event range {job['event_ranges'][0]['event_id']} is sent but its job {job['job_id']} is finished" in p for p in problems)
    # And an event-service job merging with no merge job for its record.
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.id == job["job_id"]).values(status="merging")))
    assert any(f"job {job['job_id']} is merging but no ES merge job reads its record" in p for p in run_sql(store, check_all))
    # A record finished while one of its ranges still waits.
    record = _record(store, job["inputs"][0]["lfn"])
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.id == record["id"]).values(status="finished")))
    run_sql(store, lambda conn: conn.execute(update(events).where(events.c.file_id == record["id"]).values(status="ready")))
    problems = run_sql(store, check_all)
    assert any(f"record {record['id']} is finished but its event range" in p for p in problems)
    assert any(f"record {record['id']} is finished but none of its event ranges was merged" in p for p in problems)


# ------------------------------------------------------------------------------------- jumbo jobs

JUMBO_ENV = {"JEDICTL_JUMBO__MIN_EVENTS_ENABLE": "1000", "JEDICTL_JUMBO__MIN_EVENTS_DISABLE": "150",
             "JEDICTL_JUMBO__MAX_EVENTS": "100000", "JEDICTL_JUMBO__RANGES_PER_DISPATCH": "10"}


def _jumbo_grid(cli, store, tmp_path, **params) -> int:
    task_id = _task(cli, store, tmp_path, nJumboJobs=1, **params)
    # One site takes jumbo jobs (PanDA's catchall useJumbo: the site's attributes in the catalog, docs/sites.md).
    run_sql(store, lambda conn: conn.execute(update(sites).where(sites.c.name == "MWT2").values(attributes={"use_jumbo": True})))
    return task_id


def _watch(cli, store):
    return json.loads(cli("watch", "-o", "json", db=store, env=JUMBO_ENV).stdout)


def test_the_jumbo_watchdog_enables_jumbo_jobs_that_take_ranges_of_queued_jobs(cli, store, tmp_path):
    task_id = _jumbo_grid(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    # 25 files x 100 events = 2500 events left >= 1000: switched on, one jumbo job made at the jumbo site.
    report = _watch(cli, store)
    assert report["counts"]["jumbo_on"] == 1 and report["counts"]["jumbo_job"] == 1
    jumbo = run_sql(store, lambda conn: dict(conn.execute(select(jobs).where(jobs.c.kind == "jumbo")).one()._mapping))
    assert (jumbo["site"], jumbo["status"], jumbo["task_id"]) == ("MWT2", "activated", task_id)
    assert _watch(cli, store)["counts"]["jumbo_job"] == 0  # one per task (nJumboJobs 1), one per site
    # Dispatched, it takes 10 ready ranges of queued co-jumbo jobs, which wait for it meanwhile.
    payload = cli.json("jobs", "dispatch", "--site", "MWT2", "--task", str(task_id), "--count", "100", db=store, env=JUMBO_ENV)["jobs"]
    taken = next(p for p in payload if p["kind"] == "jumbo")
    assert len(taken["event_ranges"]) == 10 and taken["event_service"]
    waiting = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.sub_status == "jumbo", jobs.c.status == "throttled"))
                      .scalars().all())
    assert len(waiting) == 3  # 4 ranges per file: 10 ranges are the ranges of 3 files
    assert run_sql(store, check_all) == []
    # It processes them; when it ends, its ranges are done and go back to their co-jumbo jobs, which wake.
    _events_report(cli, store, *_done(taken))
    out = _report(cli, store, {"job_id": taken["job_id"], "status": "finished", "attempt_nr": 1})
    assert out["items"][0]["status"] == "finished"
    back = _events(store, is_jumbo=True)
    assert {r["status"] for r in back} == {"done"} and {r["processed_by"] for r in back} == {taken["job_id"]}
    assert {r["job_id"] for r in back} == set(waiting)
    assert run_sql(store, lambda conn: conn.execute(select(func.count()).where(jobs.c.sub_status == "jumbo")).scalar_one()) == 0
    assert run_sql(store, check_all) == []
    # The co-jumbo job whose whole file the jumbo job did is ended by the watchdog: merging, with its ES merge job.
    report = _watch(cli, store)
    assert report["counts"]["cojumbo_end"] == 2  # files 1 and 2 (ranges 1-8); file 3 still has ranges to do
    merging = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.status == "merging")).scalars().all())
    assert len(merging) == 2
    assert run_sql(store, check_all) == []


def test_jumbo_jobs_are_switched_off_near_the_end_and_never_without_nJumboJobs(cli, store, tmp_path):
    task_id = _jumbo_grid(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    assert _watch(cli, store)["counts"]["jumbo_on"] == 1
    # Most ranges processed: fewer than jumbo.min_events_disable (150) events left -> off, no new jumbo job.
    run_sql(store, lambda conn: conn.execute(update(events).where(events.c.id > 4).values(status="merged")))
    report = _watch(cli, store)
    assert report["counts"]["jumbo_off"] == 1
    assert run_sql(store, lambda conn: conn.execute(select(func.count()).where(jobs.c.kind == "jumbo")).scalar_one()) == 1


def test_a_task_without_nJumboJobs_gets_no_jumbo_jobs(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    run_sql(store, lambda conn: conn.execute(update(sites).where(sites.c.name == "MWT2").values(attributes={"use_jumbo": True})))
    cli("generate", "--seed", "1", db=store)
    report = _watch(cli, store)
    assert report["counts"]["jumbo_on"] == 0 and report["counts"]["jumbo_job"] == 0


def test_killing_an_event_service_task_ends_its_jobs_and_merge_jobs(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    job, payloads = _first_job(cli, store)
    _events_report(cli, store, *_done(job))
    _report(cli, store, {"job_id": job["job_id"], "status": "finished", "attempt_nr": 1})
    _events_report(cli, store, *_done(payloads[1])[:2])  # another job half done, still running
    cli("task", "kill", str(task_id), db=store)
    for _ in range(3):
        cli("finalize", db=store)
        # The running job's executor is told to stop; it reports failed, which the kill makes cancelled.
        for payload in payloads:
            _report(cli, store, {"job_id": payload["job_id"], "status": "failed", "attempt_nr": 1, "error_source": "pilot",
                                 "error_code": 1201}, code=None)
    cli("finalize", db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "aborted"
    live = run_sql(store, lambda conn: conn.execute(select(func.count()).where(
        jobs.c.status.notin_(("finished", "failed", "cancelled", "closed")))).scalar_one())
    assert live == 0
    assert run_sql(store, check_all) == []


def test_a_jumbo_job_with_nothing_to_take_is_closed_and_the_task_waits_for_it(cli, store, tmp_path):
    task_id = _jumbo_grid(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store)
    assert _watch(cli, store)["counts"]["jumbo_job"] == 1
    # Every range is done elsewhere: the queued jumbo job has nothing to take; finalize does not end the
    # task while it lives, the watchdog closes it.
    payloads = [p for p in _dispatch_all(cli, store) if p["kind"] == "es"]
    jumbo_id = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.kind == "jumbo")).scalar_one())
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.status).where(jobs.c.id == jumbo_id)).scalar_one()) in ("activated", "sent")
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.id == jumbo_id).values(status="activated")))
    report = _watch(cli, store)
    assert report["counts"]["jumbo_closed"] == 1
    assert _job(store, jumbo_id)["status"] == "closed"
    assert run_sql(store, check_all) == []
    for payload in payloads:
        _events_report(cli, store, *_done(payload))
        _report(cli, store, {"job_id": payload["job_id"], "status": "finished", "attempt_nr": 1})
    for merge in [m for site in {p["site"] for p in payloads}
                  for m in cli.json("jobs", "dispatch", "--site", site, "--count", "100", db=store)["jobs"]]:
        _report(cli, store, _finished(merge))
    cli("finalize", db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    assert run_sql(store, check_all) == []
