"""`jedictl jobs dispatch`: executors pull activated jobs (PanDA's getJob), on both backends."""

from __future__ import annotations

import json
from datetime import datetime
from types import SimpleNamespace

import yaml
from sqlalchemy import select, update

from jedictl.engine.jobs.dispatcher import INPUT_KEYS, OUTPUT_KEYS, PAYLOAD_KEYS, DispatchFilters, job_payload
from jedictl.store.schema import job_files, jobs
from tests.cli.test_generate import WORKED_EXAMPLE, _grid, _pipeline
from tests.cli.test_refine import EXAMPLES as SPEC_EXAMPLES
from tests.helpers import row_counts, run_sql

SITE, OTHER = "CERN-PROD_GRID", "BNL_PROD"
STRICT = {"JEDICTL_DISPATCH__SLOPPY_RATIO": "0"}  # always the share order
SLOPPY = {"JEDICTL_DISPATCH__SLOPPY_RATIO": "1"}  # always the oldest first
NOW = "2030-01-01T00:00:00"


def _ten_jobs(cli, store, tmp_path, *, second_task=False):
    """The worked example's 10 scout jobs (ids 1..10), all moved to SITE; optionally a second task's 10 (11..20)."""
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps(WORKED_EXAMPLE))
    if second_task:
        other = {**WORKED_EXAMPLE, "taskName": "worked.example.two",
                 "jobParameters": [{**p, "dataset": "ds.out2", "value": "--out=ds.out2.${SN}.root"} if p.get("param_type") == "output" else p
                                   for p in WORKED_EXAMPLE["jobParameters"]],
                 "log": {**WORKED_EXAMPLE["log"], "dataset": "ds.log2", "value": "ds.log2.${SN}.log.tgz"}}
        cli("submit", "-", db=store, input=json.dumps(other))
    _pipeline(cli, store)
    run_sql(store, lambda conn: conn.execute(update(jobs).values(site=SITE)))
    return sorted(run_sql(store, lambda conn: conn.execute(select(jobs.c.id)).scalars().all()))


def _dispatch(cli, store, *args, env=None, code=0):
    result = cli("jobs", "dispatch", "--site", SITE, *args, "-o", "json", db=store, env=env, code=code)
    return [job["job_id"] for job in json.loads(result.stdout)["jobs"]] if code == 0 else result


def _set(store, values_by_job):
    """{job id: {column: value}} by direct SQL (priorities, shares, resources the test needs)."""
    def apply(conn):
        for job_id, values in values_by_job.items():
            conn.execute(update(jobs).where(jobs.c.id == job_id).values(**values))
    run_sql(store, apply)


def _statuses(store):
    return dict(run_sql(store, lambda conn: conn.execute(select(jobs.c.id, jobs.c.status)).all()))


def test_payload_contract_and_the_atomic_move_to_sent(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    payload = cli.json("jobs", "dispatch", "--site", SITE, "--count", "3", "--executor", "pilot-7", "--now", NOW, db=store)
    assert list(payload) == ["jobs"] and len(payload["jobs"]) == 3
    first = payload["jobs"][0]
    assert tuple(first) == PAYLOAD_KEYS
    assert (first["job_id"], first["task_id"], first["task_job"], first["status"], first["site"]) == (1, 1, "1.1", "sent", SITE)
    assert (first["attempt_nr"], first["priority"], first["is_scout"], first["kind"]) == (1, 901, True, "normal")
    assert (first["prod_source_label"], first["processing_type"], first["gshare"]) == ("managed", "sim", "Production default")
    assert first["job_parameters"] == "--in=f.[001,002].root --out=ds.out.000001.root --n 10"
    assert first["core_count"] == 1 and first["min_ram_count"] > 0 and first["max_walltime"] > 0 and first["resource_type"] == "SCORE"
    assert [tuple(i) for i in first["inputs"]] == [INPUT_KEYS] * 2
    assert [(i["lfn"], i["dataset"], i["type"], i["size"], i["replicas"]) for i in first["inputs"]] == [
        (f"f.00{n}.root", "ds.in", "input", 1_000_000, ["BNL-ATLAS_DATADISK", "CERN-PROD_DATADISK"]) for n in (1, 2)]
    assert [tuple(o) for o in first["outputs"]] == [OUTPUT_KEYS] * 2
    assert [(o["lfn"], o["dataset"], o["type"]) for o in first["outputs"]] == [
        ("ds.out.000001.root", "ds.out", "output"), ("ds.log.000001.log.tgz", "ds.log", "log")]
    destination = first["outputs"][0]["destination"]
    assert destination in ("CERN-PROD_DATADISK", "BNL-ATLAS_DATADISK") and first["outputs"][1]["destination"] == destination

    rows = run_sql(store, lambda conn: conn.execute(select(jobs).order_by(jobs.c.id)).all())
    at = datetime(2030, 1, 1)
    for row in rows[:3]:
        assert (row.status, row.executor, row.command_to_pilot) == ("sent", "pilot-7", None)
        assert row.dispatched_at == row.state_changed_at == row.modified_at == row.heartbeat_at == at
    assert {(row.status, row.executor, row.dispatched_at) for row in rows[3:]} == {("activated", None, None)}
    assert cli.json("jobs", "show", "1.1", db=store)["status"] == "sent"


def test_the_default_executor_is_this_process_and_the_default_count_one(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    assert _dispatch(cli, store) == [1]
    executor = run_sql(store, lambda conn: conn.execute(select(jobs.c.executor).where(jobs.c.id == 1)).scalar_one())
    assert executor and executor.count(":") == 2  # host:pid:id, as leases name their owner


def test_order_is_share_then_priority_then_age(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    _set(store, {1: {"gshare": "Analysis", "current_priority": 2000}, 2: {"gshare": "Production default", "current_priority": 100},
                 3: {"gshare": "Production default", "current_priority": 500}, 4: {"gshare": "Test", "current_priority": 0},
                 5: {"gshare": "No such share", "current_priority": 9999}, 6: {"gshare": "Production default", "current_priority": 500}})
    _set(store, {job_id: {"site": OTHER} for job_id in (7, 8, 9, 10)})
    # Nothing executes: the tree's order, "Test" first; in a share by priority, then the oldest.
    assert _dispatch(cli, store, "--count", "3", env=STRICT) == [4, 3, 6]
    # Now Test and Production default execute and Analysis, with a pledge, has nothing: it is the most
    # under-served, so its job overtakes Production default's; the unknown share comes last whatever its priority.
    assert _dispatch(cli, store, env=STRICT) == [1]
    assert _dispatch(cli, store, env=STRICT) == [2]
    assert _dispatch(cli, store, env=STRICT) == [5]
    assert _dispatch(cli, store, env=STRICT) == []
    assert cli.json("jobs", "dispatch", "--site", OTHER, "--count", "10", db=store)["jobs"][0]["site"] == OTHER


def test_the_answer_lists_jobs_in_dispatch_order(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    _set(store, {9: {"current_priority": 950}, 10: {"gshare": "Test"}, 2: {"gshare": "Analysis", "current_priority": 5000}})
    assert _dispatch(cli, store, "--count", "10", env=STRICT) == [10, 9, 1, 3, 4, 5, 6, 7, 8, 2]


def test_sloppy_dispatch_takes_the_oldest_whatever_the_share(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    _set(store, {4: {"gshare": "Test"}, 5: {"current_priority": 5000}})
    assert _dispatch(cli, store, "--count", "3", env=SLOPPY) == [1, 2, 3]
    assert _dispatch(cli, store, "--count", "2", env=STRICT) == [4, 5]


def test_each_filter(cli, store, tmp_path):
    ids = _ten_jobs(cli, store, tmp_path, second_task=True)
    assert ids == list(range(1, 21))
    base = {"min_ram_count": 8000, "max_disk_count": 90000, "max_walltime": 900000, "resource_type": "SCORE",
            "prod_source_label": "managed", "status": "activated"}
    cases = [
        (["--memory", "2000"], "min_ram_count", {1: 1000, 2: 2000, 3: None, 4: 0, 5: 2001}, {1, 2, 3, 4}),
        (["--disk", "500"], "max_disk_count", {1: 500, 2: None, 3: 0, 4: 501}, {1, 2, 3}),
        (["--walltime", "3600"], "max_walltime", {1: 3599, 2: 3600, 3: None, 4: 3601}, {1, 2, 3}),
        (["--resource-type", "MCORE"], "resource_type", {1: "MCORE", 2: "MCORE", 3: "MCORE_HIMEM"}, {1, 2}),
        (["--label", "user"], "prod_source_label", {1: "user", 2: "panda", 3: "install", 4: "test", 5: "prod_test", 6: "ptest"}, {1, 2, 3}),
        (["--label", "managed"], "prod_source_label", {1: "user", 2: "panda", 3: "install", 4: "test", 5: "prod_test", 6: "ptest"},
         {3, 4, 5} | set(range(7, 21))),
        (["--label", "unified"], "prod_source_label", {1: "user", 2: "panda", 3: "install", 4: "test", 5: "prod_test", 6: "ptest"},
         set(range(1, 21)) - {6}),
        (["--task", "2"], None, {}, set(range(11, 21))),
        (["--task", "1", "--memory", "2000", "--label", "managed"], "min_ram_count", {1: 100, 2: 100, 12: 100}, {1, 2}),
    ]
    for args, column, values, expected in cases:
        _set(store, {job_id: base for job_id in ids})
        if column:
            _set(store, {job_id: {column: value} for job_id, value in values.items()})
        got = _dispatch(cli, store, *args, "--count", "100")
        assert set(got) == expected, args
        assert {job_id for job_id, status in _statuses(store).items() if status == "sent"} == expected, args


def test_count_exhaustion_and_no_job_twice(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    _set(store, {job_id: {"site": OTHER} for job_id in (9, 10)})  # another site's jobs are never handed out here
    first = _dispatch(cli, store, "--count", "4")
    second = _dispatch(cli, store, "--count", "100")
    assert (len(first), len(second)) == (4, 4) and not set(first) & set(second)
    assert sorted(first + second) == list(range(1, 9))
    result = cli("jobs", "dispatch", "--site", SITE, "-o", "json", db=store)
    assert json.loads(result.stdout) == {"jobs": []}
    assert _statuses(store) == {**{i: "sent" for i in range(1, 9)}, 9: "activated", 10: "activated"}


def test_bad_counts_are_refused(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    before = _statuses(store)
    assert "--count: must be between 1 and 10000" in _dispatch(cli, store, "--count", "0", code=2).stderr
    small = {"JEDICTL_DISPATCH__MAX_COUNT": "5"}
    assert "--count: must be between 1 and 5" in _dispatch(cli, store, "--count", "6", env=small, code=2).stderr
    assert len(_dispatch(cli, store, "--count", "5", env=small)) == 5
    assert "--memory: must not be negative" in _dispatch(cli, store, "--memory", "-1", code=2).stderr
    assert "--label" in cli("jobs", "dispatch", "--site", SITE, "--label", "robots", db=store, code=2).stderr
    assert sum(1 for status in _statuses(store).values() if status == "sent") == 5 and len(before) == 10


def test_an_unknown_site_is_refused_and_nothing_changes(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    counts, statuses = row_counts(store), _statuses(store)
    result = cli("jobs", "dispatch", "--site", "NO_SUCH_SITE", "-o", "json", db=store, code=2)
    assert result.stderr.strip() == "jedictl: error: unknown site NO_SUCH_SITE" and result.stdout == ""
    assert row_counts(store) == counts and _statuses(store) == statuses


def test_a_site_without_activated_jobs_gets_an_empty_list(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    assert cli.json("jobs", "dispatch", "--site", "MWT2", "--count", "5", db=store) == {"jobs": []}
    assert set(_statuses(store).values()) == {"activated"}


def test_table_and_tsv_show_one_row_per_job_and_a_note(cli, store, tmp_path):
    _ten_jobs(cli, store, tmp_path)
    table = cli("jobs", "dispatch", "--site", SITE, "--count", "2", db=store)
    assert table.stderr.strip() == f"dispatched 2 job(s) to {SITE}"
    assert "job_id" in table.stdout and "1.1" in table.stdout and "1.2" in table.stdout
    tsv = cli("jobs", "dispatch", "--site", SITE, "--count", "1", "-o", "tsv", db=store)
    lines = tsv.stdout.strip().splitlines()
    assert lines[0].split("\t") == ["job_id", "task_job", "priority", "gshare", "cores", "ram_mb", "inputs"]
    assert lines[1].split("\t") == ["3", "1.3", "901", "Production default", "1", lines[1].split("\t")[5], "2"]
    empty = cli("jobs", "dispatch", "--site", "MWT2", db=store)
    assert empty.stdout == "" and empty.stderr.strip() == "dispatched 0 job(s) to MWT2"
    none = cli("jobs", "dispatch", "--site", "MWT2", "-o", "tsv", db=store).stdout  # a script reads "no job", not nothing
    assert none == "job_id\ttask_job\tpriority\tgshare\tcores\tram_mb\tinputs\n"
    assert yaml.safe_load(cli("jobs", "dispatch", "--site", SITE, "-o", "yaml", db=store).stdout)["jobs"][0]["job_id"] == 4


def test_random_seeds_and_container_inputs(cli, store, tmp_path):
    """A generation task's seeds are inputs without replicas; a container's files get their own dataset's replicas."""
    _grid(cli, store, tmp_path)
    generation = yaml.safe_load(SPEC_EXAMPLES["generation"])
    generation["split"]["n_events"] = 10_000
    cli("submit", "-", db=store, input=yaml.safe_dump(generation))
    analysis = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    analysis["inputs"] = [{"dataset": "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026", "exclude": [r"\.log\.tgz(\.\d+)*$"]}]
    analysis["split"] = {"n_files_per_job": 10}
    analysis["scouts"] = {"skip_scout": True}
    cli("submit", "-", db=store, input=yaml.safe_dump(analysis))
    _pipeline(cli, store)
    run_sql(store, lambda conn: conn.execute(update(jobs).values(site=SITE)))
    payloads = cli.json("jobs", "dispatch", "--site", SITE, "--count", "100", db=store)["jobs"]
    generated = [p for p in payloads if p["task_id"] == 1]
    assert generated and all(p["release"] == "AthGeneration,23.6.31" and p["transformation"] == "Gen_tf.py" for p in generated)
    pseudo = [i for p in generated for i in p["inputs"]]
    assert pseudo and all(i["type"] == "pseudo_input" and i["replicas"] == [] for i in pseudo)
    seeds = [i["lfn"] for p in generated for i in p["inputs"] if i["dataset"] == "RNDMSEED"]
    assert len(seeds) == len(set(seeds)) == len(generated)  # one seed per job
    analysed = [p for p in payloads if p["task_id"] == 2]
    assert analysed and all(p["container_name"].startswith("docker://") for p in analysed)
    inputs = [i for p in analysed for i in p["inputs"]]
    assert len(inputs) == 20  # 12 + 8 files, the logs excluded
    for item in inputs:
        expected = ["CERN-PROD_DATADISK", "DESY-HH_DATADISK"] if item["lfn"].startswith("DAOD_PHYS.00000001") else ["BNL-ATLAS_DATADISK"]
        assert item["replicas"] == expected, item
        assert item["guid"] and item["checksum"].startswith("ad:") and item["size"] > 1_000_000_000
    lfns = run_sql(store, lambda conn: conn.execute(select(job_files.c.lfn).where(job_files.c.task_id == 2, job_files.c.type == "input"))
                   .scalars().all())
    assert sorted(lfns) == sorted(i["lfn"] for i in inputs)


def test_job_payload_is_a_pure_function_of_rows():
    job = SimpleNamespace(id=7, task_id=3, task_job_index=2, attempt_nr=2, site="S", status="sent", prod_source_label="managed",
                          processing_type="pmerge", transformation="Merge_tf.py", job_parameters="--x", architecture="el9",
                          trans_uses="Athena,24.0.40", trans_home=None, container_name=None, core_count=8, min_ram_count=16000,
                          max_walltime=3600, max_disk_count=5000, max_cpu_count=100, current_priority=5000, gshare="Test",
                          resource_type="MCORE", is_scout=0, kind="merge")

    def file(lfn, kind, dataset, destination=None):
        return SimpleNamespace(lfn=lfn, scope="s", guid=None, size=1, checksum=None, type=kind, attempt_nr=1, destination=destination,
                               dataset=dataset)

    rows = [file("a", "input", "ds"), file("123", "pseudo_input", "RNDMSEED"), file("o", "trn_output", "um", "D"), file("l", "trn_log", "uml", "D")]
    payload = job_payload(job, rows, {("ds", "a"): ("A", "Z")})  # input_replicas gives each file's endpoints sorted
    assert tuple(payload) == PAYLOAD_KEYS
    assert (payload["task_job"], payload["release"], payload["is_scout"], payload["priority"]) == ("3.2", "Athena,24.0.40", False, 5000)
    assert [(i["lfn"], i["replicas"]) for i in payload["inputs"]] == [("a", ["A", "Z"]), ("123", [])]
    assert [(o["lfn"], o["type"], o["destination"]) for o in payload["outputs"]] == [("o", "trn_output", "D"), ("l", "trn_log", "D")]
    assert DispatchFilters(label="unified").prod_source_labels == ("user", "panda", "install", "managed", "test", "prod_test")


def test_every_payload_key_is_documented():
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "executor-protocol.md").read_text()
    assert [key for key in PAYLOAD_KEYS + INPUT_KEYS + OUTPUT_KEYS if f"| `{key}` |" not in text] == []


def test_a_resource_type_no_job_can_have_is_refused(cli, store, tmp_path):
    """An executor asking for a type the settings do not define would get no work, forever."""
    from tests.helpers import refused

    _ten_jobs(cli, store, tmp_path)
    line = refused(cli, store, "jobs", "dispatch", "--site", SITE, "--resource-type", "NOPE")
    assert line == ("jedictl: error: --resource-type: 'NOPE' is not a resource type "
                    "(allowed: SCORE, MCORE, SCORE_HIMEM, MCORE_HIMEM)")
    assert refused(cli, store, "jobs", "dispatch", "--site", SITE, "--resource-type", "score").endswith("did you mean 'SCORE'?)")
    assert len(_dispatch(cli, store, "--resource-type", "SCORE")) == 1
    # The allowed types are the settings' own.
    config = tmp_path / "types.yaml"
    config.write_text("resource_types:\n  - {name: GPU, min_core: 1}\n")
    assert "(allowed: GPU)" in refused(cli, store, "--config", str(config), "jobs", "dispatch", "--site", SITE, "--resource-type", "SCORE")
    assert _dispatch(cli, store, "--config", str(config), "--resource-type", "GPU") == []


def test_the_executor_name_is_stored_escaped(cli, store, tmp_path):
    from tests.helpers import refused

    _ten_jobs(cli, store, tmp_path)
    taken = _dispatch(cli, store, "--executor", "node1\x1b]0;owned\x07")
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.executor).where(jobs.c.id == taken[0])).scalar_one()) == \
        "node1\\x1b]0;owned\\x07"
    assert refused(cli, store, "jobs", "dispatch", "--site", SITE, "--executor", "n" * 129) == \
        "jedictl: error: --executor: must be at most 128 characters"
