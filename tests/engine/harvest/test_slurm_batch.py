"""SlurmBatch against a real one-node Slurm cluster (tests/slurm_cluster.py): an array submission
with one pilot id per element, squeue's view of queued, running and ended jobs with their exit codes,
scancel, sbatch's options from sites.batch, and one clear line when Slurm is not there."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from jedictl.engine.harvest.batch import BatchError, Submission
from jedictl.engine.harvest.policy import ENDED, QUEUED, RUNNING
from jedictl.engine.harvest.slurm import SlurmBatch, pilot_script, sbatch_options


def submission(tmp_path: Path, code: str, ids=(1,), **options) -> Submission:
    return Submission(site="SLURMSITE", argv=[sys.executable, "-c", code], env={"JEDICTL_DB": "sqlite:///x.db"}, pilot_ids=list(ids),
                      log_dir=tmp_path / "logs", options={"walltime": 120, "memory_mb": 100, **options})


def wait_for(batch, ids, states, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = batch.status(ids)
        if all(views.get(i) is not None and views[i].state in states for i in ids):
            return views
        time.sleep(0.2)
    raise AssertionError(f"not {states} in {timeout} s: {batch.status(ids)}")


def test_sbatch_options_come_from_the_sites_batch():
    args = sbatch_options("S", {"partition": "short", "account": "atlas", "qos": "low", "walltime": 61, "cores": 4, "memory_mb": 2000,
                                "submit_args": ["--exclusive", "--constraint=ssd"]}, 3)
    assert args == ["--job-name=jedictl-pilot-S", "--array=0-2", "--partition=short", "--account=atlas", "--qos=low", "--time=2",
                    "--cpus-per-task=4", "--mem=2000", "--exclusive", "--constraint=ssd"]
    assert sbatch_options("S", {}, 1) == ["--job-name=jedictl-pilot-S"]


def test_the_script_quotes_nothing_through_a_shell(monkeypatch):
    script = pilot_script(["/bin/echo", "it's $HOME; `x`"], {"JEDICTL_DB": "postgresql://u:p'w@h/db"}, [5, 9])
    # The script sets the pilot's environment (JEDICTL_DB, JEDICTL_PILOT_ID): here on a copy, not on this
    # test process's, where they outlived the test (a later pilot test's pilot took JEDICTL_PILOT_ID=5).
    monkeypatch.setattr(os, "environ", dict(os.environ))
    namespace: dict = {}
    body = script.replace("os.execv(ARGV[0], ARGV)", "")  # everything but the exec
    exec(compile(body, "script", "exec"), namespace)  # noqa: S102 - our own generated program
    assert namespace["ARGV"] == ["/bin/echo", "it's $HOME; `x`"] and namespace["PILOT_IDS"] == [5, 9]


def test_sbatch_missing_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BatchError, match=r"^site SLURMSITE: batch system slurm: sbatch not found$"):
        SlurmBatch().submit(submission(tmp_path, "pass"))



@pytest.mark.slurm
@pytest.mark.slow
def test_an_array_runs_one_pilot_per_id_and_reports_exit_codes(slurm_cluster, tmp_path):
    batch = SlurmBatch()
    code = "import os, sys; print(os.environ['JEDICTL_PILOT_ID'], os.environ['JEDICTL_DB']); sys.exit(int(os.environ['JEDICTL_PILOT_ID']))"
    ids = batch.submit(submission(tmp_path, code, ids=(11, 12, 13)))
    base = ids[0].split("_")[0]
    assert ids == [f"{base}_0", f"{base}_1", f"{base}_2"]
    views = wait_for(batch, ids, {ENDED})
    assert [views[i].exit_code for i in ids] == [11, 12, 13]
    assert {views[i].reason for i in ids} == {"FAILED"}
    assert (tmp_path / "logs" / f"slurm-{base}_1.out").read_text().split() == ["12", "sqlite:///x.db"]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_single_pilot_is_a_plain_job_and_scancel_ends_it(slurm_cluster, tmp_path):
    batch = SlurmBatch()
    [job] = batch.submit(submission(tmp_path, "import time; print('up', flush=True); time.sleep(120)"))
    assert job.isdigit()
    assert batch.status([job])[job].state in (QUEUED, RUNNING)
    wait_for(batch, [job], {RUNNING})
    batch.cancel([job])
    views = wait_for(batch, [job], {ENDED})
    assert views[job].reason == "CANCELLED" and views[job].exit_code == 128 + 15
    assert batch.status(["999999"]) == {}  # an id Slurm never had is left out, not an error


@pytest.mark.slurm
@pytest.mark.slow
def test_a_refused_submission_is_one_line(slurm_cluster, tmp_path):
    with pytest.raises(BatchError, match=r"^site SLURMSITE: batch system slurm: sbatch failed: .*partition"):
        SlurmBatch().submit(submission(tmp_path, "pass", partition="nosuchpartition"))
