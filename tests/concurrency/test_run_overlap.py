"""Two plain `jedictl run` processes on one store (issue 14, defect 1): cron firing while the previous
run is still busy. Default settings, no simulator, no clock: the two must share the work -- every lease
released when both have exited, every task status written by the process that held the task's lease,
no task `pending` with live jobs of a non-scout kind, and the history in order.

`python -m tests.concurrency.test_run_overlap sqlite|postgresql [trials]` reproduces the trial of the
issue and prints the figures per trial.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.helpers import jedictl_processes_together, run_sql

N_TASKS = 30


def evgen_task(number: int) -> dict[str, Any]:
    """A no-input task: 20 jobs of 1000 generated events each, scouted first."""
    name = f"overlap.gen.{number:03d}"
    return {"name": name, "label": "managed", "processing_type": "evgen", "priority": 750, "transformation": "Gen_tf.py",
            "command": "--randomSeed=${RNDMSEED} --maxEvents=${MAXEVENTS} --outputEVNTFile=${OUTPUT0}", "no_input": True,
            "outputs": [{"dataset": f"{name}.out/", "file_template": f"{name}._${{SN/P}}.root"}],
            "split": {"n_events": 20_000, "n_events_per_job": 1000}}


def prepare(url: str, n_tasks: int = N_TASKS) -> None:
    """A migrated store with the example grid and `n_tasks` registered no-input tasks."""
    from pathlib import Path

    import yaml

    from jedictl.clock import utcnow
    from jedictl.engine.task.submission import parse_definition, register_task
    from jedictl.store.database import open_store
    from jedictl.store.migrate import upgrade

    upgrade(url)
    store = open_store(url)
    now = utcnow()
    try:
        from jedictl.engine.catalogs.importer import import_resource_catalog

        with store.begin() as conn:
            import_resource_catalog(conn, yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / "sites.yaml").read_text()), now)
            for number in range(n_tasks):
                spec = evgen_task(number)
                register_task(conn, parse_definition(spec, user="cron", default_user="cron"), spec, now, "test")
    finally:
        store.close()


def facts(conn: Any) -> dict[str, Any]:
    """What the trial of the issue looked at, after both processes exited."""
    from jedictl.store.schema import jobs, task_status_history, tasks

    leased = conn.execute(select(tasks.c.id, tasks.c.status, tasks.c.lease_owner).where(tasks.c.lease_owner.is_not(None))).all()
    statuses = dict(conn.execute(select(tasks.c.status, func.count()).group_by(tasks.c.status)).all())
    pending_live = conn.execute(select(func.count(func.distinct(tasks.c.id))).select_from(tasks.join(jobs, jobs.c.task_id == tasks.c.id))
                                .where(tasks.c.status == "pending", jobs.c.status == "activated", jobs.c.is_scout.is_(False))).scalar_one()
    # The history of a task is a chain: each change starts from the status the one before ended in. A
    # status written by a process without the lease breaks it (the history skipped `scouting`).
    broken, last = [], {}
    for row in conn.execute(select(task_status_history).order_by(task_status_history.c.task_id, task_status_history.c.id)):
        if row.task_id in last and row.previous_status != last[row.task_id]:
            broken.append(f"task {row.task_id}: {last[row.task_id]} then {row.previous_status}->{row.status} by {row.changed_by}")
        last[row.task_id] = row.status
    current = dict(conn.execute(select(tasks.c.id, tasks.c.status)).all())
    broken += [f"task {t}: history ends {s}, task is {current[t]}" for t, s in last.items() if current[t] != s]
    return {"leased": [tuple(row) for row in leased], "statuses": statuses, "pending_with_activated_jobs": pending_live,
            "history_breaks": broken}


def run_two(url: str, tmp_dir: Any) -> list[tuple[int, str]]:
    """`jedictl run --seed 1 & jedictl run --seed 2 & wait`, started at the same moment."""
    workers = jedictl_processes_together([["run", "--db", url, "--seed", str(seed), "-q"] for seed in (1, 2)], tmp_dir)
    results = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=600)
        results.append((worker.returncode, stdout + stderr))
    return results


def trial(url: str, tmp_dir: Any) -> tuple[list[tuple[int, str]], dict[str, Any], list[str]]:
    from jedictl.store.invariants import check_all

    prepare(url)
    results = run_two(url, tmp_dir)
    # Both processes have exited: no pass runs, so any lease left is one a dead process holds.
    return results, run_sql(url, facts), run_sql(url, lambda conn: check_all(conn, no_live_passes=True))


@pytest.mark.slow
def test_two_plain_runs_share_the_work_and_leave_no_lease(store_url, tmp_path):
    results, found, problems = trial(store_url, tmp_path)
    assert [code for code, _ in results] == [0, 0], results
    assert found["leased"] == [], found
    assert found["pending_with_activated_jobs"] == 0, found
    assert found["history_breaks"] == [], found
    assert problems == [], problems


if __name__ == "__main__":  # the reproduction: python -m tests.concurrency.test_run_overlap sqlite 5
    import tempfile
    import uuid

    import psycopg

    backend, trials = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for number in range(1, trials + 1):
        with tempfile.TemporaryDirectory() as tmp:
            schema = None
            if backend == "sqlite":
                url = f"sqlite:///{tmp}/store.db"
            else:
                schema = f"overlap_{uuid.uuid4().hex[:10]}"
                with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
                    conn.execute(f'CREATE SCHEMA "{schema}"')
                url = f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
            try:
                results, found, problems = trial(url, tmp)
            finally:
                if schema:
                    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
                        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            print(f"trial {number}: exits {[code for code, _ in results]}, leased after {len(found['leased'])}, "
                  f"statuses {found['statuses']}, pending with activated non-scout jobs {found['pending_with_activated_jobs']}, "
                  f"history breaks {len(found['history_breaks'])} {found['history_breaks'][:3]}, check_all {len(problems)}", flush=True)
            for code, text in results:
                if code:
                    print("   ", text.strip()[-400:])
