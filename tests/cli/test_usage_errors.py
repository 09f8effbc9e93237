"""Usage errors of the command line (Click's parser, Typer's value checks) in jedictl's format: one line
`jedictl: error: WHAT: why`, a hint on a second line at most, exit 2 -- never Typer's five-line box,
on a terminal or in a pipe. `-v` is a counter and takes no value; -vv shows a traceback instead of a
hint to run with -vv."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.helpers import row_counts

BOX = set("╭╮╰╯│─")


def error_lines(result) -> list[str]:  # noqa: ANN001
    lines = result.stderr.rstrip("\n").split("\n")
    assert 1 <= len(lines) <= 2 and lines[0].startswith("jedictl: error: "), result.stderr
    assert not BOX & set(result.stderr), result.stderr
    assert result.stdout == "", result.stdout
    return lines


@pytest.mark.parametrize("args,line,hint", [
    # missing argument / option
    (["jobs", "show"], "JOB: missing argument", "usage: jedictl jobs show [OPTIONS] "),
    (["submit"], "FILE|-: missing argument", "usage: jedictl submit [OPTIONS] "),
    (["jobs", "dispatch"], "--site: missing option", "usage: jedictl jobs dispatch [OPTIONS]"),
    # unknown option
    (["task", "list", "--bogus"], "--bogus: no such option", None),
    (["task", "list", "--limt", "3"], "--limt: no such option", "did you mean --limit"),
    (["--bogus", "task", "list"], "--bogus: no such option", None),
    # bad value
    (["task", "list", "--limit", "x"], "--limit: 'x' is not an integer", None),
    (["task", "list", "--limit", "1.5"], "--limit: '1.5' is not an integer", None),
    (["task", "list", "--limit", "0"], "--limit: must be at least 1", None),
    (["submit", "x.json", "--parent", "0"], "--parent: must be at least 1", None),
    (["kill", "0"], "TASK_ID: must be at least 1", None),
    (["retry", "1", "--max-attempt", "0"], "--max-attempt: must be at least 1", None),
    (["simulate", "--failure-rate", "2"], "--failure-rate: must be at most 1", None),
    (["run", "--loop", "abc"], "--loop: 'abc' is not a number", None),
    (["task", "list", "-o", "xml"], "--output: 'xml' is not one of 'table', 'json', 'yaml', 'tsv'", None),
    (["task", "list", "-o"], "-o: needs a value", None),
    # unknown command
    (["bogus"], "no such command 'bogus'", "see 'jedictl -h'"),
    (["jobs", "bogus"], "jobs: no such command 'bogus'", "commands: copy, dispatch, events, heartbeat, kill, list, reassign, report, resubmit, show"),
    (["jobs", "lst"], "jobs: no such command 'lst'", "did you mean list?"),
    # extra argument
    (["jobs", "show", "1", "2", "3"], "jobs show: unexpected arguments '2', '3'", "usage: jedictl jobs show [OPTIONS] "),
    (["task", "list", "5"], "task list: unexpected argument '5'", "usage: jedictl task list [OPTIONS]"),
])
def test_usage_errors_are_one_line_and_exit_2(cli, store, args, line, hint):
    """Each was Typer's box: "Usage: ...", "Try '... -h' for help.", and three to four lines of a
    rounded box around Click's message ("Invalid value for '--limit': Input should be ...")."""
    before = row_counts(store)
    lines = error_lines(cli(*args, env={"JEDICTL_DB": store}, code=2))
    assert lines[0] == f"jedictl: error: {line}"
    if hint is None:
        assert len(lines) == 1 or lines[1].startswith(("see ", "did you mean")), lines
    else:
        assert len(lines) == 2 and lines[1].startswith(hint), lines
    assert row_counts(store) == before


@pytest.mark.parametrize("args,flag", [
    (["-v", "3", "task", "list"], "-v"), (["--verbose", "2", "task", "list"], "--verbose"),
    (["--verbose=2", "task", "list"], "--verbose"), (["task", "list", "-v", "3"], "-v"), (["task", "-vv", "2", "list"], "-vv"),
])
def test_verbose_is_a_counter_that_takes_no_value(cli, store, args, flag):
    """`-v 3` and `--verbose 2` were read as commands ("No such command '3'")."""
    lines = error_lines(cli(*args, db=store, code=2))
    assert lines == [f"jedictl: error: {flag}: takes no value; repeat it for more detail (-v, -vv)"]


def test_a_number_after_v_is_still_an_argument_where_one_is_expected(cli, store):
    assert cli("task", "show", "-v", "3", db=store, code=2).stderr == "jedictl: error: task 3 does not exist\n"


def test_no_args_still_prints_the_help(cli):
    result = cli("task", code=2)
    assert "list" in result.stdout and result.stderr == ""


#: `jedictl ARGS` in a real process, named as the installed script names itself.
JEDICTL = [sys.executable, "-c", "import sys; sys.argv[0] = 'jedictl'; from jedictl.cli import main; main()"]


def _process(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("NO_COLOR", None)
    return subprocess.run([*JEDICTL, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def test_usage_errors_in_a_pipe_and_on_a_terminal(tmp_path):
    """A real process: piped, and with stderr on a terminal (where Typer drew its box in colour)."""
    piped = _process(["jobs", "show"])
    assert piped.returncode == 2 and piped.stderr == "jedictl: error: JOB: missing argument\nusage: jedictl jobs show [OPTIONS] JOB\n"  # the usage form of --help and the man page
    import pty

    leader, follower = pty.openpty()
    try:
        env = {**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        process = subprocess.run([*JEDICTL, "task", "list", "--limit", "x"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=follower, env=env, cwd=ROOT, timeout=60)
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert process.returncode == 2
    assert seen.decode().replace("\r\n", "\n") == "jedictl: error: --limit: 'x' is not an integer\n"


def test_internal_error_at_vv_shows_the_traceback_without_the_hint(cli, store, monkeypatch):
    """At -vv the traceback is printed; the line no longer ends "(run with -vv for the traceback)"."""
    from jedictl.engine.views import tasks

    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(tasks, "list_tasks", broken)
    plain = cli("task", "list", db=store, code=1).stderr
    assert plain == "jedictl: internal error: RuntimeError: boom (run with -vv for the traceback)\n"
    traced = cli("task", "list", "-vv", db=store, code=1).stderr
    assert "Traceback (most recent call last)" in traced
    assert traced.rstrip("\n").split("\n")[-1] == "jedictl: internal error: RuntimeError: boom"
