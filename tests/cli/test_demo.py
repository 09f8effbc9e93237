"""`jedictl demo`: builds a small grid with tasks of every kind and runs everything until all end."""

from __future__ import annotations

from sqlalchemy import func, select

from jedictl.engine.sim import demo
from jedictl.store.schema import events, jobs
from jedictl.store.invariants import check_all
from jedictl.store.views import job_sites_of_task
from tests.conftest import invoke
from tests.helpers import run_sql


def test_the_demo_runs_every_kind_of_task_to_the_end(cli, store_url):
    result = cli.json("demo", "--db", store_url, "--seed", "3")
    assert result["all_final"] is True
    kinds = {task["kind"]: task for task in result["tasks"]}
    assert set(kinds) == {"analysis (prun)", "event split", "generation", "child of 3", "with merge", "fails, retried", "event service"}
    # done, or finished when a pilot error the retry rules do not retry cost a file its last attempt
    assert {task["status"] for task in result["tasks"]} <= {"done", "finished"}
    assert kinds["fails, retried"]["failed_jobs"] > 0 and kinds["fails, retried"]["status"] == "done"  # failed first, retried
    assert result["retries"] > 0
    # Numbers are numbers for scripts (once "files": "60/60"): every input file of a final task is done or failed.
    assert all(isinstance(task[key], int) for task in result["tasks"] for key in ("files", "files_done", "files_failed", "jobs"))
    assert all(task["files_done"] + task["files_failed"] == task["files"] for task in result["tasks"])
    assert run_sql(store_url, check_all) == []
    # The event-service task ran its ranges through ES jobs and ES merge jobs (docs/event-service.md).
    es_task = kinds["event service"]["task"]
    ranges = run_sql(store_url, lambda conn: conn.execute(
        select(events.c.status, func.count()).where(events.c.task_id == es_task).group_by(events.c.status)).all())
    assert dict(ranges).get("merged", 0) > 0 and set(dict(ranges)) <= {"merged", "fatal", "discarded"}
    kinds_of_jobs = set(run_sql(store_url, lambda conn: conn.execute(select(jobs.c.kind).where(jobs.c.task_id == es_task)).scalars().all()))
    assert kinds_of_jobs == {"es", "esmerge"}
    # Analysis brokerage follows the data: only some sites hold each analysis input, and every job is there.
    for task in result["tasks"]:
        if task["kind"] in ANALYSIS_INPUTS:
            holders = set(demo.sites_holding(ANALYSIS_INPUTS[task["kind"]]))
            used = set(run_sql(store_url, lambda conn, t=task["task"]: job_sites_of_task(conn, t)))
            assert used and used <= holders < {site["name"] for site in demo.GRID["sites"]}, task["kind"]


ANALYSIS_INPUTS = {"analysis (prun)": demo.PHYS, "with merge": demo.NTUP}


def test_the_demo_says_its_analysis_jobs_went_to_the_data(tmp_path):
    result = invoke(["demo", "--db", str(tmp_path / "d.db"), "--seed", "2"])
    assert result.exit_code == 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("Analysis task")]
    assert len(lines) == 2 and all("went to its data" in line for line in lines), result.stderr
    # Both write an output container: one dataset per site that ran their jobs (docs/analysis.md).
    assert all("datasets, one per site" in line for line in lines), result.stderr


def test_the_same_seed_replays_the_same_run(cli, tmp_path):
    first = cli.json("demo", "--db", str(tmp_path / "a.db"), "--seed", "7")
    second = cli.json("demo", "--db", str(tmp_path / "b.db"), "--seed", "7")
    assert first["tasks"] == second["tasks"] and first["rounds"] == second["rounds"]


def test_an_existing_file_or_a_used_store_is_refused(cli, tmp_path, store):
    existing = tmp_path / "mine.db"
    existing.write_text("precious")
    assert "exists; the demo builds a new store" in cli("demo", "--db", str(existing), code=2).stderr
    assert existing.read_text() == "precious"
    cli("demo", "--db", store)
    assert "already holds tasks" in cli("demo", "--db", store, code=2).stderr


def test_the_store_named_before_the_command_or_in_jedictl_db_is_the_demo_store(cli, tmp_path, monkeypatch):
    """`jedictl --db X demo` and `JEDICTL_DB=X jedictl demo` were ignored: the demo wrote ./jedictl-demo.db."""
    monkeypatch.chdir(tmp_path)
    before = tmp_path / "before.db"
    result = invoke(["--db", str(before), "demo", "-o", "json", "--seed", "3"])
    assert result.exit_code == 0, result.stderr
    assert before.exists() and not (tmp_path / "jedictl-demo.db").exists()
    from_env = tmp_path / "env.db"
    assert cli.json("demo", "--seed", "3", env={"JEDICTL_DB": str(from_env)})["all_final"] is True
    assert from_env.exists() and not (tmp_path / "jedictl-demo.db").exists()
    # A store named that way is the operator's: an existing one is refused, named as it was given.
    assert cli("demo", env={"JEDICTL_DB": str(from_env)}, code=2).stderr == (
        "jedictl: error: JEDICTL_DB: exists; the demo builds a new store (remove it or choose another path)\n")
    assert invoke(["--db", str(before), "demo"]).stderr == (
        "jedictl: error: --db: exists; the demo builds a new store (remove it or choose another path)\n")


def test_demo_execute_runs_a_real_task_with_real_pilots(cli, store_url, tmp_path, monkeypatch):
    """`demo --execute`: real files, a real payload, pilots started by harvest as local processes; the
    injected failure is retried and every registered output is on disk with its registered checksum."""
    monkeypatch.chdir(tmp_path)
    result = cli.json("demo", "--execute", "--db", store_url)
    assert result["status"] == "done" and result["retries"] == 1
    assert len(result["outputs"]) == 12  # six sums and six logs
    for output in result["outputs"]:
        assert output["matches"] is True and output["checksum"] == output["registered"]
        assert (tmp_path / "jedictl-demo-execute" / "storage").as_posix() in output["path"]
    assert run_sql(store_url, check_all) == []


def test_demo_execute_refuses_a_directory_it_did_not_make(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jedictl-demo-execute").mkdir()
    (tmp_path / "jedictl-demo-execute" / "precious").write_text("keep")
    assert "is not a demo directory" in cli("demo", "--execute", code=2).stderr
    assert (tmp_path / "jedictl-demo-execute" / "precious").read_text() == "keep"
    assert "runs on the wall clock" in cli("demo", "--execute", "--pace", "1", code=2).stderr
