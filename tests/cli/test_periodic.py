"""`jedictl periodic`: templates with a schedule, instantiated when due (by `periodic instantiate` and
as the first pass of `jedictl run`), a cap on active instances, pause, resume, remove; the instances
linked to their template in `task list` and `task show` (docs/periodic-tasks.md)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from jedictl.clock import parse_time
from jedictl.store.schema import tasks
from tests.conftest import ROOT
from tests.helpers import run_sql, store_dump
from tests.periodic_specs import NOW, hc_template

NAME = "hc.test.ANALY_X"


def _spec(tmp_path, document=None, name="hc.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document or hc_template()))
    return str(path)


def _add(cli, store, tmp_path, *options, document=None, now=NOW):
    return cli.json("periodic", "add", _spec(tmp_path, document), *(options or ("--every", "1h")), "--now", now, db=store)


def _instantiate(cli, store, now):
    return cli.json("periodic", "instantiate", "--now", now, db=store)


def _end(store, task_id, status="done"):
    run_sql(store, lambda conn: conn.execute(tasks.update().where(tasks.c.id == task_id).values(status=status)))


def test_a_template_is_added_listed_and_instantiated_when_due(cli, store, tmp_path):
    added = _add(cli, store, tmp_path, "--every", "1h", "--max-active", "2")
    assert added["name"] == NAME and added["status"] == "active" and added["schedule"] == "every 1h" and added["max_active"] == 2
    assert added["next_due_at"] == "2026-11-27T23:00:00Z" and added["tasks"] == []  # due at once: --start defaults to now
    assert added["upcoming"] == ["2026-11-27T23:00:00Z", "2026-11-28T00:00:00Z", "2026-11-28T01:00:00Z"]
    assert added["document"]["name"] == "hc.test.ANALY_X.${DUE}"
    assert _instantiate(cli, store, "2026-11-27T22:59:00")["counts"]["instantiated"] == 0  # not due yet

    report = _instantiate(cli, store, "2026-11-27T23:04:00")
    assert report["counts"] == {"instantiated": 1, "capped": 0, "refused": 0, "skipped": 0, "error": 0, "missed": 0}
    item = report["items"][0]
    assert (item["template"], item["due_at"], item["missed"]) == (NAME, "2026-11-27T23:00:00Z", 0)
    task = cli.json("task", "show", str(item["task_id"]), db=store)
    assert task["name"] == "hc.test.ANALY_X.20261127T2300" and task["status"] == "registered"
    assert task["periodic"] == {"template_id": added["template_id"], "template": NAME, "due_at": "2026-11-27T23:00:00Z"}
    assert [d["name"] for d in cli.json("task", "show", str(item["task_id"]), db=store)["datasets"]] == []  # not refined yet
    listed = cli.json("task", "list", db=store)
    assert [(t["task_id"], t["template"]) for t in listed] == [(item["task_id"], NAME)]
    assert "hc.test.ANALY_X" in cli("task", "list", db=store).stdout.splitlines()[2]  # the template column of the table
    assert _instantiate(cli, store, "2026-11-27T23:30:00")["items"] == []  # the next one is due at midnight

    row = cli.json("periodic", "list", db=store)[0]
    assert {k: row[k] for k in ("name", "active", "instances", "capped", "missed", "last_outcome", "next_due_at")} == {
        "name": NAME, "active": 1, "instances": 1, "capped": 0, "missed": 0, "last_outcome": "instantiated",
        "next_due_at": "2026-11-28T00:00:00Z"}
    shown = cli.json("periodic", "show", NAME, db=store)
    assert [(t["task_id"], t["due_at"]) for t in shown["tasks"]] == [(item["task_id"], "2026-11-27T23:00:00Z")]
    assert shown["last_task_id"] == item["task_id"]
    assert "hc.test.ANALY_X.20261127T2300" in cli("periodic", "show", NAME, db=store).stdout


def test_a_due_time_that_finds_the_cap_reached_is_skipped_not_deferred(cli, store, tmp_path):
    _add(cli, store, tmp_path, "--every", "1h", "--max-active", "2")
    first = _instantiate(cli, store, "2026-11-27T23:00:00")["items"][0]["task_id"]
    second = _instantiate(cli, store, "2026-11-28T00:00:00")["items"][0]
    assert second["outcome"] == "instantiated"  # two may be active at once
    capped = _instantiate(cli, store, "2026-11-28T01:00:00")
    assert capped["counts"]["capped"] == 1 and capped["items"][0]["task_id"] is None
    assert capped["items"][0]["reason"] == "2 instances still active (max_active 2): this due time is skipped"
    _end(store, first, "failed")  # an instance that ended no longer counts, whatever its end
    # 01:00 was skipped for good: the instance made at 01:30 would be the 02:00 one, not the 01:00 one
    assert _instantiate(cli, store, "2026-11-28T01:30:00")["items"] == []
    made = _instantiate(cli, store, "2026-11-28T02:00:00")["items"][0]
    assert made["outcome"] == "instantiated" and made["due_at"] == "2026-11-28T02:00:00Z"
    shown = cli.json("periodic", "show", NAME, db=store)
    assert (shown["instances"], shown["capped"], shown["active"]) == (3, 1, 2)
    assert [t["due_at"][11:16] for t in shown["tasks"]] == ["02:00", "00:00", "23:00"]


def test_missed_due_times_are_counted_and_not_made_up_for(cli, store, tmp_path):
    _add(cli, store, tmp_path, "--every", "30m", "--max-active", "5")
    report = _instantiate(cli, store, "2026-11-28T01:40:00")  # 23:00 23:30 00:00 00:30 01:00 passed unseen
    assert report["counts"]["instantiated"] == 1 and report["counts"]["missed"] == 5
    assert report["items"][0]["due_at"] == "2026-11-28T01:30:00Z"
    assert cli.json("periodic", "show", NAME, db=store)["missed"] == 5
    assert len(cli.json("task", "list", "--template", NAME, db=store)) == 1


def test_a_cron_schedule_and_a_start(cli, store, tmp_path):
    added = _add(cli, store, tmp_path, "--cron", "*/15 * * * *", "--start", "2026-11-27T23:20:00Z", "--max-active", "9")
    assert added["schedule"] == "cron */15 * * * *" and added["cron"] == "*/15 * * * *" and added["every"] is None
    assert added["next_due_at"] == "2026-11-27T23:30:00Z"
    assert _instantiate(cli, store, "2026-11-27T23:29:59")["items"] == []
    assert _instantiate(cli, store, "2026-11-27T23:30:00")["items"][0]["due_at"] == "2026-11-27T23:30:00Z"
    assert _instantiate(cli, store, "2026-11-27T23:50:00")["items"][0]["due_at"] == "2026-11-27T23:45:00Z"
    names = [t["name"] for t in cli.json("task", "list", "--template", NAME, db=store)]
    assert names == ["hc.test.ANALY_X.20261127T2345", "hc.test.ANALY_X.20261127T2330"]


def test_pause_stops_instances_and_resume_starts_from_now(cli, store, tmp_path):
    _add(cli, store, tmp_path, "--every", "1h", "--max-active", "9")
    _instantiate(cli, store, "2026-11-27T23:00:00")
    paused = cli.json("periodic", "pause", NAME, "--now", "2026-11-27T23:10:00", db=store)
    assert paused["status"] == "paused" and paused["changed"] is True and paused["next_due_at"] is None
    again = cli("periodic", "pause", NAME, db=store)
    assert again.stderr == f"periodic: {NAME} was already paused\n"
    assert _instantiate(cli, store, "2026-11-28T03:30:00")["items"] == []
    assert cli.json("periodic", "list", "--status", "paused", db=store)[0]["name"] == NAME
    assert cli.json("periodic", "list", "--status", "active", db=store) == []
    resumed = cli.json("periodic", "resume", NAME, "--now", "2026-11-28T03:30:00", db=store)
    assert resumed["status"] == "active" and resumed["next_due_at"] == "2026-11-28T04:00:00Z"
    assert cli("periodic", "resume", NAME, db=store).stderr == f"periodic: {NAME} was not paused\n"
    report = _instantiate(cli, store, "2026-11-28T04:00:00")
    assert report["counts"]["instantiated"] == 1 and report["counts"]["missed"] == 0  # paused hours are not missed ones


def test_remove_keeps_the_instances(cli, store, tmp_path):
    template_id = _add(cli, store, tmp_path)["template_id"]
    task_id = _instantiate(cli, store, NOW)["items"][0]["task_id"]
    assert cli.json("periodic", "remove", NAME, db=store) == {"removed": NAME, "template_id": template_id}
    assert cli.json("periodic", "list", db=store) == []
    task = cli.json("task", "show", str(task_id), db=store)
    assert task["status"] == "registered" and task["periodic"] == {"template_id": template_id, "template": None,
                                                                   "due_at": "2026-11-27T23:00:00Z"}
    assert cli.json("task", "list", db=store)[0]["template"] is None
    # the name is free again, and a new template of that name is another template
    assert _add(cli, store, tmp_path)["template_id"] != template_id


def test_a_refused_submission_is_the_outcome_of_its_due_time(cli, store, tmp_path):
    other = hc_template(site="OTHER")
    other["name"] = "someone.else"
    other["outputs"] = [{"dataset": "hc.test.ANALY_X.20261127T2300.out", "file_template": "x.${SN}"}]
    other["log"] = {"dataset": "someone.else.log", "file_template": "x.${SN}.log"}
    cli("submit", _spec(tmp_path, other, "other.yaml"), "--user", "bob", db=store)
    _add(cli, store, tmp_path)
    report = cli("periodic", "instantiate", "--now", NOW, "-o", "json", db=store)  # no error: the refusal is the outcome
    item = json.loads(report.stdout)["items"][0]
    assert item["outcome"] == "refused" and item["task_id"] is None
    assert item["reason"].startswith("outputs[0]: output dataset hc.test.ANALY_X.20261127T2300.out belongs to task 1 (registered) of user bob")
    shown = cli.json("periodic", "show", NAME, db=store)
    assert (shown["refused"], shown["last_outcome"], shown["next_due_at"]) == (1, "refused", "2026-11-28T00:00:00Z")
    assert shown["last_reason"] == item["reason"]
    assert _instantiate(cli, store, "2026-11-28T00:00:00")["counts"]["instantiated"] == 1  # the schedule goes on


def test_run_instantiates_first_and_refines_the_instance_in_the_same_run(cli, store, tmp_path):
    _add(cli, store, tmp_path)
    passes = cli.json("run", "--agents", "refine,periodic", "--now", NOW, db=store)["passes"]
    assert [p["pass"] for p in passes] == ["periodic", "refine"]
    assert passes[0]["counts"]["instantiated"] == 1 and passes[1]["counts"]["defined"] == 1
    assert cli.json("task", "list", "--template", NAME, db=store)[0]["status"] == "defined"
    assert cli("check", db=store).stdout == "check: consistent\n"


def test_two_passes_on_one_due_time_make_one_instance(store):
    """The claim in one process: a pass that read the due time after another claimed it is skipped."""
    from jedictl.config import load_settings
    from jedictl.engine.periodic.instances import instantiate
    from jedictl.engine.periodic.templates import add_template
    from jedictl.store import periodic as periodic_store
    from jedictl.store.database import open_store

    opened = open_store(store)
    now = parse_time(NOW)
    try:
        settings = load_settings().settings
        add_template(opened, settings, hc_template(), name=None, user="hc", default_user="hc", every="1h", cron=None, start=None,
                     max_active=5, now=now, by="test")
        with opened.read() as conn:
            row = periodic_store.due_templates(conn, now, 10)[0]
        first, second = instantiate(opened, settings, "a", now, row), instantiate(opened, settings, "b", now, row)
    finally:
        opened.close()
    assert first["outcome"] == "instantiated"
    assert second["outcome"] == "skipped" and "another pass took this due time" in second["reason"]


BAD = [
    (["--every", "1h"], {"name": "hc.fixed"}, "name: the task name must contain ${DUE}"),
    (["--every", "1h"], {"outputs": [{"dataset": "hc.fixed.out", "file_template": "hc.${SN}.out"}]},
     "outputs: output dataset hc.fixed.out would be written by every instance"),
    (["--every", "1h", "--cron", "* * * * *"], {}, "--every: give --every or --cron (one of them)"),
    ([], {}, "--every: give --every or --cron (one of them)"),
    (["--every", "30s"], {}, "--every: '30s' is not an interval"),
    (["--cron", "0 0 31 2 *"], {}, "--cron: '0 0 31 2 *' never matches a day of the calendar"),
    (["--cron", "61 * * * *"], {}, "--cron: minute '61' is outside 0-59"),
    (["--every", "1h", "--start", "tomorrow"], {}, "--start: 'tomorrow' is not an ISO-8601 time"),
    (["--every", "1h", "--start", "9999-01-01T00:00"], {}, "--start: must lie between"),
    (["--every", "1h", "--max-active", "0"], {}, "--max-active"),
    (["--every", "1h", "--name", "no spaces"], {}, "--name: a template name must be"),
    (["--every", "1h"], {"colour": "red"}, "colour: unknown field"),
]


@pytest.mark.parametrize(("options", "change", "message"), BAD, ids=[message[:40] for _, _, message in BAD])
def test_a_bad_template_is_one_error_line_and_writes_nothing(cli, store, tmp_path, options, change, message):
    before = store_dump(store)
    document = {**hc_template(), **change}
    result = cli("periodic", "add", _spec(tmp_path, document), *options, "--now", NOW, db=store, code=2)
    assert result.stdout == "" and message in result.stderr
    assert result.stderr.startswith("jedictl: error: ") and len(result.stderr.strip().splitlines()) <= 2
    assert store_dump(store) == before


def test_a_second_template_of_a_name_and_unknown_names_are_refused(cli, store, tmp_path):
    _add(cli, store, tmp_path)
    before = store_dump(store)
    taken = cli("periodic", "add", _spec(tmp_path), "--every", "2h", db=store, code=2)
    assert taken.stderr.startswith(f"jedictl: error: --name: a periodic template named {NAME} exists")
    for command in ("show", "pause", "resume", "remove"):
        result = cli("periodic", command, "nope", db=store, code=2)
        assert result.stderr.startswith("jedictl: error: NAME: no periodic template named nope"), command
    assert cli("task", "list", "--template", "nope", db=store, code=2).stderr.startswith(
        "jedictl: error: --template: no periodic template named nope")
    assert cli("periodic", "list", "--status", "paused-ish", db=store, code=2).stderr.startswith("jedictl: error: --status:")
    assert store_dump(store) == before


def test_the_documented_example_prints_what_the_page_shows(cli, store, tmp_path):
    """docs/periodic-tasks.md: its template is examples/periodic-hc.yaml, and its session, run command by
    command on the example grid, prints what the page shows."""
    page = (ROOT / "docs" / "periodic-tasks.md").read_text()
    template = re.search(r"<!-- example: hammercloud -->\n```yaml\n(.*?)```", page, re.S).group(1)
    assert template == (ROOT / "examples" / "periodic-hc.yaml").read_text()
    (tmp_path / "periodic-hc.yaml").write_text(template)
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    session = re.search(r"<!-- example: session -->\n```console\n(.*?)```", page, re.S).group(1)
    steps = re.findall(r"^\$ jedictl (.*)\n((?:(?!\$ ).*\n)*)", session, re.M)
    assert len(steps) == 7, "the page shows its commands"
    for line, shown in steps:
        argv = [str(tmp_path / arg) if arg.endswith(".yaml") else arg for arg in line.split()]
        result = cli(*argv, db=store)
        printed = result.stderr + result.stdout  # the counts on stderr come first, as on a terminal
        if shown.endswith("...\n"):  # the page shows the beginning
            assert printed.startswith(shown[:-4]), line
        else:
            assert printed == shown, line


def test_panda_task_parameters_make_a_template_too(cli, store, tmp_path):
    params = {
        "taskName": "user.hc.probe.${DUE}", "userName": "hc", "vo": "wlcg", "prodSourceLabel": "test", "taskType": "anal",
        "processingType": "hammercloud", "noInput": True, "nEvents": 10, "nEventsPerJob": 5,
        "jobParameters": [{"type": "constant", "value": "--events=${MAXEVENTS}"},
                          {"type": "template", "param_type": "output", "dataset": "user.hc.probe.${DUE}.out",
                           "value": "--out=probe.${SN}.root"}],
        "log": {"type": "template", "param_type": "log", "dataset": "user.hc.probe.${DUE}.log", "value": "probe.${SN}.log.tgz"},
    }
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(params))
    added = cli.json("periodic", "add", str(path), "--cron", "0 * * * *", "--now", NOW, db=store)
    assert (added["name"], added["format"], added["user"]) == ("user.hc.probe", "panda", "hc")
    task_id = _instantiate(cli, store, NOW)["items"][0]["task_id"]
    assert cli.json("task", "show", str(task_id), db=store)["name"] == "user.hc.probe.20261127T2300"
    fixed = {**params, "taskName": "user.hc.fixed"}
    path.write_text(json.dumps(fixed))
    refused = cli("periodic", "add", str(path), "--every", "1h", db=store, code=2)
    assert refused.stderr.startswith("jedictl: error: taskName: the task name must contain ${DUE}")


def test_check_names_a_second_instance_of_a_due_time(cli, store, tmp_path):
    """What an unguarded claim would leave (tests/concurrency/test_periodic_race.py makes it with real
    processes): two instances of one template for one due time."""
    _add(cli, store, tmp_path, "--every", "1h", "--max-active", "5")
    first = _instantiate(cli, store, NOW)["items"][0]["task_id"]
    second = _instantiate(cli, store, "2026-11-28T00:00:00")["items"][0]["task_id"]
    assert cli("check", db=store).stdout == "check: consistent\n"
    moved = run_sql(store, lambda conn: conn.execute(tasks.update().where(tasks.c.id == second).values(
        periodic_due_at=parse_time(NOW))).rowcount)
    assert moved == 1
    verdict = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    assert verdict["violations"] == [{
        "check": "periodic_instances_once", "object": f"task {second}",
        "message": f"task {second} is a second instance of periodic template 1 for its due time 2026-11-27T23:00Z (task {first} is the first)"}]
