"""Which jobs have expired: too long in a queue state, running too long, or silent too long.

Follows seed 000 "Timeout values for production jobs" (the limits, in `JobTimeoutSettings`) and "Job
rebrokerage" (jobs killed by the system are `closed`; their files go back to the pool and the next
generation places them again, possibly elsewhere), panda-server.md §2.2 (the watchers) and §2.8 (the
kill codes a timeout uses: 4 for pending/waiting, 51 "reassigned by JEDI" for queued jobs, 2 "expired"
for jobs that got a CPU). The watchdog loads `jobs` rows, asks `expired_jobs`, and kills what comes
back with `job_states.JobEvent.TIMEOUT`.

Clocks: a queue state is timed from `state_changed_at` (entering the state); a running job from
`started_at` (21 days) and from its last heartbeat (2 h, also while starting). Jobs throttled by a user
cap (sub_status `user_cap`, engine.shares.user_caps) are closed after `throttled_days` (7) unless the
cap released them (seed 000 "Throttled jobs and tasks"); the throttled jobs of a paused task (paused on
purpose) and merging jobs (waiting for their merge job) never expire here.

Analysis jobs (labels user, panda) that stay `activated` longer than ANALY_TIMEOUT (12 h) got no CPU at
their site: seed 000 reattempts them ("Job rebrokerage"), and their closing marks the site busy for the
analysis brokerage, which then sends the task's next jobs to idle sites with their input
(engine.brokerage.analysis). An `assigned` job waits for its input at most `assigned_hours` (12 h).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from jedictl.config import JobTimeoutSettings
from jedictl.engine.task.spec import ANALYSIS_LABELS
from jedictl.model import USER_CAP, JobStatus

S = JobStatus


@dataclass(frozen=True)
class JobTimes:
    """The `jobs` columns the timeouts read."""

    id: int
    status: str
    current_priority: int = 0
    site: str | None = None
    created_at: datetime | None = None
    modified_at: datetime | None = None
    state_changed_at: datetime | None = None
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    prod_source_label: str | None = None
    sub_status: str | None = None


@dataclass(frozen=True)
class SiteTimeouts:
    """Per-site values (schedconfig transtimehi/transtimelo, sitedata laststart)."""

    transferring_days_high: float | None = None  # priority >= 800
    transferring_days_low: float | None = None
    last_job_start: datetime | None = None


@dataclass(frozen=True)
class Expiry:
    job_id: int
    status: str  # the status it expired in (guard the kill with it)
    new_status: str  # always closed: killed by the system
    sub_status: str
    kill_code: int
    reason: str


_QUEUE_CODE = 51  # reassigned by JEDI
_WAITING_CODE = 4  # expired while waiting
_EXPIRED_CODE = 2


def expired_jobs(jobs: Iterable[JobTimes], settings: JobTimeoutSettings, now: datetime,
                 sites: Mapping[str, SiteTimeouts] | None = None, *, high_priority: int = 800,
                 high_priority_idle_site_hours: float = 4.0, site_idle_hours: float = 2.0) -> tuple[Expiry, ...]:
    """The jobs to close, in the order given, each with its reason."""
    found = []
    for job in jobs:
        site = (sites or {}).get(job.site or "")
        expiry = job_expiry(job, settings, now, site, high_priority=high_priority,
                            high_priority_idle_site_hours=high_priority_idle_site_hours, site_idle_hours=site_idle_hours)
        if expiry is not None:
            found.append(expiry)
    return tuple(found)


def job_expiry(job: JobTimes, settings: JobTimeoutSettings, now: datetime, site: SiteTimeouts | None = None, *,
               high_priority: int = 800, high_priority_idle_site_hours: float = 4.0,
               site_idle_hours: float = 2.0) -> Expiry | None:
    status = job.status
    entered = job.state_changed_at or job.modified_at or job.created_at
    if entered is None:
        return None
    in_state = now - entered

    def close(code: int, reason: str) -> Expiry:
        return Expiry(job.id, status, S.CLOSED.value, "toreassign", code, reason)

    simple = {
        "waiting": (timedelta(minutes=settings.waiting_minutes), _WAITING_CODE),
        "pending": (timedelta(hours=settings.pending_hours), _WAITING_CODE),
        S.DEFINED.value: (timedelta(hours=settings.defined_hours), _QUEUE_CODE),
        S.ASSIGNED.value: (timedelta(hours=settings.assigned_hours), _QUEUE_CODE),
        S.SENT.value: (timedelta(minutes=settings.sent_minutes), _QUEUE_CODE),
        S.HOLDING.value: (timedelta(hours=settings.holding_hours), _EXPIRED_CODE),
    }
    if status == S.THROTTLED.value and job.sub_status == USER_CAP:
        simple[status] = (timedelta(days=settings.throttled_days), _QUEUE_CODE)
    if status in simple:
        limit, code = simple[status]
        return close(code, f"{status} for {_span(in_state)} (limit {_span(limit)})") if in_state > limit else None
    if status in (S.ACTIVATED.value, S.STARTING.value):
        if status == S.STARTING.value:
            silent = _heartbeat_expiry(job, settings, now, entered)
            if silent:
                return close(_EXPIRED_CODE, silent)
        limit = timedelta(hours=settings.activated_hours)
        if status == S.ACTIVATED.value and job.prod_source_label in ANALYSIS_LABELS:
            limit = min(limit, timedelta(hours=settings.analy_timeout_hours))  # ANALY_TIMEOUT: no CPU for the job here
        idle_site = (site is not None and site.last_job_start is not None
                     and now - site.last_job_start > timedelta(hours=site_idle_hours))
        if job.current_priority >= high_priority and idle_site:
            # A high-priority job should not wait at a site where nothing has started for hours.
            limit = min(limit, timedelta(hours=high_priority_idle_site_hours))
        return close(_QUEUE_CODE, f"{status} for {_span(in_state)} (limit {_span(limit)})") if in_state > limit else None
    if status == S.RUNNING.value:
        started = job.started_at or entered
        limit = timedelta(days=settings.running_days)
        if now - started > limit:
            return close(_EXPIRED_CODE, f"running for {_span(now - started)} (limit {_span(limit)})")
        silent = _heartbeat_expiry(job, settings, now, entered)
        return close(_EXPIRED_CODE, silent) if silent else None
    if status == S.TRANSFERRING.value:
        days = settings.transferring_days
        if site is not None:
            chosen = site.transferring_days_high if job.current_priority >= high_priority else site.transferring_days_low
            days = chosen if chosen is not None else days
        limit = timedelta(days=days)
        return close(_EXPIRED_CODE, f"transferring for {_span(in_state)} (limit {_span(limit)})") if in_state > limit else None
    return None  # final, throttled, merging: no timeout


def _heartbeat_expiry(job: JobTimes, settings: JobTimeoutSettings, now: datetime, entered: datetime) -> str:
    last = job.heartbeat_at or entered
    limit = timedelta(hours=settings.heartbeat_hours)
    if now - last > limit:
        return f"no heartbeat for {_span(now - last)} (limit {_span(limit)})"
    return ""


def _span(delta: timedelta) -> str:
    """A duration for a reason text: 45m, 3h10m, 2d4h."""
    minutes = int(delta.total_seconds() // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m"
