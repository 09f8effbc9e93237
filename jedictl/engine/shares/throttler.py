"""Job throttling: whether a work queue (or global share) x resource type may get new jobs this pass,
how many, and from which priority up -- plus WMCore's per-site pending/running thresholds.

JEDI's rules (jedi-inventory.md §6.2, panda-server.md §3.7, seed 000 "Job throttling"): with
threshold 2.0, a bunch is clamp(running x threshold - not-running, 500, 600) jobs, the queue limit is
4 x bunch unless configured, and a pass may make bunch/2 jobs (queued cap/5 when a cap is configured).
The queue is throttled -- only merge jobs may still be made -- when nothing runs and too much is queued,
queued/running exceeds the threshold with more queued than the limit, defined jobs pile up, too many
jobs wait, or the running or queued cap is exceeded. A waiting task whose priority beats everything
already queued lets the pass go on (except past the running cap), for tasks at or above that priority
only. A short queue "lacks jobs" and gets bigger batches.

WMCore (peers.md §1.5, seed 002): a site takes a job while its pending and running slots, in total and
for the job's type, are not full; a job whose priority beats everything at the site for its type may
overflow the pending limits by 20 % of the pending slots.

Every decision is a dataclass carrying its inputs, the deciding rule and the limits, for `explain`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

from jedictl.config import ThrottleSettings


@dataclass(frozen=True)
class ThrottleTuning:
    """JEDI constants of the throttler that jedictl.config does not (yet) hold; reference defaults."""

    queue_limit_bunches: int = 4  # nQueueLimit = 4 x nJobsInBunch unless configured
    jobs_per_bunch_divisor: int = 2  # maxNumJobs = nJobsInBunch / 2
    queued_cap_divisor: int = 5  # ... or NQUEUECAP / 5
    lack_of_jobs_divisor: int = 20  # lack of jobs: maxNumJobs >= nQueueLimit / 20
    waiting_running_factor: int = 4  # too many waiting: > max(4 x running, 2 x bunch)
    waiting_bunch_factor: int = 2
    user_labels: tuple[str, ...] = ("user", "panda")  # no high-priority exception for analysis


DEFAULT_THROTTLE_TUNING = ThrottleTuning()


@dataclass(frozen=True)
class QueueCounts:
    """Jobs of one queue x resource type (at the level its limits were found)."""

    running: int = 0  # running (+ standby slots)
    not_running: int = 0  # assigned + activated + starting
    defined: int = 0
    waiting: int = 0

    @property
    def queued(self) -> int:
        return self.not_running + self.defined


@dataclass(frozen=True)
class QueueLimits:
    """Configured limits (JEDI's NQUEUELIMIT, NRUNNINGCAP, NQUEUECAP); None = not configured."""

    queue_limit: int | None = None
    running_cap: int | None = None
    queued_cap: int | None = None


@dataclass(frozen=True)
class ThrottleInput:
    queue: str  # work queue or global share
    resource_type: str | None
    prod_source_label: str
    counts: QueueCounts
    limits: QueueLimits = field(default_factory=QueueLimits)
    share_throttled: bool = True  # global_shares.throttled; False = never throttled
    highest_waiting_priority: int | None = None  # top priority of tasks waiting for jobs
    highest_queued_job_priority: int | None = None  # top priority of not-running jobs
    n_jobs_at_highest_priority: int = 0  # not-running jobs at that priority
    total_walltime_s: float | None = None  # remaining walltime of the queue; None = unknown


@dataclass(frozen=True)
class ThrottleDecision:
    queue: str
    resource_type: str | None
    throttled: bool
    merge_only: bool  # JEDI's level 5: only merge jobs may be made
    rule: str
    message: str
    max_num_jobs: int
    min_priority: int | None
    lack_of_jobs: bool
    n_jobs_in_bunch: int
    queue_limit: int
    threshold: float
    high_priority_queued: bool
    counts: QueueCounts
    limits: QueueLimits

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"queued": self.counts.queued}


def resolve_limit(config: Mapping[str, int], tag: str, queue: str, resource_type: str | None) -> tuple[int | None, str]:
    """A limit looked up most specific first -- `TAG_queue_RT` ("rt"), `TAG_queue_MCORE*` or
    `TAG_queue_SCORE*` ("ms"), `TAG_queue` ("gs") -- with the level at which it was found, which
    says at which level the caller must count jobs. ("gs", None) when nothing is configured."""
    if resource_type:
        key = f"{tag}_{queue}_{resource_type}"
        if key in config:
            return config[key], "rt"
        family = "MCORE" if resource_type.startswith("MCORE") else "SCORE"
        key = f"{tag}_{queue}_{family}*"
        if key in config:
            return config[key], "ms"
    return config.get(f"{tag}_{queue}"), "gs"


def _high_priority_queued(inp: ThrottleInput, settings: ThrottleSettings, tuning: ThrottleTuning) -> bool:
    """A waiting task beats everything not yet running (or equals it while few such jobs exist)."""
    waiting, queued = inp.highest_waiting_priority, inp.highest_queued_job_priority
    if inp.prod_source_label in tuning.user_labels or waiting is None:
        return False
    if queued is None or waiting > queued:
        return True
    return waiting == queued and inp.n_jobs_at_highest_priority < settings.high_prio_jobs


def throttle_decision(
    inp: ThrottleInput,
    settings: ThrottleSettings,
    *,
    tuning: ThrottleTuning = DEFAULT_THROTTLE_TUNING,
) -> ThrottleDecision:
    """JEDI's toBeThrottled for one queue x resource type."""
    counts, limits, threshold = inp.counts, inp.limits, settings.threshold
    slot = counts.running * threshold - counts.not_running
    bunch = int(min(max(slot, settings.bunch_min), settings.bunch_max))
    queue_limit = limits.queue_limit or tuning.queue_limit_bunches * bunch
    max_num_jobs = bunch // tuning.jobs_per_bunch_divisor
    if limits.queued_cap:
        max_num_jobs = limits.queued_cap // tuning.queued_cap_divisor
    queued = counts.queued
    high_priority = _high_priority_queued(inp, settings, tuning)

    def decide(throttled: bool, rule: str, message: str, min_priority: int | None = None,
               lack: bool = False, jobs: int = max_num_jobs) -> ThrottleDecision:
        return ThrottleDecision(
            queue=inp.queue, resource_type=inp.resource_type, throttled=throttled, merge_only=throttled,
            rule=rule, message=message, max_num_jobs=0 if throttled else jobs, min_priority=min_priority,
            lack_of_jobs=lack, n_jobs_in_bunch=bunch, queue_limit=queue_limit, threshold=threshold,
            high_priority_queued=high_priority, counts=counts, limits=limits)

    if not inp.share_throttled:
        return decide(False, "share_not_throttled", "the global share is never throttled")

    reasons = _throttle_reasons(counts, limits, queue_limit, bunch, threshold, inp.total_walltime_s, settings, tuning)
    min_priority = None
    if reasons:
        rule, message = reasons[0]
        capped = [reason for reason in reasons if reason[0] == "running_cap"]
        if not high_priority or capped:
            rule, message = capped[0] if high_priority else reasons[0]
            return decide(True, rule, f"{message}: only merge jobs")
        min_priority = inp.highest_waiting_priority
        decided_rule = "high_priority"
        decided_message = (f"{message}, but a waiting task of priority {min_priority} beats the queued jobs "
                           f"({inp.highest_queued_job_priority}): only tasks at or above it")
    else:
        decided_rule = "unthrottled"
        decided_message = f"{queued} queued, {counts.running} running, queue limit {queue_limit}"

    if queued < settings.lack_of_jobs_fraction * queue_limit or queued < counts.running:
        jobs = max(max_num_jobs, queue_limit // tuning.lack_of_jobs_divisor)
        lack_message = (f"lack of jobs: {queued} queued < {settings.lack_of_jobs_fraction:g} x {queue_limit} "
                        f"or < {counts.running} running; up to {jobs} jobs")
        if decided_rule == "unthrottled":
            return decide(False, "lack_of_jobs", lack_message, min_priority, True, jobs)
        return decide(False, decided_rule, f"{decided_message}; {lack_message}", min_priority, True, jobs)
    return decide(False, decided_rule, decided_message, min_priority)


def _throttle_reasons(counts: QueueCounts, limits: QueueLimits, queue_limit: int, bunch: int, threshold: float,
                      total_walltime_s: float | None, settings: ThrottleSettings,
                      tuning: ThrottleTuning) -> list[tuple[str, str]]:
    """Every throttling condition that holds, in JEDI's order, as (rule, message)."""
    queued, running = counts.queued, counts.running
    # A full queue only throttles when it holds much work (or its walltime is unknown).
    much_work = total_walltime_s is None or total_walltime_s > settings.total_walltime_limit_s
    work = "remaining walltime unknown" if total_walltime_s is None else f"{total_walltime_s:.3g} s of work"
    reasons: list[tuple[str, str]] = []
    if running == 0 and queued > queue_limit and much_work:
        reasons.append(("no_running", f"nothing running and {queued} queued > limit {queue_limit} ({work})"))
    if running > 0 and queued / running > threshold and queued > queue_limit and much_work:
        message = f"queued/running {queued}/{running} > {threshold:g} and {queued} queued > limit {queue_limit} ({work})"
        reasons.append(("queued_over_running", message))
    if counts.defined > queue_limit:
        reasons.append(("defined_stuck", f"{counts.defined} defined > limit {queue_limit} (brokerage stuck)"))
    waiting_limit = max(tuning.waiting_running_factor * running, tuning.waiting_bunch_factor * bunch)
    if counts.waiting > waiting_limit:
        message = (f"{counts.waiting} waiting > max({tuning.waiting_running_factor} x {running}, "
                   f"{tuning.waiting_bunch_factor} x {bunch})")
        reasons.append(("too_many_waiting", message))
    if limits.running_cap is not None and running > limits.running_cap:
        reasons.append(("running_cap", f"{running} running > cap {limits.running_cap}"))
    if limits.queued_cap is not None and queued > limits.queued_cap:
        reasons.append(("queued_cap", f"{queued} queued > cap {limits.queued_cap}"))
    return reasons


# ------------------------------------------------------------------------- WMCore site thresholds

#: WMCore task types that never overflow their pending limits: they are I/O bound.
IO_BOUND_JOB_TYPES = frozenset({"LogCollect", "Merge", "Cleanup", "Harvesting"})
_PENDING_RULES = frozenset({"NoPendingSlot", "NoTaskPendingSlot"})


@dataclass(frozen=True)
class SiteThresholds:
    """A site's slots (WMCore ResourceControl): in total and per job type; None = unlimited."""

    site: str
    pending_slots: int | None = None
    running_slots: int | None = None  # pending + running together
    type_pending_slots: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    type_running_slots: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    draining: bool = False  # WMCore's Draining state (jedictl: status brokeroff): no new work at all


@dataclass(frozen=True)
class SiteUsage:
    """Jobs at a site now, and the pending counts at the start of the submission cycle (WMCore raises
    an overflowing pending limit to max(slots, count at cycle start) + 20 % of the slots)."""

    pending: int = 0
    running: int = 0
    type_pending: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    type_running: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    type_highest_priority: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    pending_at_start: int | None = None
    type_pending_at_start: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class SiteSlotDecision:
    site: str
    job_type: str
    allowed: bool
    rule: str  # ok | Draining | ZeroThreshold | NoPendingSlot | NoTaskPendingSlot | NoRunningSlot | NoTaskRunningSlot
    message: str
    free: int  # jobs the site can still take now (0 when not allowed)
    overflow: bool  # the priority overflow raised the pending limits
    pending_limit: float | None
    type_pending_limit: float | None
    running_limit: int | None
    type_running_limit: int | None


def site_slot_decision(
    thresholds: SiteThresholds,
    usage: SiteUsage,
    job_type: str,
    job_priority: int,
    settings: ThrottleSettings,
    *,
    io_bound: bool | None = None,
) -> SiteSlotDecision:
    """Whether one more job of `job_type` fits at a site, and how many do (WMCore JobSubmitter).
    `io_bound` says whether the job is I/O bound (no overflow); by default WMCore's task types decide."""
    type_pending = usage.type_pending.get(job_type, 0)
    type_running = usage.type_running.get(job_type, 0)
    type_pending_slots = thresholds.type_pending_slots.get(job_type)
    type_running_slots = thresholds.type_running_slots.get(job_type)
    highest = usage.type_highest_priority.get(job_type)
    if io_bound is None:
        io_bound = job_type in IO_BOUND_JOB_TYPES
    # The overflow lets urgent work past lower-priority work already there; with nothing of the type
    # pending or running there is nothing to jump over, and the thresholds hold as configured.
    overflow = not io_bound and highest is not None and job_priority > highest

    def raised(slots: int | None, at_start: int | None) -> float | None:
        if slots is None:
            return None
        if not overflow:
            return float(slots)
        return max(slots, at_start or 0) + settings.wmcore_priority_overflow * slots

    # Without the cycle-start counts the raise is bounded by the slots alone: defaulting to the current
    # count would let every re-evaluation add another 20 %.
    pending_limit = raised(thresholds.pending_slots, usage.pending_at_start)
    type_pending_limit = raised(type_pending_slots, usage.type_pending_at_start.get(job_type))
    checks = (
        ("NoPendingSlot", usage.pending, pending_limit, "site pending"),
        ("NoTaskPendingSlot", type_pending, type_pending_limit, f"{job_type} pending"),
        ("NoRunningSlot", usage.pending + usage.running, thresholds.running_slots, "site pending+running"),
        ("NoTaskRunningSlot", type_pending + type_running, type_running_slots, f"{job_type} pending+running"),
    )

    def decide(allowed: bool, rule: str, message: str, free: int) -> SiteSlotDecision:
        return SiteSlotDecision(thresholds.site, job_type, allowed, rule, message, free, overflow, pending_limit,
                                type_pending_limit, thresholds.running_slots, type_running_slots)

    if thresholds.draining:
        return decide(False, "Draining", f"{thresholds.site} is draining: it takes no new work", 0)
    if type_running_slots == 0 or type_pending_slots == 0:
        return decide(False, "ZeroThreshold", f"{job_type} has a zero threshold at {thresholds.site}", 0)
    free_counts = []
    for rule, used, limit, what in checks:
        if limit is None:
            continue
        if used >= limit:
            note = " (priority overflow included)" if overflow and rule in _PENDING_RULES else ""
            return decide(False, rule, f"{what} {used} >= {limit:g}{note}", 0)
        free_counts.append(math.ceil(limit - used))
    free = min(free_counts) if free_counts else 1_000_000_000
    note = ", priority overflow" if overflow else ""
    return decide(True, "ok", f"{free} more {job_type} jobs fit{note}", free)
