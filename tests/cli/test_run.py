"""`jedictl run`: every agent once in pipeline order; metrics for the textfile collector; JSON logs;
and the cron-style acceptance test -- two processes running `run --once` over and over until every
task is final (issue 9)."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from jedictl.model import TASK_FINAL
from jedictl.store.invariants import check_all
from jedictl.store.schema import tasks
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.conftest import EXAMPLES
from tests.helpers import jedictl_processes_together, row_counts, run_sql

AGENTS = ["periodic", "refine", "feed", "broker", "generate", "finalize", "watch"]


def _submit(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", str(EXAMPLES / "prun_files.json"), db=store)
    cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "skipScout": True}))


def test_run_once_runs_every_agent_in_pipeline_order(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    result = cli.json("run", "--once", "--seed", "1", db=store)
    assert [p["pass"] for p in result["passes"]] == AGENTS
    by_pass = {p["pass"]: p for p in result["passes"]}
    assert by_pass["refine"]["counts"]["defined"] == 2 and by_pass["generate"]["counts"]["jobs"] > 0
    assert all(p["duration_s"] >= 0 for p in result["passes"])
    only = cli.json("run", "--agents", "watch,refine", db=store)
    assert [p["pass"] for p in only["passes"]] == ["refine", "watch"]  # pipeline order, whatever the list says
    one = cli.json("run", "--agents", "watch", db=store)
    assert list(one) == ["passes"] and [p["pass"] for p in one["passes"]] == ["watch"]  # one shape, however many agents
    assert all(list(p) == ["pass", "counts", "errors", "duration_s", "items"] for p in result["passes"])


def test_item_tables_go_to_stdout_under_a_heading_naming_their_pass(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    result = cli("run", "--seed", "1", db=store)
    lines = result.stdout.splitlines()
    # broker's items carry reasons (the nucleus chosen): its table, headed "broker", is on stdout
    at = lines.index("broker")
    assert lines[at + 1].split() == ["outcome", "task_id", "reason"] and "nucleus" in lines[at + 3]
    assert "broker:" in result.stderr and "broker" not in result.stderr.replace("broker:", "")  # the counts stay on stderr
    tsv = cli("run", "--seed", "2", "-o", "tsv", db=store).stdout.splitlines()
    assert tsv[0].split("\t")[:2] == ["pass", "outcome"] and {line.split("\t")[0] for line in tsv[1:]} <= set(AGENTS)
    # nothing to report is still a table for a script: the header line (it printed nothing at all)
    assert cli("finalize", "-o", "tsv", "--now", "2020-01-01T00:00:00", db=store).stdout == "pass\toutcome\n"


def test_bad_agent_names_and_options_are_refused_without_touching_the_store(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    before = row_counts(store)
    assert "unknown agent 'brokr'" in cli("run", "--agents", "brokr", db=store, code=2).stderr
    assert "--once or --loop" in cli("run", "--once", "--loop", "5", db=store, code=2).stderr
    assert "--log-format" in cli("run", "--log-format", "xml", db=store, code=2).stderr
    assert row_counts(store) == before


@pytest.mark.parametrize("where,message", [
    ("/nonexistent/dir/m.prom", "directory /nonexistent/dir does not exist"),
    ("{tmp}", "{tmp} is a directory; name the file to write in it (e.g. {tmp}/jedictl.prom)"),
    ("{tmp}/plain/m.prom", "{tmp}/plain is not a directory"),
    ("{tmp}/new.prom/", "{tmp}/new.prom/ names a directory; name the file to write in it (e.g. {tmp}/new.prom/jedictl.prom)"),
])
def test_a_metrics_file_that_cannot_be_written_is_refused_before_any_pass(cli, store, tmp_path, where, message):
    """Every pass committed, then the write failed as an internal error (FileNotFoundError); given a
    directory, the temporary file was made in its parent (`/` for `/tmp`)."""
    _submit(cli, store, tmp_path)
    (tmp_path / "plain").write_text("a file where a directory is expected")
    where, message = where.format(tmp=tmp_path), message.format(tmp=tmp_path)
    before = row_counts(store)
    result = cli("run", "--metrics-file", where, db=store, code=2)
    assert (result.stdout, result.stderr) == ("", f"jedictl: error: --metrics-file: {message}\n")
    assert row_counts(store) == before and {t["status"] for t in cli.json("task", "list", db=store)} == {"registered"}
    assert not list(tmp_path.parent.glob(".jedictl-metrics.*")) and not list(tmp_path.glob(".jedictl-metrics.*"))
    from_env = cli("refine", env={"JEDICTL_METRICS_FILE": where}, db=store, code=2)
    assert from_env.stderr == f"jedictl: error: JEDICTL_METRICS_FILE: {message}\n"
    assert row_counts(store) == before


def test_a_metrics_file_that_fails_after_the_passes_is_one_line(cli, store, tmp_path, monkeypatch):
    """The directory checked before the passes can still go away: one line, exit 1, not an internal error."""
    from jedictl.engine.views import metrics

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(metrics, "write_metrics", full)
    result = cli("run", "-q", "--metrics-file", str(tmp_path / "m.prom"), db=store, code=1)
    assert result.stderr == f"jedictl: error: --metrics-file: cannot write {tmp_path / 'm.prom'}: No space left on device\n"


def test_metrics_file_is_prometheus_text_and_keeps_other_agents_series(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    path = tmp_path / "jedictl.prom"
    cli("run", "--metrics-file", str(path), db=store)
    text = path.read_text()
    # Every series line is `name{labels} value`; HELP and TYPE once per metric.
    series = [line for line in text.splitlines() if not line.startswith("#")]
    assert series and all(re.fullmatch(r'jedictl_[a-z_]+\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\} -?[0-9.e+]+', line) for line in series), text
    types = [line for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)) == 6 and all(line.endswith(" gauge") for line in types)
    for agent in AGENTS:
        assert f'jedictl_pass_duration_seconds{{agent="{agent}"}}' in text
    assert 'jedictl_tasks{status="running"} 2' in text or 'jedictl_tasks{status="scouting"}' in text
    assert re.search(r'jedictl_jobs\{status="activated"\} \d+', text)
    # A single agent command writing the same file replaces only its own series.
    cli("generate", db=store, env={"JEDICTL_METRICS_FILE": str(path)})
    again = path.read_text()
    assert 'jedictl_pass_duration_seconds{agent="refine"}' in again
    assert again.count('jedictl_pass_duration_seconds{agent="generate"}') == 1
    assert not list(tmp_path.glob(".jedictl-metrics.*"))  # no temporary file left behind


def test_quiet_runs_print_nothing_unless_something_went_wrong(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    cli("run", "--seed", "1", db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", db=store)
    result = cli("run", "-q", "--seed", "2", db=store)  # tasks move on (scouted, done ...): routine, not news
    assert result.stdout == "" and result.stderr == ""


def test_json_log_lines_one_per_pass(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    result = cli("run", "--log-format", "json", db=store)
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert [line["pass"] for line in lines] == AGENTS
    assert all(line["event"] == "pass" and line["level"] == "info" and line["ts"].endswith("Z") for line in lines)
    assert lines[AGENTS.index("refine")]["defined"] == 2 and isinstance(lines[0]["duration_s"], float)


def test_log_format_and_metrics_file_come_from_the_environment_too(cli, store, tmp_path):
    """JEDICTL_LOG_FORMAT and JEDICTL_METRICS_FILE, as operations.md and `run --help` promise (they were
    once ignored: only JEDICTL_X__Y names and four top-level ones were read)."""
    _submit(cli, store, tmp_path)
    path = tmp_path / "from-env.prom"
    result = cli("watch", db=store, env={"JEDICTL_LOG_FORMAT": "json", "JEDICTL_METRICS_FILE": str(path)})
    assert json.loads(result.stderr.splitlines()[0])["pass"] == "watch"
    assert 'jedictl_pass_duration_seconds{agent="watch"}' in path.read_text()
    shown = {row["key"]: row for row in cli.json("config", "show", env={"JEDICTL_LOG_FORMAT": "json", "JEDICTL_METRICS_FILE": "123"})}
    assert (shown["log_format"]["value"], shown["log_format"]["source"]) == ("json", "env JEDICTL_LOG_FORMAT")
    assert shown["metrics_file"]["value"] == "123"  # a path is text, never parsed as a number


@pytest.mark.slow
def test_two_cron_processes_run_the_pipeline_until_every_task_is_final(cli, store, tmp_path):
    _submit(cli, store, tmp_path)
    final = {status.value for status in TASK_FINAL}
    for round_nr in range(1, 40):
        # Two overlapping `run --once`, as two cron lines (or two hosts) would start them.
        workers = jedictl_processes_together([["run", "--once", "-q", "--db", store, "--seed", str(round_nr * 2 + k)] for k in range(2)],
                                             tmp_path)
        for worker in workers:
            _, stderr = worker.communicate(timeout=300)
            assert worker.returncode == 0, stderr
        statuses = run_sql(store, lambda conn: [r.status for r in conn.execute(select(tasks.c.status))])
        if set(statuses) <= final:
            break
        cli("simulate", "--seed", str(round_nr), "--failure-rate", "0.1", db=store)
        assert run_sql(store, check_all) == []
    assert set(statuses) <= final, statuses
    assert run_sql(store, check_all) == []
