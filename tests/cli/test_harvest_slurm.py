"""Acceptance under real Slurm (tests/slurm_cluster.py), on SQLite (a shared file) and PostgreSQL, with
`jedictl run` (which harvests when a site has a batch system) driving pilots that are Slurm jobs:

- a task over 200 real files runs to done: outputs on disk with the registered checksums, a payload that
  exits non-zero retried;
- a payload past its walltime is killed by its pilot and reported 1213, and its input retried to the end;
- `jedictl task kill` during the run stops the running payloads: the jobs end cancelled (1144), the
  payload processes are gone, the task ends aborted;
- `scancel` of a pilot in the middle of a job: the pilot reports the job failed (1201, whichever of the
  pilot and its payload the SIGTERM reached first) and its input is retried to the end.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.cli.harvest_grid import FAST, check_outputs_on_disk, make_batch_grid, pilots, registered_outputs, wait_pilots_ended
from tests.cli.pilot_grid import alive, failure, payload_pids, shown_jobs

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

OUT = "harvest.test.1.out"
BATCH = {"system": "slurm", "jobs_per_pilot": 1, "walltime": 600, "memory_mb": 200}
# cpu_efficiency 0: a job's walltime is the task's base_walltime alone.
WALLTIME_2S = {"resources": {"cpu_time": 1, "cpu_efficiency": 0, "base_walltime": 2}}

PAYLOAD = """\
#!{python}
# Inputs (comma or space separated) -> one output. Appends "pid job-id input..." to the pids file; fails once
# on in.007.dat; sleeps 60 s on each input named in SLEEPY, the first time it sees it.
import os, sys, time
*inputs, output = [part for arg in sys.argv[1:] for part in arg.split(",") if part]
names = [os.path.basename(p) for p in inputs]
with open({pids!r}, "a") as handle:
    handle.write(" ".join([str(os.getpid()), os.environ["PANDAID"], *names]) + "\\n")
marker = {marker!r}
if "in.007.dat" in names and not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(5)
for name in names:
    if name in {sleepy!r} and not os.path.exists(f"{{marker}}.slept.{{name}}"):
        open(f"{{marker}}.slept.{{name}}", "w").close()
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


class Payload:
    """Ours in place of the grid's (the task names tmp_path/payload.py): which inputs make it sleep, and
    what it left behind (pids, markers)."""

    def __init__(self, tmp_path: Path, sleepy: tuple[str, ...] = ()):
        self.pids = tmp_path / "pids"
        self.marker = tmp_path / "failed-once"
        script = tmp_path / "payload.py"
        script.write_text(PAYLOAD.format(python=sys.executable, pids=str(self.pids), marker=str(self.marker), sleepy=list(sleepy)))
        script.chmod(0o755)

    def sleeping(self, lfn: str) -> bool:
        """A payload has started its sleep on `lfn`."""
        return Path(f"{self.marker}.slept.{lfn}").exists()

    def runs(self, lfn: str) -> list[tuple[int, int]]:
        """(pid, job id) of each payload that was given `lfn`."""
        lines = self.pids.read_text().splitlines() if self.pids.exists() else []
        return [(int(line.split()[0]), int(line.split()[1])) for line in lines if lfn in line.split()[2:]]


def run_until_ended(cli, store, timeout: float = 150.0, during: Callable[[], None] | None = None) -> dict[str, Any]:
    """`jedictl run` once a second (with `during` after each pass) until task 1 is in a final state."""
    deadline = time.monotonic() + timeout
    while True:
        cli("run", db=store, code=None)
        if during:
            during()
        task = cli.json("task", "show", "1", db=store)
        if task["status"] in ("done", "finished", "failed", "aborted", "broken"):
            return task
        assert time.monotonic() < deadline, (task, pilots(cli, store)[:5])
        time.sleep(1)


def ended_jobs(cli, store) -> list[tuple[Any, ...]]:
    """(status, attempt, error source, error code) of every job, sorted: the whole story of the task."""
    return sorted((job["status"], job["attempt_nr"], job["error_source"] or "", job["error_code"] or 0) for job in shown_jobs(cli, store))


def once(action: Callable[[], bool]) -> Callable[[], None]:
    """`action` each call until it returns True, then never again."""
    done: list[bool] = []

    def call() -> None:
        if not done and action():
            done.append(True)
    call.done = done  # type: ignore[attr-defined]
    return call


def test_a_task_over_200_files_runs_as_slurm_jobs(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, {**BATCH, "jobs_per_pilot": 20, "slots": 2, "max_queued": 4}, n_files=200,
                           command="${IN/L} ${OUTPUT0}", spec={"split": {"n_files_per_job": 4}})
    Payload(tmp_path)
    task = run_until_ended(cli, store)
    assert task["status"] == "done", task
    rows = pilots(cli, store)
    assert rows and all(row["batch_system"] == "slurm" and row["batch_id"].split("_")[0].isdigit() for row in rows)
    assert sum(row["n_jobs"] for row in rows) == 51  # 50 jobs, one retried after its payload exited 5
    failed = cli.json("jobs", "list", "--status", "failed", db=store)
    assert len(failed) == 1 and failed[0]["attempt_nr"] == 1  # its first attempt; the retry finished
    check_outputs_on_disk(store, disk, OUT, 50)


def test_a_payload_past_its_walltime_is_killed_with_1213_and_its_input_retried(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, BATCH, n_files=2, spec=WALLTIME_2S)
    payload = Payload(tmp_path, sleepy=("in.001.dat",))
    task = run_until_ended(cli, store)
    assert task["status"] == "done", task
    # No retry rule names 1213: the input is retried like any failure, and the retry (no sleep) finishes.
    assert ended_jobs(cli, store) == [("failed", 1, "pilot", 1213), ("finished", 1, "", 0), ("finished", 2, "", 0)]
    [killed] = [job for job in shown_jobs(cli, store) if job["status"] == "failed"]
    assert killed["max_walltime"] == 2 and "Reached batch system time limit" in killed["error_diag"]
    assert 2 <= killed["wall_time"] < 10  # killed at its walltime, not left to its 60 s sleep
    [(sleeper, job_id)] = payload.runs("in.001.dat")[:1]
    assert job_id == killed["job_id"] and not alive(sleeper)
    # The pilot itself ended well: it writes its end just after its last report, so wait for it.
    assert all(row["state"] == "finished" for row in wait_pilots_ended(cli, store, len(pilots(cli, store))))
    check_outputs_on_disk(store, disk, OUT, 2)


def test_task_kill_during_the_run_stops_the_running_payloads(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, BATCH, n_files=2)
    payload = Payload(tmp_path, sleepy=("in.001.dat", "in.002.dat"))

    def kill_when_both_sleep() -> bool:
        running = cli.json("jobs", "list", "--status", "running", db=store)
        if len(running) < 2 or not (payload.sleeping("in.001.dat") and payload.sleeping("in.002.dat")):
            return False
        cli("task", "kill", "1", db=store)
        return True

    kill = once(kill_when_both_sleep)
    task = run_until_ended(cli, store, timeout=90, during=kill)
    assert kill.done and task["status"] == "aborted", task  # type: ignore[attr-defined]
    # Each pilot heard `tobekilled` on its heartbeat, stopped its payload and reported the kill.
    assert ended_jobs(cli, store) == [("cancelled", 1, "pilot", 1144)] * 2
    assert all(job["wall_time"] < 30 for job in shown_jobs(cli, store))
    pids = payload_pids(payload.pids)
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)
    assert registered_outputs(store, OUT) == {}
    assert not [path for path in disk.rglob("out.*") if path.is_file()]
    # The task is aborted once both reports are in; each pilot writes its own end just after (a CI run
    # under load read one pilot still `running` here).
    assert all(row["state"] == "finished" and row["n_jobs"] == 1 for row in wait_pilots_ended(cli, store, 2))


def test_scancel_of_a_pilot_mid_job_fails_the_job_with_1201_and_it_is_retried(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, BATCH, n_files=4)
    payload = Payload(tmp_path, sleepy=("in.003.dat",))
    cancelled: list[str] = []

    def cancel_the_sleeper() -> bool:
        if not payload.sleeping("in.003.dat"):
            return False
        # The pilot that runs the sleeping payload's job (its executor names the pilot), and only that one.
        [(_, job_id)] = payload.runs("in.003.dat")
        executor = cli.json("jobs", "show", str(job_id), db=store)["executor"]
        pilot_id = int(executor.split("@")[0].removeprefix("pilot-"))
        [row] = [row for row in pilots(cli, store) if row["id"] == pilot_id]
        subprocess.run(["scancel", row["batch_id"]], check=True)
        cancelled.append(row["batch_id"])
        return True

    task = run_until_ended(cli, store, during=once(cancel_the_sleeper))
    assert len(cancelled) == 1 and task["status"] == "done", (task, cancelled)
    # scancel signals the pilot and its payload alike; the pilot's report says why it stopped.
    assert ended_jobs(cli, store) == [("failed", 1, "pilot", 1201)] + [("finished", 1, "", 0)] * 3 + [("finished", 2, "", 0)]
    [killed] = [job for job in shown_jobs(cli, store) if job["status"] == "failed"]
    assert failure(killed) == ("failed", "pilot", 1201) and killed["error_diag"] == "The pilot received SIGTERM"
    [row] = [row for row in pilots(cli, store) if row["batch_id"] in cancelled]
    assert (row["state"], row["exit_code"]) == ("cancelled", 143), row  # the pilot's own word, not the batch system's
    assert not any(alive(pid) for pid in payload_pids(payload.pids))
    check_outputs_on_disk(store, disk, OUT, 4)
