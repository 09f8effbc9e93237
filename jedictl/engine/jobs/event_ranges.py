"""Event service, the policy (seed 000 "Event-level splitting", "Transition of event status", "Final status
of Event Service jobs"; docs/event-service.md): how a record's events become ranges, what an executor's
report does to a range, and how an event-service job and its ES merge job end. Pure: plain values in,
plain values out; the store applies them (store.events) and the report path calls them
(engine.jobs.event_outcomes).

An event-service job takes one input record. Its ranges are handed to the executor with the job
(`jobs dispatch`), reported one by one (`jobs events report`), and when the job ends its ranges are
settled: finished -> done, failed or never processed -> ready again (a failed range with no attempt
left is already fatal). Then, by what the record's ranges are:

- some still ready and the record has attempts left: the job ends (closed, or failed if its executor
  said so) and the record goes back to the pool; the next job takes the ready ranges, the done ones wait;
- none ready, some done: the job goes `merging` and an ES merge job is made at its site; when that
  finishes, the record is `finished` (every range merged) or `partial` (some fatal), the ranges
  `merged`, the job `finished`;
- none ready, none done: every range failed for good: the job and the record fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from jedictl.model import EventStatus, FileStatus, JobStatus

#: Events per range when the task says nothing (nEventsPerWorker).
DEFAULT_EVENTS_PER_RANGE = 100
#: Attempts per range when the task says nothing (maxAttemptES).
DEFAULT_MAX_ATTEMPT = 3
#: Attempts of an ES merge job before its event-service job fails (es_merge_failed).
MERGE_MAX_ATTEMPT = 3
#: What an executor may report about a range.
REPORTED = frozenset({EventStatus.RUNNING.value, EventStatus.FINISHED.value, EventStatus.FAILED.value})


def record_span(n_events: int | None, start_event: int | None, end_event: int | None) -> tuple[int, int]:
    """The first and last event (inclusive) of a record: its own range when it has one, else its events
    from 0; a record whose events are unknown is one range of one event."""
    if start_event is not None and end_event is not None and end_event >= start_event:
        return start_event, end_event
    first = start_event or 0
    return first, first + max(n_events or 0, 1) - 1


def split_span(first: int, last: int, size: int) -> list[tuple[int, int]]:
    """[first, last] cut into ranges of `size` events (the last one shorter)."""
    size = max(size, 1)
    return [(start, min(start + size - 1, last)) for start in range(first, last + 1, size)]


def ranges_of(n_events: int | None, start_event: int | None, end_event: int | None, size: int) -> list[tuple[int, int]]:
    return split_span(*record_span(n_events, start_event, end_event), size)


_FAILED, _FATAL = EventStatus.FAILED.value, EventStatus.FATAL.value  # plain strings: read for every report


def after_report(reported: str, attempt_nr: int, max_attempt: int) -> tuple[str, int]:
    """A range's (status, attempt_nr) after its executor reports `reported` (running, finished, failed):
    a failure uses an attempt; with none left the range is fatal."""
    if reported == _FAILED:
        attempt_nr += 1
        return (_FATAL if attempt_nr >= max_attempt else _FAILED), attempt_nr
    return reported, attempt_nr


#: A range's status when its job ends, by its status then (finished work is kept, the rest is ready again).
AT_JOB_END = {
    EventStatus.FINISHED.value: EventStatus.DONE.value,
    EventStatus.FAILED.value: EventStatus.READY.value,
    EventStatus.SENT.value: EventStatus.READY.value,
    EventStatus.RUNNING.value: EventStatus.READY.value,
}


class EsEnd(NamedTuple):
    """How an event-service job ends, and what becomes of its record and ranges."""

    job_status: str
    sub_status: str
    record: str  # retry (back to the pool) | merge (an ES merge job is made) | failed
    give_up_ready: bool = False  # ready ranges become fatal: the record has no attempt left


def end_es_job(ending: str, counts: Mapping[str, int], record_retryable: bool) -> EsEnd:
    """The end of an event-service job whose executor (or a kill, a timeout) says `ending` (finished,
    failed, cancelled, closed), from its record's ranges counted *after* `AT_JOB_END` (done, ready,
    fatal, merged...), and whether the record has an attempt left (the attempt this job used counted).

    Seed 000: merging es_merge with successful ranges and nothing left to do; es_retry (here: the job
    closed, or failed when its executor failed, and the record retried) with ranges left; failed when
    every range failed for good."""
    done = counts.get(EventStatus.DONE.value, 0) + counts.get(EventStatus.MERGED.value, 0)
    ready = counts.get(EventStatus.READY.value, 0)
    killed = ending in (JobStatus.CANCELLED.value, JobStatus.CLOSED.value)
    if ready and record_retryable:
        status = ending if ending != JobStatus.FINISHED.value else JobStatus.CLOSED.value
        return EsEnd(status, "es_retry" if done else "es_inaction", "retry")
    if killed:
        # Killed with nothing more to try: the record fails, whatever was processed is not merged.
        return EsEnd(ending, "es_aborted", "failed", give_up_ready=bool(ready))
    if done:
        return EsEnd(JobStatus.MERGING.value, "es_merge", "merge", give_up_ready=bool(ready))
    return EsEnd(JobStatus.FAILED.value, "es_fatal", "failed", give_up_ready=bool(ready))


def merged_record_status(counts: Mapping[str, int]) -> str:
    """A record's status once its ES merge job finished: finished when every range was merged, partial
    when some failed for good (seed 000: "split at event-level and some event chunks finished")."""
    others = sum(n for status, n in counts.items() if status not in (EventStatus.DONE.value, EventStatus.MERGED.value))
    return FileStatus.PARTIAL.value if others else FileStatus.FINISHED.value


class MergeEnd(NamedTuple):
    """How an ES merge job's end settles its event-service job (`es_status` None: a new merge attempt)."""

    es_status: str | None
    es_sub_status: str | None
    record: str | None  # the record's status (None: it stays running for the next merge attempt)
    events_to: str  # the done ranges become this
    retry_merge: bool


def end_merge_job(ending: str, merge_attempt: int, counts: Mapping[str, int]) -> MergeEnd:
    """An ES merge job ended `ending`: finished -> its ES job finished, the record finished or partial,
    the ranges merged; otherwise another merge attempt while MERGE_MAX_ATTEMPT allows, else the ES job
    fails (es_merge_failed) and so does the record."""
    if ending == JobStatus.FINISHED.value:
        return MergeEnd(JobStatus.FINISHED.value, None, merged_record_status(counts), EventStatus.MERGED.value, False)
    if ending != JobStatus.CANCELLED.value and merge_attempt < MERGE_MAX_ATTEMPT:
        return MergeEnd(None, None, None, EventStatus.DONE.value, True)
    return MergeEnd(JobStatus.FAILED.value, "es_merge_failed", FileStatus.FAILED.value, EventStatus.DISCARDED.value, False)
