"""Preprocessing (issue 20 item 3; jedi-inventory.md §3, §6.13; seed 000's `topreprocess` and `preprocessing`),
end to end on both backends: a task whose parameters ask for a preprocess job is refined to
`topreprocess`, gets that one job before any other and waits `preprocessing`; the job finished, the task
goes on to its normal jobs; failed, it is made again, and after three attempts the task is broken."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, jobs, tasks
from tests.cli.test_jobs_report import _failed, _finished, _report
from tests.cli.test_output_containers import GRID, SPLIT_DATA, _import, task
from tests.helpers import run_sql

NOW = "2030-06-01T08:00:00"
PREPRO_SPEC = {"transPath": "preprocess.sh", "jobParameters": "--task ${JEDITASKID} --sourceURL ${SURL}"}


def _setup(cli, store, tmp_path, document: dict | None = None, fmt=json.dumps) -> int:
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    document = document or task("user.someone.prepro", "data.parts/", preproSpec=PREPRO_SPEC, sourceURL="https://panda.example")
    return cli.json("submit", "-", db=store, input=fmt(document))["task_id"]


def _jobs(store) -> list[dict]:
    return [dict(r._mapping) for r in run_sql(store, lambda conn: conn.execute(select(jobs).order_by(jobs.c.id)).all())]


def _status(cli, store, task_id: int) -> str:
    return cli.json("task", "show", str(task_id), db=store)["status"]


def _dispatch_all(cli, store) -> list[dict]:
    return [job for site in ("SITE_A", "SITE_B")
            for job in cli.json("jobs", "dispatch", "--site", site, "--count", "100", "--now", NOW, db=store)["jobs"]]


def test_the_preprocess_job_runs_first_and_its_success_lets_the_task_go_on(cli, store, tmp_path):
    task_id = _setup(cli, store, tmp_path)
    refined = cli.json("refine", "--now", NOW, db=store)
    assert refined["counts"]["topreprocess"] == 1 and _status(cli, store, task_id) == "topreprocess"
    pp = run_sql(store, lambda conn: conn.execute(select(datasets).where(datasets.c.type == "pp_input")).one())
    assert (pp.name, pp.status, pp.n_files, pp.n_files_to_be_used) == ("pseudo_pp_input", "ready", 1, 1)
    # The feeder leaves it alone: its input is fed only once the preprocess job succeeded.
    cli("feed", "--now", NOW, db=store)
    assert _status(cli, store, task_id) == "topreprocess"
    assert run_sql(store, check_all) == []

    generated = cli.json("generate", "--seed", "1", "--now", NOW, db=store)
    assert generated["counts"]["jobs"] == 1
    [job] = _jobs(store)
    assert (job["kind"], job["status"], job["transformation"]) == ("preprocess", "activated", "preprocess.sh")
    assert job["job_parameters"] == f"--task {task_id} --sourceURL https://panda.example"
    assert _status(cli, store, task_id) == "preprocessing"
    assert cli.json("generate", "--seed", "2", "--now", NOW, db=store)["counts"]["jobs"] == 0  # one job, no more
    assert run_sql(store, check_all) == []

    [payload] = _dispatch_all(cli, store)
    assert payload["kind"] == "preprocess" and payload["outputs"] == []
    assert [(i["lfn"], i["type"]) for i in payload["inputs"]] == [("pseudo_lfn", "pp_input")]
    _report(cli, store, _finished(payload))
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["status"] == "defined"
    assert run_sql(store, check_all) == []

    # From here it is any refined task: fed, generated, run and finished.
    for agent in (("feed",), ("generate", "--seed", "3")):
        cli(*agent, "--now", NOW, db=store)
    normal = [j for j in _jobs(store) if j["kind"] == "normal"]
    assert len(normal) == 4 and _status(cli, store, task_id) == "running"
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    cli("finalize", "--now", NOW, db=store)
    assert _status(cli, store, task_id) == "done"
    assert run_sql(store, check_all) == []


def test_a_failing_preprocess_job_is_made_again_and_three_failures_break_the_task(cli, store, tmp_path):
    task_id = _setup(cli, store, tmp_path)
    cli("refine", "--now", NOW, db=store)
    for attempt in (1, 2, 3):
        assert cli.json("generate", "--seed", str(attempt), "--now", NOW, db=store)["counts"]["jobs"] == 1
        [payload] = _dispatch_all(cli, store)
        assert payload["kind"] == "preprocess" and payload["attempt_nr"] == attempt
        _report(cli, store, _failed(payload, source="trans", code=65, diag="preprocessing crashed"))
        assert run_sql(store, check_all) == []
        if attempt < 3:
            assert _status(cli, store, task_id) == "preprocessing"
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["status"] == "tobroken" and shown["error_dialog"] == "the preprocess job failed 3 times"
    record = run_sql(store, lambda conn: conn.execute(select(files.c.status, files.c.attempt_nr).where(files.c.type == "pp_input")).one())
    assert tuple(record) == ("failed", 3)
    cli("finalize", "--now", NOW, db=store)
    assert _status(cli, store, task_id) == "broken"
    assert [j["kind"] for j in _jobs(store)] == ["preprocess"] * 3  # never a normal job
    assert run_sql(store, check_all) == []


def test_watch_moves_a_task_whose_preprocess_report_was_applied_before_a_stop(cli, store, tmp_path, monkeypatch):
    import jedictl.engine.jobs.preprocess as preprocess

    task_id = _setup(cli, store, tmp_path)
    cli("refine", "--now", NOW, db=store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    with monkeypatch.context() as patched:
        patched.setattr(preprocess, "settle_preprocessing", lambda *args, **kwargs: [])
        _report(cli, store, _finished(_dispatch_all(cli, store)[0]))
        assert _status(cli, store, task_id) == "preprocessing"
    watched = cli.json("watch", "--now", NOW, db=store)
    assert watched["counts"]["preprocessed"] == 1 and _status(cli, store, task_id) == "defined"
    assert cli.json("watch", "--now", NOW, db=store)["counts"]["preprocessed"] == 0


def test_the_spec_s_preprocess_section_and_its_bad_forms(cli, store, tmp_path):
    spec = {"name": "user.someone.spec.prepro", "label": "user", "command": "run -i ${IN} -o ${OUTPUT0}",
            "inputs": [{"dataset": "data.parts/", "expand": True}],
            "outputs": [{"dataset": "user.someone.spec.prepro_out/", "file_template": "out.${SN}.root"}], "scouts": {"skip_scout": True},
            "preprocess": {"transformation": "prepare", "command": "--for ${JEDITASKID}"}}
    task_id = _setup(cli, store, tmp_path, spec, fmt=yaml.safe_dump)
    cli("refine", "--now", NOW, db=store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    [job] = _jobs(store)
    assert (job["kind"], job["transformation"], job["job_parameters"]) == ("preprocess", "prepare", f"--for {task_id}")
    before = run_sql(store, lambda conn: conn.execute(select(tasks.c.id)).scalars().all())
    for section, field, message in (
        ({"command": "--in ${IN}"}, "preprocess.command", "placeholder ${IN} is not one a preprocess job fills"),
        ({"transformation": "x"}, "preprocess.command", "is required"),
        ({"command": "x", "program": "y"}, "preprocess.program", "unknown field"),
    ):
        result = cli("submit", "-", db=store, input=yaml.safe_dump({**spec, "name": "user.someone.bad", "preprocess": section}), code=2)
        assert field in result.stderr and message in result.stderr, result.stderr
    bad = task("user.someone.badpp", "data.parts/", preproSpec={"transPath": "x"})
    assert "preproSpec.jobParameters" in cli("submit", "-", db=store, input=json.dumps(bad), code=2).stderr
    assert run_sql(store, lambda conn: conn.execute(select(tasks.c.id)).scalars().all()) == before


def test_the_documented_example_waits_for_its_preprocess_job(cli, store, tmp_path):
    import re

    from tests.conftest import ROOT

    text = (ROOT / "docs" / "preprocessing.md").read_text()
    example = re.search(r"<!-- example: preprocessing -->\n```yaml\n(.*?)```", text, re.S).group(1)
    task_id = _setup(cli, store, tmp_path, yaml.safe_load(example), fmt=yaml.safe_dump)
    cli("refine", "--now", NOW, db=store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert [(j["kind"], j["transformation"], j["job_parameters"]) for j in _jobs(store)] == [("preprocess", "prepare", f"--for {task_id}")]
    assert _status(cli, store, task_id) == "preprocessing"
    assert run_sql(store, check_all) == []


def test_check_catches_normal_jobs_made_before_the_preprocess_job_succeeded(cli, store, tmp_path, monkeypatch):
    # A broken guard: a failed preprocess job lets the task go on as if it had succeeded.
    import jedictl.engine.jobs.preprocess as preprocess

    monkeypatch.setattr(preprocess, "preprocess_verdict", lambda status, n, finished, failed:
                        ("defined", "preprocessing done") if status == "preprocessing" and n else None)
    task_id = _setup(cli, store, tmp_path)
    cli("refine", "--now", NOW, db=store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    _report(cli, store, _failed(_dispatch_all(cli, store)[0], source="trans", code=65, diag="crashed"))
    assert _status(cli, store, task_id) == "defined"
    for agent in (("feed",), ("generate", "--seed", "2")):
        cli(*agent, "--now", NOW, db=store)
    report = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    found = [v for v in report["violations"] if v["check"] == "preprocess_job_first"]
    assert len(found) == 1 and found[0]["object"] == f"task {task_id}" and "its preprocess record ready" in found[0]["message"]


def test_the_simulator_runs_the_preprocess_job_and_then_the_task_s_jobs(cli, store, tmp_path):
    task_id = _setup(cli, store, tmp_path)
    cli("refine", "--now", NOW, db=store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    ran = cli.json("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    assert (ran["counts"]["jobs"], ran["counts"]["finished"]) == (1, 1)
    assert _status(cli, store, task_id) == "defined"
    for agent in (("feed",), ("generate", "--seed", "2"), ("simulate", "--seed", "2", "--failure-rate", "0"), ("finalize",)):
        cli(*agent, "--now", NOW, db=store)
    assert _status(cli, store, task_id) == "done"
    assert sorted(j["kind"] for j in _jobs(store)) == ["normal"] * 4 + ["preprocess"]
    assert run_sql(store, check_all) == []
