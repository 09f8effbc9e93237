"""A task's job summary for `task show`: jobs per status and one aggregate state, by the precedence Ganga
uses to derive a master job's status from its subjobs (seed 003 "Subjob status transitions"):

    1. any job waiting to run (submitted)        -> submitted
    2. else any job running or completing        -> running
    3. else any failed job                       -> failed
    4. else any finished job                     -> completed
    5. else (every job was killed)               -> killed

PanDA job statuses map onto Ganga's as below; a task without jobs is `new`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jedictl.model import JobStatus

#: Ganga's category of each PanDA job status.
CATEGORY = {
    JobStatus.DEFINED: "submitted",
    JobStatus.ASSIGNED: "submitted",
    JobStatus.ACTIVATED: "submitted",
    JobStatus.THROTTLED: "submitted",
    JobStatus.SENT: "running",
    JobStatus.STARTING: "running",
    JobStatus.RUNNING: "running",
    JobStatus.HOLDING: "running",
    JobStatus.TRANSFERRING: "running",
    JobStatus.MERGING: "running",
    JobStatus.FAILED: "failed",
    JobStatus.FINISHED: "completed",
    JobStatus.CANCELLED: "killed",
    JobStatus.CLOSED: "killed",
}
#: Aggregate states, strongest first.
PRECEDENCE = ("submitted", "running", "failed", "completed", "killed")


@dataclass(frozen=True)
class JobSummary:
    counts: Mapping[str, int]  # job status -> number of jobs, in JobStatus order, zeros left out
    total: int
    state: str  # new | submitted | running | failed | completed | killed

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state, "total": self.total, "by_status": dict(self.counts)}


def summarise(counts: Mapping[str, int]) -> JobSummary:
    """From `SELECT status, COUNT(*) FROM jobs WHERE task_id = ? GROUP BY status`."""
    known = [status.value for status in JobStatus]
    ordered = {status: counts[status] for status in known if counts.get(status)}
    # statuses jedictl does not know (a newer executor?) are kept, after the known ones
    ordered.update({status: n for status, n in sorted(counts.items()) if status not in ordered and n})
    return JobSummary(ordered, sum(ordered.values()), aggregate_state(ordered))


def summarise_statuses(statuses: Iterable[str]) -> JobSummary:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return summarise(counts)


def aggregate_state(counts: Mapping[str, int]) -> str:
    """The strongest category present; unknown statuses count as running (not yet final)."""
    present = {CATEGORY.get(status, "running") for status, n in counts.items() if n}
    return next((state for state in PRECEDENCE if state in present), "new")
