"""Output datasets per site inside the output container (issue 19 item 2; seed 000 "Workflow for analysis"
step 5; jedi-inventory.md §6.8), end to end on both backends.

A task whose output (or log) dataset is named `<outDS>/` asks for a container: the first job generated for
a site makes that site's dataset `<outDS>.<dataset id>` inside the container -- a task dataset and an open
catalog dataset, member of the catalog container -- every job at the site writes its outputs there, a
retry at another site writes into that site's dataset, and finalize closes each dataset and the container.
"""

from __future__ import annotations

import json

import yaml
from sqlalchemy import delete, select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_container_members, catalog_datasets, datasets, files, jobs
from tests.helpers import run_sql

NOW = "2030-06-01T08:00:00"
SITES = ("SITE_A", "SITE_B")
GRID = {
    "storage_endpoints": [{"name": f"{site}_DISK", "kind": "disk", "free_gb": 100000, "total_gb": 200000} for site in SITES],
    "sites": [{"name": site, "cloud": "WORLD", "core_count": 1, "core_power": 10.0, "max_memory": 4000, "max_walltime": 172800,
               "max_scratch_mb": 60000, "read_endpoints": [f"{site}_DISK"], "write_endpoints": [f"{site}_DISK"]} for site in SITES],
}


def _files(prefix: str, n: int) -> list[dict]:
    return [{"lfn": f"{prefix}.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, n + 1)]


# An input container whose two datasets live at one site each: analysis jobs follow the data, a location
# at a time, so each dataset's jobs run at its site.
SPLIT_DATA = {
    "datasets": [{"name": "data.part_a", "state": "closed", "files": _files("a", 4), "replicas": [{"endpoint": "SITE_A_DISK"}]},
                 {"name": "data.part_b", "state": "closed", "files": _files("b", 4), "replicas": [{"endpoint": "SITE_B_DISK"}]}],
    "containers": [{"name": "data.parts/", "datasets": ["data.part_a", "data.part_b"]}],
}
BOTH_DATA = {"datasets": [{"name": "data.both", "state": "closed", "files": _files("c", 4),
                           "replicas": [{"endpoint": f"{site}_DISK"} for site in SITES]}]}


def task(name: str, input_name: str, **params) -> dict:
    """A prun task as PanDA's client writes it: outDS and the log are containers (dataset and container `.../`)."""
    return {"taskName": f"{name}/", "vo": "atlas", "prodSourceLabel": "user", "taskType": "anal", "userName": "someone",
            "nFilesPerJob": 2, "skipScout": True,
            "jobParameters": [
                {"type": "template", "param_type": "input", "dataset": input_name, "value": "-i ${IN}"},
                {"type": "template", "param_type": "output", "dataset": f"{name}_hist.root/", "container": f"{name}_hist.root/",
                 "value": "user.someone.$JEDITASKID._${SN/P}.hist.root", "hidden": True}],
            "log": {"type": "template", "param_type": "log", "dataset": f"{name}.log/", "container": f"{name}.log/",
                    "value": f"{name}.log.$JEDITASKID.${{SN}}.log.tgz"},
            **params}


def _import(cli, store, tmp_path, kind: str, document: dict, name: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    cli(kind, "import", str(path), db=store)


def _rows(store, task_id: int) -> list:
    return run_sql(store, lambda conn: conn.execute(select(datasets).where(datasets.c.task_id == task_id).order_by(datasets.c.id)).all())


def _outputs_by_dataset(store, task_id: int) -> dict[str, set[str]]:
    """Task dataset name -> the sites of the jobs whose outputs (and logs) are records of it."""
    rows = run_sql(store, lambda conn: conn.execute(
        select(datasets.c.name, jobs.c.site).select_from(files.join(datasets, datasets.c.id == files.c.dataset_id)
                                                         .join(jobs, jobs.c.id == files.c.out_job_id))
        .where(files.c.task_id == task_id)).all())
    found: dict[str, set[str]] = {}
    for name, site in rows:
        found.setdefault(name, set()).add(site)
    return found


def test_a_task_at_two_sites_ends_with_two_closed_datasets_in_each_container(cli, store, tmp_path):
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task("user.someone.two", "data.parts/")))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    made = run_sql(store, lambda conn: conn.execute(select(jobs.c.site)).scalars().all())
    assert sorted(made) == ["SITE_A", "SITE_A", "SITE_B", "SITE_B"]

    # One dataset per site and container, made with the first job for the site; the containers hold the templates.
    rows = {row.name: row for row in _rows(store, task_id)}
    containers = {name: row for name, row in rows.items() if (row.attributes or {}).get("per_site")}
    assert set(containers) == {"user.someone.two_hist.root/", "user.someone.two.log/"}
    per_site = {name: row for name, row in rows.items() if row.template_id is not None}
    assert len(per_site) == 4
    for name, row in per_site.items():
        container = rows[row.container_name]
        assert container.id == row.template_id and name == f"{container.name[:-1]}.{row.id}"  # JEDI: <template minus '/'>.<id>
        assert row.site in SITES and row.type == container.type
    assert {(row.container_name, row.site) for row in per_site.values()} == {(c, s) for c in containers for s in SITES}
    # Each job's outputs are records of its site's dataset, never of the container.
    by_dataset = _outputs_by_dataset(store, task_id)
    assert set(by_dataset) == set(per_site) and all(sites == {per_site[name].site} for name, sites in by_dataset.items())
    # The catalog knows them at once: open, inside the open container.
    shown = cli.json("data", "show", "user.someone.two_hist.root/", db=store)
    hist = sorted(name for name, row in per_site.items() if row.container_name == "user.someone.two_hist.root/")
    assert (shown["kind"], shown["state"], shown["datasets"]) == ("container", "open", hist)
    b_job = next(job for job in cli.json("jobs", "list", "--task", str(task_id), db=store) if job["site"] == "SITE_B")
    written = {f["dataset"] for f in cli.json("jobs", "show", b_job["task_job"], db=store)["files"] if f["type"] in ("output", "log")}
    assert written == {name for name, row in per_site.items() if row.site == "SITE_B"}
    assert run_sql(store, check_all) == []

    # Run to the end: finalize closes every site's dataset and the containers.
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    ended = cli.json("finalize", "--now", NOW, db=store)
    assert ended["items"][0]["outcome"] == "done" and "6 output datasets closed in the catalog" in ended["items"][0]["reason"]
    for container in containers:
        shown = cli.json("data", "show", container, db=store)
        assert shown["state"] == "closed" and len(shown["datasets"]) == 2
        for member in shown["datasets"]:
            dataset = cli.json("data", "show", member, db=store)
            assert dataset["state"] == "closed" and dataset["n_files"] == 2 and dataset["containers"] == [container]
    # `task show` lists each site's dataset with its container and site.
    listed = {d["name"]: d for d in cli.json("task", "show", str(task_id), db=store)["datasets"]}
    assert {(listed[name]["container"], listed[name]["site"]) for name in per_site} == \
        {(row.container_name, row.site) for row in per_site.values()}
    assert run_sql(store, check_all) == []


def test_a_retry_at_another_site_writes_into_that_site_s_dataset(cli, store, tmp_path):
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", BOTH_DATA, "data")
    cli("sites", "set-status", "SITE_B", "offline", db=store)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task("user.someone.retry", "data.both", maxAttempt=3)))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    first = cli.json("jobs", "dispatch", "--site", "SITE_A", "--count", "10", "--now", NOW, db=store)["jobs"]
    assert len(first) == 2
    ok, bad = first
    lines = [{"job_id": ok["job_id"], "status": "finished", "attempt_nr": 1, "wall_time": 60,
              "outputs": [{"lfn": o["lfn"], "size": 1000, "checksum": "ad:00000001"} for o in ok["outputs"]]},
             {"job_id": bad["job_id"], "status": "failed", "attempt_nr": 1, "error_source": "pilot", "error_code": 1099}]
    cli("jobs", "report", "-", "--now", NOW, db=store, input="".join(json.dumps(line) + "\n" for line in lines))

    # SITE_A goes offline: the failed job's files are retried at SITE_B, which gets its own datasets.
    cli("sites", "set-status", "SITE_A", "offline", db=store)
    cli("sites", "set-status", "SITE_B", "online", db=store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    retried = cli.json("jobs", "dispatch", "--site", "SITE_B", "--count", "10", "--now", NOW, db=store)["jobs"]
    assert len(retried) == 1 and retried[0]["attempt_nr"] == 2
    per_site = {row.name: row for row in _rows(store, task_id) if row.template_id is not None}
    assert {row.site for row in per_site.values()} == set(SITES) and len(per_site) == 4
    assert {o["dataset"] for o in retried[0]["outputs"]} == {name for name, row in per_site.items() if row.site == "SITE_B"}
    assert {o["dataset"] for o in bad["outputs"]} == {name for name, row in per_site.items() if row.site == "SITE_A"}
    cli("jobs", "report", "-", "--now", NOW, db=store, input=json.dumps(
        {"job_id": retried[0]["job_id"], "status": "finished", "attempt_nr": 2, "wall_time": 60,
         "outputs": [{"lfn": o["lfn"], "size": 1000, "checksum": "ad:00000001"} for o in retried[0]["outputs"]]}) + "\n")
    assert cli.json("finalize", "--now", NOW, db=store)["items"][0]["outcome"] == "done"
    members = cli.json("data", "show", "user.someone.retry_hist.root/", db=store)["datasets"]
    assert sorted(members) == sorted(name for name, row in per_site.items() if row.container_name == "user.someone.retry_hist.root/")
    assert {cli.json("data", "show", name, db=store)["n_files"] for name in members} == {1}
    assert run_sql(store, check_all) == []


def test_own_spec_output_container_and_a_name_taken_by_a_dataset(cli, store, tmp_path):
    """In jedictl's spec a dataset name ending in '/' asks for the container too. A catalog dataset (not a
    container) of that name leaves the task pending with the reason, writing nothing."""
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", {"datasets": BOTH_DATA["datasets"] + [
        {"name": "user.someone.taken/", "state": "open", "files": []}]}, "data")
    spec = {"name": "user.someone.own", "label": "user", "command": "run ${IN} ${OUTPUT0}", "inputs": [{"dataset": "data.both"}],
            "outputs": [{"dataset": "user.someone.own_out/", "file_template": "own.${SN}.root"}], "scouts": {"skip_scout": True}}
    own = cli.json("submit", "-", db=store, input=yaml.safe_dump(spec))["task_id"]
    taken = cli.json("submit", "-", db=store, input=yaml.safe_dump(
        {**spec, "name": "user.someone.taken", "outputs": [{"dataset": "user.someone.taken/", "file_template": "t.${SN}.root"}]}))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    assert {row.site for row in _rows(store, own) if row.template_id is not None} <= set(SITES)
    assert any(row.template_id is not None for row in _rows(store, own))
    shown = cli.json("task", "show", str(taken), db=store)
    assert shown["status"] == "pending" and shown["error_dialog"] == (
        "output container user.someone.taken/ is a dataset in the data catalog: no site's dataset can be added to it")
    assert [row for row in _rows(store, taken) if row.template_id is not None] == []
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.task_id == taken)).all()) == []
    assert run_sql(store, check_all) == []


def test_check_finds_an_output_written_into_another_site_s_dataset(cli, store, tmp_path):
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task("user.someone.check", "data.parts/")))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    assert run_sql(store, check_all) == []
    by_site = {(row.container_name, row.site): row.id for row in _rows(store, task_id) if row.template_id is not None}
    a_hist = by_site[("user.someone.check_hist.root/", "SITE_A")]
    b_hist = by_site[("user.someone.check_hist.root/", "SITE_B")]

    def misplace(conn):  # one output record of a SITE_B job moved into SITE_A's dataset
        record = conn.execute(select(files.c.id).where(files.c.dataset_id == b_hist).limit(1)).scalar_one()
        conn.execute(update(files).where(files.c.id == record).values(dataset_id=a_hist))
        return record

    record = run_sql(store, misplace)
    name = next(row.name for row in _rows(store, task_id) if row.id == a_hist)
    assert run_sql(store, check_all) == [
        f"task {task_id} record {record}: an output in {name}, the dataset of site SITE_A, written by job "
        f"{run_sql(store, lambda conn: conn.execute(select(files.c.out_job_id).where(files.c.id == record)).scalar_one())} at SITE_B"]
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.id == record).values(dataset_id=b_hist)))
    assert run_sql(store, check_all) == []

    def leave_container(conn):  # the catalog loses SITE_A's dataset from the container
        member = conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == name)).scalar_one()
        conn.execute(delete(catalog_container_members).where(catalog_container_members.c.dataset_id == member))

    run_sql(store, leave_container)
    assert run_sql(store, check_all) == [
        f"task {task_id} output dataset {a_hist} ({name}) is not inside the catalog container user.someone.check_hist.root/"]
    report = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    assert [(v["check"], v["object"]) for v in report["violations"]] == [
        ("site_datasets_in_their_container", f"task {task_id} output dataset {a_hist}")]


def test_the_goal_counts_the_events_of_every_site_s_dataset(cli, store, tmp_path):
    """The watchdog's goal compares the first output's events with the input's: with an output container
    they are in the sites' datasets, not in the container's row."""
    _import(cli, store, tmp_path, "sites", GRID, "grid")
    _import(cli, store, tmp_path, "data", SPLIT_DATA, "data")
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task("user.someone.goal", "data.parts/", nFilesPerJob=1, goal=70)))["task_id"]
    for agent in (("refine",), ("feed",), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--jobs", "3", "--now", NOW, db=store)  # 3 jobs at each site
    report = cli.json("watch", "--now", NOW, db=store)
    reached = [i for i in report["items"] if i.get("task_id") == task_id and i["outcome"] == "goal_reached"]
    assert [i["reason"] for i in reached] == ["JEDI. Goal reached (75.0% >= 70%)"]
    assert run_sql(store, check_all) == []


def test_merge_jobs_write_the_merged_files_into_their_site_s_dataset(cli, store, tmp_path):
    """mergeOutput: pre-merge jobs write the unmerged (hidden) datasets as before; each merge job writes the
    merged files -- what is added to the output container (seed 000 "Output merging") -- into its site's dataset."""
    from tests.cli.test_jobs_report import _dispatch_all, _finished, _report
    from tests.cli.test_merge_jobs import MERGE_TASK, _task

    document = json.loads(json.dumps(MERGE_TASK).replace('"ds.out"', '"ds.merged/"').replace('"ds.log"', '"ds.mlog/"'))
    task_id = _task(cli, store, tmp_path, **{key: document[key] for key in ("jobParameters", "log")})
    cli("generate", "--seed", "1", db=store)
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.id % 2 == 1).values(site="CERN-PROD_GRID")))
    assert [row for row in _rows(store, task_id) if row.template_id is not None] == []  # pre-merge jobs write the unmerged twins
    _report(cli, store, *[_finished(job) for job in _dispatch_all(cli, store)])
    cli("generate", "--seed", "2", db=store)
    merges = run_sql(store, lambda conn: conn.execute(select(jobs.c.id, jobs.c.site).where(jobs.c.kind == "merge")).all())
    assert {site for _, site in merges} == {"CERN-PROD_GRID", "BNL_PROD"}
    per_site = {row.id: row for row in _rows(store, task_id) if row.template_id is not None}
    assert {(row.container_name, row.site) for row in per_site.values()} == {
        (container, site) for container in ("ds.merged/", "ds.mlog/") for site in ("CERN-PROD_GRID", "BNL_PROD")}
    assert set(_outputs_by_dataset(store, task_id)) >= {row.name for row in per_site.values()}
    _report(cli, store, *[_finished(job) for job in _dispatch_all(cli, store)])
    assert cli.json("finalize", db=store)["items"][0]["outcome"] == "done"
    shown = cli.json("data", "show", "ds.merged/", db=store)
    assert shown["state"] == "closed" and sorted(shown["datasets"]) == sorted(
        row.name for row in per_site.values() if row.container_name == "ds.merged/")
    assert run_sql(store, check_all) == []
