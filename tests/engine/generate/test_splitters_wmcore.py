"""WMCore's splitting algorithms (peers.md §1.4, seed 004) on hand-built filesets: file and run
boundaries, lumi masks, zero-event and oversized files, open versus closed filesets."""

from __future__ import annotations

import pytest

from jedictl.engine.generate.splitters import Fileset, split_fileset, wm_file
from jedictl.errors import BadInput

NOW = 1_700_000_000.0


def f(lfn: str, size: int = 0, events: int = 0, loc: tuple[str, ...] = ("T1_A",), runs: dict | None = None, **extra):
    return wm_file(lfn, size, events, loc, runs, **extra)


def split(algorithm: str, files, closed: bool = True, now: float = NOW, **params):
    return split_fileset(algorithm, Fileset(tuple(files), closed), params, now=now)


def shape(jobs) -> list[tuple]:
    """(files, events, lumis, locations, failed) per job; lumis as {run: [[a, b], ...]}."""
    return [(list(j.files), (j.first_event, j.last_event), j.as_contract()["lumis"], list(j.locations), j.failed) for j in jobs]


def files_of(jobs) -> list[list[str]]:
    return [list(j.files) for j in jobs]


NO_EVENTS = (None, None)


# ------------------------------------------------------------------------------------ FileBased

def test_file_based_sorts_by_lfn_within_each_location_set():
    fileset = [f("c"), f("a"), f("b", loc=("T2_B",)), f("d"), f("e", loc=("T2_B", "T1_A"))]
    assert shape(split("FileBased", fileset, files_per_job=2)) == [
        (["a", "c"], NO_EVENTS, None, ["T1_A"], False),
        (["d"], NO_EVENTS, None, ["T1_A"], False),
        (["b"], NO_EVENTS, None, ["T2_B"], False),
        (["e"], NO_EVENTS, None, ["T1_A", "T2_B"], False),
    ]


def test_file_based_respects_run_boundaries_and_total_files():
    fileset = [f("a", runs={1: [1]}), f("b", runs={1: [2]}), f("c", runs={2: [1]}), f("d", runs={2: [2]})]
    assert files_of(split("FileBased", fileset, files_per_job=3)) == [["a", "b", "c"], ["d"]]
    assert files_of(split("FileBased", fileset, files_per_job=3, respect_run_boundaries=True)) == [["a", "b"], ["c", "d"]]
    assert files_of(split("FileBased", fileset, files_per_job=3, total_files=2)) == [["a", "b"]]


def test_file_based_lumi_mask_keeps_good_ranges_and_drops_files_without_any():
    fileset = [f("a", runs={1: [1, 2, 3, 4, 6]}), f("b", runs={1: [5]}), f("c", runs={2: [1]}), f("d")]
    jobs = split("FileBased", fileset, files_per_job=10, runs="1", lumis="2,4;")
    assert shape(jobs) == [(["a"], NO_EVENTS, {"1": [[2, 4]]}, ["T1_A"], False)]
    # Two runs in the mask (lumis of one run per ';'-separated item, as WMCore's list of strings).
    jobs = split("FileBased", fileset, files_per_job=10, runs=[1, 2], lumis=["1,1,6,6", "1,1"])
    assert shape(jobs) == [(["a", "c"], NO_EVENTS, {"1": [[1, 1], [6, 6]], "2": [[1, 1]]}, ["T1_A"], False)]


def test_file_based_site_lists_and_failed_on_creation():
    fileset = [f("a", loc=("T1_A",)), f("b", loc=("T2_B",)), f("c", loc=())]
    jobs = split("FileBased", fileset, files_per_job=5, siteBlacklist="T2_B")
    assert [(j.files, j.locations, j.failed) for j in jobs] == [(("a",), ("T1_A",), False), (("b",), (), True), (("c",), (), True)]
    assert jobs[2].failed_code == 71101 and jobs[2].failed_reason.startswith("No sites are available to submit the job")
    trusted = split("FileBased", fileset, files_per_job=5, trustSitelists=True, siteWhitelist="X,Y")
    assert [(j.files, j.locations) for j in trusted] == [(("a", "b", "c"), ("X", "Y"))]


def test_file_load_limit_keeps_jobs_within_one_batch():
    fileset = [f(name) for name in "abcde"]
    assert files_of(split("FileBased", fileset, files_per_job=3, file_load_limit=2)) == [["a", "b"], ["c", "d"], ["e"]]


# --------------------------------------------------------------------------------- MinFileBased

def test_min_file_based_waits_for_full_jobs_while_open():
    fileset = [f(name) for name in "abcde"] + [f("z", loc=("T2_B",))]
    assert files_of(split("MinFileBased", fileset, closed=False, files_per_job=2)) == [["a", "b"], ["c", "d"]]
    assert files_of(split("MinFileBased", fileset, closed=True, files_per_job=2)) == [["a", "b"], ["c", "d"], ["e"], ["z"]]


def test_min_file_based_run_boundaries():
    fileset = [f("a", runs={1: [1]}), f("b", runs={2: [1]}), f("c", runs={2: [2]}), f("d", runs={2: [3]})]
    jobs = split("MinFileBased", fileset, closed=False, files_per_job=2, respect_run_boundaries=True)
    assert files_of(jobs) == [["a"], ["b", "c"]]  # d alone would be short of a full job: it waits


# ----------------------------------------------------------------------------------- EventBased

def test_event_based_cuts_each_file_and_keeps_zero_event_files():
    fileset = [f("a", events=250), f("z", events=0), f("b", events=100, first_event=10)]
    assert shape(split("EventBased", fileset, events_per_job=100)) == [
        (["a"], (0, 99), None, ["T1_A"], False),
        (["a"], (100, 199), None, ["T1_A"], False),
        (["a"], (200, 249), None, ["T1_A"], False),
        (["z"], (0, None), None, ["T1_A"], False),  # one job over the whole (empty) file: first event 0, no last
        (["b"], (10, 109), None, ["T1_A"], False),
    ]
    assert len(split("EventBased", fileset, closed=False, events_per_job=100)) == 5  # no waiting for more input


def test_event_based_monte_carlo_lumis_and_the_32_bit_wrap():
    mc = [f("MCFakeFile-1", events=250, runs={1: [1]}, first_event=1)]
    assert shape(split("EventBased", mc, events_per_job=100, events_per_lumi=50)) == [
        (["MCFakeFile-1"], (1, 100), {"1": [[1, 2]]}, ["T1_A"], False),
        (["MCFakeFile-1"], (101, 200), {"1": [[3, 4]]}, ["T1_A"], False),
        (["MCFakeFile-1"], (201, 250), {"1": [[5, 5]]}, ["T1_A"], False),
    ]
    edge = [f("MCFakeFile-2", events=300, runs={1: [7]}, first_event=2**32 - 150)]
    assert [(j.first_event, j.last_event) for j in split("EventBased", edge, events_per_job=100)] == [
        (2**32 - 150, 2**32 - 51), (1, 100), (101, 200)]


# ------------------------------------------------------------------------------------ LumiBased

TWO_FILES = [f("a", events=300, runs={1: [1, 2, 3]}), f("b", events=200, runs={1: [4, 5], 2: [1, 2]})]


def test_lumi_based_lumis_per_job_runs_and_ranges():
    assert shape(split("LumiBased", TWO_FILES, lumis_per_job=2)) == [
        (["a"], NO_EVENTS, {"1": [[1, 2]]}, ["T1_A"], False),
        (["a", "b"], NO_EVENTS, {"1": [[3, 3], [4, 4]]}, ["T1_A"], False),  # ranges are not merged, as in WMCore
        (["b"], NO_EVENTS, {"1": [[5, 5]]}, ["T1_A"], False),
        (["b"], NO_EVENTS, {"2": [[1, 2]]}, ["T1_A"], False),  # a new run starts a new job
    ]


def test_lumi_based_file_boundaries_and_split_on_run():
    halted = split("LumiBased", TWO_FILES, lumis_per_job=10, halt_job_on_file_boundaries=True)
    assert [(list(j.files), j.as_contract()["lumis"]) for j in halted] == [
        (["a"], {"1": [[1, 3]]}), (["b"], {"1": [[4, 5]]}), (["b"], {"2": [[1, 2]]})]
    across_runs = split("LumiBased", TWO_FILES, lumis_per_job=10, halt_job_on_file_boundaries=True, splitOnRun=False)
    assert [(list(j.files), j.as_contract()["lumis"]) for j in across_runs] == [
        (["a"], {"1": [[1, 3]]}), (["b"], {"1": [[4, 5]], "2": [[1, 2]]})]


def test_lumi_based_mask_breaks_ranges_and_run_whitelist():
    jobs = split("LumiBased", TWO_FILES, lumis_per_job=10, runs=[1], lumis=["2,4"])
    assert shape(jobs) == [(["a", "b"], NO_EVENTS, {"1": [[2, 3], [4, 4]]}, ["T1_A"], False)]
    only_run_2 = split("LumiBased", TWO_FILES, lumis_per_job=10, runWhitelist="2")
    assert [(list(j.files), j.as_contract()["lumis"]) for j in only_run_2] == [(["b"], {"2": [[1, 2]]})]
    gaps = split("LumiBased", [f("g", runs={3: [1, 2, 5, 6, 9]})], lumis_per_job=4)
    assert [j.as_contract()["lumis"] for j in gaps] == [{"3": [[1, 2], [5, 6]]}, {"3": [[9, 9]]}]


def test_lumi_based_open_fileset_waits_for_a_jobs_worth_of_lumis():
    fileset = TWO_FILES + [f("c", runs={7: [1]}, loc=("T2_B",))]
    assert files_of(split("LumiBased", fileset, closed=False, lumis_per_job=3)) == [["a"], ["b"], ["b"]]
    assert files_of(split("LumiBased", fileset, closed=True, lumis_per_job=3)) == [["a"], ["b"], ["b"], ["c"]]
    assert split("LumiBased", fileset, closed=False, lumis_per_job=10) == []


def test_lumi_based_total_lumis_and_files_without_lumis():
    fileset = TWO_FILES + [f("nolumis", events=10)]
    jobs = split("LumiBased", fileset, lumis_per_job=2, total_lumis=3)
    assert [j.as_contract()["lumis"] for j in jobs] == [{"1": [[1, 2]]}, {"1": [[3, 3]]}]
    assert "nolumis" not in {lfn for j in split("LumiBased", fileset, lumis_per_job=2) for lfn in j.files}


def test_lumi_correction_keeps_a_duplicated_lumi_in_its_first_job():
    fileset = [f("a", runs={1: [1, 2]}), f("b", runs={1: [2, 3]})]
    plain = split("LumiBased", fileset, lumis_per_job=2)
    assert [(list(j.files), j.as_contract()["lumis"]) for j in plain] == [(["a"], {"1": [[1, 2]]}), (["b"], {"1": [[2, 3]]})]
    corrected = split("LumiBased", fileset, lumis_per_job=2, applyLumiCorrection=True)
    assert [(list(j.files), j.as_contract()["lumis"]) for j in corrected] == [(["a", "b"], {"1": [[1, 2]]}), (["b"], {"1": [[3, 3]]})]


# -------------------------------------------------------------------------- EventAwareLumiBased

def test_event_aware_lumi_based_adapts_lumis_to_events():
    fileset = [f("a", events=300, runs={1: [1, 2, 3]}), f("b", events=100, runs={1: [4, 5]})]
    # a: 100 events per lumi -> 2 lumis per job; b: 50 per lumi fills the second job up to 200 events.
    assert shape(split("EventAwareLumiBased", fileset, events_per_job=200)) == [
        (["a"], NO_EVENTS, {"1": [[1, 2]]}, ["T1_A"], False),
        (["a", "b"], NO_EVENTS, {"1": [[3, 3], [4, 5]]}, ["T1_A"], False),
    ]
    halted = split("EventAwareLumiBased", fileset, events_per_job=200, halt_job_on_file_boundaries=True)
    assert [j.as_contract()["lumis"] for j in halted] == [{"1": [[1, 2]]}, {"1": [[3, 3]]}, {"1": [[4, 5]]}]


def test_event_aware_single_long_lumi_is_failed_on_creation():
    fileset = [f("a", events=300, runs={1: [1, 2, 3]}), f("long", events=1000, runs={2: [1]}), f("d", events=100, runs={3: [1, 2]})]
    jobs = split("EventAwareLumiBased", fileset, events_per_job=200, splitOnRun=False, performance='{"timePerEvent": 200}')
    assert shape(jobs) == [
        (["a"], NO_EVENTS, {"1": [[1, 2]]}, ["T1_A"], False),
        (["a"], NO_EVENTS, {"1": [[3, 3]]}, ["T1_A"], False),
        (["long"], NO_EVENTS, {"2": [[1, 1]]}, ["T1_A"], True),  # 1000 events x 200 s > 48 h
        (["d"], NO_EVENTS, {"3": [[1, 2]]}, ["T1_A"], False),
    ]
    assert jobs[2].failed_reason == "File long has a single lumi 1, in run 2 with too many events 1000 and it would take 200000 sec to run"
    assert jobs[2].failed_code == 99305
    allowed = split("EventAwareLumiBased", fileset, events_per_job=200, splitOnRun=False,
                    performance={"timePerEvent": 200}, allowCreationFailure=False)
    assert [j.failed for j in allowed] == [False] * 4
    assert not any(j.failed for j in split("EventAwareLumiBased", fileset, events_per_job=200, performance={"timePerEvent": 1}))


def test_event_aware_zero_event_files_open_fileset_and_job_limit():
    empty = [f("e", events=0, runs={1: [1, 2, 3]})]
    assert [j.as_contract()["lumis"] for j in split("EventAwareLumiBased", empty, events_per_job=10)] == [{"1": [[1, 3]]}]
    fileset = [f("a", events=300, runs={1: [1, 2, 3]})]
    assert split("EventAwareLumiBased", fileset, closed=False, events_per_job=400) == []
    assert len(split("EventAwareLumiBased", fileset, closed=False, events_per_job=300)) == 1
    with pytest.raises(BadInput, match="job_limit"):
        split("EventAwareLumiBased", fileset, events_per_job=100, job_limit=2)


# ------------------------------------------------------------------------------------ SizeBased

def test_size_based_oversized_files_get_their_own_job():
    fileset = [f("a", 400), f("b", 500), f("big", 2000), f("c", 300), f("d", 800), f("x", 100, loc=("T2_B",))]
    assert files_of(split("SizeBased", fileset, size_per_job=1000)) == [["a", "b"], ["big"], ["c"], ["d"], ["x"]]
    assert files_of(split("SizeBased", [f("big", 2000), f("s", 100)], size_per_job=1000)) == [["big"], ["s"]]


# ------------------------------------------------------------------------------------- RunBased

def test_run_based_groups_by_lowest_run_and_takes_files_from_the_end():
    fileset = [f("a", runs={1: [1]}), f("b", runs={2: [1]}), f("c", runs={1: [2], 3: [1]}), f("d", runs={1: [3]}), f("e", runs={2: [2]})]
    assert files_of(split("RunBased", fileset, files_per_job=2)) == [["d", "c"], ["a"], ["e", "b"]]
    with pytest.raises(BadInput, match=r"files\[1\].runs"):
        split("RunBased", [f("a", runs={1: [1]}), f("norun")])


# ------------------------------------------------------------------------ ParentlessMergeBySize

def test_parentless_merge_by_size():
    fileset = [f("a", 200, runs={1: [1]}), f("b", 200, runs={1: [2]}), f("c", 700, runs={1: [3]}),
               f("huge", 1500, runs={1: [4]}), f("e", 100, runs={1: [5]}), f("norun", 100)]
    jobs = split("ParentlessMergeBySize", fileset, closed=False, max_merge_size=1000, min_merge_size=300)
    assert files_of(jobs) == [["a", "b"], ["huge"], ["c", "e"]]


def test_parentless_merge_waits_while_open_unless_files_waited_too_long():
    small = [f("x", 100, runs={1: [1]}), f("y", 100, runs={1: [2]})]
    assert split("ParentlessMergeBySize", small, closed=False, max_merge_size=1000, min_merge_size=300) == []
    assert files_of(split("ParentlessMergeBySize", small, closed=True, max_merge_size=1000, min_merge_size=300)) == [["x", "y"]]
    old = [f("x", 100, runs={1: [1]}, insert_time=NOW - 13 * 3600), f("y", 100, runs={1: [2]})]
    assert files_of(split("ParentlessMergeBySize", old, closed=False, max_merge_size=1000, min_merge_size=300)) == [["x", "y"]]
    # Too small to emit, the overflowing file waits and a later small file still joins the group.
    skipping = [f("p", 250, runs={1: [1]}), f("q", 900, runs={1: [2]}), f("r", 50, runs={1: [3]})]
    assert split("ParentlessMergeBySize", skipping, closed=False, max_merge_size=1000, min_merge_size=300) == []
    assert files_of(split("ParentlessMergeBySize", skipping, closed=True, max_merge_size=1000, min_merge_size=300)) == [["p"], ["q", "r"]]


def test_parentless_merge_groups_by_location_run_and_events():
    fileset = [f("a1", 10, 10, runs={1: [1]}), f("b1", 10, 10, runs={1: [2]}, loc=("T2_B",)), f("a2", 10, 10, runs={2: [1]})]
    assert [(list(j.files), list(j.locations)) for j in split("ParentlessMergeBySize", fileset)] == [
        (["a1", "a2"], ["T1_A"]), (["b1"], ["T2_B"])]
    per_run = split("ParentlessMergeBySize", fileset, merge_across_runs=False)
    assert files_of(per_run) == [["a1"], ["a2"], ["b1"]]
    by_events = split("ParentlessMergeBySize", fileset, max_merge_events=15)
    assert files_of(by_events) == [["a1"], ["a2"], ["b1"]]


# ----------------------------------------------------------------------- SiblingProcessingBased

def test_sibling_processing_based_full_jobs_until_closed():
    fileset = [f(f"a{k}") for k in range(5)] + [f("b0", loc=("T2_B", "T1_A"))]
    assert files_of(split("SiblingProcessingBased", fileset, closed=False, files_per_job=2)) == [["a0", "a1"], ["a2", "a3"]]
    closed = split("SiblingProcessingBased", fileset, closed=True, files_per_job=2)
    assert [(list(j.files), list(j.locations)) for j in closed] == [
        (["a0", "a1"], ["T1_A"]), (["a2", "a3"], ["T1_A"]), (["a4"], ["T1_A"]), (["b0"], ["T2_B"])]


# -------------------------------------------------------------------------------------- Harvest

HARVEST = [f("a", runs={1: [1, 2]}), f("b", runs={1: [3, 5]}), f("c", runs={2: [1]}), f("d", runs={1: [7]}, loc=("T2_B",))]


def test_harvest_end_of_run_by_run_and_multi_run():
    assert shape(split("Harvest", HARVEST)) == [
        (["a", "b"], NO_EVENTS, {"1": [[1, 3], [5, 5]]}, ["T1_A"], False),
        (["c"], NO_EVENTS, {"2": [[1, 1]]}, ["T1_A"], False),
        (["d"], NO_EVENTS, {"1": [[7, 7]]}, ["T2_B"], False),
    ]
    multi = split("Harvest", HARVEST, dqmHarvestUnit="multiRun")
    assert [(list(j.files), j.as_contract()["lumis"]) for j in multi] == [
        (["a", "b", "c"], {"1": [[1, 3], [5, 5]], "2": [[1, 1]]}), (["d"], {"1": [[7, 7]]})]
    assert split("Harvest", HARVEST, closed=False) == []


def test_harvest_periodic_jobs_and_siblings():
    assert len(split("Harvest", HARVEST, closed=False, periodic_harvest_interval=3600)) == 3
    assert split("Harvest", HARVEST, closed=False, periodic_harvest_interval=3600, last_job_time=NOW - 100) == []
    assert len(split("Harvest", HARVEST, closed=False, periodic_harvest_interval=3600, last_job_time=NOW - 4000)) == 3
    assert split("Harvest", HARVEST, closed=False, periodic_harvest_interval=3600, last_job_time=NOW - 4000, jobs_running=True) == []
    assert split("Harvest", HARVEST, periodic_harvest_sibling=True, sibling_complete=False) == []
    assert len(split("Harvest", HARVEST, periodic_harvest_sibling=True)) == 3


def test_harvest_run_lists_and_lumi_mask():
    assert files_of(split("Harvest", HARVEST, runWhitelist=[2])) == [["c"]]
    # WMCore applies the blacklist only together with a whitelist.
    assert len(split("Harvest", HARVEST, runBlacklist=[2])) == 3
    assert files_of(split("Harvest", HARVEST, runWhitelist="1,2", runBlacklist="2")) == [["a", "b"], ["d"]]
    masked = split("Harvest", HARVEST, runs="1", lumis="2,3")
    assert [(list(j.files), j.as_contract()["lumis"]) for j in masked] == [(["a", "b"], {"1": [[2, 3]]})]


# --------------------------------------------------------------------------------- parameters

def test_parameters_are_checked_and_named():
    with pytest.raises(BadInput, match=r"--param files_per_jobs: unknown parameter for FileBased"):
        split("FileBased", [f("a")], files_per_jobs=3)
    with pytest.raises(BadInput, match=r"--param lumis_per_job: must be at least 1"):
        split("LumiBased", [f("a")], lumis_per_job="0")
    with pytest.raises(BadInput, match=r"--param splitOnRun: must be true or false"):
        split("LumiBased", [f("a")], splitOnRun="maybe")
    with pytest.raises(BadInput, match=r"--param lumis: needs an even number"):
        split("LumiBased", [f("a")], runs="1", lumis="1,2,3")
    with pytest.raises(BadInput, match=r"--algorithm: unknown algorithm 'Lumi'"):
        split("Lumi", [f("a")])
    assert files_of(split("filebased", [f("a")])) == [["a"]]  # names match without regard to case
