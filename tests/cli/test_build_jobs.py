"""Build jobs and lib files (issue 20 item 4; jedi-inventory.md §6.13; seed 000 "Broken tasks"), end to end
on both backends: an analysis task that ships sources (PanDA's buildSpec) gets one build job per site
before its run jobs there; the run jobs wait `defined` for their site's lib file and read it as input;
a failed build job closes them and a new one is made; three failed build jobs break a scouting task."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, job_files, jobs, tasks
from tests.cli.test_jobs_report import _failed, _finished, _report
from tests.cli.test_output_containers import GRID, SPLIT_DATA, _import, task
from tests.helpers import run_sql

NOW = "2030-06-01T08:00:00"
BUILD_SPEC = {"prodSourceLabel": "panda", "archiveName": "sources.1234.tar.gz", "transPath": "buildGen-00-00-01",
              "jobParameters": "-i ${IN} -o ${OUT} --sourceURL ${SURL} -r ."}


def build_task(name: str = "user.someone.build", **params) -> dict:
    document = task(name, "data.parts/", buildSpec=BUILD_SPEC, sourceURL="https://panda.example:25443", **params)
    document["jobParameters"] = [{"type": "constant", "value": "-l ${LIB}"}, *document["jobParameters"]]
    return document


def _setup(cli, store, tmp_path, **params) -> int:
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    task_id = cli.json("submit", "-", db=store, input=json.dumps(build_task(**params)))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    return task_id


def _jobs(store) -> list[dict]:
    return [dict(r._mapping) for r in run_sql(store, lambda conn: conn.execute(select(jobs).order_by(jobs.c.id)).all())]


def _dispatch(cli, store, site: str) -> list[dict]:
    return cli.json("jobs", "dispatch", "--site", site, "--count", "100", "--now", NOW, db=store)["jobs"]


def test_one_build_job_per_site_before_the_run_jobs_which_read_its_lib_file(cli, store, tmp_path):
    task_id = _setup(cli, store, tmp_path)
    made = _jobs(store)
    builds = [j for j in made if j["kind"] == "build"]
    runs = [j for j in made if j["kind"] == "normal"]
    assert sorted(j["site"] for j in builds) == ["SITE_A", "SITE_B"]
    assert sorted(j["site"] for j in runs) == ["SITE_A", "SITE_A", "SITE_B", "SITE_B"]
    assert {j["status"] for j in builds} == {"activated"} and {j["status"] for j in runs} == {"defined"}
    # The build job writes its site's lib file: a record of the task's lib dataset at that site.
    libs = run_sql(store, lambda conn: {r.site: r for r in conn.execute(
        select(datasets.c.site, datasets.c.name, files.c.id, files.c.lfn, files.c.status, files.c.out_job_id)
        .join(files, files.c.dataset_id == datasets.c.id).where(datasets.c.type == "lib"))})
    assert set(libs) == {"SITE_A", "SITE_B"}
    for build in builds:
        lib = libs[build["site"]]
        assert lib.out_job_id == build["id"] and lib.status == "defined" and lib.lfn.endswith(".lib.tgz")
        assert lib.name == f"panda.{task_id}.{build['site']}.lib"
        assert build["job_parameters"] == f"-i sources.1234.tar.gz -o {lib.lfn} --sourceURL https://panda.example:25443 -r ."
        assert build["transformation"] == "buildGen-00-00-01"
    for run in runs:
        assert f"-l {libs[run['site']].lfn}" in run["job_parameters"]
    assert run_sql(store, check_all) == []

    # Only the build job is dispatched at a site; its run jobs wait for it.
    dispatched = _dispatch(cli, store, "SITE_A")
    assert [job["kind"] for job in dispatched] == ["build"]
    assert [o["lfn"] for o in dispatched[0]["outputs"]] == [libs["SITE_A"].lfn]
    _report(cli, store, _finished(dispatched[0]))
    after = {j["id"]: j for j in _jobs(store)}
    assert {after[j["id"]]["status"] for j in runs if j["site"] == "SITE_A"} == {"activated"}
    assert {after[j["id"]]["status"] for j in runs if j["site"] == "SITE_B"} == {"defined"}
    # The run jobs get the lib file as an input, with its replica at the site.
    run_a = _dispatch(cli, store, "SITE_A")
    assert len(run_a) == 2 and {job["kind"] for job in run_a} == {"normal"}
    for job in run_a:
        lib_inputs = [i for i in job["inputs"] if i["type"] == "lib"]
        assert [i["lfn"] for i in lib_inputs] == [libs["SITE_A"].lfn] and lib_inputs[0]["replicas"] == ["SITE_A_DISK"]
    _report(cli, store, *[_finished(job) for job in run_a])
    assert run_sql(store, check_all) == []

    # The simulator runs build jobs too: the rest of the task runs to the end.
    for seed in ("1", "2"):
        cli("simulate", "--seed", seed, "--failure-rate", "0", "--now", NOW, db=store)
    assert {j["status"] for j in _jobs(store)} == {"finished"}
    cli("finalize", "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    assert run_sql(store, check_all) == []


def test_a_failed_build_job_closes_its_run_jobs_and_a_new_one_is_made(cli, store, tmp_path):
    task_id = _setup(cli, store, tmp_path)
    build_a = _dispatch(cli, store, "SITE_A")[0]
    _report(cli, store, _failed(build_a, source="exe", code=1, diag="compilation failed"))
    state = _jobs(store)
    closed = [j for j in state if j["kind"] == "normal" and j["site"] == "SITE_A"]
    assert {(j["status"], j["error_code"]) for j in closed} == {("closed", 1105)}
    assert all("build job failed" in j["error_diag"] for j in closed)
    assert {j["status"] for j in state if j["kind"] == "normal" and j["site"] == "SITE_B"} == {"defined"}
    # Their input is back in the pool, an attempt used but no failure.
    inputs = run_sql(store, lambda conn: conn.execute(
        select(files.c.status, files.c.attempt_nr, files.c.failed_attempt).where(files.c.type == "input", files.c.lfn.like("a.%"))).all())
    assert set(inputs) == {("ready", 1, 0)}
    assert run_sql(store, check_all) == []

    # The next pass makes a new build job at the site, with a new lib file; its new run jobs wait for it.
    cli("generate", "--seed", "2", "--now", NOW, db=store)
    state = _jobs(store)
    builds_a = [j for j in state if j["kind"] == "build" and j["site"] == "SITE_A"]
    assert [j["status"] for j in builds_a] == ["failed", "activated"]
    waiting = [j for j in state if j["kind"] == "normal" and j["site"] == "SITE_A" and j["status"] == "defined"]
    assert len(waiting) == 2
    libs = run_sql(store, lambda conn: conn.execute(select(files.c.lfn, files.c.status).where(files.c.type == "lib").order_by(files.c.id)).all())
    assert [status for _, status in libs].count("failed") == 1 and len({lfn for lfn, _ in libs}) == 3
    for seed in ("3", "4"):
        cli("simulate", "--seed", seed, "--failure-rate", "0", "--now", NOW, db=store)
    cli("finalize", "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    assert run_sql(store, check_all) == []


def test_build_jobs_failing_three_times_break_a_scouting_task(cli, store, tmp_path):
    task_id = _setup(cli, store, tmp_path, skipScout=False)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "scouting"
    failures = 0
    for seed in ("2", "3"):
        for site in ("SITE_A", "SITE_B"):
            if failures == 3:
                break
            builds = _dispatch(cli, store, site)
            assert [job["kind"] for job in builds] == ["build"]
            _report(cli, store, _failed(builds[0], source="exe", code=1, diag="compilation failed"))
            failures += 1
        if failures < 3:
            assert cli.json("task", "show", str(task_id), db=store)["status"] == "scouting"
            cli("generate", "--seed", seed, "--now", NOW, db=store)
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["status"] == "tobroken" and "build job failed 3 times" in shown["error_dialog"]
    assert run_sql(store, check_all) == []
    cli("finalize", "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "broken"
    assert run_sql(store, check_all) == []


def test_a_running_task_is_not_broken_by_failed_build_jobs(cli, store, tmp_path):
    # Past scouting a failed build job only closes its run jobs: their input's attempts bound the retries.
    task_id = _setup(cli, store, tmp_path, maxAttempt=2)
    for seed in ("2", "3", "4"):
        for site in ("SITE_A", "SITE_B"):
            builds = [job for job in _dispatch(cli, store, site) if job["kind"] == "build"]
            if builds:
                _report(cli, store, _failed(builds[0], source="exe", code=1, diag="compilation failed"))
        assert cli.json("task", "show", str(task_id), db=store)["status"] in ("running", "ready")
        cli("generate", "--seed", seed, "--now", NOW, db=store)
    assert run_sql(store, check_all) == []
    cli("finalize", "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "failed"
    inputs = run_sql(store, lambda conn: conn.execute(select(files.c.status, files.c.attempt_nr).where(files.c.type == "input")).all())
    assert set(inputs) == {("failed", 2)}
    assert run_sql(store, check_all) == []


SPEC = {"name": "user.someone.spec.build", "label": "user", "command": "run -l ${LIB} -i ${IN} -o ${OUTPUT0}",
        "inputs": [{"dataset": "data.parts/", "expand": True}],
        "outputs": [{"dataset": "user.someone.spec.build_out/", "file_template": "out.${SN}.root"}], "scouts": {"skip_scout": True},
        "split": {"n_files_per_job": 2},
        "build": {"transformation": "make-lib", "archive": "src.tgz", "command": "--in ${IN} --out ${OUT} --task ${JEDITASKID}"}}


def test_the_spec_s_build_section_makes_build_jobs_and_bad_ones_are_refused(cli, store, tmp_path):
    import yaml

    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    task_id = cli.json("submit", "-", db=store, input=yaml.safe_dump(SPEC))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    builds = [j for j in _jobs(store) if j["kind"] == "build"]
    assert sorted(j["site"] for j in builds) == ["SITE_A", "SITE_B"]
    for build in builds:
        assert build["transformation"] == "make-lib"
        assert build["job_parameters"].startswith(f"--in src.tgz --out panda.{task_id}.{build['site']}.lib._")
        assert build["job_parameters"].endswith(f".lib.tgz --task {task_id}")
    assert cli.json("submit", "--dry-run", "-", db=store, input=yaml.safe_dump({**SPEC, "name": "x.dry"}))["build"] == {
        "trans_path": "make-lib", "job_parameters": "--in ${IN} --out ${OUT} --task ${JEDITASKID}", "archive": "src.tgz"}
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--now", NOW, db=store)
    cli("finalize", "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"

    # Bad build sections: one error line naming the field, exit 2, nothing written.
    before = run_sql(store, lambda conn: conn.execute(select(tasks.c.id)).scalars().all())
    for build, field, message in (
        ({"command": "--out ${OUT} ${SN}"}, "build.command", "placeholder ${SN} is not one a build job fills"),
        ({"command": "--in ${IN} --out ${OUT}"}, "build.command", "uses ${IN} but names no source archive"),
        ({"archive": "src.tgz"}, "build.command", "is required"),
        ({"command": "x", "archives": "src.tgz"}, "build.archives", "unknown field"),
    ):
        result = cli("submit", "-", db=store, input=yaml.safe_dump({**SPEC, "name": "user.someone.bad", "build": build}), code=2)
        assert field in result.stderr and message in result.stderr and len(result.stderr.strip().splitlines()) <= 2, result.stderr
    bad_panda = {**build_task("user.someone.badpanda"), "buildSpec": {"archiveName": "a.tgz"}}
    result = cli("submit", "-", db=store, input=json.dumps(bad_panda), code=2)
    assert "buildSpec.jobParameters" in result.stderr
    assert run_sql(store, lambda conn: conn.execute(select(tasks.c.id)).scalars().all()) == before


def test_check_catches_a_run_job_dispatched_before_its_build_job_finished(cli, store, tmp_path, monkeypatch):
    # A broken guard: the generator writes run jobs activated whatever their site's lib file is.
    import jedictl.engine.generate.job_builder as job_builder

    monkeypatch.setattr(job_builder, "run_job_status", lambda built, transfer: "activated")
    _setup(cli, store, tmp_path)
    report = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    found = [v for v in report["violations"] if v["check"] == "run_jobs_wait_for_their_build"]
    assert len(found) == 4 and all("went ahead of its build job" in v["message"] for v in found)
    assert all(v["object"].startswith("task 1") for v in found)


def test_check_catches_a_run_job_reading_another_site_s_lib_file(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    for build in _dispatch(cli, store, "SITE_A") + _dispatch(cli, store, "SITE_B"):
        _report(cli, store, _finished(build))
    assert run_sql(store, check_all) == []
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.kind == "normal", jobs.c.site == "SITE_A").values(site="SITE_B")))
    problems = [p for p in run_sql(store, check_all) if "reads the lib file of task" in p]
    assert len(problems) == 2


def test_watch_releases_run_jobs_a_report_left_waiting(cli, store, tmp_path, monkeypatch):
    # A process stopped after a build job's report committed and before its run jobs were released:
    # the next watch pass releases them.
    import jedictl.engine.jobs.builds as builds

    _setup(cli, store, tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(builds, "settle_builds", lambda *args, **kwargs: [])
        build_a = _dispatch(cli, store, "SITE_A")[0]
        _report(cli, store, _finished(build_a))
        assert {j["status"] for j in _jobs(store) if j["kind"] == "normal"} == {"defined"}
    assert run_sql(store, check_all) == []
    watched = cli.json("watch", "--now", NOW, db=store)
    released = [item for item in watched["items"] if item["outcome"] == "activate"]
    assert len(released) == 2 and all(item["site"] == "SITE_A" and "lib file" in item["reason"] for item in released)
    assert {j["status"] for j in _jobs(store) if j["kind"] == "normal" and j["site"] == "SITE_A"} == {"activated"}
    assert cli.json("watch", "--now", NOW, db=store)["counts"].get("activate", 0) == 0  # nothing twice
    assert run_sql(store, check_all) == []


def test_the_documented_example_makes_a_build_job_per_site(cli, store, tmp_path):
    import re

    from tests.conftest import ROOT

    text = (ROOT / "docs" / "build-jobs.md").read_text()
    example = re.search(r"<!-- example: build-jobs -->\n```yaml\n(.*?)```", text, re.S).group(1)
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    task_id = cli.json("submit", "-", db=store, input=example)["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    made = _jobs(store)
    assert sorted((j["kind"], j["site"], j["status"]) for j in made) == [
        ("build", "SITE_A", "activated"), ("build", "SITE_B", "activated"),
        ("normal", "SITE_A", "defined"), ("normal", "SITE_A", "defined"), ("normal", "SITE_B", "defined"), ("normal", "SITE_B", "defined")]
    assert all(j["task_id"] == task_id for j in made)
    assert run_sql(store, check_all) == []
