"""Scouting happens once per task (issue 14, defect 3): a task sent back to `defined` after its
avalanche -- by `task incexec` after new files were added, or by a growing input it runs until closed
-- gets its whole input released, never the scouts' few chunks again. Before the fix both tasks ended
`finished` with part of their input never processed.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, tasks
from tests.cli.test_generate import DS_IN, WORKED_EXAMPLE, _grid
from tests.cli.test_jobs_report import _dispatch_all, _finished, _report
from tests.helpers import run_sql

#: Scouting on (no skipScout), one file per job: the scouts' budget is 10 chunks = 10 files.
SCOUTED_TASK = {**WORKED_EXAMPLE, "taskName": "scouts.once", "nFilesPerJob": 1}
FINAL = ("done", "finished", "failed", "broken", "aborted", "exhausted")
START = datetime(2030, 1, 1)


def _drive(cli, store, task_id: int, clock: list[int], rounds: int = 30) -> str:
    """Run the agents and play the executor (every job finishes) until the task ends or waits for
    its input; the feeder's clock moves on 10 minutes a round so open inputs are re-scanned."""
    status = ""
    for _ in range(rounds):
        clock[0] += 1
        now = (START + timedelta(minutes=10 * clock[0])).isoformat()
        cli("refine", db=store)
        cli("feed", "--now", now, db=store)
        cli("broker", "--seed", "1", db=store)
        cli("generate", "--seed", "1", db=store)
        dispatched = _dispatch_all(cli, store)
        if dispatched:
            _report(cli, store, *[_finished(j) for j in dispatched])
        cli("finalize", db=store)
        assert run_sql(store, check_all) == []
        status = cli.json("task", "show", str(task_id), db=store)["status"]
        if status in FINAL or (status == "defined" and not dispatched and _input(store, task_id)["state"] == "mutable"
                               and _input(store, task_id)["n_files_to_be_used"] == _input(store, task_id)["n_files_finished"]
                               and _fed_everything(store, task_id)):
            return status
    return status


def _input(store, task_id: int) -> dict:
    return run_sql(store, lambda conn: dict(conn.execute(select(datasets).where(
        datasets.c.task_id == task_id, datasets.c.type == "input")).one()._mapping))


def _fed_everything(store, task_id: int) -> bool:
    row = _input(store, task_id)
    return row["n_files_used"] == row["n_files"]


def _new_files(tmp_path, first: int, last: int) -> str:
    path = tmp_path / f"new-{first}.yaml"
    path.write_text(yaml.safe_dump([{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(first, last + 1)]))
    return str(path)


def test_incexec_after_new_files_processes_all_input(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(SCOUTED_TASK))["task_id"]
    clock = [0]
    assert _drive(cli, store, task_id, clock) == "done"
    assert run_sql(store, lambda conn: conn.execute(select(tasks.c.scouts_done).where(tasks.c.id == task_id)).scalar_one()) is True
    assert (_input(store, task_id)["n_files"], _input(store, task_id)["n_files_finished"]) == (25, 25)

    cli("data", "open", "ds.in", db=store)
    cli("data", "add-files", "ds.in", _new_files(tmp_path, 26, 40), db=store)
    cli("data", "close", "ds.in", db=store)
    changes = tmp_path / "changes.yaml"
    changes.write_text("nFilesPerJob: 1\n")
    cli("task", "incexec", str(task_id), str(changes), "--user", "alice", db=store)

    assert _drive(cli, store, task_id, clock) == "done"
    dataset = _input(store, task_id)
    assert (dataset["n_files"], dataset["n_files_to_be_used"], dataset["n_files_finished"]) == (40, 40, 40)
    history = [h["status"] for h in cli.json("task", "show", str(task_id), db=store)["status_history"]]
    assert history.count("scouting") == 1  # the scouts ran once; the new files went straight to running
    assert history[history.index("toincexec"):] == ["toincexec", "defined", "ready", "running", "prepared", "done"]


def test_an_operator_can_ask_for_scouts_again(cli, store, tmp_path):
    """`task incexec --rescout`: the task scouts again (its first chunks are scouts, measured before
    the rest is released), then processes all its input; the command's audit records the ask."""
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(SCOUTED_TASK))["task_id"]
    clock = [0]
    assert _drive(cli, store, task_id, clock) == "done"
    cli("data", "open", "ds.in", db=store)
    cli("data", "add-files", "ds.in", _new_files(tmp_path, 26, 40), db=store)
    cli("data", "close", "ds.in", db=store)
    changes = tmp_path / "changes.yaml"
    changes.write_text("ramCount: 3000\n")
    outcome = cli.json("task", "incexec", str(task_id), str(changes), "--rescout", "--user", "alice", db=store)
    assert outcome["message"].endswith("; the task scouts again")
    assert _drive(cli, store, task_id, clock) == "done"
    assert (_input(store, task_id)["n_files"], _input(store, task_id)["n_files_finished"]) == (40, 40)
    shown = cli.json("task", "show", str(task_id), db=store)
    history = [h["status"] for h in shown["status_history"]]
    assert history.count("scouting") == 2 and history[history.index("toincexec"):].count("scouted") == 1, history
    assert shown["commands"][-1]["parameters"]["rescout"] is True


def test_run_until_closed_on_a_growing_dataset_processes_all_input(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    grow = {"datasets": [{**DS_IN["datasets"][0], "name": "ds.grow", "state": "open",
                          "files": [{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 11)]}]}
    catalog = tmp_path / "grow.yaml"
    catalog.write_text(yaml.safe_dump(grow))
    cli("data", "import", str(catalog), db=store)
    spec = json.loads(json.dumps(SCOUTED_TASK).replace('"ds.in"', '"ds.grow"'))
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**spec, "runUntilClosed": True}))["task_id"]
    clock = [0]
    assert _drive(cli, store, task_id, clock) == "defined"  # the scouts and the avalanche ran; waiting for more input
    assert _input(store, task_id)["n_files_finished"] == 10

    cli("data", "add-files", "ds.grow", _new_files(tmp_path, 11, 35), db=store)
    _drive(cli, store, task_id, clock, rounds=6)
    cli("data", "close", "ds.grow", db=store)
    assert _drive(cli, store, task_id, clock) == "done"
    dataset = _input(store, task_id)
    assert (dataset["n_files"], dataset["n_files_to_be_used"], dataset["n_files_finished"]) == (35, 35, 35)
    history = [h["status"] for h in cli.json("task", "show", str(task_id), db=store)["status_history"]]
    assert history.count("scouting") == 1
