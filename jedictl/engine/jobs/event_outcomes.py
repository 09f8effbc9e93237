"""Event service on the report path (docs/event-service.md): executors' range reports in bulk
(`jobs events report`), and the end of event-service and ES merge jobs inside `jobs.outcomes`' batches.

Range reports: one transaction per batch of EVENT_BATCH lines -- the batch's ranges and jobs are read
(locked on PostgreSQL), each line is decided (engine.jobs.event_reports.decide, in line order, so two
lines for one range see each other), and one set-based UPDATE writes every changed range guarded by its
id, holder, status and attempt as read. A guard that fails means someone else changed a range: the
batch rolls back and is replayed one line per transaction.

Job ends: `end_es` and `end_merge` are called by `outcomes.end_jobs` for jobs of kind es/jumbo and
esmerge; their writes join the batch's (job rows, file updates, counters, outputs registered) and the
range changes and the ES merge job are written in the same transaction, so a report applies whole or
not at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.jobs import event_ranges as policy
from jedictl.engine.jobs.event_reports import Decision, EventReport, RangeState, decide
from jedictl.engine.jobs.results import (
    OUTPUT_JOB_FILE_TYPES,
    DatasetDelta,
    FileUpdate,
    JobRecord,
    JobReport,
    Propagation,
    _input_update,
    _output_update,
    is_retryable,
    propagate,
)
from jedictl.engine.jobs.states import status_after_kill_command
from jedictl.model import JOB_FINAL, EventStatus, FileStatus, JobStatus
from jedictl.store import events as event_store
from jedictl.engine.jobs.outcomes import Conflict

#: Range reports per transaction.
EVENT_BATCH = 5000
_INPUT_LIVE = (FileStatus.RUNNING.value, FileStatus.PICKED.value)
_OUTPUT_LIVE = (FileStatus.DEFINED.value, FileStatus.RUNNING.value)
_R_FINISHED = EventStatus.FINISHED.value


class EventResult(tuple):
    """(line, event_id, job_id, outcome, status, reason) of one report line."""

    def as_item(self) -> dict[str, Any]:
        line, event_id, job_id, outcome, status, reason = self
        return {"outcome": outcome, "line": line, "event_id": event_id, "job_id": job_id, "status": status, "reason": reason or None}


class _Changed(Exception):
    """A range changed while its batch was applied."""


def ingest_event_reports(store: Any, reports: Iterable[EventReport], now: datetime, batch_size: int = EVENT_BATCH) -> list[EventResult]:
    results: list[EventResult] = []
    for batch in _batches(reports, batch_size):
        try:
            with store.begin() as conn:
                results.extend(_apply(conn, batch, now))
        except _Changed:
            for report in batch:
                try:
                    with store.begin() as conn:
                        results.extend(_apply(conn, [report], now))
                except _Changed:
                    results.append(EventResult((report.line, report.event_id, report.job_id, "refused", None,
                                                "the range changed while its report was applied; send it again")))
    return results


def _batches(reports: Iterable[EventReport], size: int) -> Iterator[list[EventReport]]:
    batch: list[EventReport] = []
    for report in reports:
        batch.append(report)
        if len(batch) >= max(size, 1):
            yield batch
            batch = []
    if batch:
        yield batch


def _apply(conn: Any, batch: list[EventReport], now: datetime) -> list[EventResult]:
    read = event_store.lock_ranges(conn, [r.event_id for r in batch])
    jobs = event_store.job_states(conn, [r.job_id for r in batch])
    current = {event_id: RangeState(*values) for event_id, values in read.items()}
    changed: dict[int, tuple] = {}  # event id -> (new state, report)
    results = []
    for report in batch:
        decision: Decision = decide(report, current.get(report.event_id), jobs.get(report.job_id))
        if decision.state is not None:
            current[report.event_id] = decision.state
            changed[report.event_id] = (decision.state, report)
        state = current.get(report.event_id)
        results.append(EventResult((report.line, report.event_id, report.job_id, decision.outcome,
                                    state.status if state is not None and decision.outcome != "refused" else None, decision.reason)))
    rows = []
    for event_id, (state, report) in changed.items():
        job_id, status, attempt_nr, _ = read[event_id]
        finished = state.status == _R_FINISHED
        rows.append((state.status, state.attempt_nr, report.job_id if finished else None, report.output_lfn if finished else None,
                     report.output_size if finished else None, report.error_code, report.error_diag, now,
                     event_id, job_id, status, attempt_nr))
    if event_store.apply_reports(conn, rows) != len(rows):
        raise _Changed()
    return results


# ----------------------------------------------------------------------------- job ends

def end_es(conn: Any, ending: Any, job: Any, listed: list[Any], records: dict[int, Any], task: Any, batch: Any, now: datetime,
           error: Any, job_row: Any, collect_files: Any) -> tuple[str, str | None, str]:
    """The end of an event-service job (kind es): (outcome, new status, reason); the caller has checked
    that the job exists and is expected. `job_row(job, propagation, ending, error, now)` and
    `collect_files(propagation, job, listed, batch)` are outcomes' own writers."""
    status = _ending_status(ending, job)
    # A merging ES job has ended for its executor: its report again is a duplicate, another a conflict.
    merging = job.status == JobStatus.MERGING.value
    refusal = _refusal(ending, job, status, ended=job.status in JOB_FINAL or (merging and ending.report is not None),
                       same=status == job.status or (merging and status == JobStatus.FINISHED.value))
    if refusal is not None:
        return refusal
    inputs = [jf for jf in listed if jf.type == "input" and jf.file_id in records]
    record = records[inputs[0].file_id] if inputs else None
    task_final = task is None or task.status in _TASK_FINAL
    if record is None or task_final or record.status not in _INPUT_LIVE or record.attempt_nr != inputs[0].attempt_nr:
        # The task ended, or the record moved on: the job changes its own row only (as late jobs of a final task).
        batch.job_rows.append(job_row(job, Propagation(True, job_status=status), ending._replace(sub_status="es_late"), error, now))
        return "applied", status, "task is final or the record moved on: its ranges and files are left as they are"
    merging = job.status == JobStatus.MERGING.value
    if merging:
        # Killed while waiting for its merge: what it processed is discarded, its merge job closed.
        for merge_id, merge_status, merge_attempt in event_store.live_merge_jobs(conn, record.id):
            if merge_id in batch.ending_ids:
                continue  # ended by its own ending in this batch (a task killed whole)
            batch.job_rows.append(job_row(_Job(merge_id, merge_status, merge_attempt, job.started_at), Propagation(True, job_status=JobStatus.CLOSED.value),
                                          ending._replace(sub_status="es_aborted", report=None), error, now))
        event_store.move(conn, record.id, EventStatus.DONE.value, EventStatus.DISCARDED.value, now)
    else:
        event_store.settle(conn, job.id, now)
    counts = event_store.counts_of_record(conn, record.id)
    attempt = record.attempt_nr + 1
    failed_attempt = record.failed_attempt + (1 if status == JobStatus.FAILED.value else 0)
    decision = policy.end_es_job(status, counts, is_retryable(attempt, record.max_attempt, failed_attempt, record.max_failure))
    updates: list[FileUpdate] = []
    if decision.give_up_ready:
        event_store.move(conn, record.id, EventStatus.READY.value, EventStatus.FATAL.value, now)
    if decision.record == "retry":
        updates.append(_input_update(record, decision.job_status))
        updates += _outputs(listed, records, job, JobStatus.FAILED.value if decision.job_status == JobStatus.FAILED.value else JobStatus.CLOSED.value)
    elif decision.record == "failed":
        event_store.move(conn, record.id, EventStatus.DONE.value, EventStatus.DISCARDED.value, now)
        updates.append(FileUpdate(record.id, record.attempt_nr, _INPUT_LIVE, FileStatus.FAILED.value, attempt, failed_attempt,
                                  delta=DatasetDelta(record.dataset_id, n_files_failed=1)))
        updates += _outputs(listed, records, job, JobStatus.FAILED.value)
    else:  # merge: the record stays running for its ES merge job, the outputs wait for it
        event_store.make_merge_job(conn, job.id, 1, now,
                                   record={"id": record.id, "dataset_id": record.dataset_id, "lfn": inputs[0].lfn,
                                           "attempt_nr": record.attempt_nr})
    propagation = Propagation(True, job_status=decision.job_status, file_updates=tuple(updates))
    batch.es_ended.add(job.id)
    batch.job_rows.append(job_row(job, propagation, ending._replace(sub_status=decision.sub_status), error, now))
    collect_files(propagation, job, listed, batch)
    return "applied", decision.job_status, decision.sub_status



def _refusal(ending: Any, job: Any, status: str | None, *, ended: bool | None = None,
             same: bool | None = None) -> tuple[str, str | None, str] | None:
    """The outcome of a report that cannot end the job (a status it cannot end with, a job already
    ended, another attempt), or None when it can. `ended` (default: the job is final) and `same`
    (default: the report says the job's status) let an ES job count `merging` as its end."""
    if status is None:
        return "refused", None, f"job {job.id} is {job.status}: {ending.status} is not how it ends"
    if job.status in JOB_FINAL if ended is None else ended:
        if status == job.status if same is None else same:
            return "duplicate", job.status, f"duplicate report: job {job.id} is already {job.status}"
        return "conflict", job.status, f"conflict: job {job.id} is already {job.status}; this report says {status}"
    if ending.attempt_nr is not None and ending.attempt_nr != job.attempt_nr:
        return "refused", None, f"attempt mismatch: the report is for attempt {ending.attempt_nr}, job {job.id} is at attempt {job.attempt_nr}"
    return None

def end_merge(conn: Any, ending: Any, job: Any, listed: list[Any], records: dict[int, Any], task: Any, batch: Any, now: datetime,
              error: Any, job_row: Any, collect_files: Any, registered: frozenset[str], merge_attempts: int) -> tuple[str, str | None, str]:
    """The end of an ES merge job: its event-service job and record end with it (or another merge attempt)."""
    status = _ending_status(ending, job)
    refusal = _refusal(ending, job, status)
    if refusal is not None:
        return refusal
    inputs = [jf for jf in listed if jf.type == "input" and jf.file_id in records]
    record = records[inputs[0].file_id] if inputs else None
    es_job = event_store.es_job_of_record(conn, record.id) if record is not None else None
    outputs = [jf for jf in listed if jf.type in OUTPUT_JOB_FILE_TYPES]
    report = ending.report
    job_report = JobReport(job.id, status, ending.attempt_nr, report.outputs if report is not None else ())
    propagation = propagate(JobRecord(job.id, job.status, job.attempt_nr), job_report, outputs, records,
                            merge_input_extra_attempts=merge_attempts, registered=registered)
    if not propagation.accepted:
        return "refused", None, propagation.reason
    status = propagation.job_status  # a finished report missing an output counts as failed (the adder)
    if (es_job is None or es_job[1] != JobStatus.MERGING.value or es_job[0] in batch.es_ended or task is None
            or task.status in _TASK_FINAL or record.attempt_nr != inputs[0].attempt_nr):
        batch.job_rows.append(job_row(job, Propagation(True, job_status=status), ending, error, now))
        return "applied", status, "its event-service job is no longer merging: nothing else changes"
    counts = event_store.counts_of_record(conn, record.id)
    decision = policy.end_merge_job(status, job.attempt_nr, counts)
    updates: list[FileUpdate] = []
    if decision.retry_merge:
        event_store.make_merge_job(conn, es_job[0], job.attempt_nr + 1, now,
                                   record={"id": record.id, "dataset_id": record.dataset_id, "lfn": inputs[0].lfn,
                                           "attempt_nr": record.attempt_nr})
        batch.job_rows.append(job_row(job, Propagation(True, job_status=status), ending._replace(sub_status="es_merge_retry"), error, now))
        return "applied", status, f"another ES merge attempt ({job.attempt_nr + 1}) for job {es_job[0]}"
    if status == JobStatus.FINISHED.value:
        events = event_store.processed_events(conn, record.id)
        updates.append(FileUpdate(record.id, record.attempt_nr, _INPUT_LIVE, decision.record, record.attempt_nr + 1, record.failed_attempt,
                                  delta=DatasetDelta(record.dataset_id, n_files_finished=1, n_events_used=events)))
        updates += propagation.file_updates
    else:
        updates.append(FileUpdate(record.id, record.attempt_nr, _INPUT_LIVE, FileStatus.FAILED.value, record.attempt_nr + 1,
                                  record.failed_attempt + 1, delta=DatasetDelta(record.dataset_id, n_files_failed=1)))
        updates += propagation.file_updates
    event_store.move(conn, record.id, EventStatus.DONE.value, decision.events_to, now)
    if event_store.end_es_job(conn, es_job[0], decision.es_status, decision.es_sub_status, now) != 1:
        raise Conflict(f"event-service job {es_job[0]} changed while its merge job's report was applied")
    done = Propagation(True, job_status=status, file_updates=tuple(updates))
    batch.job_rows.append(job_row(job, done, ending._replace(sub_status=None if status == JobStatus.FINISHED.value else "es_merge_failed"),
                                  error, now))
    collect_files(done, job, listed, batch)
    return "applied", status, "" if status == JobStatus.FINISHED.value else propagation.reason


def end_jumbo(conn: Any, ending: Any, job: Any, batch: Any, now: datetime, error: Any, job_row: Any) -> tuple[str, str | None, str]:
    """The end of a jumbo job: its processed ranges are done and its others ready again, each back with the
    (co-jumbo) job holding its record, which is activated again; the jumbo job holds no file."""
    status = _ending_status(ending, job)
    refusal = _refusal(ending, job, status)
    if refusal is not None:
        return refusal
    returned = event_store.return_from_jumbo(conn, job.id, now)
    batch.job_rows.append(job_row(job, Propagation(True, job_status=status), ending, error, now))
    return "applied", status, f"{returned} event ranges back to their jobs"


class _Job(tuple):
    """The few job fields `outcomes._job_row` reads, for a job the batch did not lock itself."""

    def __new__(cls, id: int, status: str, attempt_nr: int, started_at: Any) -> _Job:
        return super().__new__(cls, (id, status, attempt_nr, started_at))

    id = property(lambda self: self[0])
    status = property(lambda self: self[1])
    attempt_nr = property(lambda self: self[2])
    started_at = property(lambda self: self[3])


def _outputs(listed: list[Any], records: dict[int, Any], job: Any, status: str) -> list[FileUpdate]:
    """The job's output records fail with it (as a normal job's do)."""
    found = []
    for jf in listed:
        record = records.get(jf.file_id)
        if jf.type in OUTPUT_JOB_FILE_TYPES and record is not None and record.status in _OUTPUT_LIVE and record.attempt_nr == jf.attempt_nr:
            found.append(_output_update(record, status, JobRecord(job.id, job.status, job.attempt_nr), None, 0))
    return found


def _ending_status(ending: Any, job: Any) -> str | None:
    status = str(ending.status)
    if ending.report is not None and job.command_to_pilot:
        status = status_after_kill_command(status, job.command_to_pilot).value
    if status not in (JobStatus.FINISHED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value, JobStatus.CLOSED.value):
        return None
    return status


from jedictl.model import TASK_FINAL as _TASK_FINAL  # noqa: E402
