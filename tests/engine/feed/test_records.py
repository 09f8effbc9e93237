"""The Contents Feeder's pure rules (engine/feed/records.py), without a store: which catalog files a
dataset takes, how they become records, how many are released, and where the task goes."""

from __future__ import annotations

import pytest

from jedictl.engine.catalogs.data import CatalogFile
from jedictl.engine.feed.records import (
    DatasetFeed,
    FeedSpec,
    event_ranges,
    expand,
    pseudo_records,
    release_count,
    scout_budget,
    select_files,
    seq_number_count,
    task_outcome,
)


def catalog(*names: str, events: int | None = 100) -> list[list[CatalogFile]]:
    """Catalog files in two listing batches, as the data catalog streams them."""
    files = [CatalogFile(name, n_events=events, size=1000) for name in names]
    return [files[: len(files) // 2], files[len(files) // 2:]]


def lfns(files) -> list[str]:
    return [f.lfn for f in files]


# ------------------------------------------------------------------------------------------ selection

def test_include_exclude_and_offset_keep_the_catalog_order():
    spec = FeedSpec(is_master=True, include=(r"\.root$",), exclude=(r"^log\.",), offset=1)
    assert lfns(select_files(catalog("a.root", "log.b.root", "c.root", "d.txt", "e.root"), spec)) == ["c.root", "e.root"]


def test_an_explicit_file_list_is_taken_in_its_order_and_skips_what_the_catalog_lacks():
    spec = FeedSpec(is_master=True, files=("c.root", "x.root", "a.root"))
    assert lfns(select_files(catalog("a.root", "b.root", "c.root"), spec)) == ["c.root", "a.root"]


def test_random_order_is_repeatable_by_its_seed():
    names = [f"f{i:02d}.root" for i in range(20)]
    first = lfns(select_files(catalog(*names), FeedSpec(is_master=True, random_order=True, shuffle_seed=7)))
    again = lfns(select_files(catalog(*names), FeedSpec(is_master=True, random_order=True, shuffle_seed=7)))
    assert first == again and sorted(first) == names and first != names


def test_events_alignment_puts_files_that_fill_whole_jobs_first():
    files = [[CatalogFile("short.root", n_events=150), CatalogFile("whole.root", n_events=200), CatalogFile("big.root", n_events=400)]]
    spec = FeedSpec(is_master=True, n_events_per_job=100, events_alignment=True)
    assert lfns(select_files(files, spec)) == ["big.root", "whole.root", "short.root"]


def test_files_used_by_another_task_are_skipped():
    spec = FeedSpec(is_master=True, skip_lfns=frozenset({"b.root"}))
    assert lfns(select_files(catalog("a.root", "b.root", "c.root"), spec)) == ["a.root", "c.root"]


# ------------------------------------------------------------------------------------------- records

def test_whole_file_records_number_their_events_task_wide_and_stop_at_the_file_cap():
    files = [CatalogFile("a.root", n_events=10), CatalogFile("b.root", n_events=20), CatalogFile("c.root", n_events=5)]
    records = list(expand(files, FeedSpec(is_master=True, max_files=2), next_first_event=101))
    assert [(r.lfn, r.n_events, r.first_event, r.start_event) for r in records] == [("a.root", 10, 101, None), ("b.root", 20, 111, None)]


def test_event_level_records_cut_each_file_and_skip_ranges_another_task_did():
    spec = FeedSpec(is_master=True, n_events_per_job=40, skip_ranges=frozenset({("a.root", 40, 79)}))
    records = list(expand([CatalogFile("a.root", n_events=100)], spec, next_first_event=1))
    # The file's count stays on every range (JEDI's convention); the skipped range keeps its numbers.
    assert [(r.start_event, r.end_event, r.n_events, r.first_event) for r in records] == [(0, 39, 100, 1), (80, 99, 100, 41)]


def test_the_event_cap_trims_the_last_file():
    files = [CatalogFile("a.root", n_events=60), CatalogFile("b.root", n_events=60), CatalogFile("c.root", n_events=60)]
    records = list(expand(files, FeedSpec(is_master=True, max_events=100), next_first_event=1))
    assert [(r.lfn, r.n_events) for r in records] == [("a.root", 60), ("b.root", 40)]


@pytest.mark.parametrize("n_events,per_job,target,skip_short,expected", [
    (100, 40, None, False, [(0, 39), (40, 79), (80, 99)]),
    (100, 40, None, True, [(0, 39), (40, 79)]),  # skipShortInput drops the short tail
    (100, None, 30, False, [(0, 24), (25, 49), (50, 74), (75, 99)]),  # tgtNumEventsPerJob: near-equal pieces
    (10, 40, None, True, []),
])
def test_event_ranges(n_events, per_job, target, skip_short, expected):
    assert event_ranges(n_events, per_job, target, skip_short) == expected


def test_a_no_input_task_is_one_pseudo_file_split_like_a_real_one_or_one_record_per_job():
    by_events = pseudo_records(1000, None, FeedSpec(is_master=True, n_events_per_job=400, first_event_base=1))
    assert [(r.start_event, r.end_event) for r in by_events] == [(0, 399), (400, 799), (800, 999)]
    by_jobs = pseudo_records(None, 3, FeedSpec(is_master=True, first_event_base=5))
    assert [(r.start_event, r.first_event) for r in by_jobs] == [(0, 5), (1, 6), (2, 7)]


@pytest.mark.parametrize("args,expected", [
    ((7, None, None, None, None, None, 3, 10000), 7),  # num_records
    ((None, 12, 5000, 100, None, None, 3, 10000), 12),  # nFiles
    ((None, None, 1000, 300, None, None, 3, 10000), 4),  # ceil(nEvents / nEventsPerJob)
    ((None, None, 1000, None, 100, 2, 3, 10000), 5),  # ceil(nEvents / nEventsPerFile / nFilesPerJob)
    ((None, None, None, None, None, None, 20000, 10000), 20000),  # max(10 000, master nFiles)
])
def test_seq_number_count(args, expected):
    assert seq_number_count(*args) == expected


# ------------------------------------------------------------------------------------------- release

def test_scouting_releases_ten_chunks_and_a_growing_input_whole_bunches():
    assert scout_budget(10, None) == 10 and scout_budget(10, 4) == 40
    assert release_count(25, None, None, closed=True) == 25
    assert release_count(25, scout_budget(10, 2), None, closed=True) == 20
    assert release_count(25, None, 10, closed=False) == 20  # an open input: whole bunches only
    assert release_count(25, None, 10, closed=True) == 25  # closed: the rest goes too


# ----------------------------------------------------------------------------------------- the task

MASTER = DatasetFeed("ds.in", is_master=True, usable=5)
UNKNOWN = DatasetFeed("ds.unknown", is_master=True, missing=True)


@pytest.mark.parametrize("feeds,kwargs,status", [
    ([MASTER], {"needs_nucleus": False}, "ready"),
    ([MASTER], {"needs_nucleus": True}, "assigning"),
    ([UNKNOWN], {}, "broken"),  # seed 000: unknown input breaks the task
    ([UNKNOWN], {"wait_input": True}, "pending"),  # ... unless the user asked to wait for it
    ([UNKNOWN], {"parent_running": True}, "pending"),  # a running parent will still write it
    ([UNKNOWN], {"allow_empty_input": True}, "finishing"),
    ([DatasetFeed("ds.in", is_master=True, state="open")], {}, "defined"),  # an open input waits to be closed
    ([DatasetFeed("ds.in", is_master=True, usable=0)], {}, "broken"),
    ([DatasetFeed("ds.in", is_master=True, usable=0, mutable=True, state="open")], {}, "pending"),
])
def test_where_the_task_goes_once_fed(feeds, kwargs, status):
    arguments = {"needs_nucleus": False, "allow_empty_input": False, "parent_running": False, **kwargs}
    assert task_outcome(feeds, **arguments).status == status


def test_waiting_for_a_parent_never_times_out_but_waiting_for_input_does():
    assert task_outcome([UNKNOWN], False, False, parent_running=True).times_out is False
    assert task_outcome([UNKNOWN], False, False, False, wait_input=True).times_out is True


@pytest.mark.parametrize("use_real, catalog_events, expected", [
    (False, 120, 100),  # nEventsPerInputFile wins over the catalog's count (JEDI's feeder)
    (True, 120, 120),  # useRealNumEvents: the catalog's count
    (True, None, 100),  # ... unless the catalog has none
    (False, None, 100),
])
def test_n_events_per_input_file_and_use_real_num_events(use_real, catalog_events, expected):
    spec = FeedSpec(is_master=True, n_events_per_file=100, use_real_num_events=use_real)
    assert [r.n_events for r in expand([CatalogFile("a.root", n_events=catalog_events)], spec, 1)] == [expected]


def test_a_pseudo_master_holds_n_events_whatever_the_events_per_input_file():
    spec = FeedSpec(is_master=True, n_events_per_job=400, n_events_per_file=50)
    assert sum(r.end_event - r.start_event + 1 for r in pseudo_records(1000, None, spec)) == 1000
