"""The order generation gives work queues and global shares, and the status rows of `queue-shares`, by hand."""

from __future__ import annotations

import random

import pytest

from jedictl.engine.shares.usage import (
    Counts,
    GenerationOrder,
    Usage,
    generation_order,
    queue_order,
    queue_status,
    share_status,
)
from jedictl.engine.shares.definitions import export_document, plan_import, plan_set
from jedictl.engine.shares.fair_share import load_definitions, queue_shares
from jedictl.engine.generate.task_order import Candidate, order_tasks
from jedictl.engine.shares.work_queues import load_queues
from jedictl.errors import BadInput, NotFound
from tests.engine.shares.test_fair_share import SEED_QUEUES

TREE = [{"name": "A", "value": 50, "processingtype": "a"}, {"name": "B", "value": 30, "processingtype": "b"},
        {"name": "C", "value": 20, "processingtype": "c"}]


def usage(shares=None, queues=None, active_shares=(), active_queues=()):
    return Usage({k: Counts(running_hs06=v, running_jobs=int(v)) for k, v in (shares or {}).items() if v},
                 {k: Counts(running_hs06=v, running_jobs=int(v)) for k, v in (queues or {}).items() if v},
                 frozenset(active_shares) | {k for k, v in (shares or {}).items() if v},
                 frozenset(active_queues) | {k for k, v in (queues or {}).items() if v})


def test_queue_order_level_by_level():
    rows = queue_shares(load_queues(SEED_QUEUES), active={"evgensimul", "group", "repro_fast", "repro_slow"})
    managed = [r for r in rows if r.queue_type == "managed"]
    # Targets of 100 executing: evgensimul 40, group 10, reprocessing 50 (repro_fast 37.5, repro_slow 12.5).
    executing = {"evgensimul": 50, "group": 5, "repro_fast": 40, "repro_slow": 5}
    # evgensimul 50/40 = 1.25, group 0.5, reprocessing 45/50 = 0.9; inside: repro_fast 40/37.5 = 1.07, repro_slow 0.4
    assert queue_order(managed, executing) == ["group", "repro_slow", "repro_fast", "evgensimul"]
    # Nothing executes: definition order; a queue with a target and nothing executing leads.
    assert queue_order(managed, {}) == ["evgensimul", "group", "repro_fast", "repro_slow"]
    assert queue_order(managed, {"evgensimul": 10}) == ["group", "repro_fast", "repro_slow", "evgensimul"]
    # An idle queue (effective 0) has no target: last in its level. evgensimul 44.44 and reprocessing 55.56 of 20
    # executing: 10/8.89 against 10/11.11; inside the partition the idle repro_fast after repro_slow.
    idle = queue_shares(load_queues(SEED_QUEUES), active={"evgensimul", "repro_slow"})
    assert queue_order([r for r in idle if r.queue_type == "managed"], {"evgensimul": 10, "repro_slow": 10}) == [
        "repro_slow", "repro_fast", "evgensimul", "group"]


def test_stretchable_changes_who_is_under_served():
    definitions = [{"name": n, "queue_type": "managed", "share": s, "criteria": f"processingType = '{n}'", "stretchable": n == "A"}
                   for n, s in (("A", 50), ("B", 30), ("C", 20))]
    rows = queue_shares(load_queues(definitions), active={"A", "B"})
    # C's 20 all go to A (stretchable): targets 70 / 30 of 100 executing
    assert [(r.name, r.effective) for r in rows] == [("A", 70.0), ("B", 30.0), ("C", 0.0)]
    assert queue_order(rows, {"A": 65, "B": 35}) == ["A", "B", "C"]  # 65/70 < 35/30
    definitions[0]["stretchable"] = False
    rows = queue_shares(load_queues(definitions), active={"A", "B"})  # 62.5 / 37.5
    assert queue_order(rows, {"A": 65, "B": 35}) == ["B", "A", "C"]  # 35/37.5 < 65/62.5


def test_generation_order_ranks_share_then_queue():
    definitions = load_definitions({"work_queues": SEED_QUEUES, "global_shares": TREE + [
        {"name": "Free", "value": 0, "throttled": False}]})
    order = generation_order(definitions, usage({"A": 60, "B": 20, "C": 20}, {("managed", "evgensimul"): 50, ("managed", "group"): 50}))
    # A 60/50, B 20/30, C 20/20 -> B, C, A; Free has no pledge
    assert order.share_ranks == {"B": 0, "C": 1, "A": 2, "Free": 3}
    # Queues: reprocessing is idle, its 50 go to evgensimul and group as 40:10 -> 80 / 20 of 100 executing:
    # evgensimul 50/80 before group 50/20, the idle partition's sub-queues last.
    assert order.rank("B", "group", "managed") == (0, 1)
    assert {name: rank for (label, name), rank in order.queue_ranks.items() if label == "managed"} == {
        "evgensimul": 0, "group": 1, "repro_fast": 2, "repro_slow": 3}
    assert order.rank("Nope", "nope", "managed") == (4, len(order.queue_ranks))
    assert order.unthrottled == frozenset({"Free"})


def test_tasks_are_visited_by_share_rank_first():
    candidates = [Candidate(1, "ann", 500, share_rank=(2, 0)), Candidate(2, "bob", 100, share_rank=(0, 1)),
                  Candidate(3, "ann", 900, share_rank=(0, 0)), Candidate(4, "cy", 2000, share_rank=(2, 0)),
                  Candidate(5, "bob", 100, share_rank=(0, 0))]
    order = order_tasks(candidates, random.Random(1), express_ratio=0.0)
    assert order[:2] in ([3, 5], [5, 3]) and order[2] == 2 and order[3:] == [1, 4]
    # One rank: exactly the order without ranks (the random draws are the same).
    plain = [Candidate(c.task_id, c.user, c.priority) for c in candidates]
    assert order_tasks(plain, random.Random(7)) == order_tasks([Candidate(c.task_id, c.user, c.priority, share_rank=(1, 1))
                                                               for c in candidates], random.Random(7))


def test_share_status_rows():
    definitions = load_definitions({"global_shares": [{"name": "P", "value": 80, "children": [
        {"name": "A", "value": 50}, {"name": "B", "value": 50}]}, {"name": "C", "value": 20}]})
    rows = {r["path"]: r for r in share_status(definitions.share_tree, usage({"A": 30, "B": 50, "C": 20, "X": 0}), tolerance=0.05)}
    assert list(rows) == ["P", "P/A", "P/B", "C"]  # X: nothing running, no tasks -> not listed
    # 100 executing: targets P 80 (A 40, B 40), C 20
    assert {p: (r["configured_pct"], r["effective_pct"], r["actual_pct"], r["state"]) for p, r in rows.items()} == {
        "P": (80.0, 80.0, 80.0, "on_target"), "P/A": (40.0, 40.0, 30.0, "under"), "P/B": (40.0, 40.0, 50.0, "over"),
        "C": (20.0, 20.0, 20.0, "on_target")}
    assert (rows["P"]["running_jobs"], rows["P"]["leaf"], rows["P"]["rank"], rows["P/A"]["parent"]) == (80, False, None, "P")
    # Within 5 %: on target; an undefined share that jobs carry is listed.
    rows = {r["path"]: r for r in share_status(definitions.share_tree, usage({"A": 39, "B": 41, "C": 20, "X": 10}), 0.05)}
    assert (rows["P/A"]["state"], rows["P/B"]["state"], rows["X"]["state"]) == ("on_target", "on_target", "undefined")
    # Nothing executes: active shares are under-served, idle ones idle.
    rows = {r["path"]: r for r in share_status(definitions.share_tree, usage(active_shares={"A"}), 0.05)}
    assert {p: (r["effective_pct"], r["state"]) for p, r in rows.items()} == {
        "P": (100.0, "under"), "P/A": (100.0, "under"), "P/B": (0.0, "idle"), "C": (0.0, "idle")}


def test_queue_status_rows_with_a_partition_and_a_switched_off_queue():
    definitions = [dict(q) for q in SEED_QUEUES]
    definitions[1]["status"] = "inactive"  # group
    queues = load_queues(definitions)
    rows = {r["name"]: r for r in queue_status(queues, usage(queues={("managed", "evgensimul"): 45, ("managed", "repro_fast"): 45,
                                                                         ("managed", "repro_slow"): 10}))}
    # evgensimul 40 and reprocessing 50 of 90 -> 44.44 / 55.56 (fast 41.67, slow 13.89)
    assert {n: (r["effective_pct"], r["actual_pct"], r["state"]) for n, r in rows.items()} == {
        "evgensimul": (44.44, 45.0, "on_target"), "reprocessing": (55.56, 55.0, "on_target"),
        "repro_fast": (41.67, 45.0, "over"), "repro_slow": (13.89, 10.0, "under"),
        "group": (None, None, "switched_off"), "analysis": (None, None, "not_throttled")}
    assert rows["reprocessing"]["running_jobs"] == 55 and rows["repro_slow"]["path"] == "reprocessing/repro_slow"
    assert rows["repro_slow"]["rank"] < rows["repro_fast"]["rank"]


def test_plans_are_validated_whole_and_name_their_section():
    current = load_definitions({"work_queues": SEED_QUEUES, "global_shares": TREE})
    plan = plan_import({"global_shares": [{"name": "Z", "value": 1}]}, current)
    assert list(plan.rows) == ["global_shares"] and [q.name for q in plan.definitions.queues] == [q["name"] for q in SEED_QUEUES]
    assert plan_import(export_document(current), current).definitions.queues == current.queues
    plan = plan_set(current, "repro_fast", 6, None)
    assert plan.change["before"] == {"share": 3, "stretchable": False} and plan.change["after"] == {"share": 6, "stretchable": False}
    assert next(q for q in plan.definitions.queues if q.name == "repro_fast").share == 6
    with pytest.raises(NotFound):
        plan_set(current, "Z", 1, None)
    with pytest.raises(BadInput, match="--stretchable"):
        plan_set(current, "A", None, True)
    assert isinstance(GenerationOrder({}, {}).rank(None, None, None), tuple)
