"""Job states: which transitions exist, which event causes which, and what a kill code means.

Follows panda-server.md §2.1-2.3 (states and triggers, the heartbeat guards of `updateJobStatus`) and
§2.8 (kill codes); seed 000 "Job rebrokerage" (killed by the system -> closed, by a person ->
cancelled). jedictl keeps one `jobs` table, so PanDA's table moves are plain status changes, and there
is no separate adder daemon: an executor's final report may move a job straight to finished/failed,
or through holding/transferring when it reports those first.

    defined ──> assigned ──> activated ──dispatch──> sent ──> starting ──> running ──> holding ──> finished
       └──────────────────────┘   ↕ throttled (pause/resume)   └────────────┴──> transferring ──> failed
                                                                                 merging ──────────┘
    any non-final ──kill──> cancelled (a person) | closed (the system: timeouts, rebrokerage)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jedictl.model import JOB_FINAL, JobStatus

S = JobStatus
_KILLED = {S.CANCELLED, S.CLOSED}

#: Every allowed (old -> new) status change. Final statuses have no way out.
ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    S.DEFINED: frozenset({S.ASSIGNED, S.ACTIVATED, S.FAILED, *_KILLED}),
    S.ASSIGNED: frozenset({S.ACTIVATED, S.FAILED, *_KILLED}),
    S.ACTIVATED: frozenset({S.SENT, S.THROTTLED, *_KILLED}),
    S.THROTTLED: frozenset({S.ACTIVATED, *_KILLED}),
    S.SENT: frozenset({S.STARTING, S.RUNNING, S.HOLDING, S.TRANSFERRING, S.FINISHED, S.FAILED, *_KILLED}),
    S.STARTING: frozenset({S.RUNNING, S.HOLDING, S.TRANSFERRING, S.MERGING, S.FINISHED, S.FAILED, *_KILLED}),
    S.RUNNING: frozenset({S.HOLDING, S.TRANSFERRING, S.MERGING, S.FINISHED, S.FAILED, *_KILLED}),
    S.HOLDING: frozenset({S.TRANSFERRING, S.MERGING, S.FINISHED, S.FAILED, *_KILLED}),
    S.TRANSFERRING: frozenset({S.FINISHED, S.FAILED, *_KILLED}),
    S.MERGING: frozenset({S.FINISHED, S.FAILED, *_KILLED}),
    S.FINISHED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
    S.CLOSED: frozenset(),
}

#: Statuses in which a job occupies (or is about to occupy) an executor.
EXECUTING = frozenset({S.SENT, S.STARTING, S.RUNNING})
#: What an executor may say in a heartbeat, and what it may say at the end.
HEARTBEAT_STATUSES = frozenset({S.STARTING, S.RUNNING, S.HOLDING, S.TRANSFERRING, S.MERGING})
REPORT_STATUSES = frozenset({S.FINISHED, S.FAILED})


class JobEvent(StrEnum):
    ASSIGN = "assign"  # inputs must be transferred first (PanDA Setupper)
    ACTIVATE = "activate"  # inputs available: executors may take it
    DISPATCH = "dispatch"  # `jobs dispatch` handed it out
    HEARTBEAT = "heartbeat"  # executor: starting / running / holding / transferring / merging
    REPORT = "report"  # executor: finished / failed
    KILL = "kill"  # by a person -> cancelled, by the system -> closed
    PAUSE = "pause"  # task paused: activated -> throttled
    RESUME = "resume"  # task resumed: throttled -> activated
    TIMEOUT = "timeout"  # job_timeouts: closed, its files retried elsewhere


@dataclass(frozen=True)
class Transition:
    """The outcome of an event: `new` is None when nothing changes (`reason` says why)."""

    old: JobStatus
    new: JobStatus | None
    reason: str = ""

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.old


#: ALLOWED as (old, new) pairs: StrEnum members hash and compare as their strings, so a pair of plain
#: strings is found without converting either (can_transition runs for every report).
_ALLOWED_PAIRS = frozenset((old, new) for old, targets in ALLOWED.items() for new in targets)


def can_transition(old: JobStatus | str, new: JobStatus | str) -> bool:
    return (old, new) in _ALLOWED_PAIRS or JobStatus(new) in ALLOWED[JobStatus(old)]


def is_final(status: JobStatus | str) -> bool:
    return JobStatus(status) in JOB_FINAL


def next_status(current: JobStatus | str, event: JobEvent | str, reported: JobStatus | str | None = None,
                *, by_person: bool = False) -> Transition:
    """Where `event` takes a job in `current`; invalid or stale events change nothing."""
    old = JobStatus(current)
    event = JobEvent(event)
    target = JobStatus(reported) if reported is not None else None
    if old in JOB_FINAL:
        if target == old:
            return Transition(old, None, "duplicate: the job is already " + old.value)
        return Transition(old, None, f"already done: the job is {old.value}")
    if event == JobEvent.HEARTBEAT:
        return _heartbeat(old, target)
    if event == JobEvent.REPORT:
        if target not in REPORT_STATUSES:
            return Transition(old, None, f"a final report says finished or failed, not {target}")
        return _move(old, target)
    if event == JobEvent.KILL:
        return _move(old, S.CANCELLED if by_person else S.CLOSED)
    fixed = {
        JobEvent.ASSIGN: S.ASSIGNED, JobEvent.ACTIVATE: S.ACTIVATED, JobEvent.DISPATCH: S.SENT,
        JobEvent.PAUSE: S.THROTTLED, JobEvent.RESUME: S.ACTIVATED, JobEvent.TIMEOUT: S.CLOSED,
    }
    return _move(old, fixed[event])


def _move(old: JobStatus, new: JobStatus) -> Transition:
    if new == old:
        return Transition(old, None, f"already {old.value}")
    if new not in ALLOWED[old]:
        return Transition(old, None, f"{old.value} -> {new.value} is not a valid job transition")
    return Transition(old, new)


def _heartbeat(old: JobStatus, reported: JobStatus | None) -> Transition:
    """The guards of PanDA's heartbeat handler, which keep late heartbeats from undoing progress."""
    if reported not in HEARTBEAT_STATUSES:
        return Transition(old, None, f"a heartbeat says {sorted(s.value for s in HEARTBEAT_STATUSES)}, not {reported}")
    if old == S.MERGING:
        return Transition(old, None, "merging jobs are not changed by heartbeats")
    if old in (S.HOLDING, S.TRANSFERRING) and reported in (S.STARTING, S.RUNNING, S.HOLDING, S.TRANSFERRING):
        # holding/transferring never go back to running/starting, and neither overwrites the other
        return Transition(old, None, f"{old.value} is not changed by a {reported.value} heartbeat")
    if old == S.RUNNING and reported == S.STARTING:
        return Transition(old, None, "starting while running counts as running")
    if old not in EXECUTING | {S.HOLDING}:
        return Transition(old, None, f"a {old.value} job has not been dispatched")
    return _move(old, reported)


# ----------------------------------------------------------------------------------- kill codes

@dataclass(frozen=True)
class KillPlan:
    """What `jobs kill` (or an agent) does to one job."""

    new: JobStatus | None  # None: the status stays (running jobs wait for the executor, code 7)
    sub_status: str | None
    command_to_pilot: str | None  # "tobekilled" for a running job the executor must stop
    reason: str


#: code -> (status, sub-status, reason) (panda-server §2.8); any other code: cancelled, killed by a person.
KILL_CODES: dict[int, tuple[JobStatus, str | None, str]] = {
    2: (S.CLOSED, "toreassign", "expired"),
    3: (S.CANCELLED, None, "aborted"),
    4: (S.CLOSED, "toreassign", "expired while waiting"),
    8: (S.CANCELLED, None, "reassigned by rebrokerage"),
    9: (S.CANCELLED, None, "force-killed"),
    10: (S.CLOSED, None, "fast rebrokerage of an overloaded queue"),
    50: (S.CANCELLED, None, "killed by JEDI"),
    51: (S.CLOSED, "toreassign", "reassigned by JEDI"),
    52: (S.CANCELLED, None, "force-killed by JEDI"),
    55: (S.CLOSED, "taskdone", "task almost done"),
    60: (S.CLOSED, None, "the executor found no work"),
    91: (S.CANCELLED, None, "killed by production role"),
    99: (S.CANCELLED, None, "killed by production role"),
}
#: Codes that archive a running job at once instead of asking the executor to stop.
FORCE_KILL_CODES = frozenset({9, 52, 99})


def plan_kill(status: JobStatus | str, code: int | None = None, killed_by: str = "a person") -> KillPlan | None:
    """The effect of a kill with `code` on a job in `status`; None when the job is already final
    (code 7 on a failed job only records that its work was retried elsewhere)."""
    current = JobStatus(status)
    if code == 7 and current == S.FAILED:
        return KillPlan(None, "retried", None, "retried at another site")
    if current in JOB_FINAL:
        return None
    new, sub_status, reason = KILL_CODES.get(code if code is not None else -1, (S.CANCELLED, None, f"killed by {killed_by}"))
    if current in EXECUTING - {S.SENT} and code not in FORCE_KILL_CODES:
        # A job on a worker is stopped by its executor; its final report then becomes `new`.
        return KillPlan(None, sub_status, "tobekilled", reason)
    return KillPlan(new, sub_status, None, reason)


def status_after_kill_command(reported: JobStatus | str, command_to_pilot: str | None) -> JobStatus:
    """A job told to stop ends with a failed report; as PanDA's adder does, that becomes cancelled."""
    if command_to_pilot == "tobekilled" and JobStatus(reported) == S.FAILED:
        return S.CANCELLED
    return JobStatus(reported)
