"""Job timeouts (seed 000 "Timeout values for production jobs"), closing jobs for rebrokerage."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jedictl.config import JobTimeoutSettings
from jedictl.engine.jobs.timeouts import JobTimes, SiteTimeouts, expired_jobs, job_expiry

NOW = datetime(2024, 5, 1, 12, 0)
SETTINGS = JobTimeoutSettings()
MINUTE = timedelta(minutes=1)


def times(status: str, in_state: timedelta, **values) -> JobTimes:
    return JobTimes(id=values.pop("id", 1), status=status, state_changed_at=NOW - in_state, **values)


@pytest.mark.parametrize("status,limit,code", [
    ("waiting", timedelta(minutes=30), 4),
    ("pending", timedelta(hours=1), 4),
    ("defined", timedelta(hours=4), 51),
    ("assigned", timedelta(hours=12), 51),
    ("activated", timedelta(hours=48), 51),
    ("sent", timedelta(minutes=30), 51),
    ("holding", timedelta(hours=3), 2),
    ("transferring", timedelta(days=2), 2),
])
def test_queue_state_limits(status, limit, code):
    assert job_expiry(times(status, limit), SETTINGS, NOW) is None  # exactly at the limit: not yet
    expiry = job_expiry(times(status, limit + MINUTE), SETTINGS, NOW)
    assert (expiry.new_status, expiry.sub_status, expiry.kill_code, expiry.status) == ("closed", "toreassign", code, status)
    assert expiry.reason.startswith(f"{status} for ")


def test_reason_texts():
    assert job_expiry(times("sent", timedelta(minutes=45)), SETTINGS, NOW).reason == "sent for 45m (limit 30m)"
    assert job_expiry(times("activated", timedelta(days=2, hours=3)), SETTINGS, NOW).reason == "activated for 2d3h (limit 2d)"


def test_running_too_long_or_silent():
    fresh = NOW - timedelta(minutes=5)
    long_run = times("running", timedelta(days=22), started_at=NOW - timedelta(days=22), heartbeat_at=fresh)
    assert job_expiry(long_run, SETTINGS, NOW).reason == "running for 22d (limit 21d)"
    healthy = times("running", timedelta(days=20), started_at=NOW - timedelta(days=20), heartbeat_at=fresh)
    assert job_expiry(healthy, SETTINGS, NOW) is None
    silent = times("running", timedelta(days=1), heartbeat_at=NOW - timedelta(hours=2, minutes=1))
    expiry = job_expiry(silent, SETTINGS, NOW)
    assert expiry.reason == "no heartbeat for 2h1m (limit 2h)" and expiry.kill_code == 2
    never_beat = times("running", timedelta(hours=3))  # no heartbeat yet: timed from entering running
    assert "no heartbeat for 3h" in job_expiry(never_beat, SETTINGS, NOW).reason


def test_starting_jobs_need_heartbeats_too():
    starting = times("starting", timedelta(hours=3), heartbeat_at=NOW - timedelta(hours=3))
    assert "no heartbeat" in job_expiry(starting, SETTINGS, NOW).reason
    beating = times("starting", timedelta(hours=3), heartbeat_at=NOW - timedelta(minutes=10))
    assert job_expiry(beating, SETTINGS, NOW) is None


def test_high_priority_jobs_leave_an_idle_site_after_four_hours():
    idle = SiteTimeouts(last_job_start=NOW - timedelta(hours=3))
    busy = SiteTimeouts(last_job_start=NOW - timedelta(minutes=30))
    job = times("activated", timedelta(hours=4, minutes=1), current_priority=900)
    assert job_expiry(job, SETTINGS, NOW, idle).reason == "activated for 4h1m (limit 4h)"
    assert job_expiry(job, SETTINGS, NOW, busy) is None
    low = times("activated", timedelta(hours=4, minutes=1), current_priority=500)
    assert job_expiry(low, SETTINGS, NOW, idle) is None


def test_transferring_limits_per_site_and_priority():
    site = SiteTimeouts(transferring_days_high=1, transferring_days_low=3)
    high = times("transferring", timedelta(days=1, hours=1), current_priority=800)
    low = times("transferring", timedelta(days=1, hours=1), current_priority=799)
    assert job_expiry(high, SETTINGS, NOW, site) is not None
    assert job_expiry(low, SETTINGS, NOW, site) is None
    assert job_expiry(times("transferring", timedelta(days=3, minutes=1)), SETTINGS, NOW, site) is not None


@pytest.mark.parametrize("status", ["throttled", "merging", "finished", "failed", "cancelled", "closed"])
def test_statuses_that_never_expire(status):
    assert job_expiry(times(status, timedelta(days=100)), SETTINGS, NOW) is None


def test_settings_are_honoured_and_the_batch_keeps_order():
    short = JobTimeoutSettings(sent_minutes=5, defined_hours=1)
    jobs = [
        times("sent", timedelta(minutes=6), id=1),
        times("running", timedelta(minutes=6), id=2, heartbeat_at=NOW),
        times("defined", timedelta(hours=2), id=3, site="S"),
        JobTimes(id=4, status="defined"),  # no timestamps: nothing to judge
    ]
    assert [e.job_id for e in expired_jobs(jobs, short, NOW)] == [1, 3]
    assert expired_jobs(jobs, SETTINGS, NOW) == ()


def test_activated_analysis_jobs_expire_after_analy_timeout():
    # seed 000: analysis jobs that get no CPU in 12 h (ANALY_TIMEOUT) are closed and placed again.
    def job(label: str, status: str = "activated", hours: float = 13) -> JobTimes:
        return JobTimes(1, status, 1000, "SITE", state_changed_at=NOW - timedelta(hours=hours), heartbeat_at=NOW,
                        prod_source_label=label)

    expiry = job_expiry(job("user"), SETTINGS, NOW)
    assert expiry is not None and expiry.kill_code == 51 and expiry.reason == "activated for 13h (limit 12h)"
    assert job_expiry(job("user", hours=11), SETTINGS, NOW) is None
    assert job_expiry(job("managed"), SETTINGS, NOW) is None  # production keeps its 2 days
    assert job_expiry(job("user", status="starting"), SETTINGS, NOW) is None  # starting: it got its CPU


def test_assigned_jobs_wait_twelve_hours_for_their_input():
    waiting = JobTimes(1, "assigned", 1000, "SITE", state_changed_at=NOW - timedelta(hours=12, minutes=5), prod_source_label="user")
    assert job_expiry(waiting, SETTINGS, NOW).reason == "assigned for 12h5m (limit 12h)"


def test_jobs_held_by_a_user_cap_are_closed_after_seven_days_and_a_paused_tasks_never():
    """seed 000 "Throttled jobs and tasks": throttled jobs go back to activated, "otherwise, they are
    closed after 7 days" -- those of a user cap; a paused task's wait for its resume."""
    def throttled(days: float, sub_status: str | None) -> JobTimes:
        return JobTimes(1, "throttled", state_changed_at=NOW - timedelta(days=days), sub_status=sub_status)

    assert job_expiry(throttled(6.9, "user_cap"), SETTINGS, NOW) is None
    expiry = job_expiry(throttled(7.1, "user_cap"), SETTINGS, NOW)
    assert (expiry.new_status, expiry.kill_code, expiry.reason) == ("closed", 51, "throttled for 7d2h (limit 7d)")
    assert job_expiry(throttled(30, None), SETTINGS, NOW) is None
    assert job_expiry(throttled(2.5, "user_cap"), JobTimeoutSettings(throttled_days=2), NOW) is not None
