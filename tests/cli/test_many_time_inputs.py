"""Many-time vs one-time inputs and cvmfs datasets, end to end on both backends (issue 19, item 7;
docs/task-spec.md, docs/data-catalog.md, docs/sites.md, docs/analysis.md).

A small grid: sites A and B hold the hard-scatter input, only A holds the pile-up; A and B mount cvmfs,
C does not. The pile-up is 60 GB: as one-time input an IO-intensive task's brokerage would have to move
it to B, as many-time input it is available at A and placed at B once. The conditions database is on
cvmfs: no replica anywhere, read in place, and C -- without cvmfs -- is dropped with the reason.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import yaml
from sqlalchemy import select, update

from jedictl.clock import parse_time
from jedictl.store.invariants import check_all, many_time_not_consumed
from jedictl.store.schema import datasets, files, job_files, jobs
from tests.helpers import row_counts, run_sql

T0 = parse_time("2030-03-01T08:00:00")
GB = 1024**3
DBR_PATH = "/cvmfs/atlas.cern.ch/repo/sw/database/DBRelease/34.1.1"


def at(delta: timedelta = timedelta()) -> dict[str, str]:
    return {"JEDICTL_NOW": (T0 + delta).isoformat()}


def grid(far: bool = False) -> dict:
    names = ["A_DISK", "B_DISK", "C_DISK"] + (["FAR_DISK"] if far else [])
    return {
        "nuclei": [{"name": "N1"}],
        "storage_endpoints": [{"name": name, "nucleus": "N1" if name == "A_DISK" else None, "free_gb": 100000, "total_gb": 200000}
                              for name in names],
        "sites": [{"name": site, "cloud": "WORLD", "core_count": 1, "core_power": 10.0, "max_memory": 4000, "max_walltime": 172800,
                   "max_scratch_mb": 600000, "cvmfs": site != "C", "read_endpoints": [f"{site}_DISK"], "write_endpoints": [f"{site}_DISK"]}
                  for site in ("A", "B", "C")],
    }


def catalog(hits_at=("A_DISK", "B_DISK"), pileup_at=("A_DISK",), dbr_cvmfs: str | None = DBR_PATH) -> dict:
    def replicas(endpoints):
        return [{"endpoint": endpoint} for endpoint in endpoints]

    dbr = {"name": "ddo.DBRelease.v34", "state": "closed",
           "files": [{"lfn": f"DBRelease-34.1.{i}.tar.gz", "size": 1_200_000_000} for i in range(1, 5)]}
    if dbr_cvmfs:
        dbr["cvmfs"] = dbr_cvmfs
    return {"datasets": [
        {"name": "hits", "state": "closed", "replicas": replicas(hits_at),
         "files": [{"lfn": f"HITS.{i:03d}.root", "size": GB, "events": 100} for i in range(1, 5)]},
        {"name": "pileup", "state": "closed", "replicas": replicas(pileup_at),
         "files": [{"lfn": f"MB.{i:03d}.root", "size": 3 * GB, "events": 2000} for i in range(1, 21)]},
        dbr,
    ]}


def task(*secondaries: dict, label: str = "managed", io_intensity: float = 300) -> str:
    streams = " ".join("${%s}" % item["stream"] for item in secondaries)
    # Priority 500: above the bootstrap of empty sites (150), so the weights show.
    return yaml.safe_dump({
        "name": f"{label}.pileup.digi", "label": label, "priority": 500, "command": f"--in ${{IN}} {streams} --out ${{OUTPUT0}}",
        "inputs": [{"dataset": "hits"}, *secondaries],
        "outputs": [{"dataset": f"{label}.pileup.digi.RDO", "file_template": "RDO.${SN}.root"}],
        "split": {"n_files_per_job": 1}, "scouts": {"skip_scout": True}, "resources": {"io_intensity": io_intensity},
        **({"placement": {"nucleus": "N1"}} if label == "managed" else {}),
    })


PILEUP = {"dataset": "pileup", "stream": "MB", "ratio": 2}
DBR = {"dataset": "ddo.DBRelease.v34", "stream": "DBR", "nosplit": True, "repeat": True}


def _import(cli, store, tmp_path, name: str, document: dict, kind: str = "data") -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    cli(kind, "import", str(path), db=store)


def _prepare(cli, store, tmp_path, spec: str, *, far: bool = False, **data) -> tuple[int, dict]:
    _import(cli, store, tmp_path, "grid", grid(far), kind="sites")
    _import(cli, store, tmp_path, "data", catalog(**data))
    task_id = cli.json("submit", "-", db=store, input=spec, env=at())["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store, env=at())
    explained = cli.json("explain", "task", str(task_id), db=store, env=at())
    return task_id, {row["site"]: row for row in explained["brokerage"]}


def _jobs(store) -> list:
    return run_sql(store, lambda conn: list(conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.site).order_by(jobs.c.id))))


def _dataset(shown: dict, name: str) -> dict:
    return next(d for d in shown["datasets"] if d["name"] == name)


# ---------------------------------------------------------------------------------------- brokerage

def test_one_time_pileup_is_charged_as_a_transfer_per_job_and_drops_a_site_of_an_io_intensive_task(cli, store, tmp_path):
    task_id, rows = _prepare(cli, store, tmp_path, task(PILEUP))
    assert rows["A"]["kept"]
    assert rows["B"]["rule"] == "input" and rows["B"]["message"].startswith("input: would move 24.0 GB > 10 GB")
    assert cli.json("task", "show", str(task_id), db=store)["datasets"][1]["input"] == "one-time"


def test_many_time_pileup_counts_as_availability_not_as_a_transfer_per_job(cli, store, tmp_path):
    task_id, rows = _prepare(cli, store, tmp_path, task({**PILEUP, "many_time": True}))
    assert rows["A"]["kept"] and rows["B"]["kept"]
    # The same locality factor: only the one-time input (held by both) is weighed; B places the pile-up once.
    assert "locality 2" in rows["A"]["message"] and "locality 2" in rows["B"]["message"]
    assert rows["B"]["message"].endswith("; many-time pileup to be placed here once")
    assert "many-time" not in rows["A"]["message"]
    assert rows["A"]["weight"] == rows["B"]["weight"]

    # Fed untracked: no job ever takes one of its records for itself.
    tracked = run_sql(store, lambda conn: dict(conn.execute(
        select(datasets.c.name, files.c.keep_track).join(files, files.c.dataset_id == datasets.c.id).distinct()).all()))
    assert (tracked["hits"], tracked["pileup"]) == (True, False)
    cli("generate", "--seed", "3", db=store, env=at())
    made = _jobs(store)
    assert len(made) == 4 and {job.status for job in made} == {"activated"}
    assert {job.site for job in made} & {"A", "B"}
    # Counted as read, not consumed: the pile-up's records stay ready; its reads are counted apart.
    shown = cli.json("task", "show", str(task_id), db=store)
    hits, pileup = _dataset(shown, "hits"), _dataset(shown, "pileup")
    assert (hits["input"], hits["n_files_used"], hits["reads"]) == ("master", 4, None)
    assert (pileup["input"], pileup["n_files"], pileup["n_files_used"], pileup["reads"], pileup["jobs_reading"]) == ("many-time", 20, 0, 8, 4)
    statuses = {(row["dataset"], row["input"], row["status"]): row["files"] for row in cli.json("explain", "task", str(task_id), db=store)["files"]}
    assert statuses[("pileup", "many-time", "ready")] == 20 and statuses[("hits", "master", "running")] == 4

    for agent in (("simulate", "--seed", "1", "--failure-rate", "0"), ("finalize",)):
        cli(*agent, db=store, env=at(timedelta(hours=1)))
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["status"] == "done"
    assert (_dataset(shown, "pileup")["n_files_finished"], _dataset(shown, "pileup")["reads"]) == (0, 8)
    assert run_sql(store, check_all) == []


def test_a_cvmfs_dataset_needs_no_replica_and_drops_sites_without_cvmfs(cli, store, tmp_path):
    task_id, rows = _prepare(cli, store, tmp_path, task(DBR))
    assert rows["C"]["rule"] == "cvmfs"
    assert rows["C"]["message"] == "cvmfs: input ddo.DBRelease.v34 is read from cvmfs and the site does not mount cvmfs"
    assert rows["A"]["kept"] and rows["B"]["kept"]  # no replica of it anywhere: nobody needs one

    cli("generate", "--seed", "1", db=store, env=at())
    made = _jobs(store)
    assert len(made) == 4 and {job.status for job in made} == {"activated"} and {job.site for job in made} <= {"A", "B"}
    # Read in place: the payload names its cvmfs path; no endpoint holds it and no scratch is kept for it.
    site = made[0].site
    payload = cli.json("jobs", "dispatch", "--site", site, "--count", "1", db=store, env=at())["jobs"][0]
    dbr = [(item["cvmfs"], item["replicas"]) for item in payload["inputs"] if item["dataset"] == "ddo.DBRelease.v34"]
    assert dbr == [(f"{DBR_PATH}/DBRelease-34.1.{i}.tar.gz", []) for i in range(1, 5)]
    assert [item["cvmfs"] for item in payload["inputs"] if item["dataset"] == "hits"] == [None]
    assert payload["max_disk_count"] == 1024 + 300  # the 1 GB input and the 300 MB margin: the 4.8 GB DBRelease needs no scratch
    report = {"job_id": payload["job_id"], "attempt_nr": payload["attempt_nr"], "status": "finished",
              "outputs": [{"lfn": out["lfn"], "size": 100} for out in payload["outputs"]]}
    cli("jobs", "report", "-", db=store, input=json.dumps(report), env=at(timedelta(minutes=1)))
    cli("simulate", "--seed", "1", "--failure-rate", "0", db=store, env=at(timedelta(minutes=5)))
    cli("finalize", db=store, env=at(timedelta(hours=1)))
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "done"
    assert run_sql(store, check_all) == []


def test_a_dataset_not_on_cvmfs_is_placed_as_usual(cli, store, tmp_path):
    """Without the catalog's cvmfs path the same task needs the DBRelease's replica: C is not dropped for cvmfs."""
    _, rows = _prepare(cli, store, tmp_path, task(DBR), dbr_cvmfs=None)
    assert rows["C"]["rule"] != "cvmfs"


# ------------------------------------------------------------------------------------------ analysis

def test_analysis_jobs_go_where_the_many_time_input_is_available_too(cli, store, tmp_path):
    task_id, rows = _prepare(cli, store, tmp_path, task({**PILEUP, "many_time": True}, label="user", io_intensity=0))
    summary = cli.json("explain", "task", str(task_id), db=store, env=at())["summary"]
    assert summary.endswith("analysis: jobs go to the data (held at A, B; with the many-time input at A)")
    assert rows["A"]["kept"] and rows["A"]["data"] == "holds the data (4 input files on disk)"
    assert rows["B"]["rule"] == "data_locality"
    assert rows["B"]["message"] == "data_locality: many-time input pileup not available here (A has the data and it)"
    cli("generate", "--seed", "1", db=store, env=at())
    assert {(job.status, job.site) for job in _jobs(store)} == {("activated", "A")}


def test_analysis_jobs_wait_for_a_many_time_input_no_data_site_has_then_run(cli, store, tmp_path):
    task_id, rows = _prepare(cli, store, tmp_path, task({**PILEUP, "many_time": True}, label="user", io_intensity=0),
                             far=True, pileup_at=("FAR_DISK",))
    assert rows["A"]["data"].endswith("; many-time pileup to be placed here once") and rows["B"]["kept"]
    cli("generate", "--seed", "1", db=store, env=at())
    waiting = _jobs(store)
    assert {job.status for job in waiting} == {"assigned"}
    marked = run_sql(store, lambda conn: {(row.lfn[:3], row.destination) for row in conn.execute(
        select(job_files.c.lfn, job_files.c.destination).where(job_files.c.type == "input"))})
    # Only the pile-up waits for a placement; the hard-scatter input is at the data sites already.
    assert {prefix for prefix, destination in marked if destination} == {"MB."}
    assert {destination for prefix, destination in marked if prefix == "HIT"} == {None}
    _import(cli, store, tmp_path, "placed", catalog(pileup_at=("FAR_DISK", "A_DISK", "B_DISK")))
    assert cli.json("watch", db=store, env=at(timedelta(minutes=30)))["counts"]["activate"] == 4
    assert run_sql(store, check_all) == []


@pytest.mark.parametrize("dbr", [DBR, {"dataset": "ddo.DBRelease.v34", "stream": "DBR", "files_per_job": 1}], ids=["many-time", "one-time"])
def test_analysis_jobs_sent_with_a_transfer_never_wait_for_a_cvmfs_file(cli, store, tmp_path, dbr):
    """No site holds the hard-scatter input: the jobs go with a transfer of it -- but not of the DBRelease,
    read on cvmfs, whether every job reads it or one job consumes it -- and only to sites that mount cvmfs."""
    _, rows = _prepare(cli, store, tmp_path, task(dbr, label="user", io_intensity=0), far=True, hits_at=("FAR_DISK",))
    assert rows["C"]["rule"] == "cvmfs"
    cli("generate", "--seed", "1", db=store, env=at())
    assert {job.status for job in _jobs(store)} == {"assigned"} and {job.site for job in _jobs(store)} <= {"A", "B"}
    marked = run_sql(store, lambda conn: {(row.lfn, row.destination is not None) for row in conn.execute(
        select(job_files.c.lfn, job_files.c.destination).where(job_files.c.type == "input"))})
    assert {marked_ for lfn, marked_ in marked if lfn.startswith("DBRelease")} == {False}
    assert {marked_ for lfn, marked_ in marked if lfn.startswith("HITS")} == {True}
    assert run_sql(store, check_all) == []


# ------------------------------------------------------------------------------------------ catalogs

def test_the_catalog_fields_are_imported_shown_and_checked(cli, store, tmp_path):
    _import(cli, store, tmp_path, "grid", grid(), kind="sites")
    _import(cli, store, tmp_path, "data", catalog())
    assert (cli.json("sites", "show", "A", db=store)["cvmfs"], cli.json("sites", "show", "C", db=store)["cvmfs"]) == (True, False)
    assert cli.json("data", "show", "ddo.DBRelease.v34", db=store)["cvmfs"] == DBR_PATH
    assert {d["name"]: d["cvmfs"] for d in cli.json("data", "list", db=store)}["hits"] is None
    before = row_counts(store)
    for path, message in (("/opt/DBRelease", "must be a directory under /cvmfs/"), ("/cvmfs/../etc", "must be a plain path"),
                          ("/cvmfs/", "must be a directory under /cvmfs/")):
        bad = catalog(dbr_cvmfs=path)
        bad["datasets"][2]["name"] = "ddo.other"
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
        result = cli("data", "import", str(tmp_path / "bad.yaml"), db=store, code=2)
        assert result.stderr.startswith("jedictl: error: datasets[2].cvmfs: " + message), result.stderr
    assert row_counts(store) == before
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"sites": [{"name": "D", "cvmfs": "sometimes"}]}))
    assert "sites[0].cvmfs: must be true or false" in cli("sites", "import", str(tmp_path / "bad.yaml"), db=store, code=2).stderr


def test_migration_0012_goes_down_and_up_keeping_the_catalogs(cli, store, tmp_path):
    """Down to 0008 drops the two columns without rebuilding a table (a rebuild on SQLite would cascade
    to the sites' storage links and the catalog's files); up again, a site imported before says no cvmfs
    until an import says otherwise, and a dataset is on storage."""
    from alembic import command

    from jedictl.store.migrate import alembic_config
    from jedictl.store.revisions import HEAD_REVISION

    def downgrade(conn, revision):
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    _import(cli, store, tmp_path, "grid", grid(), kind="sites")
    _import(cli, store, tmp_path, "data", catalog())
    before = row_counts(store)
    run_sql(store, lambda conn: downgrade(conn, "0008"))
    assert cli.json("db", "upgrade", db=store)["to_revision"] == HEAD_REVISION
    assert row_counts(store) == before
    assert [cli.json("sites", "show", site, db=store)["cvmfs"] for site in ("A", "C")] == [False, False]
    assert cli.json("data", "show", "ddo.DBRelease.v34", db=store)["cvmfs"] is None
    _import(cli, store, tmp_path, "again", catalog())
    assert cli.json("data", "show", "ddo.DBRelease.v34", db=store)["cvmfs"] == DBR_PATH


# ------------------------------------------------------------------------------------------ counting

def test_check_sees_a_many_time_input_consumed(cli, store, tmp_path):
    task_id, _ = _prepare(cli, store, tmp_path, task({**PILEUP, "many_time": True}))
    cli("generate", "--seed", "3", db=store, env=at())
    assert run_sql(store, many_time_not_consumed) == []

    def consume(conn):  # what a generator that claimed many-time records would leave: planted, then put back
        pileup = conn.execute(select(datasets.c.id).where(datasets.c.name == "pileup")).scalar_one()
        first = conn.execute(select(files.c.id).where(files.c.dataset_id == pileup).order_by(files.c.id)).scalars().first()
        conn.execute(update(files).where(files.c.id == first).values(status="running"))
        conn.execute(update(datasets).where(datasets.c.id == pileup).values(n_files_used=1))
        found = check_all(conn)
        conn.execute(update(files).where(files.c.id == first).values(status="ready"))
        conn.execute(update(datasets).where(datasets.c.id == pileup).values(n_files_used=0))
        return pileup, first, found

    pileup, first, found = run_sql(store, consume)
    assert found == [f"task {task_id} input dataset {pileup}: a many-time input has 1 records taken by jobs as if consumed (record {first} first)",
                     f"task {task_id} input dataset {pileup}: a many-time input counts n_files_used 1, not 0"]
    assert cli.json("check", db=store) == {"ok": True, "violations": []}


@pytest.mark.parametrize("field", ["many_time"])
def test_a_many_time_master_is_refused_at_submission(cli, store, field):
    spec = yaml.safe_load(task())
    spec["inputs"][0][field] = True
    result = cli("submit", "-", db=store, input=yaml.safe_dump(spec), code=2)
    assert result.stderr.startswith("jedictl: error: inputs[0]: many_time applies to secondary inputs only")
