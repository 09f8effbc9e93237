"""A generator killed between writing a task's jobs and its final write (issue 14; the chaos test
found it as a task `finished` at 10/20). The jobs' chunk commits on its own; if the move to
`scouting` waited for the final write, the kill left a `ready` task with scout jobs, which nothing
would move to scouting again: no avalanche released the rest of its input, and finalize ended it at
the scouts' release. The move now commits with the jobs."""

from __future__ import annotations

import json

from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import jobs, task_status_history
from tests.cli.test_generate import _grid
from tests.cli.test_scouts_once import SCOUTED_TASK, _drive, _input
from tests.helpers import hooked_env, jedictl_process, run_sql


def test_a_generator_killed_after_its_jobs_committed_leaves_the_task_scouting(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(SCOUTED_TASK))["task_id"]
    for command in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*command, db=store)
    # A clock in the past: the dead process's lease has long expired for the passes that follow.
    killed = jedictl_process(["generate", "--db", store, "--seed", "1", "--now", "2001-01-01T00:00:00"],
                             env=hooked_env(die_at="generate-finish"))
    killed.communicate(timeout=120)
    assert killed.returncode == -9

    made = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.task_id == task_id)).all())
    assert len(made) == 10  # the scouts' chunk committed before the kill
    history = run_sql(store, lambda conn: [row.status for row in conn.execute(
        select(task_status_history.c.status).where(task_status_history.c.task_id == task_id).order_by(task_status_history.c.id))])
    assert history[-1] == "scouting", history
    assert run_sql(store, check_all) == []

    assert _drive(cli, store, task_id, [0]) == "done"
    assert (_input(store, task_id)["n_files"], _input(store, task_id)["n_files_finished"]) == (25, 25)
