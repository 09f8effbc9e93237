"""Bad input found by fuzzing the command line and the files: each case used to end in "internal
error" (an overflow, a driver error, a traceback's worth of surprise) or in a multi-line error. Now:
exit 2 with one line naming the field, or exit 3 for a store URL, and nothing written."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT
from tests.helpers import row_counts

PRUN = str(EXAMPLES / "prun_files.json")
BIG = str(2**63)


def one_line(result) -> str:  # noqa: ANN001
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("jedictl: error: "), result.stderr
    return lines[0]


@pytest.fixture
def grid(cli, store):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    cli("data", "import", str(ROOT / "examples" / "data.yaml"), db=store)
    cli("submit", PRUN, db=store)
    return store


@pytest.mark.parametrize("args,field", [
    (["task", "show", BIG], "TASK_ID"), (["task", "pause", BIG], "TASK_ID"), (["kill", BIG], "TASK_ID"), (["explain", "task", BIG], "TASK_ID"),
    (["task", "settle", "1", BIG], "TASK_ID"), (["jobs", "kill", "1", BIG], "JOB"), (["jobs", "kill", "--task", BIG], "--task"),
    (["jobs", "list", "--limit", BIG], "--limit"), (["task", "list", "--limit", BIG], "--limit"), (["retry-rules", "remove", BIG], "ID"),
    (["retry-rules", "list", "--code", "-" + BIG], "--code"), (["jobs", "heartbeat", BIG], "JOB"),
])
def test_integers_beyond_bigint_are_bad_input(cli, grid, args, field):
    """The drivers raised OverflowError ("Python int too large to convert to SQLite INTEGER"). The
    message names the bound crossed, not BIGINT's whole range (ids must be at least 1)."""
    before = row_counts(grid)
    line = one_line(cli(*args, db=grid, code=2))
    bound = f"at least -{2**63 - 1}" if "-" + BIG in args else f"at most {2**63 - 1}"
    what = "job id " if field == "JOB" else ""  # JOB (an id or TASK.INDEX) says which number is out of range
    assert line == f"jedictl: error: {field}: {what}must be {bound}"
    assert row_counts(grid) == before


@pytest.mark.parametrize("job,message", [
    ("999999999999999999999999999", f"job id must be at most {2**63 - 1}"),  # OverflowError on SQLite
    ("1.3000000000", f"job index must be at most {2**31 - 1}"),  # NumericValueOutOfRange on PostgreSQL
    (f"{2**63}.1", f"task id must be at most {2**63 - 1}"),
    ("0", "job id must be at least 1"), ("0.1", "task id must be at least 1"), ("1.0", "job index must be at least 1: TASK.INDEX counts from 1, and Ganga's subjob 0 of task 1 is job 1.1 "
                                             "(resubmit, kill and copy also take Ganga's ids as --task 1 --subjob 0)"),
])
def test_a_job_reference_out_of_range_is_bad_input(cli, grid, job, message):
    assert one_line(cli("jobs", "show", job, db=grid, code=2)) == f"jedictl: error: JOB: {message}"


@pytest.mark.parametrize("args,message", [
    (["submit", PRUN, "--priority", str(2**31)], "--priority: must be at most 1000000000"),
    (["jobs", "dispatch", "--site", "CERN-PROD_GRID", "--memory", str(2**31)], "--memory: must be at most 2147483647"),
    (["jobs", "dispatch", "--site", "CERN-PROD_GRID", "--walltime", str(2**31)], "--walltime: must be at most 2147483647"),
    (["jobs", "kill", "1", "--code", str(2**31)], "--code: must be at most 2147483647"),
])
def test_integers_beyond_integer_columns_are_bad_input(cli, grid, args, message):
    """On PostgreSQL these overflowed INTEGER columns (NumericValueOutOfRange)."""
    before = row_counts(grid)
    assert one_line(cli(*args, db=grid, code=2)) == f"jedictl: error: {message}"
    assert row_counts(grid) == before


def test_a_rule_code_no_column_can_hold_lists_nothing(cli, grid):
    cli("retry-rules", "import", str(ROOT / "examples" / "retry-rules.yaml"), db=grid)
    assert cli.json("retry-rules", "list", "--code", str(2**31), db=grid) == []


@pytest.mark.parametrize("key,value,field", [
    ("max_memory", 2**31, "sites[0].max_memory"), ("max_running", 2**40, "sites[0].max_running"),
    ("job_caps", {"managed": {"max_running": 2**31}}, "sites[0].job_caps.managed.max_running"),
])
def test_site_counts_fit_their_integer_columns(cli, store, key, value, field):
    result = cli("sites", "import", "-", db=store, input=json.dumps({"sites": [{"name": "S", key: value}]}), code=2)
    assert one_line(result) == f"jedictl: error: {field}: must be at most 2147483647"
    assert row_counts(store)["sites"] == 0


@pytest.mark.parametrize("option,value", [("ram_count", 2**31), ("walltime", 2**40), ("base_ram_count", 2**31)])
def test_task_options_fit_the_columns_the_refiner_writes(cli, grid, option, value):
    spec = {"name": "big", "command": "--in=${IN} --out=${OUTPUT0}", "inputs": [{"dataset": "ds.in"}],
            "outputs": [{"dataset": "ds.out", "file_template": "o.${SN}"}], "resources": {option: value}}
    assert one_line(cli("submit", "-", db=grid, input=yaml.safe_dump(spec), code=2)) == (
        f"jedictl: error: resources.{option}: must be at most 2147483647")


@pytest.mark.parametrize("when", ["0001-01-01", "0001-01-01T00:00:00+01:00", "9999-12-31", "9999-12-31T23:59:59-01:00"])
def test_now_near_the_ends_of_the_calendar_is_bad_input(cli, grid, when):
    """Agents add and subtract days from now: `--now 0001-01-01` overflowed datetime in finalize."""
    result = cli("finalize", "--now", when, db=grid, code=2)
    assert one_line(result) in (f"jedictl: error: --now: {when!r} is not an ISO-8601 time",
                                "jedictl: error: --now: must lie between 1970-01-01 and 9000-01-01")


@pytest.mark.parametrize("key", ["colour\nsecond line", "a\rb", "x\u2028y", "a\x1b[2Jb"])
def test_errors_stay_on_one_line_whatever_the_input_holds(cli, store, key):
    """An unknown key is named in the error; a newline or escape sequence in it used to break the line."""
    result = cli("sites", "import", "-", db=store, input=json.dumps({"sites": [{"name": "S", key: 1}]}), code=2)
    line = one_line(result)
    assert line.startswith("jedictl: error: sites[0].") and line.endswith(": unknown field")
    assert not any(char in line for char in "\r\x1b\u2028")


@pytest.mark.parametrize("url,message", [
    ("postgresql+psycopg://u:p@127.0.0.1:notaport/x", "is not valid: invalid literal for int() with base 10: 'notaport'"),
    ("postgresql+psycopg://u:p@ss@127.0.0.1:1/x", "is not valid: write an @ in the password as %40"),
])
@pytest.mark.parametrize("command", [["task", "list"], ["db", "init"], ["db", "current"], ["db", "upgrade"]])
def test_unreadable_store_urls_are_exit_3(cli, url, message, command):
    result = cli(*command, db=url, code=3)
    assert message in one_line(result) and ":p@" not in result.stderr


def test_bind_variables_must_be_scalars(cli, store):
    document = {"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "processingType = :p1", "variables": {"p1": {"a": [1]}}}]}
    assert one_line(cli("queue-shares", "import", "-", db=store, input=yaml.safe_dump(document), code=2)) == (
        "jedictl: error: work_queues[0].variables.p1: must be a string or a number")


@pytest.mark.parametrize("steps", [[None, 2, 3], [1, 2, "x"]])
def test_retry_steps_must_be_numbers(cli, store, steps):
    """A null step reached `None < int` (TypeError)."""
    rules = [{"error_source": "pilot", "error_code": 1, "action": "reduce_input_per_job", "parameters": {"steps": steps}}]
    assert "[0].parameters.steps" in one_line(cli("retry-rules", "import", "-", db=store, input=json.dumps(rules), code=2))
