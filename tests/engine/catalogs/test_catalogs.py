"""Work queues, global shares and resource types as the refiner uses them."""

from __future__ import annotations

import pytest

from jedictl.config import Settings
from jedictl.engine.shares.resource_types import load_resource_types, match_resource_type, ram_per_core
from jedictl.engine.shares.global_shares import load_shares, match_share, normalise
from jedictl.engine.shares.work_queues import load_queues, match_queue
from jedictl.errors import BadInput


def test_queues_are_tried_in_order_and_first_match_wins():
    queues = load_queues(Settings().work_queues)
    attrs = {"processingType": "simul", "workingGroup": "GP_TOP", "coreCount": 8}
    assert match_queue(queues, attrs, "atlas", "managed").name == "evgensimul"
    assert match_queue(queues, {**attrs, "processingType": "reco"}, "atlas", "managed").name == "group"
    assert match_queue(queues, {"processingType": "reco", "coreCount": 8}, "atlas", "managed").name == "mcore"
    assert match_queue(queues, {"processingType": "reco", "coreCount": 1}, "atlas", "managed").name == "managed"
    assert match_queue(queues, {}, "atlas", "user").name == "user"
    assert match_queue(queues, {}, "atlas", "unknown-label") is None
    assert match_queue(queues, attrs, "atlas", "managed", requested="managed").name == "managed"


def test_partition_sub_queues():
    queues = load_queues([
        {"name": "prod", "queue_type": "managed", "kind": "partition", "share": 80},
        {"name": "evgen", "queue_type": "managed", "kind": "sub", "partition": "prod", "order": 1, "criteria": "processingType = 'evgen'"},
        {"name": "rest", "queue_type": "managed", "kind": "sub", "partition": "prod", "order": 2},
    ])
    chosen = match_queue(queues, {"processingType": "evgen"}, "wlcg", "managed")
    assert (chosen.name, chosen.partition) == ("evgen", "prod")
    with pytest.raises(BadInput, match="names no known partition"):
        load_queues([{"name": "x", "queue_type": "managed", "kind": "sub", "partition": "nope"}])
    with pytest.raises(BadInput, match="partition has no criteria"):
        load_queues([{"name": "p", "queue_type": "managed", "kind": "partition", "criteria": "coreCount > 1"}])


def test_share_tree_normalises_per_parent_and_matches_in_tree_order():
    root = load_shares(Settings().global_shares)
    values = normalise(root)
    assert values["Production"] == pytest.approx(60.0)
    assert values["MC Simulation"] == pytest.approx(60 * 50 / 100)
    assert values["Analysis"] == pytest.approx(25.0)
    task = {"prodsourcelabel": "managed", "processingtype": "simul", "workinggroup": None}
    assert match_share(root, task).name == "MC Simulation"
    assert match_share(root, {**task, "processingtype": "reco", "workinggroup": "GP_HIGGS"}).name == "Group production"
    assert match_share(root, {**task, "processingtype": "urgent"}).name == "Express"
    assert match_share(root, {"prodsourcelabel": "ptest"}).name == "Test"
    assert match_share(root, {"prodsourcelabel": "weird"}).name == "Default"
    assert match_share(root, task, requested="Analysis").name == "Analysis"
    assert match_share(root, task, requested="Production") is None  # not a leaf


def test_bad_share_definitions():
    with pytest.raises(BadInput, match=r"global_shares\[1\].name: share 'A' is defined twice"):
        load_shares([{"name": "A"}, {"name": "A"}])
    with pytest.raises(BadInput, match=r"processingtype: is not a valid regular expression"):
        load_shares([{"name": "A", "processingtype": "(("}])
    with pytest.raises(BadInput, match=r"colour: unknown share attribute"):
        load_shares([{"name": "A", "colour": "red"}])


@pytest.mark.parametrize("cores,ram,unit,base,expected", [
    (1, 2000, "MBPerCore", 0, "SCORE"),  # 2000 x 0.9 = 1800 per core
    (8, 2000, "MBPerCore", 0, "MCORE"),
    (1, 3000, "MBPerCore", 0, "SCORE_HIMEM"),  # 2700
    (8, 2500, "MBPerCore", 0, "MCORE_HIMEM"),  # 2250
    (8, 16000, "MB", 0, "MCORE"),  # 16000/8 x 0.9 = 1800
    (0, 2000, "MBPerCore", 0, "MCORE"),  # 0 cores = any = 8
    (1, 2000, "MBPerCore", 500, "SCORE_HIMEM"),  # (2000+500) x 0.9 = 2250
])
def test_resource_types(cores, ram, unit, base, expected):
    types = load_resource_types(Settings().resource_types)
    assert match_resource_type(types, cores, ram_per_core(ram, unit, base, cores, 0.9)) == expected
