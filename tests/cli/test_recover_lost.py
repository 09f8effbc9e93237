"""`jedictl recover-lost` (docs/recovery.md; seed 000 "Lost file recovery" steps 1-4): a task runs with the
simulator, files of its output are declared lost in the catalog, recover-lost makes a recovery task that
re-runs the jobs that made them -- chained to a recovery of their inputs when those are lost too -- and
once it has run the dataset holds a replacement for every lost file and `check` is consistent."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, catalog_files, files, recovered_files, tasks
from tests.cli.test_generate import DS_IN
from tests.conftest import ROOT
from tests.helpers import row_counts, run_sql

NOW = "2026-11-21T12:00:00"
TASK_A = """
name: reco.a
label: managed
processing_type: reco
transformation: Reco_tf.py
command: --in=${IN} --out=${OUTPUT0}
inputs: [{dataset: ds.in}]
outputs: [{dataset: ds.a, file_template: "A.${SN}.root"}]
log: {dataset: ds.a.log, file_template: "log.a.${SN}.tgz"}
split: {n_files_per_job: 2}
scouts: {skip_scout: true}
"""
TASK_B = """
name: deriv.b
label: managed
processing_type: deriv
transformation: Deriv_tf.py
command: --in=${IN} --out=${OUTPUT0}
inputs: [{dataset: ds.a}]
outputs: [{dataset: ds.b, file_template: "B.${SN}.root"}]
log: {dataset: ds.b.log, file_template: "log.b.${SN}.tgz"}
split: {n_files_per_job: 3}
scouts: {skip_scout: true}
"""


def _grid(cli, store, tmp_path) -> None:
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump(DS_IN))
    cli("data", "import", str(path), db=store)


def _run_to_end(cli, store, rounds: int = 12) -> None:
    """Every agent and the simulator, round after round, until no task is left to act on."""
    for round_nr in range(rounds):
        cli("run", "--once", "--seed", str(round_nr), "--now", NOW, db=store)
        cli("simulate", "--seed", str(round_nr), "--failure-rate", "0", "--now", NOW, db=store)
        statuses = run_sql(store, lambda conn: set(conn.execute(select(tasks.c.status)).scalars()))
        if statuses <= {"done", "finished", "failed", "broken", "aborted"}:
            cli("run", "--once", "--now", NOW, db=store)
            return
    raise AssertionError(f"tasks not ended after {rounds} rounds: {statuses}")


def _task(cli, store, spec: str) -> int:
    task_id = cli.json("submit", "-", db=store, input=spec)["task_id"]
    _run_to_end(cli, store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    return task_id


def _catalog(store, dataset: str) -> dict[str, str]:
    """lfn -> availability of a catalog dataset's files."""
    return dict(run_sql(store, lambda conn: conn.execute(
        select(catalog_files.c.lfn, catalog_files.c.availability).join(catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id)
        .where(catalog_datasets.c.name == dataset)).all()))


def _made_by(store, dataset: str) -> dict[str, int]:
    """lfn -> producing job of the finished output records of the dataset."""
    from jedictl.store.schema import datasets

    return dict(run_sql(store, lambda conn: conn.execute(
        select(files.c.lfn, files.c.out_job_id).join(datasets, datasets.c.id == files.c.dataset_id)
        .where(datasets.c.name == dataset, datasets.c.type.in_(("output", "log")), files.c.status == "finished")).all()))


def _inputs_of_job(store, job_id: int) -> list[str]:
    from jedictl.store.schema import job_files

    return sorted(run_sql(store, lambda conn: conn.execute(select(job_files.c.lfn).where(
        job_files.c.job_id == job_id, job_files.c.type == "input")).scalars().all()))


def _inputs_of_jobs(store, task_id: int, status: str = "finished") -> list[list[str]]:
    from jedictl.store.schema import jobs

    ids = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.task_id == task_id, jobs.c.status == status)
                                                   .order_by(jobs.c.id)).scalars().all())
    return [_inputs_of_job(store, job_id) for job_id in ids]


def test_a_lost_file_is_made_again_by_a_recovery_task_that_reruns_its_job(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_a = _task(cli, store, TASK_A)
    before = _catalog(store, "ds.a")
    assert len(before) == 13 and set(before.values()) == {"available"}
    lost = "A.000003.root"
    marked = cli.json("data", "mark-lost", "ds.a", lost, db=store)
    assert marked == {"dataset": "ds.a", "files_marked_lost": 1, "already_lost": 0}
    assert _catalog(store, "ds.a")[lost] == "lost"
    job = _made_by(store, "ds.a")[lost]

    planned = cli.json("recover-lost", "ds.a", "--dry-run", db=store)
    counts = row_counts(store)
    assert planned["dry_run"] is True and planned["lost_files"] == [lost]
    [unit] = planned["recoveries"]
    assert unit["task_id"] is None and unit["original_task_id"] == task_a and unit["jobs"] == [job] and unit["inputs"] == 2
    assert unit["status"] == "ready" and unit["files"] == [{"dataset": "ds.a", "lfn": lost, "job_id": job}]
    assert row_counts(store) == counts  # a dry run writes nothing

    made = cli.json("recover-lost", "ds.a", "--files", lost, db=store)
    [unit] = made["recoveries"]
    recovery = unit["task_id"]
    assert recovery and made["dry_run"] is False
    shown = cli.json("task", "show", str(recovery), db=store)
    assert shown["status"] == "ready" and shown["recovery"]["recovery_of"] == task_a
    assert shown["recovery"]["recovered_files"] == [{"dataset": "ds.a", "lfn": lost, "job_id": job, "replacement": None}]
    assert cli.json("task", "show", str(task_a), db=store)["recovery"]["recovered_by"] == [{"task_id": recovery, "status": "ready", "dataset": "ds.a"}]
    assert run_sql(store, check_all) == []

    # Running it again makes no second recovery task: the file is taken care of.
    again = cli.json("recover-lost", "ds.a", db=store)
    assert again["recoveries"] == [] and again["already_recovering"] == [{"lfn": lost, "task_id": recovery, "status": "ready", "replacement": None}]

    _run_to_end(cli, store)
    shown = cli.json("task", "show", str(recovery), db=store)
    assert shown["status"] == "done"
    # incexec would feed the whole input dataset into it: refused, nothing written
    counts = row_counts(store)
    result = cli("task", "incexec", str(recovery), "-", input='{"nFilesPerJob": 1}', db=store, code=2)
    assert result.stderr.startswith(f"jedictl: error: task {recovery} is a recovery task (docs/recovery.md): it cannot be changed with incexec")
    assert row_counts(store) == counts
    [entry] = shown["recovery"]["recovered_files"]
    replacement = entry["replacement"]
    after = _catalog(store, "ds.a")
    assert replacement and replacement not in before and after[replacement] == "available"  # a new file in the same dataset
    assert after[lost] == "lost" and len(after) == 14
    # the recovery's one job read exactly the inputs of the job it re-ran
    assert _inputs_of_jobs(store, recovery) == [_inputs_of_job(store, job)]
    assert run_sql(store, check_all) == []
    third = cli.json("recover-lost", "ds.a", db=store)
    assert third["recoveries"] == [] and third["already_recovering"][0]["replacement"] == replacement


def test_lost_inputs_chain_the_recovery_to_a_recovery_of_the_task_that_made_them(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_a = _task(cli, store, TASK_A)
    task_b = _task(cli, store, TASK_B)
    made_b = _made_by(store, "ds.b")
    lost_b = sorted(made_b)[1]
    inputs = _inputs_of_job(store, made_b[lost_b])
    assert len(inputs) == 3
    lost_a = inputs[:2]  # two of the three files that job read are gone as well
    cli("data", "mark-lost", "ds.b", lost_b, db=store)
    cli("data", "mark-lost", "ds.a", *lost_a, db=store)

    made = cli.json("recover-lost", "ds.b", db=store)
    first, second = made["recoveries"]
    assert first["original_task_id"] == task_a and first["status"] == "ready" and first["parent_id"] is None
    assert sorted(f["lfn"] for f in first["files"]) == lost_a
    assert second["original_task_id"] == task_b and second["status"] == "registered" and second["parent_id"] == first["task_id"]
    assert second["lost_inputs"] == lost_a and [f["lfn"] for f in second["files"]] == [lost_b]
    assert run_sql(store, check_all) == []

    cli("refine", "--now", NOW, db=store)  # the recovery of ds.b waits for the one of ds.a
    waiting = cli.json("task", "show", str(second["task_id"]), db=store)
    assert waiting["status"] == "pending" and f"recovery task {first['task_id']}" in waiting["error_dialog"]

    _run_to_end(cli, store)
    recovered_a = cli.json("task", "show", str(first["task_id"]), db=store)["recovery"]["recovered_files"]
    replacements = {entry["lfn"]: entry["replacement"] for entry in recovered_a}
    assert set(replacements) == set(lost_a) and all(replacements.values())
    shown = cli.json("task", "show", str(second["task_id"]), db=store)
    assert shown["status"] == "done" and shown["parent_id"] == first["task_id"]
    [entry] = shown["recovery"]["recovered_files"]
    assert entry["lfn"] == lost_b and _catalog(store, "ds.b")[entry["replacement"]] == "available"
    # the re-run job of B read the replacements of its lost inputs and the input that was not lost
    assert _inputs_of_jobs(store, second["task_id"]) == [sorted([replacements[lost_a[0]], replacements[lost_a[1]], inputs[2]])]
    assert run_sql(store, check_all) == []
    assert cli.json("recover-lost", "ds.b", db=store)["recoveries"] == []
    assert cli.json("recover-lost", "ds.a", db=store)["recoveries"] == []


def test_bad_requests_are_refused_with_one_line_and_nothing_written(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    _task(cli, store, TASK_A)
    cli("data", "mark-lost", "ds.in", "f.001.root", db=store)
    cli("data", "mark-lost", "ds.a", "A.000001.root", db=store)
    before = row_counts(store)
    cases = [
        (("recover-lost", "ds.nowhere"), "unknown dataset 'ds.nowhere': it is not in the data catalog"),
        (("recover-lost", "ds.a", "--files", "A.999999.root"), "file 'A.999999.root' is not in dataset ds.a"),
        (("recover-lost", "ds.a", "--files", "A.000002.root"), "file 'A.000002.root' of ds.a is not lost (mark it with `jedictl data mark-lost`)"),
        (("recover-lost", "ds.in"), "no job produced file 'f.001.root' of ds.in: only files a task wrote can be recovered"),
        (("recover-lost", "ds.a", "--files", "A.000001.root,"), "--files: an empty file name"),
        (("data", "mark-lost", "ds.nowhere", "x.root"), "unknown dataset 'ds.nowhere'"),
        (("data", "mark-lost", "ds.a", "x.root"), "file 'x.root' is not in dataset ds.a"),
    ]
    for args, message in cases:
        result = cli(*args, db=store, code=2)
        assert result.stderr == f"jedictl: error: {message}\n", args
    assert row_counts(store) == before
    # marking a file lost twice changes nothing the second time
    assert cli.json("data", "mark-lost", "ds.a", "A.000001.root", db=store) == {"dataset": "ds.a", "files_marked_lost": 0, "already_lost": 1}
    # nothing lost: nothing to do, exit 0
    result = cli("recover-lost", "ds.a.log", db=store)
    assert "nothing to do for ds.a.log: no lost files" in result.stderr


def test_a_task_still_writing_the_dataset_is_not_recovered_until_it_has_ended(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_a = _task(cli, store, TASK_A)
    cli("data", "mark-lost", "ds.a", "A.000001.root", db=store)
    recovery = cli.json("recover-lost", "ds.a", db=store)["recoveries"][0]["task_id"]
    cli("data", "mark-lost", "ds.a", "A.000002.root", db=store)
    before = row_counts(store)
    result = cli("recover-lost", "ds.a", "--files", "A.000002.root", db=store, code=2)
    assert result.stderr == f"jedictl: error: task {recovery} (ready) is writing ds.a: recover its lost files once it has ended\n"
    assert row_counts(store) == before
    _run_to_end(cli, store)
    second = cli.json("recover-lost", "ds.a", db=store)  # A.000001 has its replacement; A.000002 is recovered now
    assert [f["lfn"] for f in second["recoveries"][0]["files"]] == ["A.000002.root"]
    assert [a["lfn"] for a in second["already_recovering"]] == ["A.000001.root"] and second["recoveries"][0]["original_task_id"] == task_a
    assert run_sql(store, check_all) == []


def test_check_catches_a_file_recovered_twice(cli, store, tmp_path, monkeypatch):
    """The guard is `covering`: with it broken, a second run makes a second recovery of the same file."""
    from jedictl.store import recovery as recovery_store

    _grid(cli, store, tmp_path)
    _task(cli, store, TASK_A)
    cli("data", "mark-lost", "ds.a", "A.000004.root", db=store)
    first = cli.json("recover-lost", "ds.a", db=store)["recoveries"][0]["task_id"]
    assert run_sql(store, check_all) == []
    real = recovery_store.covering
    monkeypatch.setattr(recovery_store, "covering", lambda conn, dataset, lfns: {})
    monkeypatch.setattr(recovery_store, "live_writers", lambda conn, names: [])
    second = cli.json("recover-lost", "ds.a", db=store)["recoveries"][0]["task_id"]
    monkeypatch.setattr(recovery_store, "covering", real)
    assert run_sql(store, check_all) == [f"output A.000004.root of ds.a is recovered by tasks {first}, {second} at once"]
    result = cli("check", "-o", "json", db=store, code=1)
    violation = json.loads(result.stdout)["violations"][0]
    assert violation["check"] == "lost_files_recovered_once" and violation["object"] == "output A.000004.root of ds.a"


def test_a_recovery_killed_takes_its_waiting_child_with_it_and_the_files_can_be_recovered_again(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    _task(cli, store, TASK_A)
    _task(cli, store, TASK_B)
    made_b = _made_by(store, "ds.b")
    lost_b = sorted(made_b)[0]
    lost_a = _inputs_of_job(store, made_b[lost_b])[:1]
    cli("data", "mark-lost", "ds.b", lost_b, db=store)
    cli("data", "mark-lost", "ds.a", *lost_a, db=store)
    parent, child = (unit["task_id"] for unit in cli.json("recover-lost", "ds.b", db=store)["recoveries"])
    cli("kill", str(parent), db=store)
    _run_to_end(cli, store)
    assert cli.json("task", "show", str(parent), db=store)["status"] == "aborted"
    assert cli.json("task", "show", str(child), db=store)["status"] in ("aborted", "broken")
    assert run_sql(store, check_all) == []
    # an ended recovery that made nothing covers nothing: recovering again makes new tasks, and they run
    again = cli.json("recover-lost", "ds.b", db=store)
    assert again["already_recovering"] == [] and len(again["recoveries"]) == 2
    _run_to_end(cli, store)
    assert [cli.json("task", "show", str(unit["task_id"]), db=store)["status"] for unit in again["recoveries"]] == ["done", "done"]
    assert run_sql(store, check_all) == []


def test_the_worked_example_of_recovery_md(cli, store, tmp_path):
    import re

    page = (ROOT / "docs" / "recovery.md").read_text()
    blocks = dict(re.findall(r"<!-- recovery: (\S+) -->\n```yaml\n(.*?)```", page, re.S))
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    (tmp_path / "evnt.yaml").write_text(blocks["evnt"])
    cli("data", "import", str(tmp_path / "evnt.yaml"), db=store)
    assert _task(cli, store, blocks["simul"]) == 1 and _task(cli, store, blocks["reco"]) == 2
    assert _made_by(store, "mc23.reco.AOD")["AOD.000002.root"] == 6 and _inputs_of_job(store, 6) == ["HITS.000003.root", "HITS.000004.root"]
    cli("data", "mark-lost", "mc23.reco.AOD", "AOD.000002.root", db=store)
    cli("data", "mark-lost", "mc23.simul.HITS", "HITS.000003.root", "HITS.000004.root", db=store)
    planned = cli.json("recover-lost", "mc23.reco.AOD", "--dry-run", db=store)["recoveries"]
    assert [(u["task_id"], u["original_task_id"], u["status"], u["jobs"], u["inputs"], u["lost_inputs"]) for u in planned] == [
        (None, 1, "ready", [3, 4], 4, []), (None, 2, "registered", [6], 2, ["HITS.000003.root", "HITS.000004.root"])]
    assert [u["task_id"] for u in cli.json("recover-lost", "mc23.reco.AOD", db=store)["recoveries"]] == [3, 4]
    refined = cli.json("refine", db=store)["items"]
    assert refined == [{"outcome": "pending", "task_id": 4, "reason": "waiting for recovery task 3 to make lost inputs again"}]
    _run_to_end(cli, store)
    shown = cli.json("task", "show", "4", db=store)
    assert shown["recovery"] == {"recovery_of": 2, "recovered_files": [
        {"dataset": "mc23.reco.AOD", "lfn": "AOD.000002.root", "job_id": 6, "replacement": "AOD.000003.root"}], "recovered_by": []}
    assert "2 lost inputs read from their replacements" in [h["reason"] for h in shown["status_history"]]
    assert [f["replacement"] for f in cli.json("task", "show", "3", db=store)["recovery"]["recovered_files"]] == ["HITS.000005.root",
                                                                                                                "HITS.000006.root"]
    assert cli.json("task", "show", "2", db=store)["recovery"]["recovered_by"] == [{"task_id": 4, "status": "done", "dataset": "mc23.reco.AOD"}]
    aod = cli.json("data", "show", "mc23.reco.AOD", "--files", db=store)
    assert aod["lost_files"] == ["AOD.000002.root"] and [f["lfn"] for f in aod["files"]] == [f"AOD.00000{i}.root" for i in (1, 2, 3)]
    assert _inputs_of_jobs(store, 4) == [["HITS.000005.root", "HITS.000006.root"]]
    assert run_sql(store, check_all) == [] and cli("check", db=store).exit_code == 0
    again = cli.json("recover-lost", "mc23.reco.AOD", db=store)
    assert again["recoveries"] == [] and again["already_recovering"][0]["replacement"] == "AOD.000003.root"


EVGEN = """
name: evgen.small
label: managed
processing_type: evgen
transformation: Gen_tf.py
command: --randomSeed=${RNDMSEED} --maxEvents=${MAXEVENTS} --firstEvent=${FIRSTEVENT} --out=${OUTPUT0}
no_input: true
outputs: [{dataset: ds.evnt, file_template: "EVNT.${SN}.root"}]
log: {dataset: ds.evnt.log, file_template: "log.evnt.${SN}.tgz"}
split: {n_events: 400, n_events_per_job: 100}
scouts: {skip_scout: true}
"""


def test_a_job_without_input_is_rerun_on_its_events_with_its_seed(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task = _task(cli, store, EVGEN)
    made = _made_by(store, "ds.evnt")
    assert len(made) == 4
    lost = sorted(made)[2]
    cli("data", "mark-lost", "ds.evnt", lost, db=store)
    [unit] = cli.json("recover-lost", "ds.evnt", db=store)["recoveries"]
    assert unit["original_task_id"] == task and unit["inputs"] == 2 and unit["status"] == "ready"
    _run_to_end(cli, store)
    from jedictl.store.schema import jobs

    original, rerun = (run_sql(store, lambda conn, t=t: conn.execute(select(jobs.c.job_parameters).where(
        jobs.c.task_id == t, jobs.c.status == "finished").order_by(jobs.c.id)).scalars().all()) for t in (task, unit["task_id"]))
    [params] = rerun
    first_event = params.split("--firstEvent=")[1].split()[0]
    assert first_event == "201" and any("--firstEvent=201 " in p for p in original)  # the same events, job for job
    [same] = [p for p in original if "--firstEvent=201 " in p]
    assert params.split("--randomSeed=")[1].split()[0] == same.split("--randomSeed=")[1].split()[0]  # and the same seed
    [entry] = cli.json("task", "show", str(unit["task_id"]), db=store)["recovery"]["recovered_files"]
    assert entry["replacement"] == "EVNT.000005.root"
    assert run_sql(store, check_all) == []


def test_two_recover_lost_at_once_make_one_recovery_task(cli, store, tmp_path):
    from tests.helpers import jedictl_processes_together

    _grid(cli, store, tmp_path)
    _task(cli, store, TASK_A)
    cli("data", "mark-lost", "ds.a", "A.000005.root", "A.000006.root", db=store)
    workers = jedictl_processes_together([["recover-lost", "ds.a", "-o", "json", "--db", store]] * 2, tmp_path)
    answers = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        answers.append(json.loads(out))
    made = [unit["task_id"] for answer in answers for unit in answer["recoveries"]]
    assert len(made) == 1
    waited = [answer for answer in answers if not answer["recoveries"]]
    assert [a["task_id"] for a in waited[0]["already_recovering"]] == [made[0], made[0]]
    assert run_sql(store, lambda conn: conn.execute(select(recovered_files.c.lfn).order_by(recovered_files.c.lfn)).scalars().all()) == [
        "A.000005.root", "A.000006.root"]
    assert run_sql(store, check_all) == []


def test_each_job_is_rerun_whole_when_a_generation_chunk_would_cut_it(cli, store, tmp_path, monkeypatch):
    """Chunks of 3 records over jobs of 2 inputs: a chunk that ends inside a job leaves that job's records
    for the next chunk, so each original job is re-run as one job on all its inputs."""
    _grid(cli, store, tmp_path)
    _task(cli, store, TASK_A)
    made = _made_by(store, "ds.a")
    lost = ["A.000002.root", "A.000003.root", "A.000004.root"]
    cli("data", "mark-lost", "ds.a", *lost, db=store)
    [unit] = cli.json("recover-lost", "ds.a", db=store)["recoveries"]
    monkeypatch.setenv("JEDICTL_GENERATE__BATCH_SIZE", "3")
    _run_to_end(cli, store)
    assert _inputs_of_jobs(store, unit["task_id"]) == [_inputs_of_job(store, made[lfn]) for lfn in lost]
    assert run_sql(store, check_all) == []


def test_a_plan_that_would_make_two_recovery_tasks_write_one_dataset_is_refused(cli, store, tmp_path):
    """Task A writes ds.a and ds.x; task C reads ds.x and also writes ds.a (allowTaskDuplication). A lost
    file of C whose input is lost would need A and C re-run together, both continuing ds.a's serials."""
    _grid(cli, store, tmp_path)
    two_outputs = TASK_A.replace('outputs: [{dataset: ds.a, file_template: "A.${SN}.root"}]',
                                 'outputs: [{dataset: ds.a, file_template: "A.${SN}.root"}, {dataset: ds.x, file_template: "X.${SN}.root"}]')
    two_outputs = two_outputs.replace("--out=${OUTPUT0}", "--out=${OUTPUT0} --x=${OUTPUT1}")
    _task(cli, store, two_outputs)
    reader = TASK_B.replace("name: deriv.b", "name: deriv.c").replace("inputs: [{dataset: ds.a}]", "inputs: [{dataset: ds.x}]")
    reader = reader.replace('{dataset: ds.b, file_template: "B.${SN}.root"}', '{dataset: ds.a, file_template: "C.${SN}.root"}')
    reader = reader.replace("ds.b.log", "ds.c.log")
    task_c = cli.json("submit", "-", "--allow-task-duplication", db=store, input=reader)["task_id"]
    _run_to_end(cli, store)
    assert cli.json("task", "show", str(task_c), db=store)["status"] == "done"
    made_c = {lfn: job for lfn, job in _made_by(store, "ds.a").items() if lfn.startswith("C.")}
    lost_c = sorted(made_c)[0]
    cli("data", "mark-lost", "ds.a", lost_c, db=store)
    cli("data", "mark-lost", "ds.x", _inputs_of_job(store, made_c[lost_c])[0], db=store)
    before = row_counts(store)
    result = cli("recover-lost", "ds.a", db=store, code=2)
    assert result.stderr.startswith(f"jedictl: error: recovering {lost_c} of ds.a needs two recovery tasks writing ds.a: ")
    assert row_counts(store) == before


def test_a_chain_three_tasks_deep_is_recovered_parents_first(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    task_a = _task(cli, store, TASK_A)
    task_b = _task(cli, store, TASK_B)
    task_c = _task(cli, store, TASK_B.replace("deriv.b", "deriv.c").replace("[{dataset: ds.a}]", "[{dataset: ds.b}]")
                   .replace("ds.b,", "ds.c,").replace("B.${SN}", "C.${SN}").replace("ds.b.log", "ds.c.log").replace("log.b.", "log.c."))
    lost_c = sorted(_made_by(store, "ds.c"))[0]
    lost_b = _inputs_of_job(store, _made_by(store, "ds.c")[lost_c])[:1]
    lost_a = _inputs_of_job(store, _made_by(store, "ds.b")[lost_b[0]])[:1]
    for dataset, names in (("ds.c", [lost_c]), ("ds.b", lost_b), ("ds.a", lost_a)):
        cli("data", "mark-lost", dataset, *names, db=store)
    recoveries = cli.json("recover-lost", "ds.c", db=store)["recoveries"]
    assert [(u["original_task_id"], u["status"]) for u in recoveries] == [(task_a, "ready"), (task_b, "registered"), (task_c, "registered")]
    assert [u["parent_id"] for u in recoveries] == [None, recoveries[0]["task_id"], recoveries[1]["task_id"]]
    _run_to_end(cli, store, rounds=20)
    for unit in recoveries:
        shown = cli.json("task", "show", str(unit["task_id"]), db=store)
        assert shown["status"] == "done" and all(entry["replacement"] for entry in shown["recovery"]["recovered_files"])
    assert run_sql(store, check_all) == []
