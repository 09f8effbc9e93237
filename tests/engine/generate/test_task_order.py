"""The generator's task order (engine.generate.task_order) with privileges and group shares."""

from __future__ import annotations

import random

from jedictl.engine.generate.task_order import Candidate, order_tasks


def test_privileged_analysis_tasks_go_in_the_express_lane_whatever_their_priority():
    candidates = [Candidate(1, "bob", 1000), Candidate(2, "cy", 1000), Candidate(3, "alice", 1000, jumps=True)]
    for seed in range(20):
        assert order_tasks(candidates, random.Random(seed), express_ratio=1.0)[0] == 3
    # Without the privilege it is one user among others: not always first.
    plain = [Candidate(1, "bob", 1000), Candidate(2, "cy", 1000), Candidate(3, "alice", 1000)]
    assert {order_tasks(plain, random.Random(seed), express_ratio=1.0)[0] for seed in range(20)} != {3}


def test_a_groups_tasks_take_their_turns_as_the_group():
    """Two users' tasks of one working group share one turn per round: the group counts once."""
    candidates = [Candidate(1, "ann", 900, working_group="phys-higgs"), Candidate(2, "bob", 900, working_group="phys-higgs"),
                  Candidate(3, "cy", 900)]
    for seed in range(20):
        order = order_tasks(candidates, random.Random(seed))
        assert order.index(3) <= 1  # cy has a turn in the first round, whoever goes first
    assert Candidate(1, "ann", 900, working_group="phys-higgs").account == "group phys-higgs"
    assert Candidate(3, "cy", 900).account == "cy"


def test_groups_with_a_share_go_first_the_most_under_served_first():
    candidates = [Candidate(1, "ann", 900), Candidate(2, "bob", 900, working_group="GP_Top", group_usage=50.0),
                  Candidate(3, "cy", 900, working_group="GP_Higgs", group_usage=10.0), Candidate(4, "dan", 900)]
    for seed in range(20):
        assert order_tasks(candidates, random.Random(seed), express_ratio=0.0)[:2] == [3, 2]

