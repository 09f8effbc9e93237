"""Propagation of job outcomes to files and counters (panda-server §2.6, jedi-inventory §10.1)."""

from __future__ import annotations

import pytest

from jedictl.engine.jobs.results import (
    DatasetDelta,
    FileRecord,
    JobFileRecord,
    JobRecord,
    JobReport,
    OutputReport,
    Propagation,
    propagate,
)

IN, OUT, LOG = 10, 20, 21  # dataset ids


def job_files(attempt: int = 1) -> list[JobFileRecord]:
    return [
        JobFileRecord(1, IN, "f.001.root", "input", attempt),
        JobFileRecord(2, IN, "f.002.root", "input", attempt),
        JobFileRecord(4, OUT, "out.000007.root", "output", 0),
        JobFileRecord(5, LOG, "log.000007.tgz", "log", 0),
    ]


def files(attempt: int = 1, **input_values) -> dict[int, FileRecord]:
    inputs = {"status": "running", "attempt_nr": attempt, "max_attempt": 3, **input_values}
    return {
        1: FileRecord(1, IN, "input", n_events=100, **inputs),
        2: FileRecord(2, IN, "input", n_events=50, **inputs),
        4: FileRecord(4, OUT, "output", "defined"),
        5: FileRecord(5, LOG, "log", "defined"),
    }


OUTPUTS = (OutputReport("out.000007.root", size=1000, checksum="ad:0001", guid="g-1", n_events=150),
           OutputReport("log.000007.tgz", size=10, checksum="ad:0002"))
RUNNING = JobRecord(100, "running", attempt_nr=2)


def by_file(result: Propagation) -> dict[int, tuple[str, int, int]]:
    return {u.file_id: (u.status, u.attempt_nr, u.failed_attempt) for u in result.file_updates}


def test_finished_job():
    result = propagate(RUNNING, JobReport(100, "finished", 2, OUTPUTS), job_files(), files())
    assert result.accepted and result.job_status == "finished"
    assert by_file(result) == {1: ("finished", 2, 0), 2: ("finished", 2, 0), 4: ("finished", 0, 0), 5: ("finished", 0, 0)}
    out = next(u for u in result.file_updates if u.file_id == 4)
    assert dict(out.values) == {"size": 1000, "checksum": "ad:0001", "guid": "g-1", "n_events": 150, "keep_track": False}
    assert (out.expected_attempt_nr, out.expected_statuses) == (0, ("defined", "running"))
    assert result.deltas() == (
        DatasetDelta(IN, n_files_finished=2, n_events_used=150),
        DatasetDelta(OUT, n_files_finished=1, n_events=150, n_files=1),  # an output dataset counts what was registered
        DatasetDelta(LOG, n_files_finished=1, n_files=1),
    )


def test_failed_job_puts_inputs_back_or_fails_them_when_failures_are_used_up():
    records = files()
    records[2] = records[2]._replace(failed_attempt=1, max_failure=2)
    result = propagate(RUNNING, JobReport(100, "failed", 2), job_files(), records)
    # file 1: attempt 2 < 3 -> ready again; file 2: second genuine failure of at most 2 -> failed
    assert by_file(result) == {1: ("ready", 2, 1), 2: ("failed", 2, 2), 4: ("failed", 0, 0), 5: ("failed", 0, 0)}
    assert result.deltas() == (
        DatasetDelta(IN, n_files_used=-1, n_files_failed=1),
        DatasetDelta(OUT, n_files_failed=1),
        DatasetDelta(LOG, n_files_failed=1),
    )


def test_the_last_attempt_fails_the_file():
    result = propagate(JobRecord(100, "running", 3), JobReport(100, "failed"), job_files(2), files(2))
    assert by_file(result)[1] == ("failed", 3, 1)  # attemptNr 3 = maxAttempt 3
    assert result.deltas()[0] == DatasetDelta(IN, n_files_failed=2)


@pytest.mark.parametrize("status", ["cancelled", "closed"])
def test_cancelled_and_closed_use_an_attempt_but_not_a_failure(status):
    records = files()
    records[2] = records[2]._replace(attempt_nr=2)
    jfs = job_files()
    jfs[1] = jfs[1]._replace(attempt_nr=2)
    result = propagate(JobRecord(100, "activated", 3), JobReport(100, status), jfs, records)
    assert by_file(result) == {1: ("ready", 2, 0), 2: ("failed", 3, 0), 4: ("cancelled", 0, 0), 5: ("cancelled", 0, 0)}
    assert result.deltas()[0] == DatasetDelta(IN, n_files_used=-1, n_files_failed=1)


def test_event_ranges_count_their_events():
    records = files()
    records[1] = records[1]._replace(start_event=100, end_event=149)
    result = propagate(RUNNING, JobReport(100, "finished", 2, OUTPUTS), job_files(), records)
    assert result.deltas()[0] == DatasetDelta(IN, n_files_finished=2, n_events_used=50 + 50)


# ----------------------------------------------------------------------- refused reports: no change

@pytest.mark.parametrize("job,report,reason", [
    (None, JobReport(404, "finished"), "unknown job 404"),
    (JobRecord(100, "finished", 2), JobReport(100, "finished", 2), "duplicate report"),
    (JobRecord(100, "finished", 2), JobReport(100, "failed", 2), "already finished"),
    (JobRecord(100, "closed", 2), JobReport(100, "finished"), "already closed"),
    (RUNNING, JobReport(100, "finished", 1), "attempt mismatch"),  # a late report of the previous attempt
    (JobRecord(100, "activated", 2), JobReport(100, "finished", 2), "out of order"),  # never dispatched
    (RUNNING, JobReport(100, "running", 2), "not a final job status"),
])
def test_refused_reports_change_nothing(job, report, reason):
    result = propagate(job, report, job_files(), files())
    assert not result.accepted and reason in result.reason
    assert result.file_updates == () and result.deltas() == () and result.job_status is None
    assert result.duplicate == (reason == "duplicate report")


def test_duplicate_report_after_applying_changes_nothing():
    """Apply a report as the store would (guarded updates), then deliver it again: nothing moves twice."""
    rows = files()
    job = RUNNING
    counters = DatasetDelta(IN)
    for _ in range(2):
        result = propagate(job, JobReport(100, "failed", 2), job_files(), rows)
        if not result.accepted:
            assert result.duplicate
            break
        applied = []
        for update in result.file_updates:
            row = rows[update.file_id]
            if row.attempt_nr == update.expected_attempt_nr and row.status in update.expected_statuses:
                rows[update.file_id] = row._replace(status=update.status, attempt_nr=update.attempt_nr,
                                               failed_attempt=update.failed_attempt)
                applied.append(update.file_id)
        counters = counters + result.deltas(applied)[0]
        job = job._replace(status=result.job_status)
    assert counters == DatasetDelta(IN, n_files_used=-2)
    assert rows[1].attempt_nr == 2 and rows[1].status == "ready"


def test_stale_and_untracked_files_are_skipped():
    records = files()
    records[1] = records[1]._replace(attempt_nr=2, status="ready")  # already retried by `retry`
    records[2] = records[2]._replace(keep_track=False)
    result = propagate(RUNNING, JobReport(100, "failed", 2), job_files(), records)
    assert set(by_file(result)) == {4, 5}
    assert [file_id for file_id, _ in result.skipped_files] == [1, 2]
    assert "attempt 2" in result.skipped_files[0][1]


def test_only_applied_updates_count():
    result = propagate(RUNNING, JobReport(100, "failed", 2), job_files(), files())
    assert result.deltas(applied=[1, 4]) == (DatasetDelta(IN, n_files_used=-1), DatasetDelta(OUT, n_files_failed=1))


# ---------------------------------------------------------------------------- outputs in detail

def test_a_finished_job_missing_an_output_counts_as_failed():
    result = propagate(RUNNING, JobReport(100, "finished", 2, OUTPUTS[:1]), job_files(), files())
    assert result.accepted and result.job_status == "failed"
    assert "log.000007.tgz was not reported" in result.reason
    assert by_file(result)[1] == ("ready", 2, 1)


def test_no_output_is_neither_finished_nor_failed():
    outputs = (OUTPUTS[0]._replace(no_output=True, size=None), OUTPUTS[1])
    result = propagate(RUNNING, JobReport(100, "finished", 2, outputs), job_files(), files())
    assert by_file(result)[4][0] == "nooutput"
    assert [d.dataset_id for d in result.deltas()] == [IN, LOG]


def test_unmerged_outputs_wait_for_their_merge_job():
    records = files()
    records[4] = FileRecord(4, OUT, "trn_output", "defined", attempt_nr=0)
    result = propagate(RUNNING, JobReport(100, "finished", 2, OUTPUTS), job_files(), records)
    update = next(u for u in result.file_updates if u.file_id == 4)
    assert update.status == "merging"
    assert update.values["boundary_id"] == 100 and update.values["max_attempt"] == 3
    assert DatasetDelta(OUT, n_files_to_be_used=1, n_files=1) in result.deltas()  # released to merge jobs: a file of its dataset now


def test_a_failed_merge_job_sends_its_unmerged_inputs_back_to_wait():
    jfs = [JobFileRecord(7, 30, "panda.um.out.000001.root", "input", 0)]
    records = {7: FileRecord(7, 30, "trn_output", "running", attempt_nr=0, max_attempt=3)}
    result = propagate(JobRecord(200, "running", 1), JobReport(200, "failed", 1), jfs, records)
    (update,) = result.file_updates
    assert (update.status, update.attempt_nr) == ("merging", 1)
    assert result.deltas() == (DatasetDelta(30, n_files_used=-1),)


def test_a_merge_input_that_cannot_be_retried_is_not_merged():
    jfs = [JobFileRecord(7, 30, "panda.um.out.000001.root", "input", 2)]
    records = {7: FileRecord(7, 30, "trn_output", "running", attempt_nr=2, max_attempt=3)}
    result = propagate(JobRecord(200, "running", 3), JobReport(200, "failed"), jfs, records)
    assert by_file(result) == {7: ("notmerged", 3, 1)}
