"""`jedictl task list|show`."""

from __future__ import annotations

from tests.conftest import EXAMPLES


def test_list_filters_and_formats(cli, store):
    cli("submit", str(EXAMPLES / "prun_files.json"), "--user", "ann", db=store)
    cli("submit", str(EXAMPLES / "prun_noinput.json"), "--user", "bob", db=store)
    cli("refine", "--limit", "1", db=store)
    assert [t["task_id"] for t in cli.json("task", "list", db=store)] == [2, 1]
    assert [t["task_id"] for t in cli.json("task", "list", "--status", "registered", db=store)] == [2]
    assert [t["task_id"] for t in cli.json("task", "list", "--user", "ann", db=store)] == [1]
    assert [t["task_id"] for t in cli.json("task", "list", "--limit", "1", db=store)] == [2]
    tsv = cli("task", "list", "-o", "tsv", db=store).stdout.splitlines()
    assert tsv[0].split("\t")[:4] == ["task_id", "name", "user", "status"]
    assert tsv[1].split("\t")[:4] == ["2", "user.someone.example.gen/", "bob", "registered"]
    assert cli("task", "list", "-o", "yaml", db=store).stdout.startswith("- task_id: 2\n")


def test_piped_table_is_never_truncated(cli, store):
    cli("submit", str(EXAMPLES / "prun_files.json"), db=store)
    cli("refine", db=store)
    table = cli("task", "show", "1", db=store).stdout
    assert "user.someone.example.files_hist.root/" in table and "…" not in table


def test_show_split_rule(cli, store):
    cli("submit", str(EXAMPLES / "prun_files.json"), db=store)
    cli("refine", db=store)
    assert cli("task", "show", "1", "--split-rule", db=store).stdout == "MF=200,NF=4,RR=1,US=2\n"
    assert cli.json("task", "show", "1", "--split-rule", db=store) == {"task_id": 1, "split_rule": "MF=200,NF=4,RR=1,US=2"}


def test_unknown_task_is_exit_2(cli, store):
    assert cli("task", "show", "42", db=store, code=2).stderr.strip() == "jedictl: error: task 42 does not exist"


def test_list_refuses_a_status_that_does_not_exist(cli, store):
    """A typo would match nothing and look like "no such tasks": refused with the allowed statuses."""
    from tests.helpers import refused

    line = refused(cli, store, "task", "list", "--status", "running", "--status", "runing")
    assert line.startswith("jedictl: error: --status: 'runing' is not a task status (allowed: registered, defined, ")
    assert line.endswith("; did you mean 'running'?)")
    assert "toabort" in line  # every status a task can hold is allowed
    assert cli.json("task", "list", "--status", "toabort", db=store) == []
