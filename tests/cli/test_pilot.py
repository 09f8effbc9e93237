"""`jedictl pilot` end to end: real pilot processes run real payloads (a Python script the test writes)
on real files, on SQLite (one shared file) and PostgreSQL. Every bad input is a job failure with its own
code and leaves no file on the output endpoint; kills, walltimes, signals and kill -9 end as PanDA's pilot
and watchdog end them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import insert, select

from jedictl.engine.storage.checksums import digest
from jedictl.engine.storage.paths import replica_path, replica_scope
from jedictl.store.schema import jobs, pilots
from tests.cli import pilot_grid as grid
from tests.helpers import run_sql

TASK_OUT = "pilot.test.1.out"
NO_INPUT = {"no_input": True, "inputs": [], "split": {"n_events": 10, "n_events_per_job": 10}, "command": "${OUTPUT0}"}


def _outputs_on_disk(disk: Path) -> list[Path]:
    """Files the pilot wrote on the endpoint (the inputs live under data/)."""
    return sorted(p for p in disk.rglob("*") if p.is_file() and p.relative_to(disk).parts[0] != "data")


# ------------------------------------------------------------------------------------- the good path

def test_a_task_runs_to_finished_with_its_outputs_on_disk_as_registered(cli, store, tmp_path):
    disk = grid.make_grid(cli, store, tmp_path, n_files=3)
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"))
    assert code == 0, stderr
    assert (report["counts"]["jobs"], report["counts"]["finished"], report["counts"]["failed"]) == (3, 3, 0), stderr
    jobs = grid.shown_jobs(cli, store)
    assert [j["status"] for j in jobs] == ["finished"] * 3
    for job in jobs:
        assert job["executor"].startswith("pilot-0@") and job["executor"].endswith("/slot1")
        # CPU is measured (None would be no figure); this payload is too short to be charged a tick on a
        # loaded machine, so 0.0 is a true measure -- the burning payload below shows it counts.
        assert job["wall_time"] > 0 and job["cpu_time"] is not None and job["cpu_time"] >= 0 and job["started_at"] and job["ended_at"]
    shown = cli.json("data", "show", TASK_OUT, "--files", db=store)
    assert len(shown["files"]) == 3
    url = f"file://{disk}"
    for entry in shown["files"]:
        path = replica_path(url, replica_scope(None, TASK_OUT), entry["lfn"])
        assert digest(path) == (entry["size"], entry["checksum"])  # the bytes on disk are the catalog's
        assert path.read_bytes().endswith(b"processed\n")
    logs = cli.json("data", "show", "pilot.test.1.log", "--files", db=store)["files"]
    assert len(logs) == 3
    import tarfile

    with tarfile.open(replica_path(url, replica_scope(None, "pilot.test.1.log"), logs[0]["lfn"])) as archive:
        names = sorted(Path(n).name for n in archive.getnames())
    assert names == ["payload.stderr", "payload.stdout", "pilot.log"]
    assert list((tmp_path / "work").iterdir()) == []  # work directories go once the report is accepted


def test_the_pilots_row_follows_the_pilot_and_the_job_records_its_metrics(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=1)
    from datetime import datetime

    now = datetime(2026, 1, 1)
    pilot_id = run_sql(store, lambda conn: conn.execute(insert(pilots).values(
        site=grid.SITE, batch_system="local", state="submitted", submitted_at=now, modified_at=now).returning(pilots.c.id)).scalar_one())
    code, report, stderr = grid.run_pilot(store, "--once", env={"JEDICTL_PILOT_ID": str(pilot_id), "PILOT_TEST_MODE": "burn"})
    assert code == 0, stderr
    row = run_sql(store, lambda conn: conn.execute(select(pilots).where(pilots.c.id == pilot_id)).one())
    assert (row.state, row.n_jobs, row.n_finished, row.n_failed, row.exit_code) == ("finished", 1, 1, 0, 0)
    assert row.executor.startswith(f"pilot-{pilot_id}@") and row.started_at and row.ended_at
    job = grid.shown_jobs(cli, store)[0]
    assert job["executor"].startswith(f"pilot-{pilot_id}@")
    # The payload burns 0.5 s of CPU and holds 50 MB: both show in the tree's figures.
    assert job["cpu_time"] >= 0.4
    assert job["max_pss"] is None or job["max_pss"] > 40_000


def test_two_slots_run_two_payloads_at_once(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=2)
    stamps = tmp_path / "pids"
    code, report, stderr = grid.run_pilot(store, "--once", "--slots", "2",
                                          env={"PILOT_TEST_MODE": "sleep1.5", "PILOT_TEST_PIDS": str(stamps)})
    assert code == 0, stderr
    assert report["counts"]["finished"] == 2
    starts = sorted(float(line.split()[1]) for line in stamps.read_text().splitlines())
    assert len(starts) == 2 and starts[1] - starts[0] < 1.5  # the second started while the first still slept
    first, second = grid.shown_jobs(cli, store)
    assert first["executor"].rsplit("/", 1)[1] != second["executor"].rsplit("/", 1)[1]


def test_a_container_job_runs_through_the_site_runtime(cli, store, tmp_path):
    """No container runtime is installed: a fake `apptainer` records its arguments and runs the command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "apptainer.argv"
    fake = bin_dir / "apptainer"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\n"
                    "while [ \"$1\" != docker://example/image:1 ]; do shift; done; shift; exec \"$@\"\n")
    fake.chmod(0o755)
    grid.make_grid(cli, store, tmp_path, n_files=1, container_runtime="apptainer", spec={"container": "docker://example/image:1"})
    code, report, stderr = grid.run_pilot(store, "--once", "--workdir", str(tmp_path / "work"),
                                          env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert code == 0, stderr
    assert report["counts"]["finished"] == 1
    argv = record.read_text().splitlines()
    workdir = str(tmp_path / "work" / "job-1.1")
    assert argv[:6] == ["exec", "--bind", workdir, "--pwd", workdir, "docker://example/image:1"]
    assert argv[6].endswith("payload.py") and argv[7:] == ["in.001.dat", "out.000001.dat"]


# --------------------------------------------------------------------------------------- failures

def test_a_payload_exiting_non_zero_fails_as_trans_and_is_retried(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=1)
    code, report, stderr = grid.run_pilot(store, "--once", env={"PILOT_TEST_MODE": "fail"})
    assert code == 0, stderr
    assert report["counts"]["failed"] == 1
    job = grid.shown_jobs(cli, store)[0]
    assert grid.failure(job) == ("failed", "trans", 7)
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.trans_exit_code).where(jobs.c.id == job["job_id"])).scalar_one()) == 7
    assert "something went wrong" in job["error_diag"]
    grid.generate(cli, store)  # the input went back to ready with an attempt used: a new job for it
    code, report, stderr = grid.run_pilot(store, "--once")
    assert code == 0 and report["counts"]["finished"] == 1, stderr
    retry = grid.shown_jobs(cli, store)[1]
    assert (retry["status"], retry["attempt_nr"]) == ("finished", 2)


def test_a_payload_past_its_walltime_is_killed_with_1213(cli, store, tmp_path):
    # cpu_efficiency 0: the job's walltime is the task's base_walltime alone (2 s).
    grid.make_grid(cli, store, tmp_path, n_files=1, spec={"resources": {"cpu_time": 1, "cpu_efficiency": 0, "base_walltime": 2}})
    pids = tmp_path / "pids"
    started = time.monotonic()
    code, report, stderr = grid.run_pilot(store, "--once", env={"PILOT_TEST_MODE": "sleep60", "PILOT_TEST_PIDS": str(pids)})
    assert code == 0, stderr
    assert time.monotonic() - started < 30
    job = grid.shown_jobs(cli, store)[0]
    assert job["max_walltime"] == 2
    assert grid.failure(job) == ("failed", "pilot", 1213) and "Reached batch system time limit" in job["error_diag"]
    assert 2 <= job["wall_time"] < 10
    assert not any(grid.alive(pid) for pid in grid.payload_pids(pids))


@pytest.mark.parametrize("how", ["jobs", "task"])
def test_killing_the_job_stops_its_payload_and_cancels_it(cli, store, tmp_path, how):
    grid.make_grid(cli, store, tmp_path, n_files=1)
    pids = tmp_path / "pids"
    process = grid.start_pilot(store, "--once", env={"PILOT_TEST_MODE": "sleep60", "PILOT_TEST_PIDS": str(pids)})
    try:
        grid.wait_for(lambda: grid.payload_pids(pids), what="the payload to start")
        grid.wait_for(lambda: grid.shown_jobs(cli, store)[0]["status"] == "running", what="the job to run")
        cli(*(("jobs", "kill", "1") if how == "jobs" else ("task", "kill", "1")), db=store)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    job = grid.shown_jobs(cli, store)[0]
    assert grid.failure(job) == ("cancelled", "pilot", 1144)
    assert not any(grid.alive(pid) for pid in grid.payload_pids(pids))


def test_sigterm_stops_the_payload_and_reports_1201(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=1)
    pids = tmp_path / "pids"
    process = grid.start_pilot(store, "--once", env={"PILOT_TEST_MODE": "sleep60", "PILOT_TEST_PIDS": str(pids)})
    try:
        grid.wait_for(lambda: grid.payload_pids(pids), what="the payload to start")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, err
    assert "stopped by SIGTERM" in err
    job = grid.shown_jobs(cli, store)[0]
    assert grid.failure(job) == ("failed", "pilot", 1201)
    assert not any(grid.alive(pid) for pid in grid.payload_pids(pids))


def test_a_payload_killed_by_the_sigterm_that_stops_its_pilot_is_reported_1201(cli, store, tmp_path):
    # scancel (or a batch time limit) signals every process of the batch job, the payload's session too,
    # in no set order: the payload may die, and its end be seen, before the pilot's own handler runs.
    # Here the payload gets SIGTERM first and the pilot 0.2 s later; the report still says 1201.
    grid.make_grid(cli, store, tmp_path, n_files=1)
    pids = tmp_path / "pids"
    process = grid.start_pilot(store, "--once", env={"PILOT_TEST_MODE": "sleep60", "PILOT_TEST_PIDS": str(pids)})
    try:
        grid.wait_for(lambda: grid.payload_pids(pids), what="the payload to start")
        os.kill(grid.payload_pids(pids)[0], signal.SIGTERM)
        time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, err
    job = grid.shown_jobs(cli, store)[0]
    assert grid.failure(job) == ("failed", "pilot", 1201), job["error_diag"]
    assert job["error_diag"] == "The pilot received SIGTERM"


def test_kill_9_of_the_pilot_loses_nothing_the_watchdog_closes_the_job_and_its_input_is_retried(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=1)
    pids = tmp_path / "pids"
    process = grid.start_pilot(store, "--once", env={"PILOT_TEST_MODE": "sleep60", "PILOT_TEST_PIDS": str(pids)})
    try:
        grid.wait_for(lambda: grid.shown_jobs(cli, store)[0]["status"] == "running", what="the job to run")
        process.kill()
        process.wait(timeout=30)
    finally:
        for pid in grid.payload_pids(pids):  # the orphaned payload: on a batch system, its process tracking ends it
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert grid.shown_jobs(cli, store)[0]["status"] == "running"
    time.sleep(2)
    # Heartbeats stopped 2 s ago: a 1-second heartbeat timeout makes the watchdog close the job now.
    cli("watch", db=store, env={"JEDICTL_JOB_TIMEOUTS__HEARTBEAT_HOURS": str(1 / 3600)})
    job = grid.shown_jobs(cli, store)[0]
    assert job["status"] == "closed"
    grid.generate(cli, store)
    code, report, stderr = grid.run_pilot(store, "--once")
    assert code == 0 and report["counts"]["finished"] == 1, stderr
    assert [(j["status"], j["attempt_nr"]) for j in grid.shown_jobs(cli, store)] == [("closed", 1), ("finished", 2)]


def _break_disk(disk: Path, how: str) -> None:
    inputs = sorted((disk / "data").rglob("in.*"))
    if how == "missing input":
        inputs[0].unlink()
    elif how == "checksum mismatch":
        data = inputs[0].read_bytes()
        inputs[0].write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])  # same size, other bytes


@pytest.mark.parametrize("how, expected", [
    ("missing input", ("failed", "pilot", 1331)),
    ("checksum mismatch", ("failed", "pilot", 1171)),
    ("no output", ("failed", "pilot", 1165)),
    ("not executable", ("failed", "pilot", 1305)),
    ("not found", ("failed", "pilot", 1346)),
])
def test_bad_input_is_a_clear_job_failure_with_its_own_code_and_leaves_no_file(cli, store, tmp_path, how, expected):
    payload = grid.write_payload(tmp_path, executable=how != "not executable")
    disk = grid.make_grid(cli, store, tmp_path, n_files=1, payload=payload,
                          transformation=str(tmp_path / "nowhere" / "prog") if how == "not found" else None)
    _break_disk(disk, how)
    code, report, stderr = grid.run_pilot(store, "--once", env={"PILOT_TEST_MODE": "no-output" if how == "no output" else "ok"})
    assert code == 0, stderr
    job = grid.shown_jobs(cli, store)[0]
    assert grid.failure(job) == expected, job["error_diag"]
    assert job["error_diag"]
    assert _outputs_on_disk(disk) == []
    assert cli.json("data", "list", db=store) and not any(d["name"].startswith("pilot.test.1.") for d in cli.json("data", "list", db=store))


@pytest.mark.parametrize("url", ["missing folder", "a file", "read-only"])
def test_an_output_endpoint_that_cannot_be_written_fails_the_job_with_1137(cli, store, tmp_path, url):
    target = {"missing folder": tmp_path / "no" / "such" / "disk", "a file": tmp_path / "plain-file", "read-only": Path("/proc/1")}[url]
    if url == "a file":
        target.write_text("not a folder")
    grid.make_grid(cli, store, tmp_path, n_files=0, spec=NO_INPUT, url=f"file://{target}")
    code, report, stderr = grid.run_pilot(store, "--once")
    assert code == 0, stderr
    job = grid.shown_jobs(cli, store)[0]
    assert grid.failure(job) == ("failed", "pilot", 1137), job["error_diag"]
    if url == "missing folder":
        assert not target.exists()  # never made by the pilot: a mistyped URL is not a new endpoint


def test_a_refused_report_leaves_no_output_file(cli, store, tmp_path):
    disk = grid.make_grid(cli, store, tmp_path, n_files=1)
    # The payload closes its own job before it ends well (kill code 9 ends even a running job): the
    # finished report that follows is refused. Heartbeats are slow here, so none says "alreadydone" first.
    code, report, stderr = grid.run_pilot(store, "--once", env={"PILOT_TEST_MODE": "close-self", "JEDICTL_DB": store,
                                                                "JEDICTL_PILOT__HEARTBEAT_SECONDS": "600"})
    assert code == 1, stderr
    assert report["counts"]["error"] == 1 and "already" in report["items"][0]["reason"]
    assert "report not accepted: outputs removed" in stderr  # they were written, then taken back
    assert grid.shown_jobs(cli, store)[0]["status"] == "cancelled"  # by the kill, not by the refused report
    assert _outputs_on_disk(disk) == []
    assert not any(d["name"] == TASK_OUT for d in cli.json("data", "list", db=store))


# ------------------------------------------------------------------------------------------ usage

def test_an_unknown_site_is_one_line_and_exit_2(cli, store):
    result = cli("pilot", "--site", "NOWHERE", "--once", db=store, code=2)
    assert "unknown site NOWHERE" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_no_work_with_once_exits_0_at_once(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=0, spec=NO_INPUT)
    cli("jobs", "kill", "1", db=store)
    code, report, stderr = grid.run_pilot(store, "--once", timeout=60)
    assert code == 0, stderr
    assert (report["counts"]["jobs"], report["counts"]["finished"], report["counts"]["failed"]) == (0, 0, 0)
