"""Work-queue and global-share arithmetic with the seed's own examples (seed 000 "Work queues", "Shares",
"JEDI_Work_Queue") and redistribution cases computed by hand."""

from __future__ import annotations

import pytest

from jedictl.config import Settings
from jedictl.engine.shares.fair_share import (
    Unit,
    dispatch_key,
    dispatch_rank,
    effective_global_shares,
    flatten_shares,
    leaf_order,
    load_definitions,
    nest_shares,
    queue_shares,
    redistribute,
    service,
)
from jedictl.engine.shares.global_shares import load_shares, normalise
from jedictl.engine.shares.work_queues import load_queues, match_queue
from jedictl.errors import BadInput

# The seed's JEDI_Work_Queue examples, plus a partition with two sub-queues.
SEED_QUEUES = [
    {"name": "evgensimul", "queue_type": "managed", "order": 10, "share": 40,
     "criteria": "processingType IN (:p1,:p2)", "variables": "p1:evgen,p2:simul"},
    {"name": "group", "queue_type": "managed", "order": 20, "share": 10,
     "criteria": "workingGroup LIKE :p1", "variables": "p1:GP_%"},
    {"name": "reprocessing", "queue_type": "managed", "kind": "partition", "order": 30, "share": 50},
    {"name": "repro_fast", "queue_type": "managed", "kind": "sub", "partition": "reprocessing", "order": 31, "share": 3,
     "criteria": "processingType = 'reprocessing' AND coreCount > 1"},
    {"name": "repro_slow", "queue_type": "managed", "kind": "sub", "partition": "reprocessing", "order": 32, "share": 1,
     "criteria": "processingType = 'reprocessing'"},
    {"name": "analysis", "queue_type": "user", "order": 10, "criteria": ""},
]


def shares_by_name(rows):
    return {row.name: (round(row.configured, 6) if row.configured is not None else None,
                       round(row.effective, 6) if row.effective is not None else None) for row in rows}


@pytest.mark.parametrize("attributes,expected", [
    ({"processingType": "evgen"}, "evgensimul"),
    ({"processingType": "simul", "workingGroup": "GP_Higgs"}, "evgensimul"),  # first match by order wins
    ({"processingType": "merge", "workingGroup": "GP_Higgs"}, "group"),
    ({"processingType": "merge", "workingGroup": "AP_Higgs"}, None),
    ({"processingType": "reprocessing", "coreCount": 8}, "repro_fast"),
    ({"processingType": "reprocessing", "coreCount": 1}, "repro_slow"),
])
def test_seed_queue_examples_match_tasks(attributes, expected):
    queues = load_queues(SEED_QUEUES)
    queue = match_queue(queues, attributes, "atlas", "managed")
    assert (queue.name if queue else None) == expected


def test_configured_shares_of_the_seed_queues():
    rows = queue_shares(load_queues(SEED_QUEUES), active={"evgensimul", "group", "repro_fast", "repro_slow"})
    # the partition's 50 divided 3:1 among its sub-queues; the user queue has no share (not throttled)
    assert shares_by_name(rows) == {
        "evgensimul": (40.0, 40.0), "group": (10.0, 10.0), "reprocessing": (50.0, 50.0),
        "repro_fast": (37.5, 37.5), "repro_slow": (12.5, 12.5), "analysis": (None, None),
    }
    assert [(row.name, row.kind, row.partition, row.active) for row in rows if row.kind == "sub"] == [
        ("repro_fast", "sub", "reprocessing", True), ("repro_slow", "sub", "reprocessing", True)]


def test_an_idle_queue_lends_its_share_to_all_active_queues_in_proportion():
    rows = queue_shares(load_queues(SEED_QUEUES), active={"evgensimul", "repro_slow"})
    # group (10) is idle and nobody stretches: evgensimul 40 + 10 x 40/90, reprocessing 50 + 10 x 50/90;
    # inside the partition repro_fast is idle, so repro_slow gets the whole 55.56
    assert shares_by_name(rows) == {
        "evgensimul": (40.0, 44.444444), "group": (10.0, 0.0), "reprocessing": (50.0, 55.555556),
        "repro_fast": (37.5, 0.0), "repro_slow": (12.5, 55.555556), "analysis": (None, None),
    }


def test_a_stretchable_queue_takes_the_unused_share_first():
    definitions = [dict(q) for q in SEED_QUEUES]
    definitions[1]["stretchable"] = True  # group
    rows = queue_shares(load_queues(definitions), active={"evgensimul", "group"})
    # reprocessing (50) is idle: all of it goes to the only stretchable active queue
    assert shares_by_name(rows)["group"] == (10.0, 60.0)
    assert shares_by_name(rows)["evgensimul"] == (40.0, 40.0)


def test_a_switched_off_queue_is_left_out():
    definitions = [dict(q) for q in SEED_QUEUES]
    definitions[0]["status"] = "inactive"  # evgensimul
    rows = shares_by_name(queue_shares(load_queues(definitions), active={"group", "repro_fast"}))
    assert "evgensimul" not in rows
    # group 10 and reprocessing 50 of 60 in all
    assert rows["group"] == (pytest.approx(100 / 6, abs=1e-6), pytest.approx(100 / 6, abs=1e-6))
    assert rows["reprocessing"] == (pytest.approx(500 / 6, abs=1e-6), pytest.approx(500 / 6, abs=1e-6))


@pytest.mark.parametrize("units,expected", [
    # no stretchable queue: C's 20 goes to A and B as 50:30
    ([Unit("A", 50, True), Unit("B", 30, True), Unit("C", 20, False)], {"A": 62.5, "B": 37.5, "C": 0.0}),
    # A stretches: it alone takes C's 20
    ([Unit("A", 50, True, True), Unit("B", 30, True), Unit("C", 20, False)], {"A": 70.0, "B": 30.0, "C": 0.0}),
    # two stretchable queues share D's 10 as 40:30
    ([Unit("A", 40, True, True), Unit("B", 30, True, True), Unit("C", 20, True), Unit("D", 10, False)],
     {"A": 40 + 10 * 40 / 70, "B": 30 + 10 * 30 / 70, "C": 20.0, "D": 0.0}),
    # the only stretchable queue is idle itself: everybody active shares, 30:20
    ([Unit("A", 50, False, True), Unit("B", 30, True), Unit("C", 20, True)], {"A": 0.0, "B": 60.0, "C": 40.0}),
    # everybody busy: nothing moves
    ([Unit("A", 50, True), Unit("B", 50, True, True)], {"A": 50.0, "B": 50.0}),
    # nobody busy: nobody gets anything
    ([Unit("A", 50, False), Unit("B", 50, False)], {"A": 0.0, "B": 0.0}),
])
def test_redistribution_by_hand(units, expected):
    assert redistribute(units) == pytest.approx(expected)


def test_the_default_global_share_tree_after_redistribution():
    root = load_shares(Settings().global_shares)
    assert normalise(root) == pytest.approx({
        "Express": 10.0, "Test": 5.0, "Production": 60.0, "MC Simulation": 30.0, "Group production": 6.0,
        "Production default": 24.0, "Analysis": 25.0, "Default": 0.0})
    effective = effective_global_shares(root, {"MC Simulation", "Analysis"})
    # root: only Production (60) and Analysis (25) are busy -> 60/85 and 25/85; inside Production only MC
    assert effective == pytest.approx({
        "Express": 0.0, "Test": 0.0, "Production": 6000 / 85, "MC Simulation": 6000 / 85, "Group production": 0.0,
        "Production default": 0.0, "Analysis": 2500 / 85, "Default": 0.0})
    assert sum(effective[leaf.name] for leaf in root.leaves()) == pytest.approx(100.0)
    assert effective_global_shares(root, set()) == {name: 0.0 for name in normalise(root)}


def test_target_against_actual_ranks_the_most_under_served_first():
    rows = service({"A": 50.0, "B": 30.0, "C": 20.0, "D": 0.0}, {"A": 40, "B": 40, "C": 20})
    # 100 running: targets 50, 30, 20
    assert [(r.name, r.target, r.state) for r in rows] == [
        ("A", 50.0, "under"), ("C", 20.0, "on_target"), ("B", 30.0, "over"), ("D", 0.0, "idle")]
    assert [round(r.ratio, 4) if r.ratio is not None else None for r in rows] == [0.8, 1.0, 1.3333, None]
    tolerant = service({"A": 50.0, "B": 50.0}, {"A": 48, "B": 52}, tolerance=0.05)
    assert [r.state for r in tolerant] == ["on_target", "on_target"]


def test_a_queue_with_a_target_and_nothing_running_leads():
    rows = service({"A": 50.0, "B": 50.0}, {"B": 10})
    assert [(r.name, r.ratio, r.state) for r in rows] == [("A", 0.0, "under"), ("B", 2.0, "over")]


def test_leaf_order_by_executing_over_pledged():
    root = load_shares(Settings().global_shares)
    executing = {"Test": 5, "MC Simulation": 100, "Production default": 50, "Analysis": 45}  # 200 in all
    # top level: Express 0/20, Test 5/10, Analysis 45/50, Production 150/120, Default has no pledge (last);
    # inside Production: Group 0/12, default 50/48, MC 100/60
    assert leaf_order(root, executing) == [
        "Express", "Test", "Analysis", "Group production", "Production default", "MC Simulation", "Default"]


def test_dispatch_orders_by_share_rank_then_priority_then_age():
    ranks = dispatch_rank(["Express", "Analysis", "Test", "MC Simulation"])
    assert ranks == {"Test": 0, "Express": 1, "Analysis": 2, "MC Simulation": 3}
    jobs = [(1, "MC Simulation", 900), (2, "Analysis", 100), (3, "Analysis", 500), (4, "Express", 1), (5, None, 5000),
            (6, "Test", 1), (7, "Analysis", 500)]
    ordered = sorted(jobs, key=lambda job: dispatch_key(job[1], job[2], job[0], ranks))
    assert [job[0] for job in ordered] == [6, 4, 3, 7, 2, 1, 5]


FLAT = [
    {"name": "Production", "value": 60},
    {"name": "MC", "value": 50, "parent": "Production", "processingtype": "simul|evgen", "sort_order": 2},
    {"name": "Group", "value": 10, "parent": "Production", "workinggroup": "GP_.*", "sort_order": 1},
    {"name": "Analysis", "value": 40, "prodsourcelabel": "user"},
]


def test_flat_shares_with_parent_names_nest_in_sort_order():
    assert nest_shares(FLAT) == [
        {"name": "Production", "value": 60, "children": [
            {"name": "Group", "value": 10, "workinggroup": "GP_.*"},
            {"name": "MC", "value": 50, "processingtype": "simul|evgen"}]},
        {"name": "Analysis", "value": 40, "prodsourcelabel": "user"},
    ]
    root = load_shares(nest_shares(FLAT))
    assert normalise(root) == pytest.approx({"Production": 60.0, "Group": 10.0, "MC": 50.0, "Analysis": 40.0})
    assert nest_shares(flatten_shares(root)) == nest_shares(FLAT)


def test_a_whole_import_document():
    definitions = load_definitions({"work_queues": SEED_QUEUES, "global_shares": FLAT})
    assert [q.name for q in definitions.queues] == [q["name"] for q in SEED_QUEUES]
    assert [leaf.name for leaf in definitions.share_tree.leaves()] == ["Group", "MC", "Analysis"]


@pytest.mark.parametrize("document,path,message", [
    ({"global_shares": [{"name": "A", "value": 1, "parent": "B"}, {"name": "B", "value": 1, "parent": "A"}]},
     "queue_shares.global_shares[0].parent", "shares form a cycle: A -> B -> A"),
    ({"global_shares": [{"name": "A", "value": 1, "parent": "A"}]},
     "queue_shares.global_shares[0].parent", "shares form a cycle: A -> A"),
    ({"global_shares": [{"name": "A", "value": 1, "parent": "Nowhere"}]},
     "queue_shares.global_shares[0].parent", "names no share defined here ('Nowhere')"),
    ({"global_shares": [{"name": "A", "value": 1}, {"name": "A", "value": 2}]},
     "queue_shares.global_shares[1].name", "share 'A' is defined twice (first at queue_shares.global_shares[0])"),
    ({"global_shares": [{"name": "A", "value": 1, "colour": "red"}]},
     "queue_shares.global_shares[0].colour", "unknown attribute"),
    ({"global_shares": [{"name": "A", "value": 1, "processingtype": "simul("}]},
     "queue_shares.global_shares[0].processingtype", "is not a valid regular expression"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "colour": "red"}]},
     "queue_shares.work_queues[0].colour", "unknown attribute"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "processingType LIKE"}]},
     "queue_shares.work_queues[0].criteria", "ends too early"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "colour = 'red'"}]},
     "queue_shares.work_queues[0].criteria", "unknown attribute 'colour'"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "kind": "sub", "partition": "p"}]},
     "queue_shares.work_queues[0].partition", "names no known partition"),
    ({"queues": []}, "queue_shares.queues", "unknown section"),
])
def test_malformed_definitions_are_refused_with_their_path(document, path, message):
    document = {"work_queues": [], "global_shares": [{"name": "Default", "value": 1}], **document}
    with pytest.raises(BadInput) as caught:
        load_definitions(document)
    assert caught.value.path == path
    assert message in str(caught.value)
