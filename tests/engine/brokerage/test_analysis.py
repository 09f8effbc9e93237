"""Analysis brokerage follows the data (seed 000 "Input data transfer"; engine.brokerage.analysis).

A grid of four sites where only some hold the input: the chosen sites hold it; sites without it are used
only when no site holds it, or when every data site closed jobs of the task recently (ANALY_TIMEOUT),
and then they are transfer sites. Production tasks are untouched.
"""

from __future__ import annotations

from dataclasses import replace

from jedictl.config import BrokerageSettings
from jedictl.engine.brokerage.analysis import first_location_group, place_analysis, transfer_endpoint
from jedictl.engine.brokerage.filters import SiteLocality
from jedictl.engine.brokerage.job_brokerage import broker_job_sites
from jedictl.engine.brokerage.model import ChunkInput, JobCounts, SiteLoad, StorageEndpoint
from tests.engine.brokerage.test_job_brokerage import TASK, catalog, make_site

GB = 1024 ** 3
SETTINGS = BrokerageSettings()
USER = replace(TASK, prod_source_label="user", processing_type="panda-client-jedi-run", priority=1000)
SITES = [make_site(name) for name in ("HOLDS_A", "HOLDS_B", "PARTIAL", "EMPTY")]
GRID = catalog(*SITES)


def chunk(replicas: dict[str, frozenset[int]], n_files: int = 4) -> ChunkInput:
    return ChunkInput(file_sizes=(GB,) * n_files, file_events=(100,) * n_files, replicas=replicas)


#: Four files; complete at two sites' disks, half at a third, none at the fourth.
SPLIT = chunk({"HOLDS_A_DATADISK": frozenset(range(4)), "HOLDS_B_DATADISK": frozenset(range(4)),
               "PARTIAL_DATADISK": frozenset({0, 1})})


def test_analysis_jobs_go_to_the_sites_holding_the_data():
    result = broker_job_sites(USER, SPLIT, GRID, {}, SETTINGS)
    assert {c.site for c in result.candidates} == {"HOLDS_A", "HOLDS_B"}
    assert result.transfer_sites == frozenset()
    fates = {f.name: f for f in result.trail}
    assert fates["PARTIAL"].rule == "data_locality" and "holds 2 of 4 input files" in fates["PARTIAL"].message
    assert fates["EMPTY"].rule == "data_locality" and "holds 0 of 4" in fates["EMPTY"].message
    data = {row["site"]: row["data"] for row in result.rows()}
    assert data["HOLDS_A"].startswith("holds the data") and data["EMPTY"].startswith("no replica")
    assert result.placement.mode == "data"


def test_production_tasks_are_not_bound_to_the_data():
    result = broker_job_sites(TASK, SPLIT, GRID, {}, SETTINGS)
    assert {c.site for c in result.candidates} == {"HOLDS_A", "HOLDS_B", "PARTIAL", "EMPTY"}
    assert result.placement is None and all(row["data"] is None for row in result.rows())


def test_no_site_with_the_data_sends_jobs_anywhere_with_a_transfer():
    far = chunk({"FAR_DATADISK": frozenset(range(4))})
    grid = catalog(*SITES, endpoints={"FAR_DATADISK": StorageEndpoint("FAR_DATADISK", "disk")})
    result = broker_job_sites(USER, far, grid, {}, SETTINGS)
    assert {c.site for c in result.candidates} == {"HOLDS_A", "HOLDS_B", "PARTIAL", "EMPTY"}
    assert result.transfer_sites == {"HOLDS_A", "HOLDS_B", "PARTIAL", "EMPTY"}
    assert result.placement.mode == "no_data"
    assert "no candidate holds the data" in dict((r["site"], r["data"]) for r in result.rows())["EMPTY"]


def test_a_catalog_without_replicas_leaves_the_rule_off():
    result = broker_job_sites(USER, chunk({}), GRID, {}, SETTINGS)
    assert len(result.candidates) == 4 and result.transfer_sites == frozenset()
    assert not result.placement.applies


def test_after_analy_timeout_at_every_data_site_jobs_go_to_idle_sites_with_a_transfer():
    closed = {"HOLDS_A": 2, "HOLDS_B": 1}
    result = broker_job_sites(USER, SPLIT, GRID, {}, SETTINGS, closed_recently=closed)
    assert {c.site for c in result.candidates} == {"PARTIAL", "EMPTY"}
    assert result.transfer_sites == {"PARTIAL", "EMPTY"}
    fates = {f.name: f for f in result.trail}
    assert fates["HOLDS_A"].rule == "data_locality" and fates["HOLDS_A"].message.startswith("busy: 2 jobs of this task closed")
    assert "chosen after ANALY_TIMEOUT" in {r["site"]: r["data"] for r in result.rows()}["EMPTY"]
    # The site that already holds half the input weighs more: fewer files to move.
    weights = {c.site: c.weight for c in result.candidates}
    assert weights["PARTIAL"] > weights["EMPTY"]
    # Its candidate says which files are there already (the generator transfers only the others).
    assert next(c for c in result.candidates if c.site == "PARTIAL").local_disk_files == frozenset({0, 1})


def test_one_idle_data_site_keeps_the_jobs_at_the_data():
    result = broker_job_sites(USER, SPLIT, GRID, {}, SETTINGS, closed_recently={"HOLDS_A": 3, "EMPTY": 5})
    assert {c.site for c in result.candidates} == {"HOLDS_A", "HOLDS_B"} and result.transfer_sites == frozenset()


def test_tape_replicas_do_not_count_as_holding_the_data():
    tape = StorageEndpoint("HOLDS_A_DATATAPE", "tape")
    site = make_site("HOLDS_A", read_endpoints=("HOLDS_A_DATADISK", "HOLDS_A_DATATAPE"))
    grid = catalog(site, *SITES[1:], endpoints={"HOLDS_A_DATATAPE": tape})
    result = broker_job_sites(USER, chunk({"HOLDS_A_DATATAPE": frozenset(range(4)), "HOLDS_B_DATADISK": frozenset(range(4))}),
                              grid, {}, SETTINGS)
    assert {c.site for c in result.candidates} == {"HOLDS_B"}


def test_the_task_s_own_site_is_kept_without_the_data_with_a_transfer():
    result = broker_job_sites(replace(USER, site="EMPTY"), SPLIT, GRID, {}, SETTINGS)
    assert [c.site for c in result.candidates] == ["EMPTY"] and result.transfer_sites == {"EMPTY"}


def test_weights_among_data_sites_are_running_over_queued():
    loads = {"HOLDS_A": SiteLoad(JobCounts(running=50, activated=5)), "HOLDS_B": SiteLoad(JobCounts(running=5, activated=50))}
    result = broker_job_sites(USER, SPLIT, GRID, loads, SETTINGS)
    weights = {c.site: c.weight for c in result.candidates}
    # x the data-locality factor (total + local) / total = 2 that every site with all the input gets
    assert weights["HOLDS_A"] == (50 + 1) / (5 + 10) * 2 and weights["HOLDS_B"] == (5 + 1) / (50 + 10) * 2


def test_place_analysis_is_a_function_of_plain_values():
    sites = SITES[:2]
    locality = {"HOLDS_A": SiteLocality(frozenset({0, 1}), frozenset(), 2 * GB)}
    placement = place_analysis(sites, locality, 2, True, {}, 6.0)
    assert placement.mode == "data" and placement.holders == {"HOLDS_A"} and set(placement.drops) == {"HOLDS_B"}
    # The only data site busy and no other site left: nothing would remain, so the data rule stands.
    placement = place_analysis(sites[:1], locality, 2, True, {"HOLDS_A": 1}, 6.0)
    assert placement.mode == "data" and not placement.drops


def test_transfer_endpoint_is_the_first_readable_disk():
    endpoints = {"T": StorageEndpoint("T", "tape"), "BAD": StorageEndpoint("BAD", "disk", blacklisted_read=True),
                 "D": StorageEndpoint("D", "disk")}
    assert transfer_endpoint(make_site("X", read_endpoints=("T", "BAD", "D")), endpoints) == "D"
    assert transfer_endpoint(make_site("X", read_endpoints=(), write_endpoints=()), endpoints) is None


def test_a_chunk_is_brokered_a_location_at_a_time():
    # A container's two datasets: files 0-2 at A, files 3-4 at B and C. No site holds all five; the first
    # file's group is brokered now (at A), the others go back for the next chunk.
    mixed = chunk({"HOLDS_A_DATADISK": frozenset({0, 1, 2}), "HOLDS_B_DATADISK": frozenset({3, 4}),
                   "PARTIAL_DATADISK": frozenset({3, 4})}, n_files=5)
    assert first_location_group(mixed) == (0, 1, 2)
    assert first_location_group(chunk({}, n_files=3)) == (0, 1, 2)
    assert first_location_group(chunk({}, n_files=0)) == ()
