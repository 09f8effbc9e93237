"""The pilot's pure parts: its codes, its reports, its job budget and names, where files go."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from jedictl.engine.jobs.reports import MAX_MEMORY_KB
from jedictl.engine.pilot import staging
from jedictl.engine.pilot.codes import STAGE_OUT_FAILED, NO_REPLICA, PilotError, exit_failure, signal_failure, walltime_failure
from jedictl.engine.pilot.pilot import Budget, default_jobs, executor_name
from jedictl.engine.pilot.report import Metrics, failed_report, finished_report

PAYLOAD = {"job_id": 5, "attempt_nr": 2, "outputs": [{"lfn": "o.root", "type": "output", "dataset": "user.a.x", "destination": "D"}]}


def test_a_non_zero_exit_is_a_trans_error_with_that_code():
    failure = exit_failure(7, "boom")
    assert (failure.source, failure.code, failure.trans_exit_code) == ("trans", 7, 7) and failure.diag.endswith("boom")
    killed = exit_failure(-9)
    assert (killed.code, killed.trans_exit_code) == (137, 137) and "signal 9" in killed.diag
    assert walltime_failure(2).code == 1213 and "Reached batch system time limit" in walltime_failure(2).diag
    assert signal_failure("SIGTERM").code == 1201 and signal_failure("SIGINT").code == 1204


def test_reports_carry_the_error_or_the_outputs_and_bounded_metrics():
    metrics = Metrics(wall_time=1.23456, cpu_time=-1, max_rss=2**50, max_pss=10, started_at=datetime(2026, 1, 1))
    failed = failed_report(PAYLOAD, metrics, exit_failure(3))
    assert (failed.status, failed.error_source, failed.error_code, failed.trans_exit_code, failed.attempt_nr) == ("failed", "trans", 3, 3, 2)
    assert (failed.wall_time, failed.cpu_time, failed.max_rss, failed.max_pss) == (1.235, 0.0, MAX_MEMORY_KB, 10)
    done = finished_report(PAYLOAD, metrics, [staging.StagedOut("o.root", Path("/d/o.root"), 12, "ad:00000001", True)])
    assert (done.status, done.error_code, done.trans_exit_code) == ("finished", None, 0)
    assert [(o.lfn, o.size, o.checksum) for o in done.outputs] == [("o.root", 12, "ad:00000001")]


def test_once_takes_one_job_per_slot_unless_told_and_the_budget_is_shared():
    assert default_jobs(True, None, 1) == 1 and default_jobs(True, None, 3) == 3
    assert default_jobs(False, None, 2) is None and default_jobs(True, 5, 2) == 5
    budget = Budget(2)
    assert budget.take() and budget.take() and not budget.take()
    budget.give_back()
    assert budget.take()
    assert all(Budget(None).take() for _ in range(100))


def test_executor_names_say_which_pilot_host_process_and_slot():
    assert executor_name(None, "wn1", 42, 1) == "pilot-0@wn1:42/slot1"
    assert executor_name(7, "wn1", 42, 2) == "pilot-7@wn1:42/slot2"
    assert executor_name(7, "wn1", 42, 2, "mine") == "mine/slot2"


def test_inputs_come_from_the_first_endpoint_with_a_url():
    item = {"lfn": "f.root", "scope": None, "dataset": "mc23.x", "replicas": ["A", "B", "C"]}
    path = staging.input_source(item, {"A": None, "B": "file:///b", "C": "file:///c"})
    assert str(path).startswith("/b/mc23/") and path.name == "f.root"
    with pytest.raises(PilotError) as caught:
        staging.input_source(item, {"A": None})
    assert caught.value.failure.code == NO_REPLICA and "A, B, C" in caught.value.failure.diag


def test_an_output_needs_a_destination_with_a_url_whose_root_is_a_folder(tmp_path):
    item = {"lfn": "o.root", "dataset": "user.alice.out/", "destination": "D"}
    for urls in ({}, {"D": None}, {"D": f"file://{tmp_path}/missing"}, {"D": "https://example.org/x"}):
        with pytest.raises(PilotError) as caught:
            staging.destination(item, urls)
        assert caught.value.failure.code == STAGE_OUT_FAILED
    path = staging.destination(item, {"D": f"file://{tmp_path}"})
    assert path.relative_to(tmp_path).parts[:2] == ("user", "alice") and path.name == "o.root"
