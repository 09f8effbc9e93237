"""`jedictl check`: the verdict and the violations on stdout, violations as objects for scripts."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from jedictl.store.schema import datasets
from tests.conftest import EXAMPLES
from tests.helpers import run_sql


def _fed_task(cli, store) -> int:
    cli("sites", "import", str(EXAMPLES.parent / "sites.yaml"), db=store)
    cli("data", "import", str(EXAMPLES.parent / "data.yaml"), db=store)
    task_id = cli.json("submit", str(EXAMPLES / "prun_files.json"), db=store)["task_id"]
    cli("refine", db=store)
    cli("feed", db=store)
    return task_id


def test_consistent_is_said_on_stdout_and_in_every_format(cli, store):
    _fed_task(cli, store)
    result = cli("check", db=store)
    assert result.stdout == "check: consistent\n" and result.stderr == ""
    assert cli("check", "-q", db=store).stdout == ""  # cron: silence unless something is wrong
    assert cli.json("check", db=store) == {"ok": True, "violations": []}
    assert cli("check", "-o", "tsv", db=store).stdout == "check\tobject\tmessage\n"  # a header, never nothing


def test_violations_are_objects_naming_the_check_and_the_object(cli, store):
    task_id = _fed_task(cli, store)
    def break_one_counter(conn):
        first = conn.execute(select(func.min(datasets.c.id)).where(datasets.c.task_id == task_id, datasets.c.type == "input")).scalar()
        conn.execute(datasets.update().where(datasets.c.id == first).values(n_files=datasets.c.n_files + 1))
    run_sql(store, break_one_counter)
    report = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    assert report["ok"] is False and len(report["violations"]) == 1
    violation = report["violations"][0]
    assert set(violation) == {"check", "object", "message"}
    assert violation["check"] == "dataset_counters" and violation["object"].startswith(f"task {task_id} input dataset ")
    assert "n_files 13 but 12 records" in violation["message"]
    table = cli("check", db=store, code=1)
    assert table.stdout.startswith("check: 1 violations\n") and "dataset_counters" in table.stdout and table.stderr == ""
    tsv = cli("check", "-o", "tsv", db=store, code=1).stdout.splitlines()
    assert tsv[0] == "check\tobject\tmessage" and tsv[1].startswith("dataset_counters\ttask ")
