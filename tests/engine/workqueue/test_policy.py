"""The queue layers' rules without a database (engine.workqueue.policy; seed 002, docs/queue-layers.md):
the slots of each level, counting only work of equal or higher priority, the matching order, the random
site choice, the site lists and pile-up, the owner cap, the pass's limit, the estimate and the end."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from jedictl.engine.workqueue.policy import (
    Charge, Element, Level, Threshold, ended_status, estimate_jobs, match_elements, order_elements, possible_sites, slot_limits, used_slots,
)

T0 = datetime(2030, 3, 1, 8, 0)
A, B = ("SITE_A", "managed"), ("SITE_B", "managed")


def _element(element_id: int, priority: int = 500, sites: tuple[str, ...] = ("SITE_A",), jobs: int = 1, age: int = 0, owner: str = "alice",
             job_type: str = "managed") -> Element:
    return Element(element_id, priority, T0 - timedelta(minutes=age), job_type, owner, jobs, sites)


# ---------------------------------------------------------------------------------------------- slots

def test_the_global_level_adds_both_thresholds_and_does_not_subtract_running_jobs():
    thresholds = [Threshold("SITE_A", "managed", 10, 20)]
    assert slot_limits(thresholds, Level.GLOBAL, {A: 15}) == {A: 30}


def test_the_local_level_subtracts_the_running_jobs_never_below_zero():
    thresholds = [Threshold("SITE_A", "managed", 10, 20), Threshold("SITE_B", "managed", 1, 1)]
    assert slot_limits(thresholds, Level.LOCAL, {A: 15, B: 5}) == {A: 15, B: 0}


def test_a_drained_site_is_left_out_globally_and_kept_locally_a_down_site_everywhere():
    thresholds = [Threshold("SITE_A", "managed", 5, 5, "drain"), Threshold("SITE_B", "managed", 5, 5, "down")]
    assert slot_limits(thresholds, Level.GLOBAL, {}) == {}
    assert slot_limits(thresholds, Level.LOCAL, {A: 3}) == {A: 7}


def test_thresholds_are_per_job_type():
    thresholds = [Threshold("SITE_A", "managed", 5, 5), Threshold("SITE_A", "user", 1, 0)]
    assert slot_limits(thresholds, Level.GLOBAL, {}) == {A: 10, ("SITE_A", "user"): 1}
    charges = [Charge("SITE_A", "user", 900, 1)]
    assert used_slots(charges, "SITE_A", "managed", 0) == 0


def test_only_work_of_equal_or_higher_priority_counts():
    charges = [Charge("SITE_A", "managed", 100, 7), Charge("SITE_A", "managed", 500, 2), Charge("SITE_A", "managed", 900, 1),
               Charge("SITE_B", "managed", 900, 50)]
    assert used_slots(charges, "SITE_A", "managed", 500) == 3
    assert used_slots(charges, "SITE_A", "managed", 100) == 10
    assert used_slots(charges, "SITE_A", "managed", 901) == 0


# ------------------------------------------------------------------------------------------- matching

def test_elements_are_matched_by_priority_then_age_then_id():
    elements = [_element(1, 100), _element(2, 900, age=1), _element(3, 900, age=5), _element(4, 900, age=5)]
    assert [e.id for e in order_elements(elements)] == [3, 4, 2, 1]
    result = match_elements(elements, {A: 2}, [], random.Random(1))
    assert [m.element_id for m in result.matches] == [3, 4]
    assert set(result.left) == {1, 2} and result.left[2] == "no free slot at priority 900 (SITE_A)"


def test_higher_priority_work_is_not_kept_out_by_lower_priority_work():
    full_of_low = [Charge("SITE_A", "managed", 100, 50)]  # the site is far over its 10 slots, at priority 100
    result = match_elements([_element(1, 100), _element(2, 500)], {A: 10}, full_of_low, random.Random(0))
    assert [m.element_id for m in result.matches] == [2]
    assert "no free slot at priority 100" in result.left[1]


def test_a_whole_element_is_charged_to_the_site_that_had_one_free_slot():
    result = match_elements([_element(1, jobs=40), _element(2, jobs=1)], {A: 10}, [Charge("SITE_A", "managed", 500, 9)], random.Random(0))
    assert [m.element_id for m in result.matches] == [1]  # 9 < 10: in it goes, all 40 jobs (WMCore's known overshoot)
    assert 2 in result.left


def test_the_site_is_chosen_at_random_among_the_possible_ones_the_agent_serves():
    chosen = set()
    for seed in range(30):
        result = match_elements([_element(1, sites=("SITE_A", "SITE_B", "SITE_C"))], {A: 5, B: 5}, [], random.Random(seed))
        chosen.add(result.matches[0].site)
    assert chosen == {"SITE_A", "SITE_B"}  # never SITE_C, which the agent does not serve


def test_a_full_site_gives_way_to_another_possible_one():
    result = match_elements([_element(1, sites=("SITE_A", "SITE_B"))], {A: 5, B: 5}, [Charge("SITE_A", "managed", 500, 5)], random.Random(3))
    assert result.matches[0].site == "SITE_B"


def test_no_site_of_the_agent_and_no_site_at_all_are_told_apart():
    result = match_elements([_element(1, sites=("SITE_C",)), _element(2, sites=())], {A: 5}, [], random.Random(0))
    assert result.left == {1: "no site of the agent holds its data", 2: "its data is at no site"}


def test_an_element_whose_sites_the_level_leaves_out_says_so():
    limits = slot_limits([Threshold("SITE_A", "managed", 5, 5, "drain")], Level.GLOBAL, {})
    result = match_elements([_element(1)], limits, [], random.Random(0), served={A})
    assert result.left == {1: "its sites at the agent take no new work here (drained or down)"}


def test_the_owner_cap_stops_pulling_an_owners_elements():
    elements = [_element(1, jobs=3, owner="alice"), _element(2, jobs=3, owner="alice", age=-1), _element(3, jobs=3, owner="bob", age=-2)]
    result = match_elements(elements, {A: 100}, [], random.Random(0), owner_jobs={"alice": 2}, max_jobs_per_owner=4)
    assert [m.element_id for m in result.matches] == [1, 3]  # alice 2 -> 5 jobs: her next is not pulled; bob's is
    assert result.left[2] == "owner alice has 5 jobs at the agent, its max_jobs_per_owner is 4"


def test_the_pass_takes_at_most_its_limit():
    result = match_elements([_element(i, age=-i) for i in range(1, 6)], {A: 100}, [], random.Random(0), max_elements=2)
    assert [m.element_id for m in result.matches] == [1, 2]
    assert result.left[3] == "the pass took its 2 elements"


def test_the_matching_charges_what_it_matched_to_the_next_elements():
    result = match_elements([_element(1, jobs=4, sites=("SITE_A", "SITE_B")), _element(2, jobs=4, sites=("SITE_A", "SITE_B"), age=-1),
                             _element(3, jobs=1, sites=("SITE_A", "SITE_B"), age=-2)], {A: 4, B: 4}, [], random.Random(7))
    assert sorted(m.site for m in result.matches) == ["SITE_A", "SITE_B"]  # one each, then both full
    assert list(result.left) == [3]


# ------------------------------------------------------------------------------------ sites, estimate, end

def test_possible_sites_are_the_data_sites_within_pileup_and_the_site_lists():
    data = {"SITE_A", "SITE_B", "SITE_C", "T2_X"}
    assert possible_sites(data, [], (), ()) == ("SITE_A", "SITE_B", "SITE_C", "T2_X")
    assert possible_sites(data, [{"SITE_B", "SITE_C", "T2_X"}], (), ()) == ("SITE_B", "SITE_C", "T2_X")
    assert possible_sites(data, [], ("SITE_*",), ("SITE_B",)) == ("SITE_A", "SITE_C")
    assert possible_sites(data, [{"SITE_A"}, {"SITE_B"}], (), ()) == ()


def test_the_estimate_is_files_over_files_per_job_at_least_one():
    assert (estimate_jobs(10, 3), estimate_jobs(10, None), estimate_jobs(0, 5), estimate_jobs(6, 2)) == (4, 10, 1, 3)


def test_a_released_element_ends_when_every_record_ended():
    assert ended_status(0, 0, 0) is None
    assert ended_status(6, 4, 1) is None
    assert ended_status(6, 5, 1) == "Done"
    assert ended_status(6, 0, 6) == "Failed"
