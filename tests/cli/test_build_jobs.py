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
