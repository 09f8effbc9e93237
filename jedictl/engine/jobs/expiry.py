"""Closing expired jobs (job rebrokerage): the part of the watchdog pass that looks at jobs.

`engine.jobs.timeouts` decides which jobs have been too long in a state (seed 000's production
timeouts); this module finds the candidates with one indexed query per status, closes the expired
ones through the same path as kills and reports -- files back in the pool with an attempt used and
no failure -- so the next generation places them again, possibly elsewhere (seed 000 "Job
rebrokerage"). Each close is guarded by the status the job expired in: a job that moved on meanwhile
(a late heartbeat) is left alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jedictl.config import JobTimeoutSettings, Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.jobs.outcomes import Ending, end_jobs_safely
from jedictl.engine.jobs.timeouts import JobTimes, SiteTimeouts, expired_jobs
from jedictl.model import JobStatus
from jedictl.store import jobs as job_store

S = JobStatus


def state_cutoffs(settings: JobTimeoutSettings, now: datetime) -> dict[str, datetime]:
    """Per status, the oldest state change that cannot have expired yet: the query's coarse filter
    (the pure decision then applies the exact limit, which may depend on the site and the priority).
    Running jobs expire on their start and heartbeat times instead (see `close_expired_jobs`)."""
    high_priority_idle = timedelta(hours=4)  # job_timeouts: high-priority jobs at an idle site
    ages = {
        "waiting": timedelta(minutes=settings.waiting_minutes),
        "pending": timedelta(hours=settings.pending_hours),
        S.DEFINED.value: timedelta(hours=settings.defined_hours),
        S.ASSIGNED.value: timedelta(hours=settings.assigned_hours),
        S.SENT.value: timedelta(minutes=settings.sent_minutes),
        S.HOLDING.value: timedelta(hours=settings.holding_hours),
        S.ACTIVATED.value: min(timedelta(hours=settings.activated_hours), timedelta(hours=settings.analy_timeout_hours), high_priority_idle),
        S.STARTING.value: min(timedelta(hours=settings.activated_hours), high_priority_idle),
        S.TRANSFERRING.value: timedelta(hours=1),  # a site's own limit may be short: decided per job
        S.THROTTLED.value: timedelta(days=settings.throttled_days),  # those of a paused task are spared (the decision)
    }
    return {status: now - age for status, age in ages.items()}


def close_expired_jobs(store: Any, settings: Settings, now: datetime, limit: int = 10_000) -> PassReport:
    """Find and close expired jobs; one report item per closed (or skipped) job."""
    report = PassReport("expire")
    with store.read() as conn:
        timeouts = settings.job_timeouts
        rows = job_store.expiry_candidates(conn, state_cutoffs(timeouts, now), heartbeat_cutoff=now - timedelta(hours=timeouts.heartbeat_hours),
                                           started_cutoff=now - timedelta(days=timeouts.running_days), limit=limit)
        sites = _site_timeouts(job_store.site_timeout_facts(conn, {row.site for row in rows}))
    times = [JobTimes(row.id, row.status, row.current_priority, row.site, row.created_at, row.modified_at, row.state_changed_at,
                      row.started_at, row.heartbeat_at, row.prod_source_label, row.sub_status) for row in rows]
    expired = expired_jobs(times, settings.job_timeouts, now, sites)
    endings = [Ending(e.job_id, e.new_status, sub_status=e.sub_status, error=("kill", e.kill_code, e.reason), expected_status=e.status)
               for e in expired]
    reasons = {e.job_id: e.reason for e in expired}
    for result in end_jobs_safely(store, endings, settings, now):
        if result.outcome == "applied":
            report.add("closed", job_id=result.job_id, reason=reasons[result.job_id])
        else:
            report.add("skipped", job_id=result.job_id, reason=result.reason)
    return report


def _site_timeouts(facts: dict[str, dict[str, Any]]) -> dict[str, SiteTimeouts]:
    """Per site: PanDA's schedconfig transtimehi/transtimelo (site attributes) and the last job start."""
    found = {}
    for name, fact in facts.items():
        attributes = fact.get("attributes") or {}
        found[name] = SiteTimeouts(transferring_days_high=_days(attributes.get("transtimehi")),
                                   transferring_days_low=_days(attributes.get("transtimelo")),
                                   last_job_start=fact.get("last_job_start"))
    return found


def _days(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "", 0) else None
    except (TypeError, ValueError):
        return None
