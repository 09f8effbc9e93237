"""JEDI's splitter (jedi-inventory.md §6.6, §6.11, §6.12, §16.1): limits, boundaries, secondaries, scouts, merges."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jedictl.config import Settings
from jedictl.engine.task.options import TaskOptions
from jedictl.engine.generate.splitters import (
    InputChunk,
    InputFile,
    SecondaryInput,
    SiteLimits,
    SplitDefaults,
    job_limits,
    next_sub_chunk,
    site_limits,
    split_at_site,
    split_chunk,
    sub_chunks_per_site,
    unused_master,
)
from jedictl.engine.generate.splitters.events import event_ranges, expand_event_ranges
from jedictl.engine.generate.splitters.jedi_model import GB, MB, JobLimits
from jedictl.engine.task.definition import DatasetAttributes
from jedictl.errors import BadInput


def files(*names: str, size: int = 1000, events: int | None = None, **fields) -> tuple[InputFile, ...]:
    return tuple(InputFile(i, name, size, events, **fields) for i, name in enumerate(names))


def lfns(result) -> list[list[str]]:
    return [[r.lfn for r in sub.master] for sub in result.sub_chunks]


def numbered(n: int, start: int = 1) -> tuple[InputFile, ...]:
    return files(*(f"f.{k:03d}.root" for k in range(start, start + n)))


# ------------------------------------------------------------------------ §16.1 worked example

def test_worked_example_scouts_then_avalanche():
    """25 files, nFilesPerJob=2: scouts get 10 chunks (20 files), 2 jobs per site; the avalanche gets
    the remaining 5 files as jobs of 2, 2 and 1, the last one short."""
    options = TaskOptions(n_files_per_job=2)
    dataset = numbered(25)
    scout_chunk = InputChunk(dataset[:20])  # nFilesToBeUsed = 10 chunks x 2 files while scouting
    sites = [SiteLimits(name) for name in ("SITE_A", "SITE_B", "SITE_C", "SITE_D", "SITE_E", "SITE_F")]
    per_site = sub_chunks_per_site(scout=True)
    assert per_site == 2
    cursor, jobs = None, []
    for site in sites:
        result = split_at_site(scout_chunk, job_limits(options, site, scout=True), *(() if cursor is None else (cursor,)),
                               max_sub_chunks=per_site)
        cursor = result.cursor
        jobs.extend(result.sub_chunks)
    assert [sub.lfns for sub in jobs] == [(f"f.{2 * k + 1:03d}.root", f"f.{2 * k + 2:03d}.root") for k in range(10)]
    assert [sub.site for sub in jobs] == [s.name for s in sites[:5] for _ in range(2)]
    assert not any(sub.short for sub in jobs)
    assert unused_master(scout_chunk, cursor) == ()

    avalanche = InputChunk(dataset[20:])
    result = split_chunk(avalanche, job_limits(options, SiteLimits("SITE_A")))
    assert lfns(result) == [["f.021.root", "f.022.root"], ["f.023.root", "f.024.root"], ["f.025.root"]]
    assert [sub.short for sub in result.sub_chunks] == [False, False, True]

    dropped = split_chunk(avalanche, job_limits(TaskOptions(n_files_per_job=2, skip_short_output=True)))
    assert lfns(dropped) == [["f.021.root", "f.022.root"], ["f.023.root", "f.024.root"]]
    assert dropped.short_dropped and [r.lfn for r in unused_master(avalanche, dropped.cursor)] == ["f.025.root"]


def test_scouts_take_one_file_per_job_unless_the_task_says_otherwise():
    chunk = InputChunk(numbered(3))
    assert lfns(split_chunk(chunk, job_limits(TaskOptions(), scout=True))) == [["f.001.root"], ["f.002.root"], ["f.003.root"]]
    assert len(split_chunk(chunk, job_limits(TaskOptions(respect_split_rule=True), scout=True)).sub_chunks) == 1
    assert len(split_chunk(chunk, job_limits(TaskOptions()), ).sub_chunks) == 1
    assert sub_chunks_per_site(scout=False) == 25 and sub_chunks_per_site(scout=False, job_chunk_size=7) == 7


# --------------------------------------------------------------------------------- file limits

def test_max_files_per_job_default_and_hard_cap_with_secondaries():
    chunk = InputChunk(files(*(f"m{k}" for k in range(450)), size=1))
    assert [len(s.master) for s in split_chunk(chunk, job_limits(TaskOptions())).sub_chunks] == [200, 200, 50]
    # 1,000 input records per job at most, secondaries included: 995 masters + 5 nosplit files.
    secondary = SecondaryInput(7, files(*(f"s{k}" for k in range(5)), size=1), nosplit=True)
    chunk = InputChunk(files(*(f"m{k}" for k in range(1200)), size=1), (secondary,))
    result = split_chunk(chunk, job_limits(TaskOptions(n_max_files_per_job=1000)))
    assert [len(s.master) for s in result.sub_chunks] == [995, 205]
    assert all(len(s.secondaries[0]) == 5 for s in result.sub_chunks)


def test_n_files_per_job_takes_exactly_one_group_even_beyond_other_limits():
    chunk = InputChunk(files("a", "b", "c", size=30 * GB))
    result = split_chunk(chunk, job_limits(TaskOptions(n_files_per_job=2), SiteLimits(max_scratch_mb=1000)))
    assert lfns(result) == [["a", "b"], ["c"]]


# ---------------------------------------------------------------------- size, disk, walltime

def test_gb_per_job_counts_input_output_estimate_and_margins():
    # NG=10: max size 10 GB + 1.5 GB default output + 300 MB work-disk margin.
    big = files(*"abcdefg", size=3 * GB)
    no_output = job_limits(TaskOptions(n_gb_per_job=10))
    assert no_output.max_size == 10 * GB + 1500 * MB + 300 * MB
    # Without an output estimate the 1.5 GB default output is reserved: 3 files (9 GB) fit, 4 do not.
    assert [len(s.master) for s in split_chunk(InputChunk(big), no_output).sub_chunks] == [3, 3, 1]
    # Output of half the input: 2 files = 6 + 3 + 0.3 GB; a third would make 13.8 GB.
    with_output = job_limits(TaskOptions(n_gb_per_job=10, out_disk_count=0.5))
    result = split_chunk(InputChunk(big), with_output)
    assert [len(s.master) for s in result.sub_chunks] == [2, 2, 2, 1]
    assert result.sub_chunks[0].estimated_bytes == 6 * GB + 3 * GB + 300 * MB


def test_one_file_alone_may_exceed_the_size_limit():
    chunk = InputChunk(files("huge", "small", size=25 * GB))
    result = split_chunk(chunk, job_limits(TaskOptions()))  # 20 GB default
    assert lfns(result) == [["huge"], ["small"]]


def test_scratch_disk_limit_with_direct_io():
    # Direct IO: input is not copied, the output estimate (1 byte per input byte) fills the 5000 MB scratch.
    site = SiteLimits("S", max_scratch_mb=5000, direct_io=True)
    limits = job_limits(TaskOptions(out_disk_count=1.0), site)
    assert limits.max_disk == 5000 * MB and limits.max_size == 500 * GB
    result = split_chunk(InputChunk(files(*"abcdefghij", size=1 * GB)), limits)
    assert [len(s.master) for s in result.sub_chunks] == [4, 4, 2]
    # Scouts without NF/NE (respectSplitRule keeps them from the one-file default) read at most 50 GB.
    assert job_limits(TaskOptions(respect_split_rule=True), site, scout=True).max_size == 50 * GB
    assert job_limits(TaskOptions(), site, scout=True).max_size is None  # one file per scout job
    # Copy-to-scratch jobs are limited by maxwdir as their max size.
    assert job_limits(TaskOptions(), SiteLimits(max_scratch_mb=5000)).max_size == 5000 * MB


def test_walltime_from_hs06_cpu_time_core_power_and_site_maxtime():
    options = TaskOptions(cpu_time=10, cpu_time_unit="HS06sPerEvent", cpu_efficiency=100, base_walltime=600, max_walltime_hours=2)
    site = SiteLimits("S", max_walltime=3600, core_count=1, core_power=10.0)
    limits = job_limits(options, site)
    assert limits.max_walltime == 3600  # min(2 h, site maxtime)
    # 1 s per event: 600 s base + 3 files x 1000 events = 3600 s; a fourth file would need 4600 s.
    result = split_chunk(InputChunk(files(*"abcdefg", size=1, events=1000)), limits)
    assert [len(s.master) for s in result.sub_chunks] == [3, 3, 1]
    assert result.sub_chunks[0].walltime == 3600
    # Four cores share the work.
    four = job_limits(options, SiteLimits("S", max_walltime=3600, core_count=4, core_power=10.0))
    assert len(split_chunk(InputChunk(files(*"abcdefghijklmno", size=1, events=1000)), four).sub_chunks[0].master) == 12


def test_max_events_per_job_caps_whole_files():
    result = split_chunk(InputChunk(files(*"abcdefg", size=1, events=300)), job_limits(TaskOptions(max_events_per_job=1000)))
    assert [len(s.master) for s in result.sub_chunks] == [3, 3, 1]
    assert [s.n_events for s in result.sub_chunks] == [900, 900, 300]


# ------------------------------------------------------------------------------- event ranges

def ranges(lfn: str, n_events: int, pieces: list[tuple[int, int]], size: int = 1000) -> list[InputFile]:
    return [InputFile(0, lfn, size, n_events, start, end) for start, end in pieces]


def test_events_per_job_over_event_range_records():
    records = expand_event_ranges(files("a", "b", size=1000, events=250), 100)
    assert [(r.lfn, r.start_event, r.end_event, r.first_event) for r in records] == [
        ("a", 0, 99, 1), ("a", 100, 199, 101), ("a", 200, 249, 201), ("b", 0, 99, 251), ("b", 100, 199, 351), ("b", 200, 249, 451)]
    result = split_chunk(InputChunk(tuple(records)), job_limits(TaskOptions(n_events_per_job=100)))
    assert [(s.lfns, s.skip_events, s.n_events, s.short) for s in result.sub_chunks] == [
        (("a",), 0, 100, False), (("a",), 100, 100, False), (("a",), 200, 50, True),
        (("b",), 0, 100, False), (("b",), 100, 100, False), (("b",), 200, 50, True)]
    # A range's effective size is its share of the file.
    assert result.sub_chunks[0].estimated_bytes == 300 * MB + 1000  # the file is staged once


def test_a_finished_file_continues_into_the_next_file_but_gaps_never_join():
    # a has 75 events in ranges of 50; its last range ends the file, so b's first range continues the job.
    records = tuple(ranges("a", 75, [(0, 49), (50, 74)]) + ranges("b", 75, [(0, 49), (50, 74)]))
    result = split_chunk(InputChunk(records), job_limits(TaskOptions(n_events_per_job=125)))
    assert [[(r.lfn, r.start_event) for r in s.master] for s in result.sub_chunks] == [
        [("a", 0), ("a", 50), ("b", 0)], [("b", 50)]]
    assert [s.n_events for s in result.sub_chunks] == [125, 25]
    # A missing range (50-99 already done) and a range of another file at the same offset never join.
    gap = tuple(ranges("c", 200, [(0, 49), (100, 149)]) + ranges("d", 200, [(150, 199)]))
    result = split_chunk(InputChunk(gap), job_limits(TaskOptions(n_events_per_job=1000)))
    assert [[(r.lfn, r.start_event) for r in s.master] for s in result.sub_chunks] == [[("c", 0)], [("c", 100)], [("d", 150)]]
    same_offset = tuple(ranges("e", 200, [(0, 49)]) + ranges("f", 200, [(50, 99)]))
    assert len(split_chunk(InputChunk(same_offset), job_limits(TaskOptions(n_events_per_job=1000))).sub_chunks) == 2


def test_feeder_style_ranges():
    assert event_ranges(250, 100) == [(0, 99), (100, 199), (200, 249)]
    assert event_ranges(250, None, 100) == [(0, 83), (84, 167), (168, 249)]  # 3 near-equal pieces
    short = expand_event_ranges(files("a", "b", events=130), 50, n_events_per_input_file=200, skip_short_input=True)
    assert [(r.lfn, r.start_event, r.end_event) for r in short] == [("a", 0, 49), ("a", 50, 99), ("b", 0, 49), ("b", 50, 99)]


# --------------------------------------------------------------------------------- boundaries

def test_boundary_id_modes():
    chunk = InputChunk(tuple(InputFile(i, f"f{i}", 1, boundary_id=b) for i, b in enumerate([1, 1, 1, 2, 2])))
    split = split_chunk(chunk, job_limits(TaskOptions(n_max_files_per_job=2), group_boundary_id=1))
    assert lfns(split) == [["f0", "f1"], ["f2"], ["f3", "f4"]]  # GB=1: limits apply within a boundary
    whole = split_chunk(chunk, job_limits(TaskOptions(n_max_files_per_job=2), group_boundary_id=3))
    assert lfns(whole) == [["f0", "f1", "f2"], ["f3", "f4"]]  # GB=3: only boundaries split
    merged = split_chunk(chunk, job_limits(TaskOptions(merge_output=True), merging=True))
    assert lfns(merged) == [["f0", "f1", "f2", "f3", "f4"]]  # merge jobs take many boundaryIDs
    with pytest.raises(BadInput, match="groupBoundaryID"):
        job_limits(TaskOptions(), group_boundary_id=7)


def test_secondaries_follow_the_boundary_of_their_masters():
    master = tuple(InputFile(i, f"m{i}", 1, boundary_id=b) for i, b in enumerate([1, 2]))
    secondary = SecondaryInput(2, tuple(InputFile(i, f"s{i}", 1, boundary_id=b) for i, b in enumerate([1, 1, 2])))
    result = split_chunk(InputChunk(master, (secondary,)), job_limits(TaskOptions(), group_boundary_id=1))
    assert [[r.lfn for r in s.secondaries[0]] for s in result.sub_chunks] == [["s0", "s1"], ["s2"]]


def test_respect_lumiblock_never_mixes_lumiblocks():
    chunk = InputChunk(tuple(InputFile(i, f"f{i}", 1, lumi_block=lb) for i, lb in enumerate([1, 1, 2, 2, 2])))
    result = split_chunk(chunk, job_limits(TaskOptions(n_files_per_job=2, respect_lb=True)))
    assert lfns(result) == [["f0", "f1"], ["f2", "f3"], ["f4"]]
    assert [s.short for s in result.sub_chunks] == [False, False, True]


def test_split_by_lfn_fields():
    chunk = InputChunk(files("data.run1.a", "data.run1.b", "data.run2.c"))
    limits = job_limits(TaskOptions(add_nth_field_to_lfn="2", use_file_as_source_lfn=True))
    assert lfns(split_chunk(chunk, limits)) == [["data.run1.a", "data.run1.b"], ["data.run2.c"]]


# --------------------------------------------------------------------------------- secondaries

def sec_lfns(result, k: int = 0) -> list[list[str]]:
    return [[r.lfn for r in s.secondaries[k]] for s in result.sub_chunks]


def test_secondary_ratio_nosplit_and_repeat():
    master = numbered(3)
    pileup = files(*(f"p{k}" for k in range(6)))
    result = split_chunk(InputChunk(master, (SecondaryInput(2, pileup, ratio=2),)), job_limits(TaskOptions(n_files_per_job=1)))
    assert sec_lfns(result) == [["p0", "p1"], ["p2", "p3"], ["p4", "p5"]]
    half = split_chunk(InputChunk(numbered(4), (SecondaryInput(2, pileup, ratio=0.5),)), job_limits(TaskOptions(n_files_per_job=2)))
    assert sec_lfns(half) == [["p0"], ["p1"]]  # 2 x 0.5 = 1 per job
    db = files("db1", "db2")
    nosplit = split_chunk(InputChunk(master, (SecondaryInput(3, db, nosplit=True),)), job_limits(TaskOptions(n_files_per_job=1)))
    assert sec_lfns(nosplit) == [["db1", "db2"]] * 3
    cyclic = split_chunk(InputChunk(numbered(5), (SecondaryInput(4, files("r0", "r1", "r2"), repeat=True),)),
                         job_limits(TaskOptions(n_files_per_job=1)))
    assert sec_lfns(cyclic) == [["r0"], ["r1"], ["r2"], ["r0"], ["r1"]]


def test_secondary_files_per_job_and_reusable():
    pool = files("s0", "s1", "s2")
    plain = split_chunk(InputChunk(numbered(6), (SecondaryInput(2, pool, n_files_per_job=2),)), job_limits(TaskOptions(n_files_per_job=3)))
    assert sec_lfns(plain) == [["s0", "s1"], ["s2"]]
    reused = split_chunk(InputChunk(numbered(6), (SecondaryInput(2, pool, n_files_per_job=2, reusable=True),)),
                         job_limits(TaskOptions(n_files_per_job=3)))
    assert sec_lfns(reused) == [["s0", "s1"], ["s0", "s1"]]  # rewound when too few files are left


def test_secondary_from_dataset_attributes_and_sizes_count():
    attributes = DatasetAttributes(ratio=1, n_files_per_job=None, reusable=True)
    secondary = SecondaryInput.from_attributes(9, files("s0", "s1", size=4 * GB), attributes)
    assert (secondary.ratio, secondary.reusable, secondary.nosplit) == (1, True, False)
    # Secondary bytes count against the size limit: 1 master + 1 secondary of 4 GB each per job.
    result = split_chunk(InputChunk(files("m0", "m1", size=4 * GB), (secondary,)), job_limits(TaskOptions(n_gb_per_job=8)))
    assert [(len(s.master), len(s.secondaries[0])) for s in result.sub_chunks] == [(1, 1), (1, 1)]


def test_event_ratio_secondaries():
    master = tuple(ranges("m", 100, [(0, 49), (50, 99)]))
    minbias = SecondaryInput(2, files("b0", "b1", "b2", "b3", events=10), event_ratio=0.3)
    result = split_chunk(InputChunk(master, (minbias,)), job_limits(TaskOptions(n_events_per_job=50)))
    # 50 master events x 0.3 = 15 secondary events: two 10-event files reach it.
    assert sec_lfns(result) == [["b0", "b1"], ["b2", "b3"]]


# -------------------------------------------------------------------------------------- merges

def test_merge_jobs_use_merge_limits():
    options = TaskOptions(merge_output=True)
    limits = job_limits(options, merging=True)
    assert (limits.max_files, limits.max_out_size, limits.size_intercept) == (50, 5 * GB, 500 * MB)
    # Output of a merge = 1.2 x input: four 1 GB files make 4.8 GB, a fifth would pass 5 GB.
    result = split_chunk(InputChunk(files(*"abcdefghij", size=1 * GB)), limits)
    assert [len(s.master) for s in result.sub_chunks] == [4, 4, 2]
    many = split_chunk(InputChunk(files(*(f"u{k}" for k in range(120)), size=1)), limits)
    assert [len(s.master) for s in many.sub_chunks] == [50, 50, 20]
    fixed = job_limits(TaskOptions(merge_output=True, n_files_per_merge_job=3), merging=True)
    assert [len(s.master) for s in split_chunk(InputChunk(files(*"abcdefg", size=1)), fixed).sub_chunks] == [3, 3, 1]


# --------------------------------------------------------------------------- cursor and sites

def test_cursor_continues_across_sites_and_can_be_rolled_back():
    chunk = InputChunk(numbered(7), (SecondaryInput(2, files(*(f"s{k}" for k in range(7))), ratio=1),))
    limits = job_limits(TaskOptions(n_files_per_job=1))
    first = split_at_site(chunk, limits, max_sub_chunks=3)
    assert first.cursor.master == 3 and first.cursor.secondaries == (3,)
    second = split_at_site(chunk, limits, first.cursor)
    whole = split_chunk(chunk, limits)
    assert first.sub_chunks + second.sub_chunks == whole.sub_chunks
    again = split_at_site(chunk, limits, first.cursor, max_sub_chunks=1)  # rollback = reuse an old cursor
    assert again.sub_chunks[0] == second.sub_chunks[0]
    assert next_sub_chunk(chunk, limits, whole.cursor) is None


def test_limits_from_site_catalog_entries_and_settings():
    site = SimpleNamespace(name="Q", max_walltime=7200, core_count=8, core_power=12.5, max_scratch_mb=20000, direct_io=False)
    assert site_limits(site) == SiteLimits("Q", 7200, 8, 12.5, 20000, False)
    defaults = SplitDefaults.from_settings(Settings())
    assert (defaults.max_files_per_job, defaults.hard_max_files_per_job, defaults.default_output_mb) == (200, 1000, 1500.0)
    assert job_limits(TaskOptions(), site_limits(site)).core_count == 8
    assert isinstance(job_limits(TaskOptions()), JobLimits)
