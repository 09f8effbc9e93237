"""Resubmission with the same outDS, on both backends (docs/analysis.md "Resubmitting with the same
outDS"): `jedictl submit` of a task named as one of the user's continues that task, as PanDA does --
its failed and unused files and the files added to its inputs since, with the parameters a
resubmission may change -- and refuses what PanDA refuses, writing nothing.

The PanDA tasks are prun's own task parameters (examples/panda-taskparams/prun_files.json) over the
example catalog: a container of two datasets, 20 files, 4 files per job."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, job_param_templates, tasks
from tests.conftest import EXAMPLES, invoke
from tests.helpers import refused, row_counts, run_sql

PRUN = json.loads((EXAMPLES / "prun_files.json").read_text())
OUT_DS = PRUN["taskName"]
CONTAINER = "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026"
TID1, TID2, TID3 = (f"{CONTAINER}_tid0000000{n}_00" for n in (1, 2, 3))
#: Jobs whose input holds one of these fail, every attempt.
BAD = ("DAOD_PHYS.00000001._000002.pool.root.1", "DAOD_PHYS.00000002._000005.pool.root.1")
SANDBOX = "jobO.c86d02d5-3133-49a2-9233-ecf63052bcd4.tar.gz"
FINAL = ("done", "finished", "failed", "broken", "aborted", "exhausted")


def _prun(**changes) -> str:
    document = copy.deepcopy(PRUN)
    document.update(changes)
    return json.dumps(document)


def _grid(cli, store) -> None:
    cli("sites", "import", str(EXAMPLES.parent / "sites.yaml"), db=store)
    cli("data", "import", str(EXAMPLES.parent / "data.yaml"), db=store)


def _started(cli, store, document: str | None = None, user: str = "alice") -> int:
    task_id = cli.json("submit", "-", "--user", user, db=store, input=document or _prun())["task_id"]
    for agent in ("refine", "feed", "broker", "generate"):
        cli(agent, db=store)
    return task_id


def _dispatch_all(cli, store) -> list[dict]:
    """Every activated job, handed to an executor."""
    sites = sorted({j["site"] for j in cli.json("jobs", "list", "--status", "activated", "--limit", "1000", db=store)})
    return [job for site in sites for job in cli.json("jobs", "dispatch", "--site", site, "--count", "100", db=store)["jobs"]]


def _report(cli, store, jobs: list[dict], bad=()) -> None:
    """The executors' reports: a job reading a file of `bad` fails, the others finish."""
    lines = []
    for job in jobs:
        if any(i["lfn"] in bad for i in job["inputs"]):
            lines.append({"job_id": job["job_id"], "status": "failed", "attempt_nr": job["attempt_nr"], "error_source": "pilot",
                          "error_code": 1099, "error_diag": "Failed to stage-in file"})
        else:
            lines.append({"job_id": job["job_id"], "status": "finished", "attempt_nr": job["attempt_nr"], "wall_time": 100,
                          "cpu_time": 90, "max_pss": 500_000, "n_events": 200,
                          "outputs": [{"lfn": o["lfn"], "size": 1000, "checksum": "ad:00000001", "guid": f"G-{job['job_id']}-{n}",
                                       "n_events": 10} for n, o in enumerate(job["outputs"])]})
    if lines:
        cli("jobs", "report", "-", db=store, input="".join(json.dumps(line) + "\n" for line in lines))


def _run(cli, store, task_id: int, bad=()) -> str:
    """Executors run every job until the task ends: a job reading a file of `bad` fails, the others finish."""
    for _ in range(20):
        _report(cli, store, _dispatch_all(cli, store), bad)
        for agent in ("finalize", "feed", "generate"):
            cli(agent, db=store)
        status = cli.json("task", "show", str(task_id), db=store)["status"]
        if status in FINAL:
            assert run_sql(store, check_all) == []
            return status
    raise AssertionError(f"task {task_id} did not end")


def _input_files(store, task_id: int) -> dict[str, str]:
    query = (select(files.c.lfn, files.c.status).join(datasets, datasets.c.id == files.c.dataset_id)
             .where(files.c.task_id == task_id, datasets.c.type == "input"))
    return dict(run_sql(store, lambda conn: conn.execute(query).all()))


def _new_files(cli, store, tmp_path) -> list[str]:
    """One file joins the first dataset of the container, and a third dataset of two files joins the container."""
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump([{"lfn": "DAOD_PHYS.00000001._000013.pool.root.1", "size": 1_500_013_000, "events": 5000}]))
    cli("data", "open", TID1, db=store)
    cli("data", "add-files", TID1, str(one), db=store)
    cli("data", "close", TID1, db=store)
    third = tmp_path / "third.yaml"
    members = yaml.safe_load((EXAMPLES.parent / "data.yaml").read_text())["containers"]
    container = next(c for c in members if c["name"] == CONTAINER)
    third.write_text(yaml.safe_dump({
        "datasets": [{"name": TID3, "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}],
                      "files": [{"lfn": f"DAOD_PHYS.00000003._00000{n}.pool.root.1", "size": 1_500_000_000, "events": 5000} for n in (1, 2)]}],
        "containers": [{"name": CONTAINER, "datasets": [*container["datasets"], TID3]}]}))
    cli("data", "import", str(third), db=store)
    return ["DAOD_PHYS.00000001._000013.pool.root.1", "DAOD_PHYS.00000003._000001.pool.root.1", "DAOD_PHYS.00000003._000002.pool.root.1"]


def test_resubmitting_a_finished_task_runs_only_its_failed_and_new_files(cli, store, tmp_path):
    """Seed 000: "an old task is resubmitted to run on files which were unused or failed in the previous
    attempt"; nFilesPerJob changes, maxAttempt (not changeable) is kept and said."""
    _grid(cli, store)
    task_id = _started(cli, store)
    assert _run(cli, store, task_id, BAD) == "finished"
    failed = sorted(lfn for lfn, status in _input_files(store, task_id).items() if status == "failed")
    assert len(failed) == 8 and set(BAD) <= set(failed)  # the four files of each job that read a bad one
    new = _new_files(cli, store, tmp_path)

    result = cli("submit", "-", "--user", "alice", "-o", "json", db=store, input=_prun(nFilesPerJob=2, maxAttempt=6))
    answer = json.loads(result.stdout)
    assert answer == {
        "task_id": task_id, "status": "defined", "resubmitted": True, "previous": "finished",
        "message": f"resubmission accepted: jediTaskID={task_id} (was finished) will be re-executed with old and/or new input; "
                   "8 input files back to ready; inputs to be fed again with n_files_per_job=2",
        "changes": {"nFilesPerJob": 2}, "kept": ["maxAttempt"], "inputs_added": [], "retried": 8}
    assert result.stderr == ("jedictl: warning: maxAttempt: not changed by the resubmission: "
                             f"task {task_id} keeps 4 (6 asked)\n")
    assert len(cli.json("task", "list", db=store)) == 1  # no second task
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["options"]["n_files_per_job"] == 2 and shown["options"]["max_attempt"] == 4
    assert [h["status"] for h in shown["status_history"]][-3:] == ["finished", "toincexec", "defined"]
    command = shown["commands"][-1]
    assert (command["command"], command["by"], command["comment"]) == ("incexec", "alice", f"resubmitted with the same outDS {OUT_DS} by alice")
    assert command["parameters"] == {"resubmission": True, "changes": {"nFilesPerJob": 2}, "kept": ["maxAttempt"], "inputs_added": []}
    assert run_sql(store, check_all) == []

    cli("feed", db=store)
    cli("generate", db=store)
    jobs = _dispatch_all(cli, store)
    assert sorted(i["lfn"] for job in jobs for i in job["inputs"]) == sorted(failed + new)  # nothing that finished runs again
    assert max(len(job["inputs"]) for job in jobs) == 2
    _report(cli, store, jobs)
    assert _run(cli, store, task_id) == "done"
    assert set(_input_files(store, task_id).values()) == {"finished"}


def test_the_outDS_of_a_task_still_running_or_queued_is_refused(cli, store):
    _grid(cli, store)
    cli("submit", "-", "--user", "alice", db=store, input=_prun())
    line = refused(cli, store, "submit", "-", "--user", "alice", input=_prun())
    assert line == f"jedictl: error: taskName: jediTaskID=1 is already queued for outDS={OUT_DS}: you cannot submit duplicated tasks"
    for agent in ("refine", "feed", "broker", "generate"):
        cli(agent, db=store)
    assert cli.json("task", "show", "1", db=store)["status"] == "scouting"
    line = refused(cli, store, "submit", "-", "--user", "alice", input=_prun(nFilesPerJob=1))
    assert line == (f"jedictl: error: taskName: jediTaskID=1 is in the scouting state for outDS={OUT_DS}: "
                    "resubmit it once it is finished, failed or done")


def test_a_broken_task_is_resubmitted_only_as_an_explicit_duplicate(cli, store):
    """Seed 000 "Broken tasks": not resubmitted; --allowTaskDuplication makes a new task with its outDS."""
    _grid(cli, store)
    cli("submit", "-", "--user", "alice", db=store, input=_prun())
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == 1).values(status="broken")))
    line = refused(cli, store, "submit", "-", "--user", "alice", input=_prun())
    assert line.startswith(f"jedictl: error: taskName: jediTaskID=1 is broken for outDS={OUT_DS}: a broken task cannot be resubmitted")
    duplicate = cli.json("submit", "-", "--user", "alice", "--allow-task-duplication", db=store, input=_prun())
    assert (duplicate["task_id"], duplicate["status"], duplicate["resubmitted"]) == (2, "registered", False)
    assert cli.json("submit", "-", "--user", "alice", db=store, input=_prun(allowTaskDuplication=True))["task_id"] == 3  # the key, too
    cli("refine", db=store)  # the duplicates keep the option the command line gave: they are refined, not broken
    assert [(t["task_id"], t["status"]) for t in cli.json("task", "list", db=store)] == [(3, "defined"), (2, "defined"), (1, "broken")]
    assert cli.json("task", "show", "2", db=store)["options"]["allow_task_duplication"] is True
    # the newest task of the name is the one a later submission finds
    line = refused(cli, store, "submit", "-", "--user", "alice", input=_prun())
    assert "jediTaskID=3 is in the defined state" in line
    assert run_sql(store, check_all) == []


def test_another_users_outDS_is_refused(cli, store):
    _grid(cli, store)
    task_id = _started(cli, store)
    assert _run(cli, store, task_id) == "done"
    line = refused(cli, store, "submit", "-", "--user", "bob", input=_prun())
    assert line == (f"jedictl: error: jobParameters[4]: output dataset user.someone.example.files_hist.root/ belongs to task {task_id} "
                    "(done) of user alice; another user's outDS is not yours to continue: choose another name, or set "
                    "allowTaskDuplication to write to it from a new task")
    # the same user's dataset under another name: resubmit the task under its name
    line = refused(cli, store, "submit", "-", "--user", "alice", input=_prun(taskName="user.someone.renamed/"))
    assert f"belongs to task {task_id} (done); resubmit it under its name {OUT_DS} to continue it" in line
    # without uniqueTaskName the same name is no resubmission (PanDA's server looks only with it): the outputs refuse it
    line = refused(cli, store, "submit", "-", "--user", "alice", input=_prun(uniqueTaskName=False))
    assert f"belongs to task {task_id} (done); resubmit it under its name {OUT_DS} with uniqueTaskName set to continue it" in line


def test_new_code_replaces_the_sandbox_of_the_continued_task(cli, store, tmp_path):
    """prun --useNewCode (PanDA's fixedSandbox): the new sandbox and sourceURL replace the old ones; without
    it the task keeps its code and the submission is told."""
    _grid(cli, store)
    task_id = _started(cli, store)
    assert _run(cli, store, task_id) == "done"
    document = copy.deepcopy(PRUN)
    document["jobParameters"][3]["value"] = "-a jobO.new-code.tar.gz"
    document["sourceURL"] = "https://panda.example:25443"

    def template() -> str:
        return run_sql(store, lambda conn: conn.execute(select(job_param_templates.c.template).where(
            job_param_templates.c.task_id == task_id, job_param_templates.c.kind == "job")).scalar_one())

    kept = cli("submit", "-", "--user", "alice", "-o", "json", db=store, input=json.dumps(document))
    assert json.loads(kept.stdout)["kept"] == ["jobParameters", "sourceURL"]
    assert f"task {task_id} keeps sandbox {SANDBOX} (sandbox jobO.new-code.tar.gz asked); --use-new-code" in kept.stderr
    assert f"-a {SANDBOX}" in template()
    assert _run(cli, store, task_id) == "done"

    _new_files(cli, store, tmp_path)
    result = cli.json("submit", "-", "--user", "alice", "--use-new-code", db=store, input=json.dumps(document))
    assert result["changes"] == {"fixedSandbox": "jobO.new-code.tar.gz", "sourceURL": "https://panda.example:25443"}
    assert result["kept"] == []
    assert "-a jobO.new-code.tar.gz" in template() and SANDBOX not in template()
    source_url = run_sql(store, lambda conn: conn.execute(select(tasks.c.source_url).where(tasks.c.id == task_id)).scalar_one())
    assert source_url == "https://panda.example:25443"
    cli("feed", db=store)
    cli("generate", db=store)
    jobs = _dispatch_all(cli, store)
    assert jobs and all("-a jobO.new-code.tar.gz" in job["job_parameters"] for job in jobs)
    assert all("--sourceURL https://panda.example:25443" in job["job_parameters"] for job in jobs)
    assert cli.json("task", "show", str(task_id), db=store)["commands"][-1]["parameters"]["changes"]["fixedSandbox"] == "jobO.new-code.tar.gz"


def test_a_new_input_dataset_joins_the_task(cli, store):
    """"You can add or use a new input if necessary": the input prun names (dsForIN) becomes an input
    of the task, the old one stays."""
    _grid(cli, store)
    task_id = _started(cli, store)
    assert _run(cli, store, task_id) == "done"
    other = "mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.deriv.DAOD_PHYS.e8514_s4162_r14622_p6026"
    document = copy.deepcopy(PRUN)
    document["jobParameters"][6]["dataset"] = document["dsForIN"] = other
    result = cli("submit", "-", "--user", "alice", "-o", "json", db=store, input=json.dumps(document))
    answer = json.loads(result.stdout)
    assert (answer["inputs_added"], answer["kept"], answer["retried"]) == ([other], ["jobParameters[6]"], 0)
    assert f"task {task_id} keeps input {CONTAINER}" in result.stderr
    cli("feed", db=store)
    cli("generate", db=store)
    jobs = _dispatch_all(cli, store)
    catalog = yaml.safe_load((EXAMPLES.parent / "data.yaml").read_text())["datasets"]
    assert sorted(i["lfn"] for job in jobs for i in job["inputs"]) == sorted(f["lfn"] for d in catalog if d["name"] == other for f in d["files"])
    _report(cli, store, jobs)
    assert _run(cli, store, task_id) == "done"


SPEC = {
    "name": "user.alice.spec.v1", "label": "user", "command": "-a code.v1.tgz -i ${IN/T} -o ${OUTPUT0}",
    "inputs": [{"dataset": TID2}],
    "outputs": [{"dataset": "user.alice.spec.v1_hist.root/", "file_template": "user.alice.${JEDITASKID}._${SN/P}.hist.root"}],
    "split": {"n_files_per_job": 4}, "retry": {"max_attempt": 2}, "scouts": {"skip_scout": True},
}


def test_a_spec_is_resubmitted_with_its_changes_and_refused_what_it_cannot_change(cli, store, tmp_path):
    _grid(cli, store)
    task_id = _started(cli, store, json.dumps(SPEC))
    assert _run(cli, store, task_id, ("DAOD_PHYS.00000002._000001.pool.root.1",)) == "finished"
    line = refused(cli, store, "submit", "-", "--user", "alice", input=json.dumps({**SPEC, "retry": {"max_attempt": 5}}))
    assert line == ("jedictl: error: retry.max_attempt: task 1 keeps 2, a resubmission does not change it (5 asked); "
                    "submit a new task under another name to change it")
    line = refused(cli, store, "submit", "-", "--user", "alice", input=json.dumps({**SPEC, "command": "-a code.v2.tgz -i ${IN/T} -o ${OUTPUT0}"}))
    assert line.startswith("jedictl: error: command: task 1 keeps -a code.v1.tgz") and line.endswith("--use-new-code replaces the code of the task")

    changed = {**SPEC, "command": "-a code.v2.tgz -i ${IN/T} -o ${OUTPUT0}", "split": {"n_files_per_job": 1}}
    answer = cli.json("submit", "-", "--user", "alice", "--use-new-code", db=store, input=json.dumps(changed))
    assert answer["resubmitted"] and answer["retried"] == 4
    assert answer["changes"] == {"split.n_files_per_job": 1, "command": changed["command"]}
    cli("feed", db=store)
    cli("generate", db=store)
    jobs = _dispatch_all(cli, store)
    assert len(jobs) == 4 and all(job["job_parameters"].startswith("-a code.v2.tgz ") for job in jobs)
    # the same spec once more, with --allow-task-duplication: a new task of the same name
    assert cli.json("submit", "-", "--user", "alice", "--allow-task-duplication", db=store, input=json.dumps(changed))["task_id"] == 2
    assert run_sql(store, check_all) == []


def test_check_finds_an_output_dataset_a_second_task_writes_without_allowing_it(cli, store):
    """The promise the refusals keep: a second writer of an output dataset exists only when its submission
    allowed duplication. A second task written past the guard is what `jedictl check` reports."""
    _grid(cli, store)
    cli("submit", "-", "--user", "alice", db=store, input=_prun())
    cli("submit", "-", "--user", "alice", "--allow-task-duplication", db=store, input=_prun())
    assert run_sql(store, check_all) == []
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == 2).values(options={})))  # as if never allowed
    report = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    assert [(v["check"], v["object"]) for v in report["violations"]] == [("outputs_of_one_task", "task 2")] * 2
    assert report["violations"][0]["message"] == (
        "task 2 writes output dataset user.someone.example.files.log/ of task 1 without allowTaskDuplication")


@pytest.mark.slow
def test_two_resubmissions_at_once_continue_the_task_once(store_url, tmp_path):
    """Both find the finished task before either continues it (a test hook holds each a second once it has
    planned): the task row is locked, so the second sees the first's resubmission and is refused."""
    from tests.cli.test_generate import WORKED_EXAMPLE
    from tests.helpers import hooked_env, jedictl_processes_together

    assert invoke(["db", "init", "--db", store_url]).exit_code == 0
    path = tmp_path / "task.json"
    path.write_text(json.dumps({**WORKED_EXAMPLE, "uniqueTaskName": True}))
    assert invoke(["submit", str(path), "--db", store_url]).exit_code == 0
    assert invoke(["refine", "--db", store_url]).exit_code == 0
    run_sql(store_url, lambda conn: conn.execute(update(tasks).where(tasks.c.id == 1).values(status="finished")))
    before = row_counts(store_url)
    workers = jedictl_processes_together([["submit", str(path), "--db", store_url, "-o", "json"]] * 2, tmp_path,
                                         env=hooked_env(slow_resubmission="1"))
    outcomes = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        outcomes.append((worker.returncode, err))
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    assert any("jediTaskID=1 is in the defined state" in err for _, err in outcomes), outcomes
    after = row_counts(store_url)
    assert after["tasks"] == before["tasks"] and after["task_commands"] == before["task_commands"] + 1


@pytest.mark.slow
def test_two_submissions_of_one_new_outDS_at_once_register_one(store_url, tmp_path):
    """Both look for a task of the name before either registers it (a test hook holds each a second after
    its look for the owners of its output datasets, which waits for the other's commit): the second
    is refused as PanDA refuses a task already queued."""
    from tests.helpers import hooked_env, jedictl_processes_together

    assert invoke(["db", "init", "--db", store_url]).exit_code == 0
    path = tmp_path / "task.json"
    path.write_text(_prun())
    workers = jedictl_processes_together([["submit", str(path), "--db", store_url, "--user", "alice"]] * 2, tmp_path,
                                         env=hooked_env(slow_owner_check="1"))
    outcomes = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        outcomes.append((worker.returncode, err))
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    assert any(f"jediTaskID=1 is already queued for outDS={OUT_DS}" in err for _, err in outcomes), outcomes
    assert row_counts(store_url)["tasks"] == 1
