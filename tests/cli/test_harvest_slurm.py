"""Acceptance under real Slurm (tests/slurm_cluster.py), on SQLite (a shared file) and PostgreSQL: a task
over 200 real files, `jedictl run` (which harvests when a site has a batch system) until the task is done
-- jobs run by pilots that are Slurm jobs, outputs on disk with the registered checksums, a payload
that exits non-zero retried -- and `scancel` of a pilot in the middle of a job: the pilot reports the job
failed (1201) and it is retried to the end."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.harvest_grid import FAST, SITE, check_outputs_on_disk, make_batch_grid, pilots

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PAYLOAD = """\
#!{python}
# Inputs (comma or space separated) -> one output; fails once on in.007.dat; sleeps on in.{sleepy}.dat
import os, sys, time
*inputs, output = [part for arg in sys.argv[1:] for part in arg.split(",") if part]
marker = {marker!r}
if any(os.path.basename(p) == "in.007.dat" for p in inputs) and not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(5)
if any(os.path.basename(p) == "in.{sleepy}.dat" for p in inputs) and not os.path.exists(marker + ".slept"):
    open(marker + ".slept", "w").close()
    time.sleep(60)
with open(output, "wb") as out:
    for path in inputs:
        with open(path, "rb") as handle:
            out.write(handle.read())
"""


@pytest.fixture
def fast(monkeypatch, tmp_path, slurm_cluster):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("JEDICTL_HARVEST__LOG_DIR", str(tmp_path / "pilot-logs"))
    # One site takes every job: the brokerage's queue limit (20 queued) would park the task pending for an hour.
    monkeypatch.setenv("JEDICTL_BROKERAGE__QUEUE_LIMIT_SITE", "1000")
    monkeypatch.setenv("JEDICTL_PILOT__WORKDIR", str(tmp_path / "work"))


def use_payload(tmp_path: Path, sleepy: str = "none") -> None:
    """Ours in place of the grid's (the task names tmp_path/payload.py)."""
    script = tmp_path / "payload.py"
    script.write_text(PAYLOAD.format(python=sys.executable, marker=str(tmp_path / "failed-once"), sleepy=sleepy))
    script.chmod(0o755)


def run_until_done(cli, store, timeout=150.0, during=None):
    deadline = time.monotonic() + timeout
    while True:
        cli("run", db=store, code=None)
        if during:
            during()
        task = cli.json("task", "show", "1", db=store)
        if task["status"] in ("done", "finished", "failed"):
            return task
        assert time.monotonic() < deadline, (task, pilots(cli, store)[:5])
        time.sleep(1)


def test_a_task_over_200_files_runs_as_slurm_jobs(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, {"system": "slurm", "jobs_per_pilot": 20, "slots": 2, "max_queued": 4, "walltime": 600,
                                                  "memory_mb": 200}, n_files=200, command="${IN/L} ${OUTPUT0}",
                           spec={"split": {"n_files_per_job": 4}})
    use_payload(tmp_path)
    task = run_until_done(cli, store)
    assert task["status"] == "done", task
    rows = pilots(cli, store)
    assert rows and all(row["batch_system"] == "slurm" and row["batch_id"].split("_")[0].isdigit() for row in rows)
    assert sum(row["n_jobs"] for row in rows) == 51  # 50 jobs, one retried after its payload exited 5
    failed = cli.json("jobs", "list", "--status", "failed", db=store)
    assert len(failed) == 1 and failed[0]["attempt_nr"] == 1  # its first attempt; the retry finished
    check_outputs_on_disk(store, disk, "harvest.test.1.out", 50)


def test_scancel_of_a_pilot_mid_job_fails_the_job_and_it_is_retried(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, {"system": "slurm", "jobs_per_pilot": 1, "walltime": 600, "memory_mb": 200}, n_files=4)
    use_payload(tmp_path, sleepy="003")
    cancelled: list[str] = []

    def cancel_the_sleeper() -> None:
        if cancelled or not (tmp_path / "failed-once.slept").exists():
            return
        running = [row for row in pilots(cli, store, state="running") if row["n_jobs"]]
        for row in running:  # the pilot whose payload sleeps is the one still running
            subprocess.run(["scancel", row["batch_id"]], check=True)
            cancelled.append(row["batch_id"])

    task = run_until_done(cli, store, during=cancel_the_sleeper)
    assert cancelled and task["status"] == "done", (task, cancelled)
    killed = [row for row in pilots(cli, store) if row["batch_id"] in cancelled]
    assert killed and all(row["state"] in ("failed", "finished", "cancelled") for row in killed)
    failed = cli.json("jobs", "list", "--status", "failed", db=store)
    assert failed, "the job of the cancelled pilot ends failed and is retried"
    errors = [cli.json("jobs", "show", str(job["job_id"]), db=store) for job in failed]
    assert any((e["error_source"], e["error_code"]) == ("pilot", 1201) for e in errors), errors  # SIGTERM from scancel
    check_outputs_on_disk(store, disk, "harvest.test.1.out", 4)
