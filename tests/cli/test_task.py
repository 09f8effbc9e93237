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


TERMINAL_80 = {"TTY_COMPATIBLE": "1", "COLUMNS": "80"}  # a terminal of 80 columns (NO_COLOR and TERM=dumb from conftest)
LONG_NAME = "user.someone.mc23_13p6TeV.700000.Sh_2214_ttbar_pTbins.simul.HITS.e9000_s4162_analysis_v17/"


def _long_named_task(cli, store) -> None:
    import json

    params = json.loads((EXAMPLES / "prun_files.json").read_text())
    cli("submit", "-", db=store, input=json.dumps({**params, "taskName": LONG_NAME}))
    cli("refine", db=store)


def test_list_at_80_columns_keeps_each_task_on_one_line(cli, store):
    from rich.cells import cell_len

    _long_named_task(cli, store)
    cli("submit", str(EXAMPLES / "prun_noinput.json"), db=store)
    lines = cli("task", "list", db=store, env=TERMINAL_80).stdout.splitlines()
    assert len(lines) == 2 + 2 and all(cell_len(line) <= 80 for line in lines)  # header, rule, one line per task
    assert lines[0].split()[:4] == ["task_id", "name", "user", "status"]
    long_row = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "…" in long_row and "user.someone.mc" in long_row and "analysis_v17/" in long_row  # the middle gives way
    assert "modified_at" not in lines[0]  # the least telling column makes room
    assert LONG_NAME in cli("task", "list", db=store).stdout  # piped: whole, every default column
    wide = cli("task", "list", "--wide", db=store, env=TERMINAL_80).stdout
    assert "…" not in wide and "modified_at" in wide and all(cell_len(line) <= 80 for line in wide.splitlines())
    picked = cli("task", "list", "--columns", "status,task_id", db=store, env=TERMINAL_80).stdout.splitlines()
    assert picked[0].split() == ["status", "task_id"] and picked[2].split() == ["registered", "2"]
    bad = cli("task", "list", "--columns", "task_id,colour", db=store, code=2).stderr
    assert bad.startswith("jedictl: error: --columns: no column colour; choose from task_id, name, user, status")


def test_show_at_80_columns_has_a_readable_dataset_table_and_key_value_blobs(cli, store):
    from rich.cells import cell_len

    _long_named_task(cli, store)
    text = cli("task", "show", "1", db=store, env=TERMINAL_80).stdout
    assert all(cell_len(line) <= 80 for line in text.splitlines())
    assert "options            n_files_per_job: 4\n" in text  # options and resources as key: value lines, not JSON
    assert "resources          core_count: 1\n" in text and '{"' not in text
    datasets = text[text.index("\ndatasets\n") + 1:].split("\n\n")[0].splitlines()
    header = datasets[1].split()
    assert header[:4] == ["dataset_id", "name", "type", "status"] and len(header) <= 10  # the narrow set, not 23 columns
    rows = datasets[3:]
    assert rows and all(len(row.split()) == len(header) or row.split()[0].isdigit() for row in rows)
    assert all(len(row.split()[1]) >= 20 for row in rows)  # names are read, not 2-character stubs
    every = cli("task", "show", "1", "--wide", db=store).stdout
    assert "n_files_on_hold" in every and "n_files_on_hold" not in cli("task", "show", "1", db=store).stdout


def test_list_refuses_a_status_that_does_not_exist(cli, store):
    """A typo would match nothing and look like "no such tasks": refused with the allowed statuses."""
    from tests.helpers import refused

    line = refused(cli, store, "task", "list", "--status", "running", "--status", "runing")
    assert line.startswith("jedictl: error: --status: 'runing' is not a task status (allowed: registered, defined, ")
    assert line.endswith("; did you mean 'running'?)")
    assert "toabort" in line  # every status a task can hold is allowed
    assert cli.json("task", "list", "--status", "toabort", db=store) == []
