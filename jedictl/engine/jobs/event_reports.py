"""What executors say about event ranges: one JSON object per line (docs/executor-protocol.md, "Event ranges").

`{"event_id": 17, "job_id": 4711, "status": "finished", "attempt_nr": 1, "output_lfn": "...", "output_size": 123}`
-- the range's id as `jobs dispatch` gave it, the job that holds it, and running | finished | failed
(error_code, error_diag for a failure). Parsing is pure and per line: a malformed line is refused with
its number and reason, and the other lines still count. A few of PanDA's names are accepted as aliases
(eventRangeID, eventStatus, errorCode, errorDiag, PandaID).

`decide` is the guard of one report against the range as the store holds it (pure as well): which
moves are allowed, what a repeat is, and what becomes of a failure (engine.jobs.event_ranges.after_report).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from jedictl.engine.input import fields
from jedictl.engine.jobs.event_ranges import REPORTED, after_report
from jedictl.engine.jobs.reports import MAX_DIAG, Refused, json_lines
from jedictl.model import EventStatus

KEYS = frozenset({"event_id", "job_id", "status", "attempt_nr", "error_code", "error_diag", "output_lfn", "output_size"})
_ALIASES = {"eventRangeID": "event_id", "eventStatus": "status", "errorCode": "error_code", "errorDiag": "error_diag",
            "PandaID": "job_id", "pandaid": "job_id", "attemptNr": "attempt_nr"}
#: Jobs whose executor may report ranges: handed out and not ended.
REPORTING_JOBS = frozenset({"sent", "starting", "running", "holding", "transferring"})


class EventReport(NamedTuple):
    line: int
    event_id: int
    job_id: int
    status: str  # running | finished | failed
    attempt_nr: int | None = None  # the job's attempt (checked)
    error_code: int | None = None
    error_diag: str | None = None
    output_lfn: str | None = None
    output_size: int | None = None


def parse_event_report(item: Any, line: int) -> EventReport:
    if not isinstance(item, dict):
        raise ValueError("must be a JSON object")
    values = item if KEYS.issuperset(item) else {_ALIASES.get(key, key): value for key, value in item.items()}
    if not KEYS.issuperset(values):
        raise ValueError(f"unknown key {sorted(set(values) - KEYS)[0]!r}")
    event_id, job_id, status = values.get("event_id"), values.get("job_id"), values.get("status")
    if event_id is None or job_id is None or status is None:
        raise ValueError(f"{'event_id' if event_id is None else 'job_id' if job_id is None else 'status'} is required")
    if status not in REPORTED:
        raise ValueError(f"status must be one of {', '.join(sorted(REPORTED))}, not {status!r}")
    if type(event_id) is not int or type(job_id) is not int or event_id < 1 or job_id < 1:
        _integer(event_id, "event_id", 1)
        _integer(job_id, "job_id", 1)
    if len(values) == 3:  # the common line: id, job, status
        return EventReport(line, event_id, job_id, status)
    diag = values.get("error_diag")
    if diag is not None and not isinstance(diag, str):
        raise ValueError("error_diag must be a string")
    lfn = values.get("output_lfn")
    if lfn is not None and (not isinstance(lfn, str) or not lfn or len(lfn) > 512):
        raise ValueError("output_lfn must be a file name of at most 512 characters")
    return EventReport(
        line, event_id, job_id, status, _integer(values.get("attempt_nr"), "attempt_nr", 0),
        _integer(values.get("error_code"), "error_code", -fields.INT32_MAX - 1, fields.INT32_MAX),
        fields.free_text(diag, "error_diag", MAX_DIAG, truncate=True) if diag is not None else None, lfn,
        _integer(values.get("output_size"), "output_size", 0))


def _integer(value: Any, name: str, minimum: int, maximum: int = 2**63 - 1) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be between {minimum} and {maximum}")
    return value


def stream_event_reports(lines: str | Iterable[str | bytes], refused: list[Refused]) -> Iterator[EventReport]:
    """The reports of `lines` one at a time; lines that cannot be read go to `refused`."""
    for number, item in json_lines(lines):
        if isinstance(item, Refused):
            refused.append(item)
            continue
        try:
            yield parse_event_report(item, number)
        except ValueError as exc:
            job_id = item.get("job_id") if isinstance(item, dict) and isinstance(item.get("job_id"), int) else None
            refused.append(Refused(number, job_id, str(exc)))


class RangeState(NamedTuple):
    """A range as the store holds it (and as the batch has changed it so far)."""

    job_id: int | None
    status: str
    attempt_nr: int
    max_attempt: int


class Decision(NamedTuple):
    outcome: str  # applied | duplicate | refused
    reason: str = ""
    state: RangeState | None = None  # the range's new state when applied


#: Moves a report may make, by the range's status now (plain strings: read for every report).
_ALLOWED = {
    EventStatus.SENT.value: REPORTED,
    EventStatus.RUNNING.value: REPORTED,
}
_SETTLED = {EventStatus.FINISHED.value: (EventStatus.FINISHED.value,),
            EventStatus.FAILED.value: (EventStatus.FAILED.value, EventStatus.FATAL.value)}
_RUNNING = EventStatus.RUNNING.value


def decide(report: EventReport, state: RangeState | None, job: tuple[str, str, int] | None) -> Decision:
    """The effect of one report on its range; `job` is the reporting job's (status, kind, attempt_nr)."""
    if state is None:
        return Decision("refused", f"unknown event range {report.event_id}")
    if state.job_id != report.job_id:
        return Decision("refused", f"event range {report.event_id} is held by job {state.job_id}, not {report.job_id}")
    if job is None:
        return Decision("refused", f"unknown job {report.job_id}")
    status, _, attempt = job
    if report.attempt_nr is not None and report.attempt_nr != attempt:
        return Decision("refused", f"attempt mismatch: job {report.job_id} is at attempt {attempt}")
    if status not in REPORTING_JOBS:
        return Decision("refused", f"job {report.job_id} is {status}: its ranges take no more reports")
    if state.status in _SETTLED.get(report.status, ()) or (state.status == report.status == _RUNNING):
        return Decision("duplicate", f"event range {report.event_id} is already {state.status}")
    if report.status not in _ALLOWED.get(state.status, ()):
        return Decision("refused", f"event range {report.event_id} is {state.status}: it cannot become {report.status}")
    new_status, attempt_nr = after_report(report.status, state.attempt_nr, state.max_attempt)
    return Decision("applied", "" if new_status == report.status else f"no attempt left: {new_status}",
                    RangeState(state.job_id, new_status, attempt_nr, state.max_attempt))
