"""The per-user caps' decisions (engine.shares.user_caps), without a store."""

from __future__ import annotations

import dataclasses

from jedictl.config import UserCapSettings
from jedictl.engine.shares.user_caps import (
    GB,
    Account,
    AwaitedInput,
    Backlog,
    Load,
    account_of,
    backlogs,
    generation_block,
    job_cap_action,
    transfer_actions,
)

CAPS = UserCapSettings(running_user_jobs=10, running_user_cores=40, running_group_jobs=100, running_group_cores=400)
ANN, HIGGS = Account("user", "ann"), Account("group", "phys-higgs")


def test_a_group_task_counts_against_the_group_and_a_personal_one_against_its_user():
    assert account_of("ann", None) == ANN and account_of("ann", "") == ANN
    assert account_of("ann", "phys-higgs") == HIGGS and str(HIGGS) == "group phys-higgs"


def test_at_the_running_cap_the_activated_jobs_are_throttled():
    assert job_cap_action(ANN, Load(running_jobs=9, activated=5), CAPS) is None
    action = job_cap_action(ANN, Load(running_jobs=10, activated=5), CAPS)
    assert (action.action, action.reason) == ("throttle_jobs", "user ann: 10 running jobs >= user_caps.running_user_jobs 10")
    cores = job_cap_action(ANN, Load(running_jobs=5, running_cores=40, activated=1), CAPS)
    assert cores.reason == "user ann: 40 running cores >= user_caps.running_user_cores 40"
    assert job_cap_action(ANN, Load(running_jobs=12), CAPS) is None  # nothing queued to throttle


def test_a_group_has_the_group_caps():
    assert job_cap_action(HIGGS, Load(running_jobs=10, activated=5), CAPS) is None
    assert job_cap_action(HIGGS, Load(running_jobs=100, activated=5), CAPS).reason == (
        "group phys-higgs: 100 running jobs >= user_caps.running_group_jobs 100")


def test_throttled_jobs_go_back_below_the_release_fraction_of_both_caps():
    assert job_cap_action(ANN, Load(running_jobs=9, capped=3), CAPS) is None  # 9 >= 0.9 x 10
    assert job_cap_action(ANN, Load(running_jobs=8, running_cores=36, capped=3), CAPS) is None  # cores 36 >= 0.9 x 40
    action = job_cap_action(ANN, Load(running_jobs=8, running_cores=8, capped=3), CAPS)
    assert action.action == "release_jobs"
    assert action.reason == "user ann: 8 running jobs and 8 cores, below 0.9 x user_caps.running_user_jobs 10 and .running_user_cores 40"
    assert job_cap_action(ANN, Load(running_jobs=0), CAPS) is None  # nothing held


def test_generation_stops_over_the_running_cap_or_twice_it_queued():
    assert generation_block(ANN, Load(running_jobs=10, queued_jobs=20, running_cores=40, queued_cores=80), CAPS) is None
    assert generation_block(ANN, Load(running_jobs=11), CAPS) == "user ann: 11 running jobs > user_caps.running_user_jobs 10"
    assert generation_block(ANN, Load(running_cores=41), CAPS) == "user ann: 41 running cores > user_caps.running_user_cores 40"
    assert generation_block(ANN, Load(queued_jobs=21), CAPS) == "user ann: 21 queued jobs > 2 x user_caps.running_user_jobs 10"
    assert generation_block(ANN, Load(queued_cores=81), CAPS) == "user ann: 81 queued cores > 2 x user_caps.running_user_cores 40"
    three = dataclasses.replace(CAPS, queued_factor=3.0)
    assert generation_block(ANN, Load(queued_jobs=21), three) is None
    assert Load(queued_jobs=1, queued_cores=8).plus_queued(2, 16) == Load(queued_jobs=3, queued_cores=24)


def _awaited(account, task_id, lfn, size, on_disk=True, dataset="ds"):
    return AwaitedInput(account, task_id, dataset, lfn, size, on_disk)


def test_backlogs_count_a_file_once_per_account_and_kind():
    found = backlogs([_awaited(ANN, 1, "a", 5 * GB), _awaited(ANN, 2, "a", 5 * GB), _awaited(ANN, 2, "b", 1 * GB),
                      _awaited(ANN, 3, "t", 7 * GB, on_disk=False), _awaited(HIGGS, 4, "a", 2 * GB)])
    assert found == {(ANN, "transfer"): Backlog(6 * GB, frozenset({1, 2})), (ANN, "prestaging"): Backlog(7 * GB, frozenset({3})),
                     (HIGGS, "transfer"): Backlog(2 * GB, frozenset({4}))}


def test_tasks_over_a_limit_are_throttled_and_released_once_within():
    limits = dataclasses.replace(CAPS, transfer_limit_gb=5.0, prestage_limit_gb=1.0)
    totals = {(ANN, "transfer"): Backlog(6 * GB, frozenset({1, 2})), (ANN, "prestaging"): Backlog(GB, frozenset({3})),
              (HIGGS, "prestaging"): Backlog(2 * GB, frozenset({4}))}
    runnable = {1: ANN, 2: ANN, 3: ANN, 5: ANN}
    actions = transfer_actions(totals, {4: (HIGGS, "prestaging"), 6: (ANN, "prestaging")}, runnable, limits)
    assert [(a.task_id, a.action, a.kind) for a in actions] == [
        (1, "throttle_transfers", "transfer"), (2, "throttle_transfers", "transfer"),  # 3: 1 GB is within; 5 waits for nothing
        (6, "release_transfers", "prestaging")]  # 4 stays: its group is still over
    assert actions[0].reason == "user ann: 6.0 GB of input waits for transfer > user_caps.transfer_limit_gb 5 GB"
    assert actions[2].reason == "user ann: 1.0 GB of input waits for prestaging, within user_caps.prestage_limit_gb 1 GB"
    # A task already throttled is not throttled again; nothing waiting at all releases every one.
    assert transfer_actions(totals, {1: (ANN, "transfer")}, {1: ANN}, limits) == []
    assert [a.task_id for a in transfer_actions({}, {1: (ANN, "transfer")}, {}, limits)] == [1]
