"""Two `jedictl refine` processes started together refine each of 200 tasks exactly once."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from jedictl.clock import utcnow
from jedictl.engine.task.submission import parse_definition, register_task
from jedictl.store.database import open_store
from jedictl.store.schema import datasets, task_status_history, tasks
from tests.cli.test_refine import EXAMPLES
from tests.helpers import jedictl_processes_together, run_sql

import yaml

N_TASKS = 200


def _submit_many(url: str) -> None:
    spec = yaml.safe_load(EXAMPLES["generation"])
    store = open_store(url)
    try:
        with store.begin() as conn:
            for index in range(N_TASKS):
                # each task its own output datasets: an output dataset belongs to one task
                outputs = [dict(output, dataset=f"{output['dataset']}.{index:03d}") for output in spec["outputs"]]
                log = dict(spec["log"], dataset=f"{spec['log']['dataset']}.{index:03d}")
                document = dict(spec, name=f"{spec['name']}.{index:03d}", outputs=outputs, log=log)
                definition = parse_definition(document, user="race", default_user="race")
                register_task(conn, definition, document, utcnow(), "test")
    finally:
        store.close()


@pytest.mark.slow
def test_two_refiners_share_the_work_and_refine_each_task_once(cli, store, tmp_path):
    _submit_many(store)
    workers = jedictl_processes_together([["refine", "--db", store, "--limit", str(N_TASKS), "-o", "json"]] * 2, tmp_path)
    reports = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr
        reports.append(json.loads(stdout))

    refined = [{item["task_id"] for item in report["items"] if item["outcome"] == "defined"} for report in reports]
    assert refined[0].isdisjoint(refined[1])
    assert len(refined[0] | refined[1]) == N_TASKS
    assert all(report.get("error", 0) == 0 for report in reports)

    def facts(conn):
        statuses = dict(conn.execute(select(tasks.c.status, func.count()).group_by(tasks.c.status)).all())
        defined_lines = conn.execute(
            select(task_status_history.c.task_id, func.count()).where(task_status_history.c.status == "defined")
            .group_by(task_status_history.c.task_id)
        ).all()
        per_task = conn.execute(select(datasets.c.task_id, func.count()).group_by(datasets.c.task_id)).all()
        leases = conn.execute(select(func.count()).where(tasks.c.lease_owner.is_not(None))).scalar_one()
        return statuses, defined_lines, per_task, leases

    statuses, defined_lines, per_task, leases = run_sql(store, facts)
    assert statuses == {"defined": N_TASKS}
    assert len(defined_lines) == N_TASKS and {count for _, count in defined_lines} == {1}
    assert len(per_task) == N_TASKS and {count for _, count in per_task} == {4}  # pseudo input, seeds, EVNT, log
    assert leases == 0
    # Both processes really took part (they start together and claim 10 tasks at a time). Not on
    # SQLite: its busy handler sleeps while the other writer commits and begins again, so one process
    # can legitimately do all the work -- correctness, checked above, is what SQLite promises.
    if not store.startswith("sqlite"):
        assert all(refined), [len(r) for r in refined]
