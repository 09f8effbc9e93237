"""The reassignment policy (engine.watch.reassign_policy): which queues are overloaded, which jobs may
move, and where each goes -- pure functions, no store."""

from __future__ import annotations

from datetime import datetime, timedelta

from jedictl.config import ReassignSettings
from jedictl.engine.watch.reassign_policy import (
    Placements,
    QueuedJob,
    QueueStat,
    Target,
    choose_target,
    find_overloads,
    stalled,
    why_not_movable,
)

NOW = datetime(2026, 11, 27, 14, 0)
SETTINGS = ReassignSettings()
OLD = NOW - timedelta(hours=4)


def test_a_long_queue_that_does_not_move_is_overloaded_by_the_least_overshoot():
    stats = [QueueStat("A", "prod", 40, 5, OLD), QueueStat("B", "prod", 10, 10, OLD)]
    [found] = find_overloads(stats, {"A": None, "B": NOW}, NOW, SETTINGS)
    # 40 - 3 x 5 = 25, 40 - 10 = 30, 40 - 0.3 x 50 = 25 -> 25
    assert (found.site, found.gshare, found.queued, found.running, found.excess) == ("A", "prod", 40, 5, 25)
    assert found.reason.startswith("site A (prod): 40 queued > 3 x 5 running, > 10 and > 0.3 x 50 queued in the share; never took a job")


def test_each_check_alone_keeps_a_queue_off_the_list():
    def found(stat, *others, **settings):
        return find_overloads([stat, *others], {}, NOW, ReassignSettings(**settings))

    assert found(QueueStat("A", "p", 30, 10, OLD)) == []  # 30 is not more than 3 x 10 running
    assert found(QueueStat("A", "p", 10, 0, OLD)) == []  # not more than min_queue 10
    assert found(QueueStat("A", "p", 11, 0, OLD), QueueStat("B", "p", 30, 20, OLD)) == []  # 11 <= 0.3 x 41
    assert found(QueueStat("A", "p", 11, 0, NOW - timedelta(hours=1))) == []  # its oldest job waited 1 h only
    assert [o.excess for o in found(QueueStat("A", "p", 11, 0, OLD))] == [1]
    assert [o.excess for o in found(QueueStat("A", "p", 11, 0, OLD), min_queue=0, queue_fraction=0)] == [11]


def test_a_site_that_took_a_job_lately_makes_progress():
    assert stalled(NOW - timedelta(hours=1), OLD, NOW, SETTINGS) is None
    assert stalled(NOW - timedelta(hours=3, minutes=5), OLD, NOW, SETTINGS) == (
        "took no job for 3h05m; its oldest queued job waited 4h00m (limit 3h00m)")
    assert stalled(None, None, NOW, SETTINGS) is None


def test_shares_are_counted_apart():
    stats = [QueueStat("A", "prod", 20, 0, OLD), QueueStat("A", "anal", 5, 0, OLD)]
    assert [(o.gshare, o.excess) for o in find_overloads(stats, {}, NOW, SETTINGS)] == [("prod", 10)]


def _job(**values) -> QueuedJob:
    base = {"job_id": 1, "task_id": 1, "status": "activated", "site": "A", "kind": "normal", "waiting_since": OLD}
    return QueuedJob(**{**base, **values})


def test_what_keeps_a_job_where_it_is():
    assert why_not_movable(_job(), NOW, SETTINGS) is None
    assert why_not_movable(_job(status="assigned"), NOW, SETTINGS) is None
    assert "not queued" in why_not_movable(_job(status="sent"), NOW, SETTINGS)
    assert "merge job" in why_not_movable(_job(kind="merge"), NOW, SETTINGS)
    assert why_not_movable(_job(disable_reassign=True), NOW, SETTINGS) == "its task says disableReassign"
    assert why_not_movable(_job(outputs_bound="stays"), NOW, SETTINGS) == "stays"
    assert "queued for 30m only" in why_not_movable(_job(waiting_since=NOW - timedelta(minutes=30)), NOW, SETTINGS)


def test_a_target_holds_the_input_has_room_and_is_not_the_source():
    targets = [Target("A", 5.0, 0, 10, frozenset({0, 1})), Target("B", 1.0, 0, 10, frozenset({0})), Target("C", 2.0, 0, 10, frozenset({0, 1}))]
    placed = Placements()
    assert choose_target(frozenset({0, 1}), targets, "A", placed).site == "C"  # A is the source, B lacks file 1
    assert choose_target(frozenset({0}), targets, "A", placed).site == "C"
    assert choose_target(frozenset({0}), targets, "A", Placements(excluded=frozenset({"C"}))).site == "B"
    assert choose_target(frozenset({2}), targets, "A", placed) is None


def test_moves_spread_by_what_the_pass_already_sent():
    targets = [Target("B", 2.0, 0, 10, frozenset({0})), Target("C", 1.0, 0, 1, frozenset({0}))]
    placed = Placements()
    picks = []
    for _ in range(4):
        target = choose_target(frozenset({0}), targets, "A", placed)
        placed.add(target.site)
        picks.append(target.site)
    # B's weight is scaled by 1/(moved+1); C takes one only (its room)
    assert picks == ["B", "B", "C", "B"]
    full = Placements(moved={"B": 10, "C": 1})
    assert choose_target(frozenset({0}), targets, "A", full) is None
