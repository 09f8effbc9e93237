"""Phase complete, the avalanche and the final status (jedi-inventory.md §7.1, §7.3, §7.4)."""

from __future__ import annotations

import pytest

from jedictl.engine.task.final_status import (
    ChildTask,
    DatasetRecord,
    DatasetUpdate,
    avalanche,
    avalanche_count,
    child_actions,
    completeness,
    final_dataset_statuses,
    final_status,
    from_row,
    phase_complete,
    prepare,
)


def master(n_files=10, finished=0, failed=0, to_be_used=None, status="ready", state=None, events=0, events_used=0, id=1):
    return DatasetRecord(id=id, type="input", status=status, state=state, n_files=n_files,
                         n_files_to_be_used=n_files if to_be_used is None else to_be_used, n_files_used=finished + failed,
                         n_files_finished=finished, n_files_failed=failed, n_events=events, n_events_used=events_used)


SECONDARY = DatasetRecord(id=2, type="input", status="ready", master_id=1, n_files=3, n_files_to_be_used=3)
OUTPUT = DatasetRecord(id=3, type="output", status="running", n_files=10, n_files_finished=8)
LOG = DatasetRecord(id=4, type="log", status="running", n_files=10, n_files_finished=10)
UNMERGED = DatasetRecord(id=5, type="trn_output", status="running", n_files=10, n_files_finished=10)


def test_record_loads_from_a_row_mapping():
    row = {"id": 7, "task_id": 3, "type": "input", "status": "ready", "master_id": None, "state": "closed", "n_files": 5,
           "n_files_to_be_used": 5, "n_files_used": 2, "n_files_finished": 1, "n_files_failed": 1, "n_files_on_hold": 0,
           "n_files_missing": 0, "n_events": 50, "n_events_to_be_used": 50, "n_events_used": 10, "name": "ds"}
    record = from_row(DatasetRecord, row)
    assert record == DatasetRecord(7, "input", "ready", None, "closed", 5, 5, 2, 1, 1, 0, 50, 10)
    assert record.is_master_input and record.has_unprocessed


@pytest.mark.parametrize("to_be_used,finished,failed,complete", [
    (10, 7, 3, True),
    (10, 6, 3, False),
    (20, 10, 0, False),  # scouting released 20 files and only 10 ended
    (20, 15, 5, True),
])
def test_phase_complete_when_every_released_master_file_is_terminal(to_be_used, finished, failed, complete):
    datasets = [master(n_files=100, to_be_used=to_be_used, finished=finished, failed=failed), SECONDARY, OUTPUT]
    assert phase_complete(datasets) is complete


def test_closed_masters_and_secondaries_do_not_hold_the_phase():
    assert phase_complete([master(to_be_used=10, finished=2, status="done"), SECONDARY])
    assert phase_complete([master(to_be_used=10, finished=2, status="removed")])


def test_unmerged_files_waiting_for_merge_jobs_hold_the_phase():
    done = master(to_be_used=10, finished=10)
    waiting = DatasetRecord(id=6, type="trn_log", status="running", n_files_to_be_used=10, n_files_used=8, n_files_finished=6)
    assert not phase_complete([done, waiting])
    merged = DatasetRecord(id=6, type="trn_log", status="running", n_files_to_be_used=10, n_files_used=10, n_files_finished=9, n_files_failed=1)
    assert phase_complete([done, merged, UNMERGED])


def test_avalanche_releases_every_available_file():
    counts = {"ready": 80, "finished": 10, "running": 2, "pending": 5, "lost": 2, "missing": 1}
    assert avalanche_count(counts) == 92
    scouting = master(n_files=100, to_be_used=20)
    assert avalanche([scouting, SECONDARY], {1: counts}) == [DatasetUpdate(1, n_files_to_be_used=92)]
    assert avalanche([master(n_files=92, to_be_used=92)], {1: counts}) == []


def test_prepare_sends_a_task_with_mutable_input_back_to_the_feeder():
    decision = prepare([master(to_be_used=10, finished=10, state="mutable"), OUTPUT])
    assert (decision.action, decision.task_status) == ("refeed", "defined")
    assert decision.datasets == (DatasetUpdate(1, status="toupdate"),)


def test_prepare_waits_while_released_files_run():
    decision = prepare([master(to_be_used=10, finished=5), OUTPUT])
    assert (decision.action, decision.task_status, decision.datasets) == ("wait", None, ())


@pytest.mark.parametrize("finished,failed,status", [(10, 0, "done"), (0, 10, "failed"), (6, 4, "finished")])
def test_prepare_settles_every_dataset(finished, failed, status):
    decision = prepare([master(finished=finished, failed=failed), SECONDARY, OUTPUT, LOG])
    assert (decision.action, decision.task_status) == ("prepared", "prepared")
    assert decision.datasets == (
        DatasetUpdate(1, status=status), DatasetUpdate(2, status="done"),
        DatasetUpdate(3, status="prepared"), DatasetUpdate(4, status="prepared"),
    )


@pytest.mark.parametrize("status,datasets,kwargs,expected", [
    ("tobroken", [master(finished=10)], {}, ("broken", None)),
    ("toabort", [master(finished=10)], {}, ("aborted", None)),
    ("paused", [master(finished=3)], {}, ("paused", None)),
    ("prepared", [master(finished=10)], {}, ("done", None)),
    ("prepared", [master(finished=10)], {"parent_status": "done"}, ("done", None)),
    ("prepared", [master(finished=10)], {"parent_status": "finished"}, ("finished", "parent task is finished")),
    ("prepared", [master(finished=10)], {"parent_status": "running"}, ("finished", "parent task is running")),
    ("prepared", [master(finished=10)], {"parent_status": "failed"}, ("failed", "parent task is failed")),
    ("prepared", [master(finished=10)], {"parent_status": "aborted"}, ("failed", "parent task is aborted")),
    ("prepared", [master(finished=10, state="mutable")], {}, ("finished", "input is still mutable")),
    ("prepared", [master(failed=10)], {}, ("failed", "no input file was processed successfully")),
    ("prepared", [master(finished=6, failed=4)], {}, ("finished", "6/10 input files processed")),
    ("prepared", [master(n_files=0)], {}, ("failed", "no input")),
    ("prepared", [master(n_files=0)], {"allow_empty_input": True}, ("done", None)),
    ("passed", [master(finished=6, failed=0)], {}, ("finished", "6/10 input files processed")),
    # removed masters do not count
    ("prepared", [master(finished=10), master(id=9, finished=0, failed=5, status="removed")], {}, ("done", None)),
])
def test_final_status(status, datasets, kwargs, expected):
    result = final_status(status, datasets, **kwargs)
    assert (result.status, result.reason) == expected


def test_completeness_reads_events_when_known_else_files():
    assert completeness([master(finished=6, failed=4)]) == 60.0
    assert completeness([master(finished=6, failed=4, events=1000, events_used=950)]) == 95.0
    assert completeness([master(n_files=0)]) == 0.0


@pytest.mark.parametrize("status,goal,fg,ux,expected", [
    # 95 % of the events done
    ("prepared", 90.0, True, False, "finished"),  # goal reached
    ("prepared", None, True, False, "failed"),  # the default goal is 100 %
    ("prepared", None, False, False, "finished"),  # below the goal without FG: just finished
    ("prepared", 99.0, False, True, "exhausted"),  # useExhausted parks it for an operator
    ("passed", 99.0, False, True, "finished"),  # ...unless an operator finished it
    ("passed", 99.0, True, True, "failed"),  # FG applies once it was forced to finish
    ("prepared", 90.0, False, True, "finished"),
])
def test_goal_rules(status, goal, fg, ux, expected):
    datasets = [master(finished=9, failed=1, events=1000, events_used=950)]
    result = final_status(status, datasets, goal=goal, fail_when_goal_unreached=fg, use_exhausted=ux)
    assert result.status == expected
    assert result.completeness == 95.0


def test_goal_messages():
    datasets = [master(finished=9, failed=1, events=1000, events_used=950)]
    assert final_status("prepared", datasets, fail_when_goal_unreached=True).reason == "goal 100% not reached (95.0%)"
    assert final_status("prepared", datasets, use_exhausted=True).reason == \
        "exhausted since the task was incomplete and didn't reach the goal"
    done_but_parent = [master(finished=10, events=1000, events_used=900)]
    assert final_status("prepared", done_but_parent, parent_status="running", use_exhausted=True).reason == \
        "exhausted since the parent task was incomplete and didn't reach the goal"


def test_final_dataset_statuses_of_a_successful_task():
    datasets = [master(finished=10, status="done"), SECONDARY, OUTPUT, LOG, UNMERGED]
    assert final_dataset_statuses("finished", datasets) == [
        DatasetUpdate(3, status="finished", n_files=8),  # 2 of its 10 files were not produced
        DatasetUpdate(4, status="done", n_files=10),
        DatasetUpdate(5, status="done"),
    ]


def test_final_dataset_statuses_of_a_failed_task_and_of_a_finished_passed_task():
    datasets = [master(finished=0, failed=10), OUTPUT, LOG]
    assert [u.status for u in final_dataset_statuses("failed", datasets)] == ["failed", "failed", "failed"]
    assert [u.status for u in final_dataset_statuses("aborted", datasets)] == ["failed", "failed", "failed"]
    # a finish command skips prepare: the master is settled here
    passed = [master(finished=6, failed=4), OUTPUT]
    assert final_dataset_statuses("finished", passed)[0] == DatasetUpdate(1, status="finished")


FAMILY = [
    ChildTask(2, 1, "running"), ChildTask(3, 1, "done"), ChildTask(4, 2, "pending"),
    ChildTask(5, 4, "registered"), ChildTask(6, 1, "pending"), ChildTask(7, 2, "toabort"),
]


def test_a_failed_parent_kills_its_whole_subtree():
    actions = child_actions(1, "failed", FAMILY)
    assert [(a.task_id, a.action, a.new_status, a.reason) for a in actions] == [
        (2, "kill", "toabort", "parent task is failed"),
        (6, "kill", "toabort", "parent task is failed"),
        (4, "kill", "toabort", "parent task is toabort"),
        (5, "kill", "toabort", "parent task is toabort"),
    ]


def test_a_successful_parent_kicks_its_children():
    actions = child_actions(1, "done", FAMILY)
    assert [(a.task_id, a.action) for a in actions] == [(2, "kick"), (6, "kick")]
