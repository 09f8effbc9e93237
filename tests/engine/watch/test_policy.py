"""The watchdog's decisions (jedi-inventory.md §8; seed 000 "throttled", "Automatic priority boosting")."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jedictl.config import WatchdogSettings
from jedictl.engine.task.final_status import DatasetRecord
from jedictl.engine.watch.policy import (
    TaskProgress,
    WatchedTask,
    auto_pause,
    boost,
    goal_reached,
    kick_exhausted,
    may_boost,
    pause_same_request_type,
    reactivate_pending,
    release_throttled,
    rescue_picked,
    throttle,
)

NOW = datetime(2024, 5, 1, 12, 0, 0)
SETTINGS = WatchdogSettings()


def ago(**delta: float) -> datetime:
    return NOW - timedelta(**delta)


def task(**values) -> WatchedTask:
    base = {"id": 7, "status": "running", "old_status": None, "current_priority": 500, "task_priority": 500,
            "gshare": "Production default", "modified_at": ago(hours=1)}
    base.update(values)
    return WatchedTask(**base)


def test_watched_task_loads_from_a_tasks_row():
    row = {"id": 3, "status": "pending", "old_status": "running", "current_priority": 900, "name": "t",
           "options": {"goal": 90.0, "disable_auto_finish": True, "no_auto_pause": True}, "num_throttled": 2}
    loaded = WatchedTask.from_row(row)
    assert (loaded.id, loaded.status, loaded.old_status, loaded.current_priority, loaded.num_throttled) == (3, "pending", "running", 900, 2)
    assert (loaded.goal, loaded.disable_auto_finish, loaded.no_auto_pause, loaded.no_throttle) == (90.0, True, True, False)


# ------------------------------------------------------------------------------------- picked files

def test_picked_files_of_a_dead_owner_are_rescued():
    dead = task(lease_owner="host:1:abc", lease_expires_at=ago(minutes=1))
    action = rescue_picked(dead, {10: 4, 11: 0, 12: 2}, NOW, SETTINGS)
    assert action.kind == "rescue_picked"
    assert action.reason == "6 picked files back to ready: lease of host:1:abc expired at 2024-05-01 11:59:00"
    assert action.dataset_deltas == {10: {"n_files_used": -4}, 12: {"n_files_used": -2}}
    assert action.values == {"lease_owner": None, "lease_expires_at": None}


def test_a_live_owner_keeps_its_picked_files():
    assert rescue_picked(task(lease_owner="me", lease_expires_at=NOW + timedelta(minutes=5)), {10: 4}, NOW, SETTINGS) is None
    assert rescue_picked(task(lease_owner="x", lease_expires_at=ago(minutes=1)), {10: 0}, NOW, SETTINGS) is None
    assert rescue_picked(task(status="done", lease_owner="x", lease_expires_at=ago(minutes=1)), {10: 3}, NOW, SETTINGS) is None


@pytest.mark.parametrize("idle_minutes,rescued", [(29, False), (30, True), (120, True)])
def test_unleased_tasks_with_picked_files_are_rescued_after_the_wait(idle_minutes, rescued):
    action = rescue_picked(task(modified_at=ago(minutes=idle_minutes)), {10: 1}, NOW, SETTINGS)
    assert (action is not None) is rescued


# ------------------------------------------------------------------------------------------ pending

@pytest.mark.parametrize("priority,idle_minutes,due", [
    (500, 59, False), (500, 60, True), (900, 29, False), (900, 30, True), (950, 9, False), (950, 10, True),
])
def test_pending_tasks_are_reactivated_after_their_wait(priority, idle_minutes, due):
    pending = task(status="pending", old_status="running", current_priority=priority, modified_at=ago(minutes=idle_minutes),
                   frozen_at=ago(hours=2))
    action = reactivate_pending(pending, NOW, SETTINGS)
    if not due:
        assert action is None
    else:
        assert (action.kind, action.status) == ("reactivate", "running")
        assert action.values == {"old_status": None, "wait_until": None}  # frozen_at kept: the timeout still counts


def test_wait_until_overrides_the_idle_time():
    pending = task(status="pending", old_status="ready", modified_at=ago(days=1), wait_until=NOW + timedelta(minutes=1))
    assert reactivate_pending(pending, NOW, SETTINGS) is None
    assert reactivate_pending(dataclasses.replace(pending, wait_until=NOW), NOW, SETTINGS).status == "ready"


def test_pending_for_seven_days_is_exhausted_unless_the_parent_still_runs():
    old = task(status="pending", old_status="running", modified_at=ago(hours=2), frozen_at=ago(days=7))
    action = reactivate_pending(old, NOW, SETTINGS)
    assert (action.kind, action.status, action.reason) == (
        "pending_timeout", "exhausted", "timeout while in pending since 2024-04-24 12:00:00")
    assert reactivate_pending(old, NOW, SETTINGS, parent_status="running").status == "running"
    assert reactivate_pending(old, NOW, SETTINGS, parent_status="done").status == "exhausted"
    assert reactivate_pending(dataclasses.replace(old, frozen_at=ago(days=6, hours=23)), NOW, SETTINGS).status == "running"
    assert reactivate_pending(old, NOW, SETTINGS, timeout_days=10).status == "running"
    assert reactivate_pending(dataclasses.replace(old, old_status=None), NOW, SETTINGS) is None


# --------------------------------------------------------------------------------------- exhausted

def test_exhausted_tasks_are_finished_after_48_hours():
    assert kick_exhausted(task(status="exhausted", modified_at=ago(hours=47)), NOW, SETTINGS) is None
    action = kick_exhausted(task(status="exhausted", modified_at=ago(hours=48)), NOW, SETTINGS)
    assert (action.kind, action.status, action.reason) == ("kick_exhausted", "finishing", "exhausted for more than 48 h")
    assert kick_exhausted(task(status="exhausted", modified_at=ago(days=9), disable_auto_finish=True), NOW, SETTINGS) is None


# ------------------------------------------------------------------------------------------ throttle

def test_first_throttle_step_is_120_minutes():
    action = throttle(task(), 5.0, NOW, SETTINGS)
    assert (action.kind, action.status) == ("throttle", "throttled")
    assert action.values == {"old_status": "running", "num_throttled": 1, "wait_until": NOW + timedelta(minutes=120)}
    assert action.as_dict() == {"action": "throttle", "task_id": 7, "status": "throttled",
                                "reason": "input files failed 5.0 times on average: throttled until 2024-05-01 14:00:00"}
    assert action.reason == "input files failed 5.0 times on average: throttled until 2024-05-01 14:00:00"


@pytest.mark.parametrize("average,num_throttled,step,minutes", [
    (4.9, None, None, None),
    (9.9, 1, None, None),  # int(9.9 / 5) = 1: step 1 already taken
    (10.0, 1, 2, 480),  # 120 x 2 squared
    (15.0, 2, 3, 1080),  # 120 x 3 squared
])
def test_throttle_steps(average, num_throttled, step, minutes):
    action = throttle(task(num_throttled=num_throttled), average, NOW, SETTINGS)
    if step is None:
        assert action is None
    else:
        assert action.values["num_throttled"] == step
        assert action.values["wait_until"] == NOW + timedelta(minutes=minutes)


def test_tasks_that_cannot_be_throttled():
    assert throttle(task(no_throttle=True), 50.0, NOW, SETTINGS) is None
    assert throttle(task(status="paused"), 50.0, NOW, SETTINGS) is None


def test_throttled_tasks_are_released():
    throttled = task(status="throttled", old_status="scouting", wait_until=NOW + timedelta(minutes=1))
    assert release_throttled(throttled, NOW) is None
    done = release_throttled(throttled, NOW, released_files_done=True)
    assert (done.status, done.reason) == ("scouting", "all released files are done")
    over = release_throttled(dataclasses.replace(throttled, wait_until=NOW), NOW)
    assert (over.kind, over.status, over.values) == ("release_throttled", "scouting", {"old_status": None, "wait_until": None})


# ---------------------------------------------------------------------------------------- progress

def progress(finished=940, failed=15, n_files=1000, n_jobs=500, jobs_finished=450, jobs_failed=10) -> TaskProgress:
    return TaskProgress(n_files, finished, failed, n_jobs, jobs_finished, jobs_failed)


def test_progress_from_master_datasets():
    datasets = [DatasetRecord(1, "input", "ready", n_files=600, n_files_finished=500, n_files_failed=10),
                DatasetRecord(2, "input", "ready", n_files=400, n_files_finished=300, n_files_failed=5),
                DatasetRecord(3, "input", "ready", master_id=1, n_files=99), DatasetRecord(4, "output", "running", n_files=99)]
    figures = TaskProgress.from_datasets(datasets, n_jobs=200)
    assert (figures.n_files, figures.n_files_finished, figures.n_files_failed) == (1000, 800, 15)
    assert figures.remaining_jobs == 37  # int(185 x 200 / 1000)


def test_nearly_done_tasks_are_boosted_to_900_and_express():
    # 955 of 1000 files done (95.5 %), int(45 x 500 / 1000) = 22 jobs left
    action = boost(task(), progress(), SETTINGS)
    assert action.kind == "boost"
    assert action.values == {"current_priority": 900, "gshare": "Express"}
    assert action.reason == "95.5% of input done and 22 jobs left"
    assert boost(task(current_priority=950), progress(), SETTINGS).values == {"gshare": "Express"}
    assert boost(task(current_priority=950), progress(), SETTINGS, share_available=False) is None
    assert boost(task(current_priority=900, gshare="Express"), progress(), SETTINGS) is None


@pytest.mark.parametrize("figures,kwargs", [
    (progress(finished=930), {}),  # 94.5 % done
    (progress(n_jobs=2300), {}),  # int(45 x 2300 / 1000) = 103 jobs left
    (progress(n_jobs=0), {}),
    (progress(), {"parent_status": "running"}),
])
def test_no_boost(figures, kwargs):
    assert boost(task(), figures, SETTINGS, **kwargs) is None


def test_no_boost_unless_running():
    assert boost(task(status="scouting"), progress(), SETTINGS) is None


def test_the_counters_alone_rule_out_a_boost_below_the_done_fraction_or_once_boosted():
    counters = dataclasses.replace(progress(), n_jobs=0, n_jobs_finished=0, n_jobs_failed=0)  # what the pass knows before counting jobs
    assert may_boost(task(), counters, SETTINGS)
    assert not may_boost(task(), dataclasses.replace(counters, n_files_finished=930), SETTINGS)  # 94.5 % done
    assert not may_boost(task(current_priority=900, gshare="Express"), counters, SETTINGS)
    assert may_boost(task(current_priority=900), counters, SETTINGS)  # the share is still to give
    assert not may_boost(task(status="scouting"), counters, SETTINGS)


@given(st.integers(0, 2000), st.integers(0, 2000), st.integers(0, 2000), st.integers(0, 5000),
       st.sampled_from([500, 899, 900, 950]), st.sampled_from(["Production default", "Express"]), st.booleans())
def test_every_boost_is_of_a_task_the_counters_let_through(n_files, finished, failed, n_jobs, priority, share, available):
    """The watch pass counts jobs only for the tasks `may_boost` lets through: a boost it would skip is a lost boost."""
    figures = TaskProgress(n_files, finished, failed, n_jobs)
    counters = TaskProgress(n_files, finished, failed)
    watched = task(current_priority=priority, gshare=share)
    if boost(watched, figures, SETTINGS, share_available=available) is not None:
        assert may_boost(watched, counters, SETTINGS)


PAUSING = dataclasses.replace(SETTINGS, pause_failure_rate=0.5)
# 2000 jobs, half of the ended ones failed, int(3000 x 2000 / 4000) = 1500 jobs left
FAILING = TaskProgress(n_files=4000, n_files_finished=1000, n_files_failed=0, n_jobs=2000, n_jobs_finished=800, n_jobs_failed=800)


def test_high_failure_rate_pauses_the_task():
    action = auto_pause(task(), FAILING, PAUSING)
    assert (action.kind, action.command, action.status) == ("pause", "pause", None)
    assert action.reason == "watchdog due to high job failure rate 0.50 >= 0.5"
    assert auto_pause(task(), FAILING, SETTINGS) is None  # 0 = off, the default
    assert auto_pause(task(), FAILING, SETTINGS, failure_rate_limit=0.4) is not None


@pytest.mark.parametrize("figures,values", [
    (dataclasses.replace(FAILING, n_jobs_failed=799), {}),
    (dataclasses.replace(FAILING, n_jobs=999), {}),  # fewer than 1000 jobs
    (dataclasses.replace(FAILING, n_files_finished=3950), {}),  # int(50 x 2000 / 4000) = 25 < 100 jobs left
    (FAILING, {"no_auto_pause": True}),
    (FAILING, {"status": "paused"}),
])
def test_no_pause(figures, values):
    assert auto_pause(task(**values), figures, PAUSING) is None


def test_a_pause_spreads_to_tasks_with_the_same_payload():
    action = auto_pause(task(request_type="abc"), FAILING, PAUSING)
    others = [task(id=8, request_type="abc"), task(id=9, request_type="xyz"), task(id=10, request_type="abc", no_auto_pause=True),
              task(id=11, request_type="abc", status="done"), task(request_type="abc")]
    spread = pause_same_request_type(action, "abc", others)
    assert [(a.task_id, a.command, a.reason) for a in spread] == [(8, "pause", "watchdog due to high job failure rate in another task 7")]


# -------------------------------------------------------------------------------------------- goal

def goal(**kwargs):
    defaults = {"parent_status": None, "input_statuses": ["ready", "done"], "fresh_ready_files": 0, "output_events": 950,
                "input_events": 1000}
    defaults.update(kwargs)
    return defaults


def test_a_task_at_its_goal_is_soft_finished():
    action = goal_reached(task(goal=90.0), NOW, SETTINGS, **goal())
    assert (action.kind, action.command, action.qualifier) == ("goal_reached", "finish", "soft")
    assert action.reason == "JEDI. Goal reached (95.0% >= 90%)"
    assert action.values == {"assessed_at": NOW}
    assert action.as_dict() == {"action": "goal_reached", "task_id": 7, "reason": "JEDI. Goal reached (95.0% >= 90%)",
                                "command": "soft finish"}
    assert goal_reached(task(status="pending", goal=95.0), NOW, SETTINGS, **goal()) is not None


@pytest.mark.parametrize("values,kwargs", [
    ({"goal": 96.0}, {}),
    ({"goal": None}, {}),
    ({"goal": 90.0, "disable_auto_finish": True}, {}),
    ({"goal": 90.0, "assessed_at": ago(minutes=59)}, {}),
    ({"goal": 90.0, "status": "scouting"}, {}),
    ({"goal": 90.0}, {"parent_status": "running"}),
    ({"goal": 90.0}, {"input_statuses": ["toupdate"]}),
    ({"goal": 90.0}, {"fresh_ready_files": 3}),
    ({"goal": 90.0}, {"input_events": 0}),
])
def test_goal_not_reached(values, kwargs):
    assert goal_reached(task(**values), NOW, SETTINGS, **goal(**kwargs)) is None


def test_goal_checked_again_after_the_interval():
    assert goal_reached(task(goal=90.0, assessed_at=ago(minutes=60)), NOW, SETTINGS, **goal(parent_status="done")) is not None


# ------------------------------------------------------------------------------------------- leases

def test_an_expired_lease_is_released_and_a_live_one_kept():
    from jedictl.engine.watch.policy import release_lease

    action = release_lease(task(lease_owner="host:9:x", lease_expires_at=ago(seconds=1)), NOW)
    assert (action.kind, action.status, action.reason) == ("release_lease", None, "lease of host:9:x expired at 2024-05-01 11:59:59")
    assert action.values == {"lease_owner": None, "lease_expires_at": None}
    assert release_lease(task(lease_owner="host:9:x", lease_expires_at=NOW + timedelta(seconds=1)), NOW) is None
    assert release_lease(task(), NOW) is None
