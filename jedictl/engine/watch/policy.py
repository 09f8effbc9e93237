"""The watchdog's decisions (jedi-inventory.md §8; seed 000 "throttled", "Automatic priority boosting",
"exhausted"): each is a pure function of one task's figures and `now`, and returns a `WatchAction` for
the pass report (or None when there is nothing to do).

jedictl keeps explicit scheduling columns instead of JEDI's timestamp tricks: a lease
(`lease_owner`/`lease_expires_at`) instead of lockedBy/lockedTime, `wait_until` for "not before"
(pending re-check, throttling backoff), `frozen_at` for "pending since", `assessed_at` for the goal
check interval, `num_throttled` for the throttle step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import WatchdogSettings
from jedictl.engine.task.final_status import DatasetRecord, masters, parent_completed
from jedictl.engine.task.options import options_from_dict
from jedictl.model import TASK_FINAL, TASK_FOR_JOB_GENERATOR, DatasetStatus, TaskStatus

#: Pending tasks at or above these priorities are retried sooner (minutes), as the ATLAS watchdog does.
HIGH_PRIORITY_PENDING_WAITS: tuple[tuple[int, int], ...] = ((950, 10), (900, 30))
#: Tasks the rescue of picked files looks at.
_PICKING_STATUSES = frozenset({TaskStatus.READY, TaskStatus.SCOUTING, TaskStatus.RUNNING})


@dataclass(frozen=True)
class WatchedTask:
    """The `tasks` columns the watchdog reads, with the few options it obeys."""

    id: int
    status: str
    old_status: str | None = None
    task_priority: int = 0
    current_priority: int = 0
    gshare: str | None = None
    parent_id: int | None = None
    request_type: str | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    modified_at: datetime | None = None
    frozen_at: datetime | None = None
    wait_until: datetime | None = None
    assessed_at: datetime | None = None
    num_throttled: int | None = None
    goal: float | None = None  # options.goal, percent
    disable_auto_finish: bool = False
    no_auto_pause: bool = False
    no_throttle: bool = False

    @classmethod
    def from_row(cls, row: Any) -> WatchedTask:
        mapping = row._mapping if hasattr(row, "_mapping") else row
        options = options_from_dict(mapping.get("options") or {})
        names = [name for name in cls.__dataclass_fields__ if name in mapping]
        return cls(**{name: mapping[name] for name in names}, goal=options.goal,
                   disable_auto_finish=bool(options.disable_auto_finish), no_auto_pause=bool(options.no_auto_pause),
                   no_throttle=bool(options.no_throttle))

    def lease_alive(self, now: datetime) -> bool:
        return self.lease_owner is not None and self.lease_expires_at is not None and self.lease_expires_at > now


@dataclass(frozen=True)
class TaskProgress:
    """Master-input totals (datasets counters) and job counts of a task."""

    n_files: int = 0
    n_files_finished: int = 0
    n_files_failed: int = 0
    n_jobs: int = 0
    n_jobs_finished: int = 0
    n_jobs_failed: int = 0

    @classmethod
    def from_datasets(cls, datasets: Iterable[DatasetRecord], n_jobs: int = 0, n_jobs_finished: int = 0,
                      n_jobs_failed: int = 0) -> TaskProgress:
        live = [d for d in masters(datasets) if d.status != DatasetStatus.REMOVED]
        return cls(sum(d.n_files for d in live), sum(d.n_files_finished for d in live), sum(d.n_files_failed for d in live),
                   n_jobs, n_jobs_finished, n_jobs_failed)

    @property
    def remaining_jobs(self) -> int | None:
        """Jobs still to come, scaled from files per job so far (None before any job or file)."""
        if not self.n_files or not self.n_jobs:
            return None
        return int((self.n_files - self.n_files_finished - self.n_files_failed) * self.n_jobs / self.n_files)

    @property
    def job_failure_rate(self) -> float | None:
        ended = self.n_jobs_finished + self.n_jobs_failed
        return self.n_jobs_failed / ended if ended else None


@dataclass(frozen=True)
class WatchAction:
    """One thing the watchdog does to one task: a row of the pass report and the writes it implies."""

    kind: str
    task_id: int
    reason: str
    status: str | None = None  # new task status (None: unchanged)
    values: Mapping[str, Any] = field(default_factory=dict)  # other `tasks` columns to set
    command: str | None = None  # an operator command to queue on the task instead of writing a status
    qualifier: str | None = None
    dataset_deltas: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The pass-report row: what was done to which task, and why."""
        row: dict[str, Any] = {"action": self.kind, "task_id": self.task_id, "reason": self.reason}
        if self.status is not None:
            row["status"] = self.status
        if self.command is not None:
            row["command"] = f"{self.qualifier} {self.command}" if self.qualifier else self.command
        return row


def rescue_picked(task: WatchedTask, picked: Mapping[int, int], now: datetime, settings: WatchdogSettings) -> WatchAction | None:
    """Files left `picked` by a generator that died: back to `ready`, `n_files_used` down by as many.

    `picked` counts picked tracked files per dataset. The owner is dead when its lease expired; an
    unleased task still holding picked files is rescued once it has been idle `wait_for_picked_minutes`.
    """
    counts = {dataset: n for dataset, n in picked.items() if n > 0}
    if not counts or task.status not in _PICKING_STATUSES or task.lease_alive(now):
        return None
    if task.lease_owner is None:
        idle = task.modified_at is None or task.modified_at + timedelta(minutes=settings.wait_for_picked_minutes) <= now
        if not idle:
            return None
        why = "picked files of an unleased task"
    else:
        why = f"lease of {task.lease_owner} expired at {task.lease_expires_at:%Y-%m-%d %H:%M:%S}"
    return WatchAction("rescue_picked", task.id, f"{sum(counts.values())} picked files back to ready: {why}",
                       values={"lease_owner": None, "lease_expires_at": None},
                       dataset_deltas={ds: {"n_files_used": -n} for ds, n in sorted(counts.items())})


def reactivate_pending(task: WatchedTask, now: datetime, settings: WatchdogSettings, *, parent_status: str | None = None,
                       timeout_days: float | None = None,
                       high_priority_waits: Sequence[tuple[int, int]] = HIGH_PRIORITY_PENDING_WAITS) -> WatchAction | None:
    """A pending task is retried in its old status after its wait, and exhausted once it has been pending
    longer than the timeout (7 days) -- unless its parent is still running (not final): then it is only
    retried.

    `frozen_at` ("pending since") survives the retry, as JEDI's reactivation leaves frozenTime alone:
    a task that falls back to pending at once keeps counting towards the timeout. The agents clear it
    when the task really moves on (the feeder when it releases the task)."""
    if task.status != TaskStatus.PENDING or task.old_status is None:
        return None
    if task.wait_until is not None:
        due = task.wait_until <= now
    else:
        wait = next((minutes for floor, minutes in high_priority_waits if task.current_priority >= floor),
                    settings.wait_for_pending_minutes)
        due = task.modified_at is None or task.modified_at + timedelta(minutes=wait) <= now
    if not due:
        return None
    limit = timedelta(days=settings.timeout_for_pending_days if timeout_days is None else timeout_days)
    parent_running = parent_status is not None and parent_status not in TASK_FINAL
    if task.frozen_at is not None and task.frozen_at + limit <= now and not parent_running:
        return WatchAction("pending_timeout", task.id, f"timeout while in pending since {task.frozen_at:%Y-%m-%d %H:%M:%S}",
                           TaskStatus.EXHAUSTED, {"wait_until": None})
    return WatchAction("reactivate", task.id, f"pending since {_since(task.frozen_at)}: back to {task.old_status}",
                       task.old_status, {"old_status": None, "wait_until": None})


def release_lease(task: WatchedTask, now: datetime) -> WatchAction | None:
    """A lease that expired belongs to a process that died or hung: it is dropped (claimers already
    treat it as free; this tidies the row and says so in the report)."""
    if task.lease_owner is None or task.lease_alive(now):
        return None
    expired = "an unknown time" if task.lease_expires_at is None else f"{task.lease_expires_at:%Y-%m-%d %H:%M:%S}"
    return WatchAction("release_lease", task.id, f"lease of {task.lease_owner} expired at {expired}",
                       values={"lease_owner": None, "lease_expires_at": None})


def kick_exhausted(task: WatchedTask, now: datetime, settings: WatchdogSettings) -> WatchAction | None:
    """An exhausted task nobody touched for 48 h is finished (unless disableAutoFinish). `finishing` is the
    finish command's doing status: the watch pass settles it (`passed`) once no job of the task is live."""
    if task.status != TaskStatus.EXHAUSTED or task.disable_auto_finish:
        return None
    if task.modified_at is not None and task.modified_at + timedelta(hours=settings.wait_for_exhausted_hours) > now:
        return None
    return WatchAction("kick_exhausted", task.id, f"exhausted for more than {settings.wait_for_exhausted_hours} h",
                       TaskStatus.FINISHING)


def throttle(task: WatchedTask, average_failed_attempt: float, now: datetime, settings: WatchdogSettings) -> WatchAction | None:
    """Throttle a task whose released files keep failing: each `throttle_attempt_step` (5) failed attempts
    on average is one more step, and step n keeps the task throttled 120 min x n squared."""
    if task.no_throttle or task.status not in TASK_FOR_JOB_GENERATOR:
        return None
    done_steps = task.num_throttled or 0
    if int(average_failed_attempt / settings.throttle_attempt_step) <= done_steps:
        return None
    step = done_steps + 1
    until = now + timedelta(minutes=settings.wait_for_throttled_minutes * step * step)
    return WatchAction("throttle", task.id,
                       f"input files failed {average_failed_attempt:.1f} times on average: throttled until {until:%Y-%m-%d %H:%M:%S}",
                       TaskStatus.THROTTLED, {"old_status": task.status, "num_throttled": step, "wait_until": until})


def release_throttled(task: WatchedTask, now: datetime, *, released_files_done: bool = False) -> WatchAction | None:
    """A throttled task goes back to its old status when its backoff ended or nothing is left to run."""
    if task.status != TaskStatus.THROTTLED:
        return None
    if not released_files_done and task.wait_until is not None and task.wait_until > now:
        return None
    why = "all released files are done" if released_files_done else "throttle period over"
    return WatchAction("release_throttled", task.id, why, task.old_status or TaskStatus.READY,
                       {"old_status": None, "wait_until": None})


def may_boost(task: WatchedTask, progress: TaskProgress, settings: WatchdogSettings) -> bool:
    """Whether `boost` could act on the task, judged from its master counters alone: a task short of
    the done fraction, or already at the boost's priority and share, needs no count of its jobs. The
    watch pass counts jobs only for the others, so its cost follows the tasks near their end, not every
    job of every running task."""
    if task.status != TaskStatus.RUNNING or not progress.n_files:
        return False
    done = (progress.n_files_finished + progress.n_files_failed) / progress.n_files
    return done >= settings.boost_done_fraction and (task.current_priority < settings.boost_priority or task.gshare != settings.boost_share)


def boost(task: WatchedTask, progress: TaskProgress, settings: WatchdogSettings, *, parent_status: str | None = None,
          share_available: bool = True) -> WatchAction | None:
    """Nearly done tasks finish quickly: at >= 95 % of their master files done and <= 100 jobs left,
    priority 900 and the Express share (`share_available`: that share serves the task's label)."""
    remaining = progress.remaining_jobs
    if task.status != TaskStatus.RUNNING or remaining is None or not parent_completed(parent_status):
        return None
    done = (progress.n_files_finished + progress.n_files_failed) / progress.n_files
    if done < settings.boost_done_fraction or remaining > settings.boost_max_remaining_jobs:
        return None
    values: dict[str, Any] = {}
    if task.current_priority < settings.boost_priority:
        values["current_priority"] = settings.boost_priority
    if share_available and task.gshare != settings.boost_share:
        values["gshare"] = settings.boost_share
    if not values:
        return None
    return WatchAction("boost", task.id, f"{done:.1%} of input done and {remaining} jobs left", values=values)


def auto_pause(task: WatchedTask, progress: TaskProgress, settings: WatchdogSettings,
               failure_rate_limit: float | None = None) -> WatchAction | None:
    """Pause a big running task whose jobs fail too often (`pause_failure_rate`, 0 = off; noAutoPause
    opts out). The pause goes through the command path so its jobs are throttled too."""
    limit = settings.pause_failure_rate if failure_rate_limit is None else failure_rate_limit
    rate = progress.job_failure_rate
    remaining = progress.remaining_jobs
    if task.status != TaskStatus.RUNNING or task.no_auto_pause or not limit or limit <= 0 or rate is None:
        return None
    if progress.n_jobs < settings.pause_min_jobs or remaining is None or remaining < settings.pause_min_remaining_jobs:
        return None
    if rate < limit:
        return None
    return WatchAction("pause", task.id, f"watchdog due to high job failure rate {rate:.2f} >= {limit:g}", command="pause")


def pause_same_request_type(paused: WatchAction, request_type: str | None, others: Iterable[WatchedTask]) -> list[WatchAction]:
    """A pause for failures also pauses the other running tasks with the same payload (request type)."""
    if not request_type:
        return []
    return [WatchAction("pause", other.id, f"watchdog due to high job failure rate in another task {paused.task_id}",
                        command="pause")
            for other in others
            if other.id != paused.task_id and other.request_type == request_type
            and other.status == TaskStatus.RUNNING and not other.no_auto_pause]


def goal_check_due(task: WatchedTask, now: datetime, settings: WatchdogSettings) -> bool:
    """Whether `goal_reached` should look at the task now (running/pending with a goal, once an interval)."""
    if task.goal is None or task.disable_auto_finish or task.status not in (TaskStatus.RUNNING, TaskStatus.PENDING):
        return False
    return task.assessed_at is None or task.assessed_at + timedelta(minutes=settings.wait_for_achieved_minutes) <= now


def goal_reached(task: WatchedTask, now: datetime, settings: WatchdogSettings, *, parent_status: str | None,
                 input_statuses: Iterable[str], fresh_ready_files: int, output_events: int,
                 input_events: int) -> WatchAction | None:
    """Soft-finish a task that reached its goal: the parent is final, no input is still being scanned, no
    never-tried input file is waiting, and the first output holds `goal` % of the input events."""
    if not goal_check_due(task, now, settings) or task.goal is None:
        return None
    if parent_status is not None and parent_status not in TASK_FINAL:
        return None
    if any(status in (DatasetStatus.DEFINED, DatasetStatus.TOUPDATE) for status in input_statuses):
        return None
    if fresh_ready_files > 0 or input_events <= 0:
        return None
    achieved = 100.0 * output_events / input_events
    if achieved < task.goal:
        return None
    return WatchAction("goal_reached", task.id, f"JEDI. Goal reached ({achieved:.1f}% >= {task.goal:g}%)",
                       values={"assessed_at": now}, command="finish", qualifier="soft")


def _since(moment: datetime | None) -> str:
    return "an unknown time" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"
