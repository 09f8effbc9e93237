"""End to end: submit -> refine -> feed -> broker -> generate -> simulate (with failures) -> generate ...
until every input file is finished or has used up its attempts (issue 6 acceptance)."""

from __future__ import annotations

import json
from collections import defaultdict

from sqlalchemy import select

from jedictl.store.schema import datasets, files, job_files, job_retry_history, jobs
from tests.cli.test_generate import _grid
from tests.cli.test_jobs_report import RULES, TASK, _consistent
from tests.helpers import run_sql


def _state(conn):
    inputs = [dict(r._mapping) for r in conn.execute(
        select(files).join(datasets, datasets.c.id == files.c.dataset_id).where(datasets.c.name == "ds.in"))]
    links = conn.execute(select(job_files.c.file_id, job_files.c.job_id, job_files.c.attempt_nr)
                         .where(job_files.c.type == "input").order_by(job_files.c.job_id)).all()
    history = {(r.old_job_id, r.new_job_id, r.relation_type) for r in conn.execute(select(job_retry_history))}
    statuses = [r.status for r in conn.execute(select(jobs.c.status))]
    counters = dict(conn.execute(select(datasets).where(datasets.c.name == "ds.in")).one()._mapping)
    return inputs, links, history, statuses, counters


def test_a_task_runs_to_the_end_through_failures_and_retries(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("retry-rules", "import", "-", db=store, input=RULES)
    cli.json("submit", "-", db=store, input=json.dumps({**TASK, "taskName": "lifecycle"}))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store)
    rounds = 0
    for rounds in range(1, 40):
        cli("generate", "--seed", str(rounds), db=store)
        ran = cli.json("simulate", "--seed", str(rounds), "--failure-rate", "0.4", db=store)
        if ran["counts"]["jobs"] == 0:
            break
        _consistent(store)
    inputs, links, history, statuses, counters = run_sql(store, _state)
    assert rounds > 2, "failures must have caused retries"

    # Every file is finished, or failed having used up its attempts (or by a no_retry rule).
    for record in inputs:
        assert record["status"] in ("finished", "failed"), record
        if record["status"] == "failed":
            assert record["attempt_nr"] >= record["max_attempt"] or record["failed_attempt"] >= (record["max_failure"] or 10**9)
    assert any(r["status"] == "failed" for r in inputs) or any(r["attempt_nr"] > 1 for r in inputs)
    assert counters["n_files_finished"] + counters["n_files_failed"] == counters["n_files"] == len(inputs)
    assert counters["n_files_finished"] == sum(1 for r in inputs if r["status"] == "finished")
    assert counters["n_files_used"] == len(inputs)
    assert set(statuses) <= {"finished", "failed", "cancelled", "closed"}
    _consistent(store)

    # The retry history is complete: each job that took a file after another job had it records
    # (previous job -> new job, retry); nothing else is recorded.
    jobs_of_file: dict[int, list[int]] = defaultdict(list)
    for file_id, job_id, _attempt in links:
        jobs_of_file[file_id].append(job_id)
    expected = {(a, b, "retry") for chain in jobs_of_file.values() for a, b in zip(chain, chain[1:], strict=False)}
    assert expected and history == expected
    # Attempt numbers grow by one per job a file went through.
    for file_id, chain in jobs_of_file.items():
        attempts = [attempt for f, _job, attempt in links if f == file_id]
        assert attempts == list(range(len(chain)))
