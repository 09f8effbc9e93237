"""`jedictl jobs report|heartbeat|kill`: propagation, idempotency, retry rules -- on both backends."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, catalog_file_replicas, catalog_files, datasets, files, job_retry_history, jobs, tasks
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.helpers import row_counts, run_sql, store_dump

TASK = {**WORKED_EXAMPLE, "taskName": "report.tests", "skipScout": True, "maxAttempt": 3}


def _task(cli, store, tmp_path, **params) -> int:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**TASK, **params}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    return task_id


def _dispatch_all(cli, store) -> list[dict]:
    sites = sorted({j["site"] for j in cli.json("jobs", "list", "--status", "activated", "--limit", "1000", db=store)})
    return [job for site in sites for job in cli.json("jobs", "dispatch", "--site", site, "--count", "100", db=store)["jobs"]]


def _finished(job: dict, **extra) -> dict:
    outputs = [{"lfn": o["lfn"], "size": 1000 + i, "checksum": f"ad:0000000{i}", "guid": f"G-{job['job_id']}-{i}", "n_events": 10}
               for i, o in enumerate(job["outputs"])]
    return {"job_id": job["job_id"], "status": "finished", "attempt_nr": job["attempt_nr"], "outputs": outputs, "wall_time": 100,
            "cpu_time": 90, "max_pss": 500_000, "n_events": 200, **extra}


def _failed(job: dict, source="pilot", code=1099, diag="Failed to stage-in file", **extra) -> dict:
    return {"job_id": job["job_id"], "status": "failed", "attempt_nr": job["attempt_nr"], "error_source": source, "error_code": code,
            "error_diag": diag, **extra}


def _report(cli, store, *lines: dict, code: int = 0, raw: str = "") -> dict:
    text = "".join(json.dumps(line) + "\n" for line in lines) + raw
    return json.loads(cli("jobs", "report", "-", "-o", "json", db=store, input=text, code=code).stdout)


def _files(store, lfns=None, task_id: int | None = None) -> dict[str, dict]:
    """Input records by name; `task_id` picks one task's when several tasks read the same files."""
    def read(conn):
        query = select(files).join(datasets, datasets.c.id == files.c.dataset_id).where(datasets.c.type == "input")
        if task_id is not None:
            query = query.where(files.c.task_id == task_id)
        return {row.lfn: dict(row._mapping) for row in conn.execute(query)}
    found = run_sql(store, read)
    return {k: v for k, v in found.items() if lfns is None or k in lfns}


def _counters(store, name: str) -> dict:
    return run_sql(store, lambda conn: dict(conn.execute(select(datasets).where(datasets.c.name == name)).one()._mapping))


def _consistent(store) -> None:
    assert run_sql(store, check_all) == []


def test_finished_report_finishes_inputs_and_registers_outputs(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    result = _report(cli, store, _finished(job))
    assert result["counts"]["applied"] == 1 and result["items"][0]["status"] == "finished"
    assert result["counts"] == {"applied": 1, "duplicate": 0, "conflict": 0, "refused": 0}  # no count vanishes for being zero
    assert set(result["items"][0]) == {"outcome", "line", "job_id", "status", "reason", "retry"}
    inputs = [i["lfn"] for i in job["inputs"]]
    assert {f["status"] for f in _files(store, inputs).values()} == {"finished"}
    assert {f["attempt_nr"] for f in _files(store, inputs).values()} == {1}
    assert _counters(store, "ds.in")["n_files_finished"] == 2
    assert _counters(store, "ds.out")["n_files_finished"] == 1 and _counters(store, "ds.out")["n_events"] == 10
    shown = cli.json("jobs", "show", str(job["job_id"]), db=store)
    assert shown["status"] == "finished"

    def catalog(conn):
        rows = conn.execute(select(catalog_datasets.c.name, catalog_datasets.c.state, catalog_files.c.lfn, catalog_files.c.guid,
                                   catalog_files.c.size, catalog_file_replicas.c.endpoint)
                            .join(catalog_files, catalog_files.c.dataset_id == catalog_datasets.c.id)
                            .join(catalog_file_replicas, catalog_file_replicas.c.file_id == catalog_files.c.id)
                            .where(catalog_datasets.c.name.in_(["ds.out", "ds.log"]))).all()
        return sorted(tuple(r) for r in rows)
    out = job["outputs"][0]
    registered = run_sql(store, catalog)
    assert (("ds.out", "open", out["lfn"], f"G-{job['job_id']}-0", 1000, out["destination"]) in registered)
    # A child task can now find the output: the catalog answers for it.
    assert any(d["name"] == "ds.out" for d in cli.json("data", "list", db=store))
    _consistent(store)


def test_failed_report_puts_inputs_back_and_the_next_job_records_the_retry(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    before = _counters(store, "ds.in")["n_files_used"]
    _report(cli, store, _failed(job))
    inputs = _files(store, [i["lfn"] for i in job["inputs"]])
    assert {(f["status"], f["attempt_nr"], f["failed_attempt"]) for f in inputs.values()} == {("ready", 1, 1)}
    assert _counters(store, "ds.in")["n_files_used"] == before - 2
    shown = cli.json("jobs", "show", str(job["job_id"]), db=store)
    assert shown["status"] == "failed"
    _consistent(store)
    # The next generation makes a new job for them, attempt 2, and records where it came from.
    assert cli.json("generate", "--seed", "2", db=store)["counts"]["jobs"] == 1
    history = run_sql(store, lambda conn: [tuple(r) for r in conn.execute(
        select(job_retry_history.c.old_job_id, job_retry_history.c.new_job_id, job_retry_history.c.relation_type))])
    new_job = run_sql(store, lambda conn: conn.execute(select(jobs.c.id, jobs.c.attempt_nr).where(jobs.c.id != job["job_id"])
                                                       .order_by(jobs.c.id.desc())).first())
    assert history == [(job["job_id"], new_job.id, "retry")] and new_job.attempt_nr == 2
    _consistent(store)


def test_attempts_used_up_fail_the_file_and_kills_use_attempts_not_failures(cli, store, tmp_path):
    _task(cli, store, tmp_path, maxAttempt=2)
    first = _dispatch_all(cli, store)
    _report(cli, store, _failed(first[0]))
    killed = cli.json("jobs", "kill", str(first[1]["job_id"]), "--code", "51", db=store)["items"]
    assert killed[0]["outcome"] == "killed" and killed[0]["status"] == "closed"
    cli("generate", "--seed", "3", db=store)
    second = _dispatch_all(cli, store)
    assert sorted(j["attempt_nr"] for j in second) == [2, 2]
    _report(cli, store, *[_failed(j) for j in second])
    lfns = [i["lfn"] for i in first[0]["inputs"]]
    assert {(f["status"], f["attempt_nr"], f["failed_attempt"]) for f in _files(store, lfns).values()} == {("failed", 2, 2)}
    lfns = [i["lfn"] for i in first[1]["inputs"]]
    assert {(f["status"], f["attempt_nr"], f["failed_attempt"]) for f in _files(store, lfns).values()} == {("failed", 2, 1)}
    assert _counters(store, "ds.in")["n_files_failed"] == 4
    assert cli.json("generate", db=store)["counts"]["jobs"] == 0  # nothing left to retry for them
    _consistent(store)


def test_duplicate_out_of_order_and_unknown_reports_count_nothing_twice(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    dispatched = _dispatch_all(cli, store)
    first, second = dispatched[0], dispatched[1]
    _report(cli, store, _finished(first), _failed(second))
    snapshot = (_counters(store, "ds.in"), _counters(store, "ds.out"), _files(store))
    counts = row_counts(store)
    undispatched = cli.json("jobs", "list", "--status", "activated", "--limit", "1", db=store)
    lines = [
        _finished(first),  # duplicate
        _failed(second),  # duplicate
        _failed(first),  # already finished: a conflict
        {**_finished(dispatched[2]), "attempt_nr": 7},  # wrong attempt
        {"job_id": 99999, "status": "finished"},  # unknown
    ]
    if undispatched:  # never dispatched: it cannot have finished
        lines.append({"job_id": undispatched[0]["job_id"], "status": "finished"})
    result = _report(cli, store, *lines, code=1, raw="{broken\n")
    outcomes = [(item["outcome"], item["reason"]) for item in result["items"]]
    assert outcomes[0][0] == outcomes[1][0] == "duplicate"
    assert outcomes[2] == ("conflict", f"conflict: job {first['job_id']} is already finished; this report says failed")
    assert "attempt mismatch" in outcomes[3][1] and outcomes[4] == ("refused", "unknown job 99999")
    if undispatched:
        assert "out of order" in outcomes[5][1]
    assert outcomes[-1][0] == "refused" and outcomes[-1][1].startswith("not JSON")
    assert (_counters(store, "ds.in"), _counters(store, "ds.out"), _files(store)) == snapshot
    assert row_counts(store) == counts
    # The rest of a batch still applies around refused lines.
    result = _report(cli, store, {"job_id": 99999, "status": "finished"}, _finished(dispatched[2]), code=1)
    assert [i["outcome"] for i in result["items"]] == ["refused", "applied"]
    _consistent(store)


def test_malformed_reports_name_the_field(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    bad = [
        {"job_id": job["job_id"], "status": "running"},
        {"job_id": job["job_id"], "status": "finished", "colour": "red"},
        {"job_id": "x", "status": "finished"},
        {"job_id": job["job_id"], "status": "failed", "error_code": 3},
        {"job_id": job["job_id"], "status": "finished", "outputs": [{"lfn": "a"}, {"lfn": "a"}]},
    ]
    result = _report(cli, store, *bad, code=1)
    reasons = [item["reason"] for item in result["items"]]
    assert reasons[0].startswith("line 1.status: must be one of failed, finished")
    assert reasons[1].startswith("line 2.colour: unknown key")
    assert reasons[2] == "line 3.job_id: must be an integer"
    assert reasons[3] == "line 4.error_code: error_source and error_code go together"
    assert reasons[4] == "line 5.outputs: names a file twice"
    empty = cli("jobs", "report", "-", db=store, input="\n", code=2)
    assert "holds no reports" in empty.stderr
    missing = cli("jobs", "report", "/nonexistent.jsonl", db=store, code=2)
    assert "cannot read the file" in missing.stderr


def test_pilot_field_names_are_accepted(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    line = {"PandaID": job["job_id"], "jobStatus": "failed", "attemptNr": job["attempt_nr"], "pilotErrorCode": 1099,
            "pilotErrorDiag": "stage-in", "maxPSS": 123456, "startTime": "2026-11-21T10:00:00Z", "endTime": 1795300000}
    assert _report(cli, store, line)["counts"]["applied"] == 1
    row = run_sql(store, lambda conn: conn.execute(select(jobs).where(jobs.c.id == job["job_id"])).one())
    assert (row.error_source, row.error_code, row.error_diag, row.max_pss) == ("pilot", 1099, "stage-in", 123456)


def test_heartbeats_follow_panda_guards(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]["job_id"]
    beat = cli.json("jobs", "heartbeat", str(job), "--status", "running", db=store)["items"]
    assert beat == [{"outcome": "alive", "line": None, "job_id": job, "status": "running", "command": None, "reason": None}]
    started = run_sql(store, lambda conn: conn.execute(select(jobs.c.started_at).where(jobs.c.id == job)).scalar())
    assert started is not None
    assert cli.json("jobs", "heartbeat", str(job), "--status", "holding", db=store)["items"][0]["status"] == "holding"
    back = cli.json("jobs", "heartbeat", str(job), "--status", "running", db=store)["items"][0]
    assert back["status"] == "holding" and "not changed" in back["reason"]
    lines = "\n".join(json.dumps(b) for b in [{"job_id": 99999}, {"job_id": job, "attempt_nr": 5}])
    replies = cli.json("jobs", "heartbeat", "--from", "-", db=store, input=lines)["items"]
    assert [r["command"] for r in replies] == ["tobekilled", "tobekilled"]
    cli("jobs", "report", "-", db=store, input=json.dumps({"job_id": job, "status": "failed", "error_source": "pilot", "error_code": 1}))
    assert cli.json("jobs", "heartbeat", str(job), db=store)["items"][0]["command"] == "alreadydone"
    # One object like every report (once a bare list): every count present, 0 included.
    whole = cli.json("jobs", "heartbeat", str(job), db=store)
    assert (whole["pass"], whole["counts"], whole["errors"]) == ("heartbeat", {"alive": 0, "tobekilled": 0, "alreadydone": 1}, 0)
    assert cli("jobs", "heartbeat", str(job), "--status", "finished", db=store, code=2).stderr.startswith("jedictl: error: heartbeat.status")


def test_kill_of_a_running_job_waits_for_its_executor(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    queued, running = _dispatch_all(cli, store)[:2]
    cli("jobs", "heartbeat", str(running["job_id"]), db=store)
    activated = cli.json("jobs", "list", "--status", "activated", "--limit", "1", db=store)
    ids = [queued["job_id"], running["job_id"]] + [a["job_id"] for a in activated]
    results = {r["job_id"]: r for r in cli.json("jobs", "kill", *map(str, ids), db=store)["items"]}
    assert results[queued["job_id"]]["outcome"] == "killed" and results[queued["job_id"]]["status"] == "cancelled"
    assert results[running["job_id"]]["outcome"] == "tobekilled" and results[running["job_id"]]["status"] == "running"
    for extra in activated:
        assert results[extra["job_id"]]["status"] == "cancelled"
    assert cli.json("jobs", "heartbeat", str(running["job_id"]), db=store)["items"][0]["command"] == "tobekilled"
    # Its executor stops it and reports failed: a killed job ends cancelled, no failure counted.
    _report(cli, store, _failed(running, source="pilot", code=1144, diag="killed"))
    assert cli.json("jobs", "show", str(running["job_id"]), db=store)["status"] == "cancelled"
    lfns = [i["lfn"] for i in running["inputs"]]
    assert {(f["status"], f["attempt_nr"], f["failed_attempt"]) for f in _files(store, lfns).values()} == {("ready", 1, 0)}
    again = cli("jobs", "kill", str(queued["job_id"]), db=store, code=1)
    assert "already cancelled" in again.stdout
    assert cli("jobs", "kill", db=store, code=2).stderr.startswith("jedictl: error: JOB: name the jobs")
    _consistent(store)


def test_kill_a_whole_task(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    results = cli.json("jobs", "kill", "--task", str(task_id), db=store)["items"]
    assert results and {r["status"] for r in results} == {"cancelled"}
    assert _counters(store, "ds.in")["n_files_used"] == 0
    _consistent(store)


def test_heartbeat_and_kill_take_task_index_as_jobs_show_does(cli, store, tmp_path):
    """`jobs heartbeat 1.2` and `jobs kill 1.2`: the README's job reference works for every JOB argument."""
    task_id = _task(cli, store, tmp_path)
    jobs_by_index = {j["task_job"]: j["job_id"] for j in cli.json("jobs", "list", "--task", str(task_id), db=store)}
    site = cli.json("jobs", "show", f"{task_id}.2", db=store)["site"]
    cli("jobs", "dispatch", "--site", site, "--task", str(task_id), "--count", "1", db=store)
    sent = [j for j in cli.json("jobs", "list", "--task", str(task_id), "--status", "sent", db=store)]
    ref = sent[0]["task_job"]
    beat = cli.json("jobs", "heartbeat", ref, "--status", "running", db=store)["items"]
    assert [b["job_id"] for b in beat] == [jobs_by_index[ref]] and beat[0]["status"] == "running"
    killed = cli.json("jobs", "kill", ref, db=store)["items"]
    assert [(k["job_id"], k["outcome"]) for k in killed] == [(jobs_by_index[ref], "tobekilled")]
    queued = [ref for ref in jobs_by_index if ref not in {j["task_job"] for j in sent}][0]
    assert cli.json("jobs", "kill", queued, str(jobs_by_index[ref]), db=store)["items"][0]["outcome"] == "killed"
    assert cli("jobs", "kill", f"{task_id}.999", db=store, code=2).stderr.strip() == f"jedictl: error: job {task_id}.999 does not exist"
    assert cli("jobs", "heartbeat", f"{task_id}.0", db=store, code=2).stderr.startswith("jedictl: error: JOB: job index must be at least 1")
    assert "JOB: must be a job id" in cli("jobs", "kill", "x.y", db=store, code=2).stderr


RULES = """
- {error_source: pilot, error_code: 1212, action: increase_memory}
- {error_source: pilot, error_code: 1099, action: no_retry}
- {error_source: trans, error_code: 65, action: limit_retry, parameters: {maxAttempt: 2}}
"""


def test_memory_ladder_raises_the_files_ram_and_the_next_job_gets_it(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("retry-rules", "import", "-", db=store, input=RULES)
    job = _dispatch_all(cli, store)[0]
    ram = job["min_ram_count"]  # 1800 = 2000 MB x 0.9 compensation
    result = _report(cli, store, _failed(job, code=1212, diag="Payload exceeded memory limit", max_pss=2_100 * 1024))
    assert result["items"][0]["retry"] == "RAM of 2 input file(s) raised to 3000 MB per core"
    inputs = _files(store, [i["lfn"] for i in job["inputs"]])
    assert {(f["status"], f["ram_count"]) for f in inputs.values()} == {("ready", 3000)}
    cli("generate", "--seed", "5", db=store)
    regenerated = run_sql(store, lambda conn: conn.execute(select(jobs.c.min_ram_count).order_by(jobs.c.id.desc())).scalar())
    assert regenerated == 2700 and regenerated > ram  # 3000 x 0.9
    _consistent(store)


def test_task_memory_is_raised_when_most_files_needed_more(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    cli("retry-rules", "import", "-", db=store, input=RULES)
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.lfn.in_([f"f.{i:03d}.root" for i in range(10, 20)]))
                                             .values(ram_count=4000)))
    job = _dispatch_all(cli, store)[0]
    result = _report(cli, store, _failed(job, code=1212, max_pss=1_000))
    assert result["items"][0]["retry"].startswith("task RAM raised to 3000 MB per core")
    task = run_sql(store, lambda conn: conn.execute(select(tasks.c.ram_count).where(tasks.c.id == task_id)).scalar())
    assert task == 3000


def test_no_retry_and_limit_retry(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    cli("retry-rules", "import", "-", db=store, input=RULES)
    first, second = _dispatch_all(cli, store)[:2]
    result = _report(cli, store, _failed(first, code=1099), _failed(second, source="trans", code=65, diag="crash"))
    assert result["items"][0]["retry"] == "no retry: 2 input file(s) will not be tried again"
    assert result["items"][1]["retry"] == "maxAttempt lowered to 2 on 2 input file(s)"
    no_retry = _files(store, [i["lfn"] for i in first["inputs"]])
    assert {(f["status"], f["max_attempt"]) for f in no_retry.values()} == {("failed", 1)}
    limited = _files(store, [i["lfn"] for i in second["inputs"]])
    assert {(f["status"], f["max_attempt"]) for f in limited.values()} == {("ready", 2)}
    assert _counters(store, "ds.in")["n_files_failed"] == 2
    _consistent(store)


def test_late_report_of_a_final_task_leaves_its_counters(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == task_id).values(status="aborted")))
    before = (_counters(store, "ds.in"), _files(store))
    result = _report(cli, store, _finished(job))
    assert result["items"][0]["reason"] == "task is final: its files and counters are left as they are"
    assert (_counters(store, "ds.in"), _files(store)) == before
    assert cli.json("jobs", "show", str(job["job_id"]), db=store)["status"] == "finished"


def test_one_transaction_per_job_gives_the_same_result(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    dispatched = _dispatch_all(cli, store)
    lines = "".join(json.dumps(_finished(j) if j["job_id"] % 2 else _failed(j)) + "\n" for j in dispatched)
    result = json.loads(cli("jobs", "report", "-", "-o", "json", db=store, input=lines,
                            env={"JEDICTL_REPORT__BATCH_SIZE": "1"}).stdout)
    assert result["counts"]["applied"] == len(dispatched)
    _consistent(store)


def _two_tasks_one_output(cli, store, tmp_path) -> tuple[int, int]:
    """Two tasks writing the same output dataset with the same file template (the second opted out
    of the one-task rule with allowTaskDuplication): their jobs are told to write the same files."""
    first = _task(cli, store, tmp_path)
    second = cli.json("submit", "-", db=store, input=json.dumps({**TASK, "taskName": "report.tests.again", "allowTaskDuplication": True}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    return first, second


def _catalog_guids(store, lfn: str) -> list[str]:
    return run_sql(store, lambda conn: [row.guid for row in conn.execute(
        select(catalog_files.c.guid).join(catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id)
        .where(catalog_datasets.c.name == "ds.out", catalog_files.c.lfn == lfn))])


def _same_output_pair(cli, store, first: int, second: int) -> tuple[dict, dict]:
    jobs = _dispatch_all(cli, store)
    by_lfn: dict[str, dict[int, dict]] = {}
    for job in jobs:
        by_lfn.setdefault(job["outputs"][0]["lfn"], {})[job["task_id"]] = job
    lfn = sorted(lfn for lfn, owners in by_lfn.items() if len(owners) == 2)[0]
    return by_lfn[lfn][first], by_lfn[lfn][second]


@pytest.mark.parametrize("one_batch", [False, True], ids=["two-reports", "one-batch"])
def test_an_output_registered_by_another_job_fails_the_report_s_job(cli, store, tmp_path, one_batch):
    """Issue 14 defect 4: the second job to report an output file another job registered fails with
    the adder's error (ddm 200) -- the catalog keeps the first file, nothing is overwritten or dropped."""
    first, second = _two_tasks_one_output(cli, store, tmp_path)
    one, two = _same_output_pair(cli, store, first, second)
    lfn = one["outputs"][0]["lfn"]
    if one_batch:
        result = _report(cli, store, _finished(one), _finished(two))
    else:
        _report(cli, store, _finished(one))
        result = _report(cli, store, _finished(two))
    assert [i["status"] for i in result["items"]][-1] == "failed"
    clashed = {o["lfn"] for o in one["outputs"]}  # the output and the log: both were registered by the first job
    assert result["items"][-1]["reason"] == f"output {min(clashed)} is already registered by another job: the job counts as failed"
    shown = cli.json("jobs", "show", str(two["job_id"]), db=store)
    assert (shown["status"], shown["error_source"], shown["error_code"]) == ("failed", "ddm", 200)
    assert "already registered by another job" in shown["error_diag"]
    assert cli.json("jobs", "show", str(one["job_id"]), db=store)["status"] == "finished"
    assert _catalog_guids(store, lfn) == [f"G-{one['job_id']}-0"]  # the first job's file, not overwritten
    assert {f["status"] for f in _files(store, [i["lfn"] for i in two["inputs"]], task_id=second).values()} == {"ready"}  # retried
    _consistent(store)


def test_a_single_report_that_loses_the_registration_race_fails_its_job(cli, store, tmp_path, monkeypatch):
    """One report whose output another process registered between the check and the insert: replayed,
    it sees the registration and fails its job (ddm 200) -- not an internal error, nothing dropped."""
    from jedictl.engine.jobs import outcomes

    first, second = _two_tasks_one_output(cli, store, tmp_path)
    one, two = _same_output_pair(cli, store, first, second)
    _report(cli, store, _finished(one))
    real, calls = outcomes.job_store.registered_outputs, []

    def checked_before_the_other_registered(conn, pairs):  # noqa: ANN001, ANN202
        calls.append(1)
        return set() if len(calls) == 1 else real(conn, pairs)

    monkeypatch.setattr(outcomes.job_store, "registered_outputs", checked_before_the_other_registered)
    result = _report(cli, store, _finished(two))
    assert len(calls) == 2  # the batch of one was replayed
    assert [(i["status"], i["reason"].split(":")[0]) for i in result["items"]] == [("failed", f"output {min(o['lfn'] for o in one['outputs'])} is already registered by another job")]
    assert cli.json("jobs", "show", str(two["job_id"]), db=store)["status"] == "failed"
    _consistent(store)


# ------------------------------------------------------------------- reports that cannot be right

def _job_row(store, job_id: int) -> dict:
    return run_sql(store, lambda conn: dict(conn.execute(select(jobs).where(jobs.c.id == job_id)).one()._mapping))


def test_reports_that_cannot_be_right_are_refused_and_the_others_apply(cli, store, tmp_path):
    """Each bad line is refused naming its field -- its job keeps its status -- and the good lines of the
    same input apply: an executor's batch is never lost to one bad report."""
    _task(cli, store, tmp_path)
    jobs_out = _dispatch_all(cli, store)
    early, badsum, foreign, good = jobs_out[:4]
    bad_checksum = _finished(badsum)
    bad_checksum["outputs"][0]["checksum"] = "ad:123"
    lines = [
        _finished(early, started_at="2026-11-21T10:00:00Z", ended_at="2026-11-21T09:59:59Z"),
        bad_checksum,
        {**_finished(foreign), "outputs": _finished(foreign)["outputs"] + [{"lfn": "../../../etc/shadow", "size": 1}]},
        _finished(good),
    ]
    result = _report(cli, store, *lines, code=1)
    items = [(item["outcome"], item["reason"]) for item in result["items"]]
    assert items[0] == ("refused", "line 1.ended_at: 2026-11-21T09:59:59Z is before started_at (2026-11-21T10:00:00Z)")
    assert items[1] == ("refused", "line 2.outputs[0].checksum: must be ad: and 8 hex digits (adler32) or md5: and 32 hex digits, "
                                   "e.g. ad:0a1b2c3d")
    assert items[2] == ("refused", f"outputs[{len(foreign['outputs'])}].lfn: '../../../etc/shadow' is not an output of job {foreign['job_id']}")
    assert items[3][0] == "applied"
    assert [_job_row(store, j["job_id"])["status"] for j in (early, badsum, foreign, good)] == ["sent", "sent", "sent", "finished"]
    twice = json.dumps(_finished(early))[:-1] + ', "status": "failed"}'
    assert _report(cli, store, raw=twice + "\n", code=1)["items"][0]["reason"] == "duplicate key 'status' in an object"
    assert not run_sql(store, lambda conn: conn.execute(select(catalog_files).where(catalog_files.c.lfn.like("%shadow%"))).all())
    _consistent(store)
    # Checksums are kept as the catalog writes them: lower-case hex.
    fixed = _finished(badsum)
    fixed["outputs"][0]["checksum"] = "ad:0A1B2C3D"
    fixed["outputs"][1]["checksum"] = "md5:" + "AB" * 16
    assert _report(cli, store, fixed)["counts"]["applied"] == 1
    checksums = run_sql(store, lambda conn: sorted(conn.execute(select(catalog_files.c.checksum).where(
        catalog_files.c.lfn.in_([o["lfn"] for o in badsum["outputs"]]))).scalars()))
    assert checksums == ["ad:0a1b2c3d", "md5:" + "ab" * 16]


def test_an_error_diag_over_the_limit_is_cut_not_refused(cli, store, tmp_path):
    """Refusing it left the job `sent` until its timeout; PanDA cuts the diag and keeps the report."""
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    diag = "\x1b[31mboom\x1b[0m\n" + "x" * 5000
    assert _report(cli, store, _failed(job, diag=diag))["counts"]["applied"] == 1
    row = _job_row(store, job["job_id"])
    assert row["status"] == "failed" and len(row["error_diag"]) == 4000 and row["error_diag"].endswith("…")
    assert row["error_diag"].startswith("\\x1b[31mboom\\x1b[0m\nxxx")  # escapes stored, never the raw ESC
    _consistent(store)


def test_a_second_different_report_of_a_final_job_is_a_conflict(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    first, second, killed = _dispatch_all(cli, store)[:3]
    ended = _finished(first, started_at="2026-11-21T10:00:00Z", ended_at="2026-11-21T11:00:00Z")
    _report(cli, store, ended, _failed(second))
    cli("jobs", "heartbeat", str(killed["job_id"]), db=store)
    cli("jobs", "kill", str(killed["job_id"]), db=store)
    _report(cli, store, _failed(killed, code=1144, diag="killed"))  # told to stop: ends cancelled
    snapshot = store_dump(store)
    # The same reports again: duplicates, nothing to do, exit 0.
    again = _report(cli, store, ended, _failed(second), _failed(killed, code=1144, diag="killed"))
    assert [i["outcome"] for i in again["items"]] == ["duplicate"] * 3 and again["counts"]["conflict"] == 0
    # Different ones: conflicts, each with what differs, exit 1 and a count.
    other_output = _finished(first)
    other_output["outputs"][0]["checksum"] = "ad:ffffffff"
    lines = [{**ended, "wall_time": 120}, other_output, _failed(second, code=1212, diag="Payload exceeded memory limit"),
             _finished(second), _failed(first)]
    result = _report(cli, store, *lines, code=1)
    items = [(i["outcome"], i["status"], i["reason"]) for i in result["items"]]
    assert result["counts"]["conflict"] == 5 and [i[0] for i in items] == ["conflict"] * 5 and [i[1] for i in items] == ["finished", "finished",
                                                                                                            "failed", "failed", "finished"]
    job = first["job_id"]
    assert items[0][2] == f"conflict: job {job} is already finished by another report (wall_time 100, not 120)"
    assert items[1][2] == (f"conflict: job {job} is already finished by another report "
                           f"({first['outputs'][0]['lfn']} checksum 'ad:00000000', not 'ad:ffffffff')")
    assert items[2][2] == (f"conflict: job {second['job_id']} is already failed by another report "
                           "(error_code 1099, not 1212; error_diag 'Failed to stage-in file', not 'Payload exceeded memory limit')")
    assert items[3][2] == f"conflict: job {second['job_id']} is already failed; this report says finished"
    assert items[4][2] == f"conflict: job {job} is already finished; this report says failed"
    assert store_dump(store) == snapshot
    table = cli("jobs", "report", "-", db=store, input=json.dumps(lines[0]) + "\n", code=1)
    assert "conflict" in table.stdout + table.stderr


def test_a_job_the_adder_failed_takes_the_same_report_again_as_a_duplicate(cli, store, tmp_path):
    """A finished report without an output fails its job (ddm 200): sent again, it is the same report."""
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    short = {**_finished(job), "outputs": _finished(job)["outputs"][:1]}
    assert _report(cli, store, short)["items"][0]["status"] == "failed"
    assert _report(cli, store, short)["items"][0]["outcome"] == "duplicate"
    assert _report(cli, store, {**short, "n_events": 1}, code=1)["items"][0]["outcome"] == "conflict"


def test_output_sizes_that_add_up_past_a_bigint_are_refused(cli, store, tmp_path):
    """Each size fits, their sum (the job's output_bytes) did not: an internal error, found by the fuzz suite."""
    _task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    line = _finished(job)
    line["outputs"][0]["size"] = 2**63 - 1
    result = _report(cli, store, line, code=1)
    assert result["items"][0]["reason"] == "line 1.outputs: sizes add up to more than 9223372036854775807 bytes"
