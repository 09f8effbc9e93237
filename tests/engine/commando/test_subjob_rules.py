"""Ganga's subjob operations as pure rules (docs/subjobs.md): which job a resubmission takes, what it
writes, Ganga's subjob ids, and the document `jobs copy` prints."""

from __future__ import annotations

from datetime import datetime

import pytest

from jedictl.engine.commando.subjob_rules import Candidate, InputRecord, copy_document, plan, refusal, subjob_index
from jedictl.engine.task.final_status import DatasetRecord
from jedictl.model.files import FileRecord


def _spent(file_id: int = 1, job_id: int = 7, status: str = "failed", last_job: int | None = None) -> InputRecord:
    return InputRecord(FileRecord(file_id, 10, "input", status, attempt_nr=1, max_attempt=1, failed_attempt=1, max_failure=None),
                       f"f.{file_id}.root", job_id if last_job is None else last_job, 0)


def _job(**changes) -> Candidate:
    values = dict(ref="3.2", job_id=7, status="failed", kind="normal", resubmitted_at=None, task_id=3, task_status="running",
                  leased_by=None, inputs=(_spent(1), _spent(2)))
    values.update(changes)
    return Candidate(**values)


MASTER = DatasetRecord(10, "input", "ready", n_files=5, n_files_to_be_used=5, n_files_used=5, n_files_finished=2, n_files_failed=2)
OUTPUT = DatasetRecord(11, "output", "running")


def test_a_failed_job_whose_input_ran_out_with_it_is_resubmitted():
    assert refusal(_job()) is None
    assert refusal(_job(status="cancelled")) is None and refusal(_job(status="closed")) is None


@pytest.mark.parametrize(("changes", "words"), [
    ({"resubmitted_at": datetime(2026, 1, 2, 3, 4, 5)}, "already resubmitted (at 2026-01-02 03:04:05)"),
    ({"status": "finished"}, "finished: only a failed or killed job"),
    ({"status": "running"}, "is running: only a job that ended"),
    ({"kind": "merge"}, "merge job"),
    ({"task_status": "paused"}, "its task 3 is paused"),
    ({"inputs": ()}, "no input records"),
    ({"inputs": (_spent(1, last_job=9),)}, "is now with job 9"),
    ({"inputs": (_spent(1, status="ready"),)}, "back in the pool with attempts left"),
    ({"inputs": (_spent(1, status="finished"),)}, "is finished"),
    ({"no_retry_rule": "retry rule 4 (pilot:1099)"}, "retry rule 4 (pilot:1099) says no_retry"),
    ({"leased_by": "host:1:finalize"}, "leased by host:1:finalize"),
])
def test_refusals_name_the_job_and_why(changes, words):
    reason = refusal(_job(**changes))
    assert reason is not None and reason.startswith("job 3.2") and words in reason


def test_the_plan_gives_one_attempt_more_and_counts_back():
    decided = plan([_job()], [MASTER, OUTPUT])
    assert decided.files == ((1, 1, {"status": "ready", "max_attempt": 2}), (2, 1, {"status": "ready", "max_attempt": 2}))
    # A live task keeps its datasets' statuses: only the counters move.
    assert decided.datasets == ((10, {"n_files_used": -2, "n_files_failed": -2}, None),)
    assert decided.task_status is None


def test_an_ended_task_is_reopened_as_task_retry_leaves_it():
    decided = plan([_job(task_status="failed")], [MASTER, OUTPUT])
    assert decided.task_status == "ready"
    assert (10, {"n_files_used": -2, "n_files_failed": -2}, "ready") in decided.datasets
    assert any(dataset_id == 11 and deltas == {} for dataset_id, deltas, _ in decided.datasets)


def test_ganga_subjob_ids_count_from_zero():
    assert [subjob_index(k) for k in (0, 1, 41)] == [1, 2, 42]
    with pytest.raises(ValueError):
        subjob_index(-1)


def test_copy_of_a_spec_task_restricts_its_master_input():
    spec = {"name": "alice.v1", "parent": 4, "command": "run ${IN}",
            "inputs": [{"dataset": "ds.in", "offset": 3, "include": ["root"]}, {"dataset": "ds.sec", "ratio": 1}],
            "outputs": [{"dataset": "user.alice.v1_hist/", "file_template": "h.${SN}.root"}],
            "log": {"dataset": "user.alice.v1.log", "file_template": "l.${SN}.tgz"}}
    copied = copy_document("spec", spec, "12.3", ["f.2.root", "f.1.root", "f.1.root"])
    assert copied["name"] == "alice.v1.copy12_3" and "parent" not in copied
    assert copied["inputs"][0] == {"dataset": "ds.in", "include": ["root"], "files": ["f.1.root", "f.2.root"]}
    assert copied["inputs"][1] == {"dataset": "ds.sec", "ratio": 1}
    assert copied["outputs"][0]["dataset"] == "user.alice.v1_hist.copy12_3/"
    assert copied["log"]["dataset"] == "user.alice.v1.log.copy12_3"
    assert spec["inputs"][0]["offset"] == 3 and spec["name"] == "alice.v1"  # the task's own document is not touched


def test_copy_refuses_a_task_without_input():
    with pytest.raises(ValueError, match="no input"):
        copy_document("spec", {"name": "gen", "no_input": True, "inputs": []}, "5.1", ["x"])
    with pytest.raises(ValueError, match="no input"):
        copy_document("panda", {"taskName": "gen", "noInput": True, "jobParameters": []}, "5.1", ["x"])
    with pytest.raises(ValueError, match="nothing to copy"):
        copy_document("spec", {"name": "a", "inputs": [{"dataset": "d"}]}, "5.1", [])


def test_jobs_of_one_task_are_planned_together_and_counted_once():
    other = _job(ref="3.4", job_id=8, inputs=(_spent(3, job_id=8), _spent(4, job_id=8)))
    master = DatasetRecord(10, "input", "ready", n_files=6, n_files_to_be_used=6, n_files_used=6, n_files_finished=2, n_files_failed=4)
    decided = plan([_job(), other], [master, OUTPUT])
    assert [file_id for file_id, _, _ in decided.files] == [1, 2, 3, 4]
    assert decided.datasets == ((10, {"n_files_used": -4, "n_files_failed": -4}, None),)
