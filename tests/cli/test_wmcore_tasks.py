"""WMCore splitting for real tasks (issue 21, items 1-2): a task spec names a WMCore algorithm with its
parameters; `generate` cuts the task's released input with the very function `jedictl split` previews
with; jobs carry their mask to the executor; algorithms that wait on an open fileset wait across passes
without taking a file twice; createfailed jobs are recorded; include_parents attaches catalog parents."""

from __future__ import annotations

import json

import pytest
import yaml
from sqlalchemy import select, update

from jedictl.engine.generate.splitters.registry import WMCORE_ALGORITHMS, split_fileset
from jedictl.engine.generate.splitters.wmcore_model import Fileset, wm_file
from jedictl.model import TASK_FINAL
from jedictl.store.invariants import check_all
from jedictl.store.schema import job_masks, tasks
from tests.conftest import ROOT
from tests.helpers import refused, row_counts, run_sql

#: Parameters that give each algorithm several jobs over the fileset below (an algorithm the registry
#: gains later runs with its defaults).
PARAMS = {
    "FileBased": {"files_per_job": 2},
    "MinFileBased": {"files_per_job": 2},
    "EventBased": {"events_per_job": 40},
    "LumiBased": {"lumis_per_job": 2},
    "EventAwareLumiBased": {"events_per_job": 60},
    "SizeBased": {"size_per_job": 2_500_000},
    "RunBased": {"files_per_job": 2},
    "ParentlessMergeBySize": {"min_merge_size": 1, "max_merge_size": 2_500_000},
    "WMBSMergeBySize": {},
    "SiblingProcessingBased": {"files_per_job": 2},
    "Harvest": {},
}
FILES = [
    {"lfn": "raw.001.root", "size": 1_000_000, "events": 100, "run": 1, "lumi_blocks": [1, 2, 3], "parents": ["gen.001.root"]},
    {"lfn": "raw.002.root", "size": 1_000_000, "events": 90, "run": 1, "lumi_blocks": [4, 5], "parents": ["gen.001.root", "gen.002.root"]},
    {"lfn": "raw.003.root", "size": 1_000_000, "events": 80, "run": 2, "lumi_blocks": [1, 2]},
    {"lfn": "raw.004.root", "size": 1_000_000, "events": 70, "run": 2, "lumi_blocks": [3]},
    {"lfn": "raw.005.root", "size": 1_000_000, "events": 60, "run": 3, "lumi_blocks": [7, 8]},
]
PARENTS = {"name": "cms.gen", "state": "closed", "replicas": [{"endpoint": "BNL-ATLAS_DATADISK"}],
           "files": [{"lfn": "gen.001.root", "size": 10}, {"lfn": "gen.002.root", "size": 20}]}


#: WMBSMergeBySize merges only files with parents (the outputs of a processing job): every file gets one.
MERGE_FILES = [{**f, "parents": f.get("parents", ["gen.002.root"])} for f in FILES]


def _catalog(files=FILES, state="closed"):
    return {"datasets": [{"name": "cms.raw", "state": state, "replicas": [{"endpoint": "CERN-PROD_DATADISK"}], "files": files}, PARENTS]}


def _spec(algorithm, **params):
    return {
        "name": f"wm.{algorithm.lower()}", "command": "--in=${IN/L} --out=${OUTPUT0}",
        "inputs": [{"dataset": "cms.raw"}],
        "outputs": [{"dataset": f"wm.{algorithm.lower()}.out", "file_template": "out.${SN}.root"}],
        "log": {"dataset": f"wm.{algorithm.lower()}.log", "file_template": "log.${SN}.tgz"},
        "splitting": {"algorithm": algorithm, **params},
    }


def _setup(cli, store, tmp_path, catalog=None):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    _import(cli, store, tmp_path, catalog or _catalog())


def _import(cli, store, tmp_path, catalog, name="catalog.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(catalog))
    cli("data", "import", str(path), db=store)


def _submit(cli, store, spec):
    return cli.json("submit", "-", db=store, input=json.dumps(spec))["task_id"]


def _jobs(cli, store, task_id):
    listed = sorted(cli.json("jobs", "list", "--task", str(task_id), "--limit", "1000", db=store), key=lambda j: j["job_id"])
    return [cli.json("jobs", "show", j["task_job"], db=store) for j in listed]


def _task_status(store, task_id):
    return run_sql(store, lambda conn: conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar_one())


#: The feeder looks at a growing input again at every pass (not only every 5 minutes).
RESCAN = {"JEDICTL_FEED__CHECK_INTERVAL_MINUTES": "0"}


def _generate(cli, store):
    cli("refine", db=store)
    cli("feed", db=store, env=RESCAN)
    cli("broker", "--seed", "1", db=store)
    report = cli.json("generate", "--seed", "1", db=store)
    assert run_sql(store, check_all) == []
    return report


def _inputs(job):
    return [f["lfn"] for f in job["files"] if f["type"] == "input"]


@pytest.mark.parametrize("algorithm", list(WMCORE_ALGORITHMS))
def test_a_task_split_by_each_wmcore_algorithm_runs_to_the_end_with_the_simulator(cli, store, tmp_path, algorithm):
    files = MERGE_FILES if algorithm == "WMBSMergeBySize" else FILES
    _setup(cli, store, tmp_path, _catalog(files))
    task_id = _submit(cli, store, _spec(algorithm, **PARAMS.get(algorithm, {})))
    for seed in range(1, 12):
        cli("run", "--once", "--seed", str(seed), db=store)
        cli("simulate", "--seed", str(seed), "--failure-rate", "0", db=store)
        if _task_status(store, task_id) in TASK_FINAL:
            break
    assert _task_status(store, task_id) == "done"
    assert cli("check", db=store).stdout.strip() == "check: consistent"
    jobs = _jobs(cli, store, task_id)
    assert jobs and {j["status"] for j in jobs} == {"finished"}
    # The jobs are the preview's: the same function over the same fileset (one pass, a closed dataset).
    fileset = Fileset(tuple(wm_file(f["lfn"], f["size"], f["events"], ("SITE",), {f["run"]: f["lumi_blocks"]}, parents=tuple(f.get("parents", ())))
                            for f in files))
    planned = split_fileset(algorithm, fileset, PARAMS.get(algorithm, {}))
    assert sorted(tuple(sorted(set(_inputs(j)))) for j in jobs) == sorted(tuple(sorted(set(p.files))) for p in planned)


def test_jobs_carry_their_mask_into_dispatch_and_the_payload_environment(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    task_id = _submit(cli, store, _spec("LumiBased", lumis_per_job=2))
    _generate(cli, store)
    masks = {}
    for site in {j["site"] for j in _jobs(cli, store, task_id)}:
        for payload in cli.json("jobs", "dispatch", "--site", site, "--count", "50", db=store)["jobs"]:
            masks[payload["job_id"]] = (tuple(i["lfn"] for i in payload["inputs"]), payload["mask"])
    # raw.001 has lumis 1-3: its first job takes 1-2, the next takes 3 and raw.002's 4 (WMCore appends ranges unmerged)
    assert sorted(masks.values()) == sorted([
        (("raw.001.root",), {"first_event": None, "last_event": None, "first_run": 1, "last_run": 1, "first_lumi": 1, "last_lumi": 2,
                             "lumis": {"1": [[1, 2]]}}),
        (("raw.001.root", "raw.002.root"), {"first_event": None, "last_event": None, "first_run": 1, "last_run": 1, "first_lumi": 3,
                                            "last_lumi": 4, "lumis": {"1": [[3, 3], [4, 4]]}}),
        (("raw.002.root",), {"first_event": None, "last_event": None, "first_run": 1, "last_run": 1, "first_lumi": 5, "last_lumi": 5,
                             "lumis": {"1": [[5, 5]]}}),
        (("raw.003.root",), {"first_event": None, "last_event": None, "first_run": 2, "last_run": 2, "first_lumi": 1, "last_lumi": 2,
                             "lumis": {"2": [[1, 2]]}}),
        (("raw.004.root",), {"first_event": None, "last_event": None, "first_run": 2, "last_run": 2, "first_lumi": 3, "last_lumi": 3,
                             "lumis": {"2": [[3, 3]]}}),
        (("raw.005.root",), {"first_event": None, "last_event": None, "first_run": 3, "last_run": 3, "first_lumi": 7, "last_lumi": 8,
                             "lumis": {"3": [[7, 8]]}}),
    ])


def test_event_based_jobs_carry_their_event_range(cli, store, tmp_path):
    _setup(cli, store, tmp_path, _catalog(FILES[:1]))
    task_id = _submit(cli, store, _spec("EventBased", events_per_job=40))
    _generate(cli, store)
    site = _jobs(cli, store, task_id)[0]["site"]
    payloads = cli.json("jobs", "dispatch", "--site", site, "--count", "50", db=store)["jobs"]
    sites = {j["site"] for j in _jobs(cli, store, task_id)} - {site}
    for other in sites:
        payloads += cli.json("jobs", "dispatch", "--site", other, "--count", "50", db=store)["jobs"]
    assert sorted((p["mask"]["first_event"], p["mask"]["last_event"]) for p in payloads) == [(0, 39), (40, 79), (80, 99)]


def test_the_pilot_gives_the_mask_to_the_payload_in_its_environment():
    from jedictl.engine.pilot.payload import job_environment

    env = job_environment({"job_id": 7, "task_id": 1, "mask": {"first_event": 40, "last_event": 79, "first_run": 1, "last_run": 2,
                                                                "first_lumi": 3, "last_lumi": 1, "lumis": {"1": [[3, 4], [6, 6]], "2": [[1, 1]]}}}, {})
    assert (env["JEDICTL_FIRST_EVENT"], env["JEDICTL_LAST_EVENT"], env["JEDICTL_FIRST_LUMI"], env["JEDICTL_LUMIS"]) == (
        "40", "79", "3", "1:3-4,6-6;2:1-1")
    assert json.loads(env["JEDICTL_MASK"])["lumis"] == {"1": [[3, 4], [6, 6]], "2": [[1, 1]]}
    assert "JEDICTL_MASK" not in job_environment({"job_id": 7, "task_id": 1, "mask": None}, {})


def test_createfailed_jobs_are_recorded_with_their_reason(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    task_id = _submit(cli, store, _spec("FileBased", files_per_job=2, siteWhitelist=["NOWHERE"]))
    report = _generate(cli, store)
    assert report["counts"]["jobs"] == 3
    jobs = _jobs(cli, store, task_id)
    assert [j["status"] for j in jobs] == ["failed"] * 3
    # WMCore's own failedReason for a job without a possible site (code 71101; JobFactory.commit).
    assert all("createfailed: No sites are available to submit the job" in (j.get("error_diag") or json.dumps(j)) for j in jobs)
    listed = cli.json("jobs", "list", "--task", str(task_id), "--status", "failed", db=store)
    assert len(listed) == 3
    # As WMCore's ErrorHandler retries createfailed jobs (createcooloff) until the retries are used up:
    # each of the file's attempts is a createfailed job, then the file has failed and the task counts it.
    _generate(cli, store)
    _generate(cli, store)
    assert len(_jobs(cli, store, task_id)) == 9
    master = next(d for d in cli.json("task", "show", str(task_id), db=store)["datasets"] if d["type"] == "input")
    assert (master["n_files"], master["n_files_failed"]) == (5, 5)


def test_an_open_fileset_waits_across_passes_and_never_takes_a_file_twice(cli, store, tmp_path):
    _setup(cli, store, tmp_path, _catalog(FILES[:3], state="open"))
    task_id = _submit(cli, store, _spec("MinFileBased", files_per_job=2))
    _generate(cli, store)
    assert [_inputs(j) for j in _jobs(cli, store, task_id)] == [["raw.001.root", "raw.002.root"]]  # raw.003 waits for a full job
    _import(cli, store, tmp_path, _catalog(FILES[:4], state="open"), "more.yaml")
    _generate(cli, store)
    _generate(cli, store)  # a second pass with nothing new makes nothing
    assert [_inputs(j) for j in _jobs(cli, store, task_id)] == [["raw.001.root", "raw.002.root"], ["raw.003.root", "raw.004.root"]]
    _import(cli, store, tmp_path, _catalog(FILES, state="closed"), "last.yaml")
    _generate(cli, store)
    taken = [lfn for j in _jobs(cli, store, task_id) for lfn in _inputs(j)]
    assert sorted(taken) == [f["lfn"] for f in FILES] and len(taken) == len(set(taken))


#: The throttle's bunch held at 4 jobs: a queue lacking jobs gets a budget of 4 / 2 = 2 jobs per pass.
SMALL_BUDGET = {"JEDICTL_THROTTLE__BUNCH_MIN": "4", "JEDICTL_THROTTLE__BUNCH_MAX": "4"}


@pytest.mark.parametrize("algorithm,params,per_pass", [
    ("FileBased", {"files_per_job": 1}, [2, 2, 1]),
    # Jobs 1-3 share raw.001 (lumis 1-2 | 3) and raw.002 (4 | 5): a cut inside them would leave raw.001's
    # lumi 3 unmade, so the first pass makes the three, past the budget; then 2 and 1 as the budget allows.
    ("LumiBased", {"lumis_per_job": 2}, [3, 2, 1]),
])
def test_the_throttle_budget_bounds_a_wmcore_plan_and_the_rest_waits_for_the_next_pass(cli, store, tmp_path, algorithm, params,
                                                                                         per_pass):
    _setup(cli, store, tmp_path)
    task_id = _submit(cli, store, _spec(algorithm, **params))
    cli("refine", db=store)
    cli("feed", db=store)
    cli("broker", "--seed", "1", db=store)
    made = []
    for _ in range(len(per_pass) + 1):
        report = cli.json("generate", "--seed", "1", db=store, env=SMALL_BUDGET)
        made.append(report["counts"]["jobs"])
        assert run_sql(store, check_all) == []
    assert made == [*per_pass, 0]
    jobs = _jobs(cli, store, task_id)
    assert sorted({lfn for j in jobs for lfn in _inputs(j)}) == [f["lfn"] for f in FILES]
    if algorithm == "LumiBased":
        # Every lumi of every file is in exactly one job's mask, as in the unthrottled plan of the whole input.
        masks = run_sql(store, lambda conn: conn.execute(select(job_masks.c.lumis).where(job_masks.c.task_id == task_id)).scalars().all())
        lumis = sorted((int(run), lumi) for mask in masks for run, ranges in mask.items() for first, last in ranges
                       for lumi in range(first, last + 1))
        assert lumis == sorted((f["run"], lumi) for f in FILES for lumi in f["lumi_blocks"])


def test_harvest_keeps_its_state_between_passes(cli, store, tmp_path):
    _setup(cli, store, tmp_path, _catalog(FILES[:2], state="open"))
    task_id = _submit(cli, store, _spec("Harvest", periodic_harvest_interval=3600))
    _generate(cli, store)
    assert len(_jobs(cli, store, task_id)) == 1  # the first periodic job
    state = cli.json("task", "show", str(task_id), db=store)
    _import(cli, store, tmp_path, _catalog(FILES[:3], state="open"), "more.yaml")
    _generate(cli, store)
    assert len(_jobs(cli, store, task_id)) == 1  # the interval has not passed since the last job
    from jedictl.store.schema import task_splitting
    saved = run_sql(store, lambda conn: conn.execute(select(task_splitting.c.state).where(task_splitting.c.task_id == task_id)).scalar_one())
    assert saved["last_job_time"] > 0 and saved["harvested"] == 2 and state["status"] in ("running", "scouting")


def test_include_parents_attaches_the_catalog_parents_of_each_jobs_files(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    task_id = _submit(cli, store, _spec("FileBased", files_per_job=2, include_parents=True))
    _generate(cli, store)
    jobs = _jobs(cli, store, task_id)
    by_inputs = {tuple(_inputs(j)): [f["lfn"] for f in j["files"] if f["type"] == "parent"] for j in jobs}
    assert by_inputs == {("raw.001.root", "raw.002.root"): ["gen.001.root", "gen.002.root"], ("raw.003.root", "raw.004.root"): [],
                         ("raw.005.root",): []}
    site = next(j["site"] for j in jobs if _inputs(j)[0] == "raw.001.root")
    payloads = cli.json("jobs", "dispatch", "--site", site, "--count", "50", db=store)["jobs"]
    parents = [i for p in payloads for i in p["inputs"] if i["type"] == "parent"]
    assert [(i["lfn"], i["replicas"], i["size"]) for i in parents] == [("gen.001.root", ["BNL-ATLAS_DATADISK"], 10),
                                                                       ("gen.002.root", ["BNL-ATLAS_DATADISK"], 20)]


def test_without_include_parents_no_parent_is_attached(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    task_id = _submit(cli, store, _spec("FileBased", files_per_job=2))
    _generate(cli, store)
    assert all(f["type"] != "parent" for j in _jobs(cli, store, task_id) for f in j["files"])


@pytest.mark.parametrize("splitting,message", [
    ({"algorithm": "LumiBased", "lumis_per_job": "two"}, "splitting.lumis_per_job: must be a whole number"),
    ({"algorithm": "LumiBased", "lumis_per_job": 0}, "splitting.lumis_per_job: must be at least 1"),
    ({"algorithm": "LumiBased", "lumis_pr_job": 2}, "splitting.lumis_pr_job: unknown parameter for LumiBased"),
    ({"algorithm": "SizeBased", "include_parents": True}, "splitting.include_parents: unknown parameter for SizeBased"),
    ({"algorithm": "Lumi"}, "splitting.algorithm: unknown algorithm 'Lumi'"),
    ({"algorithm": "jedi"}, "splitting.algorithm: JEDI's rules split a task by default"),
    ({"lumis_per_job": 2}, "splitting.algorithm: must name a WMCore algorithm"),
    ({"algorithm": "Harvest", "jobs_running": True}, "splitting.jobs_running: is read from the task's jobs by the generator"),
    ({"algorithm": "WMBSMergeBySize", "unfinished_parents": ["p"]}, "splitting.unfinished_parents: is for `jedictl split` only"),
    ({"algorithm": "FileBased", "files_per_job": 2, "jobs_per_group": 3},
     "splitting.jobs_per_group: is for `jedictl split` only (its `group` column): a task's jobs are not put in job groups"),
    ({"algorithm": "MinFileBased", "jobs_per_group": 1}, "splitting.jobs_per_group: is for `jedictl split` only"),
    ({"algorithm": "LumiBased", "jobs_per_group": 1},
     "splitting.jobs_per_group: unknown parameter for LumiBased; only FileBased, MinFileBased take it"),
    ("LumiBased", "splitting: must be a mapping"),
])
def test_a_bad_splitting_block_is_refused_at_submit_with_the_store_unchanged(cli, store, tmp_path, splitting, message):
    _setup(cli, store, tmp_path)
    spec = {**_spec("LumiBased"), "splitting": splitting}
    assert message in refused(cli, store, "submit", "-", input=json.dumps(spec))


def test_jedi_splitting_options_cannot_be_combined_with_a_wmcore_algorithm(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    spec = {**_spec("LumiBased"), "split": {"n_files_per_job": 2}}
    assert "split.n_files_per_job: cannot be combined with splitting" in refused(cli, store, "submit", "-", input=json.dumps(spec))
    spec = {**_spec("LumiBased"), "inputs": [{"dataset": "cms.raw"}, {"dataset": "cms.gen", "ratio": 1}]}
    assert "reads one input dataset" in refused(cli, store, "submit", "-", input=json.dumps(spec))


def test_parents_in_the_catalog_are_checked_at_import(cli, store, tmp_path):
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    bad = {"datasets": [{"name": "x", "state": "closed", "files": [{"lfn": "a.root", "parents": "b.root"}]}]}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert "datasets[0].files[0].parents: must be a list of file names" in refused(cli, store, "data", "import", str(tmp_path / "bad.yaml"))
    bad["datasets"][0]["files"][0]["parents"] = ["a.root"]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert "a file cannot be its own parent" in refused(cli, store, "data", "import", str(tmp_path / "bad.yaml"))


def test_check_reports_a_mask_outside_its_files(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    task_id = _submit(cli, store, _spec("LumiBased", lumis_per_job=2))
    _generate(cli, store)
    job_id = _jobs(cli, store, task_id)[0]["job_id"]
    run_sql(store, lambda conn: conn.execute(update(job_masks).where(job_masks.c.job_id == job_id).values(lumis={"1": [[1, 9]]})))
    problems = run_sql(store, check_all)
    assert problems == [f"task {task_id} job {job_id}: its mask has run 1 lumi 4, which none of its input files holds"]
    result = cli("check", db=store, code=1)
    assert "wmcore_masks_within_their_files" in result.stdout


def test_check_reports_an_event_mask_outside_its_record_and_a_mask_of_a_jedi_task(cli, store, tmp_path):
    _setup(cli, store, tmp_path, _catalog(FILES[:1]))
    task_id = _submit(cli, store, _spec("EventBased", events_per_job=40))
    _generate(cli, store)
    job_id = _jobs(cli, store, task_id)[0]["job_id"]
    run_sql(store, lambda conn: conn.execute(update(job_masks).where(job_masks.c.job_id == job_id).values(first_event=30, last_event=60)))
    assert run_sql(store, check_all) == [f"task {task_id} job {job_id}: its events 30-60 lie outside its input files' events"]
    run_sql(store, lambda conn: conn.execute(update(job_masks).where(job_masks.c.job_id == job_id).values(first_event=0, last_event=39)))
    from jedictl.store.schema import task_splitting
    run_sql(store, lambda conn: conn.execute(task_splitting.delete().where(task_splitting.c.task_id == task_id)))
    assert f"task {task_id} job {job_id} has a WMCore mask, but its task is not split by a WMCore algorithm" in run_sql(store, check_all)
    assert row_counts(store)["job_masks"] == 3


MASK_PAYLOAD = """\
#!{python}
# Writes the mask the pilot gave it (its environment) into its output.
import os, sys
with open(sys.argv[1], "w") as out:
    out.write(os.environ.get("JEDICTL_LUMIS", "no mask") + " " + os.environ.get("JEDICTL_FIRST_LUMI", "-") + "\\n")
"""


def test_the_pilot_hands_a_jobs_mask_to_its_payload(cli, store, tmp_path):
    import sys

    from jedictl.engine.storage.paths import replica_path, replica_scope
    from tests.cli import pilot_grid as grid

    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "sites.yaml").write_text(yaml.safe_dump(grid.sites_document(disk)))
    cli("sites", "import", str(tmp_path / "sites.yaml"), db=store)
    files = grid.place_inputs(disk, 2)
    for index, entry in enumerate(files):
        entry.update(run=1, lumi_blocks=[2 * index + 1, 2 * index + 2])
    _import(cli, store, tmp_path, {"datasets": [{"name": grid.INPUT, "state": "closed", "replicas": [{"endpoint": grid.ENDPOINT}],
                                                 "files": files}]})
    payload = tmp_path / "mask.py"
    payload.write_text(MASK_PAYLOAD.format(python=sys.executable))
    payload.chmod(0o755)
    spec = yaml.safe_load(grid.task_spec(str(payload), command="${OUTPUT0}"))
    del spec["split"]
    spec["splitting"] = {"algorithm": "LumiBased", "lumis_per_job": 1}
    cli("submit", "-", db=store, input=json.dumps(spec))
    grid.generate(cli, store)
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"))
    assert code == 0 and report["counts"]["finished"] == 4, stderr
    shown = cli.json("data", "show", "pilot.test.1.out", "--files", db=store)["files"]
    written = sorted(replica_path(f"file://{disk}", replica_scope(None, "pilot.test.1.out"), f["lfn"]).read_text() for f in shown)
    assert written == ["1:1-1 1\n", "1:2-2 2\n", "1:3-3 3\n", "1:4-4 4\n"]


def test_input_the_algorithm_refuses_leaves_the_task_pending_with_the_reason(cli, store, tmp_path):
    no_runs = [{key: value for key, value in f.items() if key not in ("run", "lumi_blocks")} for f in FILES]
    _setup(cli, store, tmp_path, _catalog(no_runs))
    task_id = _submit(cli, store, _spec("RunBased", files_per_job=2))
    report = _generate(cli, store)
    assert report["counts"]["jobs"] == 0
    task = cli.json("task", "show", str(task_id), db=store)
    assert task["status"] == "pending" and "RunBased cannot split the input" in task["error_dialog"] and "needs the run" in task["error_dialog"]


def test_a_closed_input_the_algorithm_takes_nothing_of_leaves_the_task_pending_with_the_reason(cli, store, tmp_path):
    # WMBSMergeBySize merges only the outputs of a processing job: files without parents are never merged.
    orphans = [{key: value for key, value in f.items() if key != "parents"} for f in FILES]
    _setup(cli, store, tmp_path, _catalog(orphans))
    task_id = _submit(cli, store, _spec("WMBSMergeBySize"))
    report = _generate(cli, store)
    assert report["counts"]["jobs"] == 0
    task = cli.json("task", "show", str(task_id), db=store)
    assert task["status"] == "pending"
    assert "WMBSMergeBySize makes no job of the 5 file(s) left of the closed input" in task["error_dialog"]


def test_include_parents_over_files_without_parents_leaves_the_task_pending_with_the_reason(cli, store, tmp_path):
    # The preview's rule (WMCore refuses IncludeParents for an input without parents), on a real task.
    orphans = [{key: value for key, value in f.items() if key != "parents"} for f in FILES]
    _setup(cli, store, tmp_path, _catalog(orphans))
    task_id = _submit(cli, store, _spec("FileBased", files_per_job=2, include_parents=True))
    assert _generate(cli, store)["counts"]["jobs"] == 0
    task = cli.json("task", "show", str(task_id), db=store)
    assert task["status"] == "pending" and "no input file has parents" in task["error_dialog"]


@pytest.mark.parametrize("algorithm", ["Harvest", "WMBSMergeBySize", "MinFileBased"])
def test_the_algorithm_sees_all_the_released_input_whatever_the_pass_size(cli, store, tmp_path, algorithm):
    # generate.n_files caps JEDI's chunks; a WMCore algorithm gets the whole input (WMCore's JobFactory hands
    # the whole available fileset to its splitter), or Harvest would make its end-of-run job over a part.
    files = MERGE_FILES if algorithm == "WMBSMergeBySize" else FILES
    _setup(cli, store, tmp_path, _catalog(files))
    task_id = _submit(cli, store, _spec(algorithm, **PARAMS.get(algorithm, {})))
    cli("refine", db=store)
    cli("feed", db=store, env=RESCAN)
    cli("broker", "--seed", "1", db=store)
    cli("generate", "--seed", "1", db=store, env={"JEDICTL_GENERATE__N_FILES": "2"})
    fileset = Fileset(tuple(wm_file(f["lfn"], f["size"], f["events"], ("SITE",), {f["run"]: f["lumi_blocks"]}, parents=tuple(f.get("parents", ())))
                            for f in files))
    planned = split_fileset(algorithm, fileset, PARAMS.get(algorithm, {}))
    jobs = _jobs(cli, store, task_id)
    assert sorted(tuple(sorted(set(_inputs(j)))) for j in jobs) == sorted(tuple(sorted(set(p.files))) for p in planned)
