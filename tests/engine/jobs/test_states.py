"""Job states and transitions (panda-server §2.1-2.3), heartbeat guards and kill codes (§2.8)."""

from __future__ import annotations

import pytest

from jedictl.engine.jobs.states import (
    ALLOWED,
    JobEvent,
    can_transition,
    next_status,
    plan_kill,
    status_after_kill_command,
)
from jedictl.model import JOB_FINAL, JobStatus

S = JobStatus


def test_every_status_has_a_row_and_final_statuses_have_no_way_out():
    assert set(ALLOWED) == set(JobStatus)
    for status in JOB_FINAL:
        assert ALLOWED[status] == frozenset()
    for status in set(JobStatus) - JOB_FINAL:
        assert {S.CANCELLED, S.CLOSED} <= ALLOWED[status], status  # anything alive can be killed


def test_the_normal_life_of_a_job():
    path = [
        (S.DEFINED, JobEvent.ACTIVATE, None, S.ACTIVATED),
        (S.ACTIVATED, JobEvent.DISPATCH, None, S.SENT),
        (S.SENT, JobEvent.HEARTBEAT, S.STARTING, S.STARTING),
        (S.STARTING, JobEvent.HEARTBEAT, S.RUNNING, S.RUNNING),
        (S.RUNNING, JobEvent.HEARTBEAT, S.HOLDING, S.HOLDING),
        (S.HOLDING, JobEvent.HEARTBEAT, S.MERGING, S.MERGING),
        (S.MERGING, JobEvent.REPORT, S.FINISHED, S.FINISHED),
    ]
    for old, event, reported, new in path:
        transition = next_status(old, event, reported)
        assert transition.changed and transition.new == new, (old, event, transition.reason)


@pytest.mark.parametrize("old,new", [
    (S.DEFINED, S.ASSIGNED), (S.ASSIGNED, S.ACTIVATED), (S.RUNNING, S.TRANSFERRING), (S.TRANSFERRING, S.FAILED),
    (S.RUNNING, S.FINISHED), (S.ACTIVATED, S.THROTTLED), (S.THROTTLED, S.ACTIVATED),
])
def test_valid_transitions(old, new):
    assert can_transition(old, new)


@pytest.mark.parametrize("old,new", [
    (S.DEFINED, S.RUNNING), (S.ACTIVATED, S.FINISHED), (S.RUNNING, S.ACTIVATED), (S.HOLDING, S.RUNNING),
    (S.TRANSFERRING, S.HOLDING), (S.FINISHED, S.FAILED), (S.CLOSED, S.ACTIVATED), (S.THROTTLED, S.SENT),
])
def test_invalid_transitions(old, new):
    assert not can_transition(old, new)


def test_events_and_their_transitions():
    assert next_status(S.DEFINED, JobEvent.ASSIGN).new == S.ASSIGNED
    assert next_status(S.ASSIGNED, JobEvent.ACTIVATE).new == S.ACTIVATED
    assert next_status(S.ACTIVATED, JobEvent.PAUSE).new == S.THROTTLED
    assert next_status(S.THROTTLED, JobEvent.RESUME).new == S.ACTIVATED
    assert next_status(S.RUNNING, JobEvent.REPORT, S.FAILED).new == S.FAILED
    assert next_status(S.RUNNING, JobEvent.KILL, by_person=True).new == S.CANCELLED
    assert next_status(S.ACTIVATED, JobEvent.KILL).new == S.CLOSED  # killed by the system
    assert next_status(S.SENT, JobEvent.TIMEOUT).new == S.CLOSED


@pytest.mark.parametrize("old,event,reported,reason", [
    (S.ACTIVATED, JobEvent.DISPATCH, None, None),  # control: this one changes
    (S.DEFINED, JobEvent.DISPATCH, None, "not a valid job transition"),  # not activated yet
    (S.RUNNING, JobEvent.PAUSE, None, "not a valid job transition"),  # only queued jobs are throttled
    (S.ACTIVATED, JobEvent.HEARTBEAT, S.RUNNING, "has not been dispatched"),
    (S.ACTIVATED, JobEvent.REPORT, S.FINISHED, "not a valid job transition"),
    (S.RUNNING, JobEvent.REPORT, S.HOLDING, "finished or failed"),
    (S.RUNNING, JobEvent.HEARTBEAT, S.FINISHED, "a heartbeat says"),
])
def test_invalid_events_change_nothing(old, event, reported, reason):
    transition = next_status(old, event, reported)
    if reason is None:
        assert transition.changed
    else:
        assert not transition.changed and reason in transition.reason


@pytest.mark.parametrize("old,reported,reason", [
    (S.FAILED, S.RUNNING, "already done"),  # PanDA answers "alreadydone"
    (S.FINISHED, S.HOLDING, "already done"),
    (S.MERGING, S.RUNNING, "merging jobs are not changed"),
    (S.HOLDING, S.RUNNING, "not changed by a running heartbeat"),
    (S.HOLDING, S.TRANSFERRING, "not changed by a transferring heartbeat"),
    (S.TRANSFERRING, S.HOLDING, "not changed by a holding heartbeat"),
    (S.TRANSFERRING, S.STARTING, "not changed"),
    (S.RUNNING, S.STARTING, "counts as running"),
    (S.RUNNING, S.RUNNING, "already running"),
])
def test_heartbeat_guards(old, reported, reason):
    transition = next_status(old, JobEvent.HEARTBEAT, reported)
    assert transition.new is None and reason in transition.reason


def test_reports_for_final_jobs():
    assert "duplicate" in next_status(S.FINISHED, JobEvent.REPORT, S.FINISHED).reason
    assert "already done" in next_status(S.CANCELLED, JobEvent.REPORT, S.FINISHED).reason
    assert next_status(S.CLOSED, JobEvent.KILL).new is None


# ----------------------------------------------------------------------------------- kill codes

@pytest.mark.parametrize("code,status,sub_status", [
    (2, S.CLOSED, "toreassign"), (4, S.CLOSED, "toreassign"), (51, S.CLOSED, "toreassign"),
    (55, S.CLOSED, "taskdone"), (10, S.CLOSED, None), (60, S.CLOSED, None),
    (3, S.CANCELLED, None), (8, S.CANCELLED, None), (9, S.CANCELLED, None), (50, S.CANCELLED, None),
    (52, S.CANCELLED, None), (91, S.CANCELLED, None), (None, S.CANCELLED, None), (1234, S.CANCELLED, None),
])
def test_kill_codes_on_a_queued_job(code, status, sub_status):
    plan = plan_kill(S.ACTIVATED, code)
    assert (plan.new, plan.sub_status, plan.command_to_pilot) == (status, sub_status, None)


def test_a_running_job_is_asked_to_stop_unless_force_killed():
    plan = plan_kill(S.RUNNING, 51)
    assert (plan.new, plan.command_to_pilot) == (None, "tobekilled")
    assert plan_kill(S.RUNNING, 9).new == S.CANCELLED
    assert plan_kill(S.MERGING, 50).new == S.CANCELLED  # merging jobs are archived at once
    assert plan_kill(S.SENT, None).new == S.CANCELLED
    # its failed report then becomes cancelled
    assert status_after_kill_command(S.FAILED, "tobekilled") == S.CANCELLED
    assert status_after_kill_command(S.FINISHED, "tobekilled") == S.FINISHED
    assert status_after_kill_command(S.FAILED, None) == S.FAILED


def test_kill_of_final_jobs():
    assert plan_kill(S.FINISHED, 9) is None
    retried = plan_kill(S.FAILED, 7)
    assert retried.new is None and retried.reason == "retried at another site"
