"""Every task command in every task status, through the CLI: accepted or refused as JEDI does.

The allowed sets are written out by hand from panda-server.md §1.2 (`_check_command_allowed`) and
jedi-inventory.md §9.1 in tests/engine/commando/test_rules.py, not derived from the code under test. A
refusal must be one line naming the task, its status and what the command needs, exit 2, and leave
the store exactly as it was; an acceptance is recorded in `task_commands` with who, when and why.

One store with a refined, fed and generated task is built once; each case runs on a copy of it
with the task's status set directly (SQLite only: the statuses, not the backend, are under test
here; the scenarios in test_task_commands.py run on both backends).
"""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import select, update

from jedictl.store.schema import metadata, task_commands, tasks
from tests.cli.test_generate import _grid
from tests.cli.test_jobs_report import TASK
from tests.conftest import Cli
from tests.engine.commando.test_rules import ACCEPTED, ALL_STATUSES
from tests.helpers import run_sql

NOW = "2026-12-01T10:00:00"
COMMANDS = {
    "kill": ["kill"],
    "retry": ["retry"],
    "finish": ["task", "finish"],
    "finish --soft": ["task", "finish", "--soft"],
    "incexec": ["task", "incexec"],
    "pause": ["task", "pause"],
    "resume": ["task", "resume"],
    "avalanche": ["task", "avalanche"],
    "reassign": ["task", "reassign"],
}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A SQLite store holding task 1: refined, fed, brokered, with activated jobs."""
    path = tmp_path_factory.mktemp("table")
    url = f"sqlite:///{path / 'template.db'}"
    cli = Cli()
    cli("db", "init", db=url)
    _grid(cli, url, path)
    cli("submit", "-", db=url, input=json.dumps(TASK))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=url)
    (path / "changes.yaml").write_text("nFilesPerJob: 3\n")
    return path


def _dump(url: str) -> dict[str, list]:
    def read(conn):
        return {name: sorted((tuple(map(repr, row)) for row in conn.execute(select(table))))
                for name, table in metadata.tables.items()}
    return run_sql(url, read)


def _args(command: str, template) -> list[str]:
    args = list(COMMANDS[command])
    if command == "incexec":
        return args + ["1", str(template / "changes.yaml")]
    if command == "reassign":
        return args + ["1", "--site", "CERN-PROD_GRID"]
    return args + ["1"]


def test_the_table_covers_every_command_and_status():
    assert {name.split()[0] for name in COMMANDS} == set(ACCEPTED) - {"release"}
    assert len(ALL_STATUSES) >= 28


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_in_every_status(command, template, tmp_path):
    cli = Cli()
    accepted = ACCEPTED[command.split()[0]]
    mistakes = []
    for status in ALL_STATUSES:
        db = tmp_path / f"{status}.db"
        shutil.copy(template / "template.db", db)
        url = f"sqlite:///{db}"
        run_sql(url, lambda conn, s=status: conn.execute(update(tasks).where(tasks.c.id == 1).values(status=s, old_status=None)))
        before = _dump(url)
        result = cli(*_args(command, template), "--user", "olga", "--comment", f"table {status}", "--now", NOW, "-o", "json",
                     db=url, code=None)
        if status in accepted:
            if result.exit_code != 0:
                mistakes.append(f"{command} in {status}: refused ({result.exit_code}) {result.stderr.strip()}")
                continue
            outcome = json.loads(result.stdout)
            recorded = run_sql(url, lambda conn: conn.execute(
                select(task_commands.c.command, task_commands.c.requested_by, task_commands.c.comment, task_commands.c.requested_at,
                       task_commands.c.qualifier)).all())
            expected = [(command.split()[0], "olga", f"table {status}", NOW, "soft" if "soft" in command else None)]
            if [(c, by, why, at.isoformat(), q) for c, by, why, at, q in recorded] != expected or outcome["previous"] != status:
                mistakes.append(f"{command} in {status}: recorded {recorded}, answered {outcome}")
        else:
            lines = result.stderr.strip().splitlines()
            needs = "it is broken" if status == "broken" and command == "retry" else f"its status is {status} ("
            if result.exit_code != 2 or len(lines) != 1 or not lines[0].startswith(f"jedictl: error: cannot {command.split()[0]} task 1: ") \
                    or needs not in lines[0]:
                mistakes.append(f"{command} in {status}: expected a refusal, got exit {result.exit_code} {result.stderr.strip()!r}")
            elif _dump(url) != before:
                mistakes.append(f"{command} in {status}: refused but the store changed")
        db.unlink()
    assert mistakes == []
