"""The network weight of job brokerage (seed 000 "Network weight" and "Job brokerage explained" steps 3-4;
jedi-inventory.md §6.5), without a database: how a link weighs, which link a site's jobs depend on, the link
rules (blocked, NQUEUED_SAT_CAP, the NW_THRESHOLD x NW_WEIGHT_MULTIPLIER rule of urgent tasks), and a small
grid where the network term changes the choice."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jedictl.config import BrokerageSettings
from jedictl.engine.brokerage.job_brokerage import broker_job_sites
from jedictl.engine.brokerage.model import (
    BrokerageCatalog,
    ChunkInput,
    JobCounts,
    Site,
    SiteLoad,
    StorageEndpoint,
    TaskRequirements,
)
from jedictl.engine.brokerage.network import (
    AT_NUCLEUS,
    NO_NETWORK,
    NetworkLink,
    closeness_weight,
    input_term,
    link_term,
    matrix_from_rows,
    output_term,
    queued_weight,
    throughput_weight,
)
from jedictl.engine.brokerage.network_rule import link_refusal, site_names

SETTINGS = BrokerageSettings()
GB = 1024 ** 3


def matrix(*links: NetworkLink):
    return matrix_from_rows([vars(link) for link in links])


# ------------------------------------------------------------------------------------ one link

@pytest.mark.parametrize("queued,weight", [(None, 2.0), (0, 2.0), (75, 1.5), (150, 1.0), (300, 0.0), (900, 0.0)])
def test_the_queued_weight_falls_from_two_to_one_at_the_cap_and_never_below_zero(queued, weight):
    assert queued_weight(queued, 150) == pytest.approx(weight)


@pytest.mark.parametrize("mbps,weight", [(0, 1.0), (1, 1.0), (1.5, 1.1), (2.5, 1.2), (10, 1.2), (12, 1.3), (21, 1.5),
                                         (60, 1.6), (80, 1.8), (150, 1.9), (200, 1.9), (200.1, 2.0), (5000, 2.0)])
def test_the_throughput_weight_is_a_step_of_the_fts_throughput(mbps, weight):
    assert throughput_weight(mbps) == weight


@pytest.mark.parametrize("closeness,weight", [(0, 2.0), (11, 1.0), (3, 1 + 8 / 11), (5, 1 + 6 / 11)])
def test_the_closeness_is_normalised_between_one_and_two(closeness, weight):
    assert closeness_weight(closeness) == pytest.approx(weight)


def test_the_newest_throughput_is_used_then_the_closeness_then_the_worst():
    full = NetworkLink("A", "N", queued=30, mbps_1h=12.5, mbps_1d=300.0, mbps_1w=0.5, closeness=0)
    term = link_term(full, "output", "A -> N", SETTINGS)
    assert (term.basis, term.queued_weight, term.throughput_weight) == ("mbps_1h", pytest.approx(1.8), 1.3)
    assert term.weight == pytest.approx(0.5 * 1.8 + 0.5 * 1.3)
    assert link_term(replace(full, mbps_1h=None), "output", "", SETTINGS).basis == "mbps_1d"
    assert link_term(replace(full, mbps_1h=None, mbps_1d=None), "output", "", SETTINGS).throughput_weight == 1.0  # 0.5 MB/s
    # No throughput measured: the closeness, normalised (seed 000: "If there are no available network metrics").
    fallback = link_term(NetworkLink("A", "N", closeness=3), "output", "", SETTINGS)
    assert fallback.basis == "closeness" and fallback.weight == pytest.approx(0.5 * 2 + 0.5 * (1 + 8 / 11))
    # Neither, or no link at all: the worst link -- nothing queued, closeness 11.
    for link in (NetworkLink("A", "N", queued=0), None):
        worst = link_term(link, "output", "A -> N", SETTINGS)
        assert (worst.basis, worst.weight) == ("worst", pytest.approx(1.5))


def test_the_queue_importance_mixes_the_two_weights():
    link = NetworkLink("A", "N", queued=150, mbps_1h=500.0)
    assert link_term(link, "output", "", SETTINGS).weight == pytest.approx(1.5)
    assert link_term(link, "output", "", replace(SETTINGS, nw_queue_importance=1.0)).weight == pytest.approx(1.0)
    assert link_term(link, "output", "", replace(SETTINGS, nw_queue_importance=0.0)).weight == pytest.approx(2.0)
    assert link_term(link, "output", "", replace(SETTINGS, nqueued_sat_cap=300)).weight == pytest.approx(0.5 * 1.5 + 0.5 * 2)


def test_a_site_is_known_by_its_own_name_first_then_its_nucleus():
    nucleus_link = NetworkLink("BNL-ATLAS", "CERN-PROD", mbps_1h=250.0)
    own_link = NetworkLink("MWT2", "CERN-PROD", closeness=11)
    mwt2 = Site("MWT2", nucleus="BNL-ATLAS")
    assert site_names(mwt2) == ("MWT2", "BNL-ATLAS")
    assert output_term(site_names(mwt2), "CERN-PROD", False, matrix(nucleus_link), SETTINGS).link == nucleus_link
    assert output_term(site_names(mwt2), "CERN-PROD", False, matrix(nucleus_link, own_link), SETTINGS).link == own_link
    at_home = output_term(site_names(mwt2), "BNL-ATLAS", True, matrix(nucleus_link), SETTINGS)
    assert (at_home.weight, at_home.basis, at_home.link) == (AT_NUCLEUS, "nucleus", None)


def test_input_comes_over_the_best_usable_link_from_where_the_data_is():
    links = matrix(NetworkLink("X", "T", mbps_1h=300.0, blocked=True), NetworkLink("Y", "T", closeness=5),
                   NetworkLink("Z", "T", mbps_1h=15.0))
    term = input_term(("T",), ("X", "Y", "Z"), links, SETTINGS)
    assert term.link.source == "Y" and term.direction == "input"  # X is better but blocked; Y's closeness beats Z's 15 MB/s
    assert input_term(("T",), ("X",), links, SETTINGS).link.blocked  # only a blocked one: it is chosen and then refused
    missing = input_term(("T", "N"), ("Q", "R"), links, SETTINGS)
    assert (missing.link, missing.basis, missing.wanted) == (None, "worst", "Q|R -> T")


def test_the_matrix_sums_the_files_queued_into_each_destination():
    links = matrix(NetworkLink("A", "N", queued=1500), NetworkLink("B", "N", queued=600), NetworkLink("A", "M", closeness=1))
    assert links.queued_to() == {"N": 2100}
    assert not NO_NETWORK and len(links) == 3


# ------------------------------------------------------------------------------------ the rules

@pytest.mark.parametrize("link,express,settings,refused", [
    (NetworkLink("A", "N", mbps_1h=300.0, blocked=True), False, SETTINGS, "link A -> N is blocked"),
    (NetworkLink("A", "N", queued=150), False, SETTINGS, "150 files queued on A -> N >= 150 (nqueued_sat_cap)"),
    (NetworkLink("A", "N", queued=149, mbps_1h=300.0), False, SETTINGS, None),
    (NetworkLink("A", "N", queued=150), False, replace(SETTINGS, nqueued_sat_cap=151), None),
    # urgent or priority >= 1000: weight >= NW_THRESHOLD (1.7) x NW_WEIGHT_MULTIPLIER (1)
    (NetworkLink("A", "N", queued=30, mbps_1h=12.5), True, SETTINGS, "weight 1.55 < 1.7"),
    (NetworkLink("A", "N", queued=30, mbps_1h=12.5), False, SETTINGS, None),
    (NetworkLink("A", "N", queued=0, mbps_1h=60.0), True, SETTINGS, None),  # 0.5 x 2 + 0.5 x 1.6 = 1.8
    (NetworkLink("A", "N", queued=30, mbps_1h=12.5), True, replace(SETTINGS, nw_weight_multiplier=0.9), None),  # 1.55 >= 1.53
    (NetworkLink("A", "N", queued=0, mbps_1h=60.0), True, replace(SETTINGS, nw_threshold=1.9), "weight 1.8 < 1.9"),
    (None, True, SETTINGS, "weight 1.5 < 1.7"),  # a missing link is the worst one
])
def test_the_link_rules(link, express, settings, refused):
    term = link_term(link, "output", "A -> N", settings)
    drop = link_refusal(term, settings, express=express)
    assert (drop.message if drop else None) == refused or refused in drop.message


def test_the_nucleus_itself_always_passes_the_threshold():
    term = output_term(("N_SITE", "N"), "N", True, NO_NETWORK, SETTINGS)
    assert link_refusal(term, replace(SETTINGS, nw_threshold=2.5), express=True) is None


# ------------------------------------------------------------------------------ a small grid

NUCLEUS = "NUC"
WORLD_TASK = TaskRequirements(task_id=7, prod_source_label="managed", processing_type="simul", priority=500, core_count=1,
                              ram_count=1000, ram_unit="MBPerCore", walltime=10, base_walltime=600, nucleus=NUCLEUS)
CHUNK = ChunkInput(file_sizes=(GB,), file_events=(100,))
LOAD = SiteLoad(JobCounts(running=20, activated=5))


def _site(name: str, nucleus: str | None = None) -> Site:
    return Site(name, cloud="WORLD", core_count=1, core_power=10.0, max_memory=4000, max_walltime=172800,
                read_endpoints=(f"{name}_DISK",), write_endpoints=(f"{name}_DISK",), nucleus=nucleus)


def _grid(*links: NetworkLink) -> BrokerageCatalog:
    sites = (_site("FAR"), _site("NEAR"), _site("NUC_SITE", NUCLEUS))
    endpoints = {f"{s.name}_DISK": StorageEndpoint(f"{s.name}_DISK", "disk", s.nucleus, 5000.0, 9000.0) for s in sites}
    return BrokerageCatalog(sites=sites, endpoints=endpoints, network=matrix(*links))


LINKS = (NetworkLink("NEAR", NUCLEUS, queued=10, mbps_1h=120.0), NetworkLink("FAR", NUCLEUS, queued=140, closeness=10))


def _broker(catalog, task=WORLD_TASK, settings=SETTINGS, chunk=CHUNK):
    loads = {site.name: LOAD for site in catalog.sites}
    return broker_job_sites(task, chunk, catalog, loads, settings)


def _weights(result) -> dict[str, float]:
    return {fate.name: fate.weight for fate in result.trail if fate.kept}


def test_without_a_matrix_the_weights_are_as_before_and_no_site_has_a_term():
    result = _broker(_grid())
    weights = _weights(result)
    assert weights["NEAR"] == weights["FAR"] and weights["NUC_SITE"] == weights["NEAR"]
    assert all(row["network"] is None for row in result.rows())


def test_the_network_term_changes_the_choice_between_two_satellites():
    before = _broker(_grid(), settings=replace(SETTINGS, max_candidates=1))
    assert before.candidates[0].site == "FAR"  # equal weights: the name breaks the tie
    result = _broker(_grid(*LINKS))
    weights = _weights(result)
    near = 0.5 * (2 - 10 / 150) + 0.5 * 1.9
    far = 0.5 * (2 - 140 / 150) + 0.5 * (1 + 1 / 11)
    base = 21 / 15
    assert weights["NEAR"] == pytest.approx(base * near) and weights["FAR"] == pytest.approx(base * far)
    assert weights["NUC_SITE"] == pytest.approx(base * AT_NUCLEUS)  # at the nucleus: no output to move
    assert [c.site for c in result.candidates] == ["NUC_SITE", "NEAR", "FAR"]
    assert _broker(_grid(*LINKS), settings=replace(SETTINGS, max_candidates=2)).rules_by_site()["FAR"] == "rank"
    rows = {row["site"]: row for row in result.rows()}
    assert rows["NEAR"]["network"].startswith(f"{near:.3g} = 0.5 x queued 1.93 (10 files) + 0.5 x throughput 1.9 (120 MB/s, 1h); "
                                              "output NEAR -> NUC")
    assert "closeness 10, no throughput measured" in rows["FAR"]["network"]
    assert rows["NUC_SITE"]["network"] == "2.5: at the nucleus NUC (no output to transfer)"
    assert f"x network {near:.3g}" in rows["NEAR"]["message"]


def test_passive_network_weights_are_shown_but_change_nothing():
    passive = replace(SETTINGS, nw_active=False)
    result = _broker(_grid(*LINKS, NetworkLink("NUC_SITE", "FAR", blocked=True)), settings=passive)
    weights = _weights(result)
    assert weights["NEAR"] == weights["FAR"] == weights["NUC_SITE"]
    assert {row["site"]: row["network"].endswith("(passive: brokerage.nw_active is off)") for row in result.rows()} == \
        {"FAR": True, "NEAR": True, "NUC_SITE": True}
    blocked = _grid(replace(LINKS[0], blocked=True), LINKS[1])
    assert _broker(blocked, settings=passive).rules_by_site()["NEAR"] == "kept"


def test_blocked_and_full_links_drop_the_satellite():
    result = _broker(_grid(replace(LINKS[0], blocked=True), replace(LINKS[1], queued=150)))
    assert result.rules_by_site() == {"FAR": "network", "NEAR": "network", "NUC_SITE": "kept"}
    assert "150 files queued on FAR -> NUC" in result.trail[0].message
    assert "link NEAR -> NUC is blocked" in result.trail[1].message


@pytest.mark.parametrize("changes,far_rule", [
    ({"priority": 1000}, "network"),  # priority >= 1000: FAR's weight 1.08 < 1.7
    ({"processing_type": "urgent"}, "network"),
    ({"priority": 999}, "kept"),
    ({"priority": 1000, "site": "FAR"}, "kept"),  # pinned to its site: JEDI skips the link rules
])
def test_urgent_and_high_priority_tasks_need_a_good_link(changes, far_rule):
    result = _broker(_grid(*LINKS), task=replace(WORLD_TASK, **changes))
    assert result.rules_by_site()["FAR"] == far_rule
    if far_rule == "network" and "site" not in changes:
        assert result.rules_by_site()["NEAR"] == "kept" and result.rules_by_site()["NUC_SITE"] == "kept"
        assert "weight 1.08 < 1.7 (nw_threshold x nw_weight_multiplier)" in result.trail[0].message


def test_a_task_without_a_nucleus_gets_no_output_term():
    result = _broker(_grid(*LINKS), task=replace(WORLD_TASK, nucleus=None))
    assert all(row["network"] is None for row in result.rows())


# ------------------------------------------------------------------------ analysis: the input link

ANALYSIS = replace(WORLD_TASK, prod_source_label="user", nucleus=None, priority=1000)


def _analysis_grid(*links: NetworkLink) -> BrokerageCatalog:
    sites = (_site("FAR"), _site("NEAR"), _site("DATA"))
    endpoints = {f"{s.name}_DISK": StorageEndpoint(f"{s.name}_DISK", "disk", None, 5000.0, 9000.0) for s in sites}
    endpoints["TAPE"] = StorageEndpoint("TAPE", "tape", None, 5000.0, 9000.0)
    return BrokerageCatalog(sites=sites, endpoints=endpoints, network=matrix(*links))


def test_analysis_sites_that_must_receive_the_input_are_weighed_by_the_link_from_the_data():
    at_data = ChunkInput(file_sizes=(GB, GB), file_events=(10, 10), replicas={"DATA_DISK": frozenset({0, 1})})
    links = (NetworkLink("DATA", "NEAR", mbps_1h=250.0), NetworkLink("DATA", "FAR", queued=100, closeness=9))
    # The data is held at DATA: the jobs go there, no site moves input and none has a term.
    held = _broker(_analysis_grid(*links), task=ANALYSIS, chunk=at_data)
    assert [c.site for c in held.candidates] == ["DATA"] and all(row["network"] is None for row in held.rows())
    # Nobody holds it (on tape only, not read by any site): every site needs a transfer -- from the tape's
    # places, here none, so the worst link each: the term leaves them equal.
    on_tape = ChunkInput(file_sizes=(GB, GB), file_events=(10, 10), replicas={"TAPE": frozenset({0, 1})})
    equal = _weights(_broker(_analysis_grid(*links), task=ANALYSIS, chunk=on_tape))
    assert len(set(equal.values())) == 1
    # Every data site busy (ANALY_TIMEOUT): the idle ones get the input over their link from DATA.
    result = broker_job_sites(ANALYSIS, at_data, _analysis_grid(*links), {s: LOAD for s in ("FAR", "NEAR", "DATA")}, SETTINGS,
                              closed_recently={"DATA": 2})
    rows = {row["site"]: row for row in result.rows()}
    assert rows["DATA"]["rule"] == "data_locality" and rows["DATA"]["network"] is None
    assert rows["NEAR"]["network"].startswith("2 = 0.5 x queued 2 (0 files) + 0.5 x throughput 2 (250 MB/s, 1h); input DATA -> NEAR")
    assert rows["NEAR"]["weight"] / rows["FAR"]["weight"] == pytest.approx(2 / (0.5 * (2 - 100 / 150) + 0.5 * (1 + 2 / 11)))
    # Urgent-looking priority 1000 does not drop analysis transfer sites (JEDI: WORLD tasks only) ...
    assert rows["FAR"]["kept"]
    # ... but a blocked link from the data does.
    blocked = broker_job_sites(ANALYSIS, at_data, _analysis_grid(links[0], replace(links[1], blocked=True)),
                               {s: LOAD for s in ("FAR", "NEAR", "DATA")}, SETTINGS, closed_recently={"DATA": 2})
    assert blocked.rules_by_site()["FAR"] == "network" and [c.site for c in blocked.candidates] == ["NEAR"]
