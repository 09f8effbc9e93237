"""Task commands: the accept/refuse table over every status, the doing/done statuses, what happens to jobs,
and the retry/incexec file reset (jedi-inventory.md §9, panda-server.md §1.2, §2.8; seeds 000, 001)."""

from __future__ import annotations

import pytest

from jedictl.engine.commando.rules import (
    ACTIVE_JOB_STATUSES,
    COMMANDS,
    QUEUED_JOB_STATUSES,
    CommandTask,
    DatasetChange,
    FileChange,
    children_to_retry,
    default_comment,
    done_status,
    finish_files,
    plan_retry,
    reassign_target,
    refusal,
    start,
)
from jedictl.engine.task.final_status import DatasetRecord
from jedictl.model import TaskStatus
from jedictl.model.files import FileRecord

# Every status a task can be in: jedictl's own plus JEDI's that model.TaskStatus does not list yet.
ALL_STATUSES = sorted({s.value for s in TaskStatus} | {"toabort", "toreassign", "reassigning", "staging"})

# Written out by hand from panda-server.md §1.2 (_check_command_allowed) and jedi-inventory.md §9.1 --
# deliberately not derived from the module under test.
KILL_REFUSED = {"finished", "done", "prepared", "broken", "aborted", "toabort", "aborting", "failed"}
ACCEPTED = {
    "kill": set(ALL_STATUSES) - KILL_REFUSED,
    "finish": set(ALL_STATUSES) - KILL_REFUSED,
    "retry": {"finished", "failed", "exhausted"},
    "incexec": {"finished", "failed", "aborted", "done", "exhausted"},
    "pause": set(ALL_STATUSES) - {"done", "finished", "failed", "broken", "aborted", "paused"},
    "resume": {"paused", "throttled", "staging"},
    "avalanche": {"scouting"},
    "reassign": {"defined", "ready", "running", "scouting", "scouted", "pending", "assigning", "exhausted"},
    "release": {"scouting", "pending", "running", "ready", "assigning", "defined"},
}


def test_the_table_covers_every_command():
    assert set(COMMANDS) == set(ACCEPTED)


@pytest.mark.parametrize("command", sorted(ACCEPTED))
@pytest.mark.parametrize("status", ALL_STATUSES)
def test_every_command_in_every_status(command, status):
    reason = refusal(command, status, task_id=12)
    if status in ACCEPTED[command]:
        assert reason is None
    else:
        assert reason is not None
        assert reason.startswith(f"cannot {command} task 12: ")
        assert status in reason


def test_refusal_messages_say_what_would_be_needed():
    assert refusal("retry", "running", task_id=3) == \
        "cannot retry task 3: its status is running (retry needs exhausted or failed or finished)"
    assert refusal("kill", "done", task_id=3) == (
        "cannot kill task 3: its status is done (kill is refused in aborted, aborting, broken, done, failed, "
        "finished, prepared, toabort)")
    assert refusal("retry", "broken", task_id=3) == \
        "cannot retry task 3: it is broken; fix the task definition and submit a new task"


def test_retrying_an_exhausted_task_needs_the_production_role():
    assert refusal("retry", "exhausted", task_id=3, production_role=False) == \
        "cannot retry task 3: retrying an exhausted task needs the production role"
    assert refusal("retry", "finished", production_role=False) is None


def test_unknown_commands_and_qualifiers_are_refused():
    assert refusal("explode", "running") == \
        "unknown command 'explode' (known: kill, finish, retry, incexec, pause, resume, avalanche, reassign, release)"
    assert refusal("finish", "running", qualifier="soft") is None
    assert refusal("kill", "running", qualifier="soft") == "kill takes no qualifier 'soft' (allowed: none)"


@pytest.mark.parametrize("command,doing,done", [
    ("kill", "aborting", "toabort"),
    ("finish", "finishing", "passed"),
    ("retry", "toretry", "ready"),
    ("incexec", "toincexec", "rerefine"),
    ("reassign", "toreassign", "reassigning"),
    ("pause", "paused", "paused"),
    ("resume", None, None),
    ("release", None, None),
])
def test_doing_and_done_statuses(command, doing, done):
    assert (COMMANDS[command].doing, COMMANDS[command].done) == (doing, done)


def test_kill_kills_every_active_job_with_code_50():
    begun = start("kill", CommandTask(1, "running"))
    assert (begun.status, begun.old_status, begun.kill_code) == ("aborting", "running", 50)
    assert begun.kill_job_statuses == ACTIVE_JOB_STATUSES
    assert ACTIVE_JOB_STATUSES == {"defined", "assigned", "activated", "sent", "starting", "running", "holding",
                                   "transferring", "merging", "throttled"}
    assert done_status("kill", active_jobs=3) is None
    assert done_status("kill", active_jobs=0) == "toabort"


def test_soft_finish_kills_only_queued_jobs_and_hard_finish_all():
    soft = start("finish", CommandTask(1, "running"), "soft")
    assert (soft.status, soft.kill_code, soft.kill_job_statuses) == ("finishing", 52, QUEUED_JOB_STATUSES)
    assert QUEUED_JOB_STATUSES == {"defined", "assigned", "activated", "throttled"}
    assert start("finish", CommandTask(1, "running")).kill_job_statuses == ACTIVE_JOB_STATUSES
    assert done_status("finish", 0) == "passed"


def test_reassign_kills_queued_jobs_with_code_51():
    default = start("reassign", CommandTask(1, "running"))
    assert (default.status, default.kill_code, default.kill_job_statuses) == ("toreassign", 51, QUEUED_JOB_STATUSES)
    assert start("reassign", CommandTask(1, "running"), "nokill").kill_job_statuses == frozenset()
    assert start("reassign", CommandTask(1, "running"), "hard").kill_job_statuses == ACTIVE_JOB_STATUSES
    assert done_status("reassign", 0) == "reassigning"


def test_old_status_is_kept_from_pending_and_throttled_and_cleared_from_paused():
    assert start("kill", CommandTask(1, "pending", old_status="running")).old_status == "running"
    assert start("pause", CommandTask(1, "throttled", old_status="scouting")).old_status == "scouting"
    assert start("kill", CommandTask(1, "throttled", old_status="scouting")).old_status == "throttled"
    assert start("kill", CommandTask(1, "paused", old_status="running")).old_status is None


def test_pause_and_resume_flip_queued_jobs():
    paused = start("pause", CommandTask(1, "running"))
    assert (paused.status, paused.old_status, paused.flip_jobs) == ("paused", "running", ("activated", "throttled"))
    resumed = start("resume", CommandTask(1, "paused", old_status="running"))
    assert (resumed.status, resumed.old_status, resumed.flip_jobs) == ("running", None, ("throttled", "activated"))
    assert start("resume", CommandTask(1, "throttled", old_status=None)).status == "ready"


def test_avalanche_ends_scouting():
    assert start("avalanche", CommandTask(1, "scouting")).status == "scouted"


def test_retry_of_a_task_exhausted_while_processing_just_goes_on():
    assert start("retry", CommandTask(1, "exhausted", old_status="running")).status == "running"
    assert start("retry", CommandTask(1, "exhausted", old_status="scouting")).status == "scouting"
    assert start("retry", CommandTask(1, "exhausted", old_status="scouting", walltime_unit="kSI2kseconds")).status == "running"
    ordinary = start("retry", CommandTask(1, "finished"))
    assert (ordinary.status, ordinary.old_status) == ("toretry", "finished")


MASTER = DatasetRecord(id=1, type="input", status="finished", n_files=6, n_files_to_be_used=6, n_files_used=6,
                       n_files_finished=1, n_files_failed=3)
SECONDARY = DatasetRecord(id=2, type="input", status="done", master_id=1, n_files=1, n_files_to_be_used=1, n_files_used=1,
                          n_files_failed=1)
OUTPUT = DatasetRecord(id=3, type="output", status="finished", n_files=6, n_files_finished=1)
FILES = [
    FileRecord(11, 1, "input", "finished", attempt_nr=1, max_attempt=3),
    FileRecord(12, 1, "input", "ready", attempt_nr=3, max_attempt=3),  # out of attempts
    FileRecord(13, 1, "input", "failed", attempt_nr=3, max_attempt=3),
    FileRecord(14, 1, "input", "ready", attempt_nr=1, max_attempt=3, failed_attempt=3, max_failure=3),  # out of failures
    FileRecord(15, 1, "input", "running", attempt_nr=1, max_attempt=3),  # left behind by a killed job
    FileRecord(16, 1, "input", "picked", attempt_nr=0, max_attempt=3),
    FileRecord(21, 2, "input", "ready", attempt_nr=3, max_attempt=3),
]


def test_retry_resets_only_unsuccessful_inputs():
    plan = plan_retry("toretry", "finished", [MASTER, SECONDARY, OUTPUT], FILES, attempt_increase=5, task_attempt_nr=1,
                      task_priority=800)
    assert (plan.outcome, plan.status) == ("retried", "ready")
    assert plan.files == (
        FileChange(12, {"status": "ready", "max_attempt": 8}),
        FileChange(13, {"status": "ready", "max_attempt": 8}),
        FileChange(14, {"status": "ready", "max_attempt": 8, "max_failure": 8}),
        FileChange(15, {"status": "ready", "attempt_nr": 2, "max_attempt": 8}),
        FileChange(16, {"status": "ready", "attempt_nr": 1, "max_attempt": 8}),
        FileChange(21, {"status": "ready", "max_attempt": 8}),
    )
    assert plan.datasets == (
        DatasetChange(1, {"n_files_used": -5, "n_files_failed": -3}, "ready"),
        DatasetChange(2, {"n_files_used": -1, "n_files_failed": -1}, "ready"),
        DatasetChange(3, {}, "done"),
    )
    assert plan.task_values == {"attempt_nr": 2, "started_at": None, "frozen_at": None, "old_status": None,
                                "current_priority": 800}
    assert plan.retry_children


def test_retry_with_a_new_max_attempt_and_qualifiers():
    plan = plan_retry("toretry", "failed", [MASTER], FILES[:3], attempt_increase=5, max_attempt=10,
                      qualifiers=["keep", "sole"], task_priority=800)
    assert plan.files == (FileChange(12, {"status": "ready", "max_attempt": 10}), FileChange(13, {"status": "ready", "max_attempt": 10}))
    assert "current_priority" not in plan.task_values and not plan.retry_children
    # a ceiling the files already reached changes nothing: back to the old status
    unchanged = plan_retry("toretry", "failed", [MASTER], FILES[:3], attempt_increase=5, max_attempt=3)
    assert (unchanged.outcome, unchanged.status, unchanged.reason) == ("unchanged", "failed", "no new or unprocessed files to retry")


def test_retry_of_a_fully_done_master_changes_nothing():
    done = DatasetRecord(id=1, type="input", status="done", n_files=1, n_files_to_be_used=1, n_files_used=1, n_files_finished=1)
    plan = plan_retry("toretry", "finished", [done], [FileRecord(11, 1, "input", "finished", 1, 3)], attempt_increase=5)
    assert (plan.outcome, plan.status) == ("unchanged", "finished")


def test_retry_of_an_exhausted_task_keeps_running_files_and_always_goes_ready():
    plan = plan_retry("toretry", "exhausted", [MASTER], FILES[4:6], attempt_increase=5)
    assert (plan.outcome, plan.status, plan.files) == ("retried", "ready", ())


def test_incexec_recovers_lost_files_and_forgets_per_file_ram():
    files = [FileRecord(31, 1, "input", "lost", attempt_nr=0, max_attempt=3), FileRecord(32, 1, "input", "ready", 1, 3, ram_count=4000),
             FileRecord(33, 1, "input", "ready", attempt_nr=3, max_attempt=3, ram_count=6000)]
    dataset = DatasetRecord(id=1, type="input", status="done", n_files=3, n_files_to_be_used=2, n_files_used=2,
                            n_files_finished=1, n_files_failed=1, n_files_missing=1)
    plan = plan_retry("toincexec", "done", [dataset], files, attempt_increase=5, incexec=True)
    assert (plan.outcome, plan.status) == ("retried", "rerefine")
    assert plan.files == (
        FileChange(31, {"status": "ready"}),
        FileChange(32, {"ram_count": 0}),
        FileChange(33, {"status": "ready", "max_attempt": 8, "ram_count": 0}),
    )
    assert plan.datasets == (DatasetChange(1, {"n_files_used": -1, "n_files_failed": -1, "n_files": 1,
                                              "n_files_to_be_used": 1, "n_files_missing": -1}, "toupdate"),)


def test_retry_hard_limits():
    exhausted = plan_retry("toretry", "finished", [MASTER], FILES, attempt_increase=5, task_attempt_nr=3, task_max_attempt=3)
    assert (exhausted.outcome, exhausted.status) == ("exhausted", "exhausted")
    assert plan_retry("toretry", "finished", [MASTER], FILES, attempt_increase=5, task_attempt_nr=3, task_max_attempt=3,
                      qualifiers=["transcend"]).outcome == "retried"
    refused = plan_retry("toretry", "finished", [MASTER], FILES, attempt_increase=5, job_max_attempt=6)
    assert (refused.outcome, refused.status, refused.reason) == ("refused", "finished", "file 12 would exceed 6 attempts")
    broken = plan_retry("toretry", "broken", [MASTER], FILES, attempt_increase=5)
    assert (broken.outcome, broken.status) == ("refused", "broken")


def test_children_are_retried_unless_aborted_broken_or_failed():
    children = [(2, "finished"), (3, "failed"), (4, "aborted"), (5, "broken"), (6, "exhausted"), (7, "running")]
    assert children_to_retry(children) == [2, 6]


def test_finish_makes_every_ready_input_terminal():
    files = [FileRecord(41, 1, "input", "ready", attempt_nr=1, max_attempt=3), FileRecord(42, 1, "input", "ready", attempt_nr=0, max_attempt=3),
             FileRecord(43, 1, "input", "ready", attempt_nr=3, max_attempt=3), FileRecord(44, 1, "input", "finished", 1, 3),
             FileRecord(45, 1, "input", "ready", keep_track=False), FileRecord(46, 3, "input", "defined")]
    updates, deltas = finish_files([MASTER, OUTPUT], files)
    assert updates == [FileChange(41, {"status": "failed", "max_attempt": 1}), FileChange(42, {"status": "failed", "max_attempt": 0})]
    # failed files count as used; the watermark is raised to cover them (6 used + 2 > 6 released)
    assert deltas == [DatasetChange(1, {"n_files_failed": 2, "n_files_used": 2, "n_files_to_be_used": 2})]


@pytest.mark.parametrize("nucleus,old,expected", [
    (None, "running", "assigning"), ("NUC", None, "ready"), ("NUC", "exhausted", "ready"),
    ("NUC", "assigning", "ready"), ("NUC", "running", "running"),
])
def test_reassign_target(nucleus, old, expected):
    assert reassign_target(nucleus, old) == expected


def test_default_comment():
    assert default_comment("finish", "alice", "soft") == "soft finish by alice"
    assert default_comment("kill", "bob") == "kill by bob"
