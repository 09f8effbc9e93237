"""Propagation of a job's outcome to its file records and dataset counters, guarded by attempt numbers.

Follows panda-server.md §2.6 (`propagateResultToJEDI`: new file statuses, attempt fields, counter
deltas, idempotency) and §7 gotchas 3-5, jedi-inventory.md §10.1. Attempts live on files: every job
end adds one to the inputs' attemptNr, a genuine failure also to failedAttempt; cancelled and closed
jobs use an attempt but not a failure. A file whose attempts or failures are used up becomes `failed`
(JEDI leaves it `ready` but ineligible; an explicit status is clearer and is what `retry` looks for).

The decision is pure. The caller applies each `FileUpdate` with a guarded UPDATE
(`WHERE id = :file_id AND attempt_nr = :expected_attempt_nr AND status IN (:expected_statuses)`) and
adds a file's `delta` to the dataset counters only when that UPDATE changed exactly one row, all in
the job's transaction; `Propagation.deltas(applied)` sums them per dataset in lock order. A report
that is a duplicate, out of order or for an unknown job is refused and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from jedictl.engine.jobs.states import can_transition
from jedictl.model import JOB_FINAL, LIB_JOB_FILE_TYPE, FileStatus, JobStatus
from jedictl.model.files import COUNTERS, DatasetDelta, FileRecord, FileUpdate, JobFileRecord  # noqa: F401 (COUNTERS: re-exported)

INPUT_JOB_FILE_TYPES = frozenset({"input", "pseudo_input", "pp_input"})  # pp_input: a preprocess job's pseudo record
OUTPUT_JOB_FILE_TYPES = frozenset({"output", "log"})
#: files.type of pre-merge (unmerged) files: outputs of pre-merge jobs, inputs of merge jobs.
UNMERGED_FILE_TYPES = frozenset({"trn_output", "trn_log"})


class JobRecord(NamedTuple):
    """The `jobs` row as the report finds it."""

    id: int
    status: str
    attempt_nr: int


class OutputReport(NamedTuple):
    """One output file as the executor reports it."""

    lfn: str
    size: int | None = None
    checksum: str | None = None
    guid: str | None = None
    n_events: int | None = None
    no_output: bool = False  # an optional output the payload did not produce


class JobReport(NamedTuple):
    job_id: int
    status: str  # finished | failed | cancelled | closed
    attempt_nr: int | None = None  # the attempt the executor ran; None: not checked
    outputs: tuple[OutputReport, ...] = ()


class Propagation(NamedTuple):
    accepted: bool
    reason: str = ""  # why nothing changes, or what was changed about the outcome
    duplicate: bool = False  # the same report again: nothing to do, nothing wrong
    job_status: str | None = None  # the job's new status (guarded by its old status and attempt)
    file_updates: tuple[FileUpdate, ...] = ()
    skipped_files: tuple[tuple[int, str], ...] = ()  # (file id, why the file is left alone)

    def deltas(self, applied: Iterable[int] | None = None) -> tuple[DatasetDelta, ...]:
        """Counter deltas of the updates that were applied (all when `applied` is None), one per
        dataset, in dataset-id order (the order rows are locked in, so two jobs never deadlock)."""
        chosen = set(applied) if applied is not None else None
        totals: dict[int, DatasetDelta] = {}
        for update in self.file_updates:
            if update.delta is None or (chosen is not None and update.file_id not in chosen):
                continue
            current = totals.get(update.delta.dataset_id, DatasetDelta(update.delta.dataset_id))
            totals[update.delta.dataset_id] = current + update.delta
        return tuple(totals[key] for key in sorted(totals) if not totals[key].is_zero())


#: Statuses as the plain strings rows hold: an enum member's `.value` is a Python-level property, and
#: these are read for every file of every report.
_FINISHED, _FAILED = JobStatus.FINISHED.value, JobStatus.FAILED.value
_JOB_STATUSES = {status.value: status for status in JobStatus}
_F_FINISHED, _F_FAILED, _F_READY, _F_CANCELLED = (FileStatus.FINISHED.value, FileStatus.FAILED.value, FileStatus.READY.value,
                                                 FileStatus.CANCELLED.value)
_F_MERGING, _F_NOTMERGED, _F_NOOUTPUT = FileStatus.MERGING.value, FileStatus.NOTMERGED.value, FileStatus.NOOUTPUT.value
_PRODUCED_TYPES = OUTPUT_JOB_FILE_TYPES | UNMERGED_FILE_TYPES
_LIB_REFERENCE = LIB_JOB_FILE_TYPE


def propagate(job: JobRecord | None, report: JobReport, job_files: Sequence[JobFileRecord],
              files: Mapping[int, FileRecord], *, merge_input_extra_attempts: int = 3,
              registered: frozenset[str] = frozenset()) -> Propagation:
    """What a final report does to the job, its input and output file records and the counters.

    `merge_input_extra_attempts`: the attempts an unmerged output gets as a merge input
    (panda-server §2.6: maxAttempt = attemptNr + 3). `registered`: the job's output LFNs another job
    already registered in their datasets -- the job fails rather than overwrite or drop one."""
    if job is None:
        return Propagation(False, f"unknown job {report.job_id}")
    status = report.status
    if status not in _JOB_STATUSES:
        JobStatus(status)  # raises, as it always did, on a status that is none
    if status not in JOB_FINAL:
        return Propagation(False, f"{status} is not a final job status")
    if report.attempt_nr is not None and report.attempt_nr != job.attempt_nr:
        return Propagation(False, f"attempt mismatch: the report is for attempt {report.attempt_nr}, "
                                  f"job {job.id} is at attempt {job.attempt_nr}")
    if job.status in JOB_FINAL:
        if job.status == status:
            return Propagation(False, f"duplicate report: job {job.id} is already {job.status}", duplicate=True)
        return Propagation(False, f"job {job.id} is already {job.status}")
    if not can_transition(job.status, status):
        return Propagation(False, f"out of order: job {job.id} is {job.status}, it cannot become {status}")
    reported = {output.lfn: output for output in report.outputs} if report.outputs else {}
    reason = ""
    if status == _FINISHED:
        missing = [jf.lfn for jf in job_files if jf.type in _PRODUCED_TYPES and jf.lfn not in reported]
        if missing:
            # PanDA's adder fails a job whose output cannot be registered; so does jedictl.
            status = _FAILED
            reason = f"output {missing[0]} was not reported: the job counts as failed"
        clash = sorted(lfn for lfn in registered if lfn in reported and not reported[lfn].no_output) if registered else ()
        if clash and not missing:
            status = _FAILED
            reason = f"output {clash[0]} is already registered by another job: the job counts as failed"
    updates: list[FileUpdate] = []
    skipped: list[tuple[int, str]] = []
    for job_file in job_files:
        file_id = job_file.file_id
        if file_id is None or job_file.type == _LIB_REFERENCE:
            continue  # a run job's lib file is its build job's output: the run job changes nothing of it
        record = files.get(file_id)
        is_input = job_file.type in INPUT_JOB_FILE_TYPES
        # Tracked, at the attempt the job used and live (else `_skip_reason` says why it is left alone).
        if (record is None or not record.keep_track or record.attempt_nr != job_file.attempt_nr
                or record.status not in (_INPUT_LIVE if is_input else _OUTPUT_LIVE)):
            skipped.append((file_id, _skip_reason(job_file, record)))
            continue
        if is_input:
            updates.append(_input_update(record, status))
        else:
            updates.append(_output_update(record, status, job, reported.get(job_file.lfn), merge_input_extra_attempts))
    return Propagation(True, reason, job_status=str(status), file_updates=tuple(updates), skipped_files=tuple(skipped))


def _skip_reason(job_file: JobFileRecord, record: FileRecord | None) -> str:
    if record is None:
        return "no file record"
    if not record.keep_track:
        return "not tracked (a many-time secondary: read by many jobs, consumed by none)"
    if record.attempt_nr != job_file.attempt_nr:
        return f"file is at attempt {record.attempt_nr}, the job used attempt {job_file.attempt_nr}"
    expected = _INPUT_LIVE if job_file.type in INPUT_JOB_FILE_TYPES else _OUTPUT_LIVE
    if record.status not in expected:
        return f"file is {record.status}, not in a live job"
    return ""


_INPUT_LIVE = (FileStatus.RUNNING.value, FileStatus.PICKED.value)
_OUTPUT_LIVE = (FileStatus.DEFINED.value, FileStatus.RUNNING.value)


def _input_update(record: FileRecord, status: str) -> FileUpdate:
    attempt_nr = record.attempt_nr + 1
    if status == _FINISHED:
        return FileUpdate(record.id, record.attempt_nr, _INPUT_LIVE, _F_FINISHED, attempt_nr, record.failed_attempt,
                          delta=DatasetDelta(record.dataset_id, n_files_finished=1, n_events_used=input_events(record)))
    failed_attempt = record.failed_attempt + (1 if status == _FAILED else 0)
    if is_retryable(attempt_nr, record.max_attempt, failed_attempt, record.max_failure):
        # Back in the pool: giving back the "used" count is what makes the generator make a new job.
        # An unmerged input waits for the next merge job at its site (still tagged with its producer).
        again = _F_MERGING if record.type in UNMERGED_FILE_TYPES else _F_READY
        return FileUpdate(record.id, record.attempt_nr, _INPUT_LIVE, again, attempt_nr, failed_attempt,
                          delta=DatasetDelta(record.dataset_id, n_files_used=-1))
    final = _F_NOTMERGED if record.type in UNMERGED_FILE_TYPES else _F_FAILED
    return FileUpdate(record.id, record.attempt_nr, _INPUT_LIVE, final, attempt_nr, failed_attempt,
                      delta=DatasetDelta(record.dataset_id, n_files_failed=1))


def _output_update(record: FileRecord, status: str, job: JobRecord, output: OutputReport | None,
                   merge_attempts: int) -> FileUpdate:
    if status != _FINISHED or output is None:
        new = _F_FAILED if status == _FAILED else _F_CANCELLED
        if record.type in UNMERGED_FILE_TYPES:
            # Never released to merge jobs, so not a failed merge input: counting it would make the
            # merge master look complete while released files still wait in `merging`.
            return FileUpdate(record.id, record.attempt_nr, _OUTPUT_LIVE, new, record.attempt_nr, record.failed_attempt)
        return FileUpdate(record.id, record.attempt_nr, _OUTPUT_LIVE, new, record.attempt_nr, record.failed_attempt,
                          delta=DatasetDelta(record.dataset_id, n_files_failed=1))
    if output.no_output:
        return FileUpdate(record.id, record.attempt_nr, _OUTPUT_LIVE, _F_NOOUTPUT, record.attempt_nr, record.failed_attempt)
    values: dict[str, Any] = {}
    if output.size is not None:
        values["size"] = output.size
    if output.checksum is not None:
        values["checksum"] = output.checksum
    if output.guid is not None:
        values["guid"] = output.guid
    if output.n_events is not None:
        values["n_events"] = output.n_events
    if record.type in UNMERGED_FILE_TYPES:
        # Waits for a merge job at the site: tagged with its producer, with merge attempts of its own,
        # and released to merge jobs by raising its dataset's watermark (what the generator looks for).
        values.update(boundary_id=job.id, max_attempt=record.attempt_nr + merge_attempts)
        # It becomes a file of its dataset only now (JEDI: the server sets the transient dataset's
        # nFiles and nFilesToBeUsed when the pre-merge job's files are marked for merging).
        return FileUpdate(record.id, record.attempt_nr, _OUTPUT_LIVE, _F_MERGING, record.attempt_nr, record.failed_attempt, values,
                          DatasetDelta(record.dataset_id, n_files_to_be_used=1, n_files=1))
    values["keep_track"] = False
    # An output dataset holds the files that were registered: nFiles is nFilesFinished all along, as
    # JEDI sets it when the task ends (so a task's counters equal its rows at every moment).
    return FileUpdate(record.id, record.attempt_nr, _OUTPUT_LIVE, _F_FINISHED, record.attempt_nr, record.failed_attempt, values,
                      DatasetDelta(record.dataset_id, n_files_finished=1, n_events=output.n_events or 0, n_files=1))


#: Error a finished report gets when an output it must have produced is missing (PanDA's adder, EC_Adder).
ADDER_ERROR = ("ddm", 200)
#: Metrics of a report that the job row keeps as they were reported.
REPORTED_METRICS = ("trans_exit_code", "wall_time", "cpu_time", "max_pss", "max_rss", "n_events", "started_at", "ended_at")
_OUTPUT_FIELDS = ("size", "checksum", "guid", "n_events")


def report_conflict(recorded: Mapping[str, Any], status: str, report: Any) -> str | None:
    """A final report of a job that is already final: None when it is the report that ended the job
    (sent again: a duplicate, nothing to do), else what differs -- a conflict, never silently dropped.

    `recorded`: the job's outcome columns and its output files as recorded (`store.job_outcomes.recorded_ends`);
    `status`: what the report would make of the job (failed becomes cancelled for a job told to stop). A
    value is compared only where both the report and the record have one."""
    recorded_status = recorded.get("status")
    adder = (recorded.get("error_source"), recorded.get("error_code")) == ADDER_ERROR
    if status != recorded_status and not (adder and recorded_status == JobStatus.FAILED and status == JobStatus.FINISHED):
        return f"conflict: job {report.job_id} is already {recorded_status}; this report says {report.status}"
    differences = []
    checked = list(REPORTED_METRICS)
    if recorded_status != JobStatus.FINISHED and not adder:
        checked = ["error_source", "error_code", "error_diag", *checked]
    for name in checked:
        mine, theirs = getattr(report, name), recorded.get(name)
        if mine is not None and theirs is not None and mine != theirs:
            differences.append(f"{name} {_shown(theirs)}, not {_shown(mine)}")
    outputs = recorded.get("outputs") or {}
    if report.outputs and recorded.get("output_bytes") is not None:
        total = sum(output.size or 0 for output in report.outputs)
        if total != recorded["output_bytes"]:
            differences.append(f"output bytes {recorded['output_bytes']}, not {total}")
    for output in report.outputs:
        kept = outputs.get(output.lfn) or {}
        for name in _OUTPUT_FIELDS:
            mine, theirs = getattr(output, name), kept.get(name)
            if recorded_status == JobStatus.FINISHED and mine is not None and theirs is not None and mine != theirs:
                differences.append(f"{output.lfn} {name} {_shown(theirs)}, not {_shown(mine)}")
    if differences:
        return (f"conflict: job {report.job_id} is already {recorded_status} by another report ("
                + "; ".join(differences[:3]) + (f"; {len(differences) - 3} more" if len(differences) > 3 else "") + ")")
    return None


def _shown(value: Any) -> str:
    if hasattr(value, "isoformat"):
        return value.isoformat(timespec="seconds") + "Z"
    text = repr(value) if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def is_retryable(attempt_nr: int, max_attempt: int | None, failed_attempt: int, max_failure: int | None) -> bool:
    """A file may be tried again while attempts and (if bounded) genuine failures remain."""
    return (max_attempt is None or attempt_nr < max_attempt) and (max_failure is None or failed_attempt < max_failure)


def input_events(record: FileRecord) -> int:
    """Events a finished input contributed: its event range, else its event count."""
    if record.start_event is not None and record.end_event is not None:
        return record.end_event - record.start_event + 1
    return record.n_events or 0
