"""Properties of the splitters (hypothesis): every released file or event range lands in exactly one job,
no job exceeds a limit unless one file alone does, and input order is kept."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from jedictl.engine.generate.splitters import (
    Fileset,
    InputChunk,
    InputFile,
    JobLimits,
    SecondaryInput,
    split_at_site,
    split_chunk,
    split_fileset,
    unused_master,
    wm_file,
)
from jedictl.engine.generate.splitters.jedi_model import BOUNDARY_SPLIT

SITES = ("T1_A", "T2_B", "T2_C")


# ---------------------------------------------------------------------------------------- JEDI

@st.composite
def jedi_records(draw) -> tuple[InputFile, ...]:
    """Whole files and event-range records (consecutive, possibly with gaps), in read order."""
    records = []
    for index in range(draw(st.integers(0, 40))):
        size = draw(st.integers(0, 5_000))
        boundary = draw(st.integers(1, 3))
        lumi_block = draw(st.integers(1, 3))
        n_events = draw(st.integers(0, 300))
        if n_events and draw(st.booleans()):
            step = draw(st.integers(1, n_events))
            for start in range(0, n_events, step):
                if draw(st.integers(0, 9)) == 0:
                    continue  # a range already done: a gap
                records.append(InputFile(len(records), f"f{index}", size, n_events, start, min(start + step, n_events) - 1,
                                         boundary_id=boundary, lumi_block=lumi_block))
        else:
            records.append(InputFile(len(records), f"f{index}", size, n_events or None, boundary_id=boundary, lumi_block=lumi_block))
    return tuple(records)


@st.composite
def jedi_limits(draw) -> JobLimits:
    def maybe(strategy: st.SearchStrategy) -> object:
        return draw(st.one_of(st.none(), strategy))

    n_files_per_job = maybe(st.integers(1, 6))
    return JobLimits(
        n_files_per_job=n_files_per_job,
        n_events_per_job=maybe(st.integers(1, 500)),
        max_files=n_files_per_job or maybe(st.integers(1, 12)),
        max_events=maybe(st.integers(1, 600)),
        max_size=maybe(st.integers(1, 40_000)),
        max_disk=maybe(st.integers(1, 40_000)),
        max_walltime=maybe(st.integers(1, 3_000)),
        max_out_size=maybe(st.integers(1, 20_000)),
        hard_max_files=draw(st.integers(1, 30)),
        min_out_size=draw(st.integers(0, 2_000)),
        size_gradient=draw(st.sampled_from([0.0, 0.5, 2.0])),
        size_intercept=draw(st.integers(0, 500)),
        walltime_gradient=draw(st.sampled_from([0.0, 1.0, 7.5])),
        use_hs06=draw(st.booleans()),
        direct_io=draw(st.booleans()),
        boundary_mode=draw(st.sampled_from([None, BOUNDARY_SPLIT])),
        respect_lb=draw(st.booleans()),
        skip_short_output=draw(st.booleans()),
    )


def _continues(previous: InputFile, record: InputFile) -> bool:
    if previous.start_event is None or record.start_event is None:
        return True
    expected = previous.end_event + 1
    if expected == previous.n_events:
        return record.start_event == 0
    return record.start_event == expected and record.lfn == previous.lfn


@settings(max_examples=200, deadline=None)
@given(records=jedi_records(), limits=jedi_limits())
def test_jedi_every_record_in_exactly_one_job_in_order_within_limits(records, limits):
    chunk = InputChunk(records)
    result = split_chunk(chunk, limits)
    placed = [record for sub in result.sub_chunks for record in sub.master]
    # every record once, in read order; what was not placed (short job dropped) is the unused tail
    assert placed + list(unused_master(chunk, result.cursor)) == list(records)
    if not result.short_dropped:
        assert result.cursor.master == len(records)
    group = limits.n_files_per_job if limits.n_files_per_job and not limits.respect_lb else 1
    for sub in result.sub_chunks:
        master = sub.master
        assert master
        for previous, record in pairwise(master):
            assert _continues(previous, record), "a job joined event ranges that do not continue each other"
            if limits.boundary_mode:
                assert previous.boundary_id == record.boundary_id
            if limits.respect_lb:
                assert previous.lumi_block == record.lumi_block
        if group > 1:
            assert len(master) <= group
            continue
        if len(master) == 1:
            continue  # one record alone may exceed any limit
        assert limits.max_files is None or len(master) <= limits.max_files
        assert limits.max_events is None or sub.n_events <= limits.max_events
        assert limits.max_size is None or sub.estimated_bytes <= limits.max_size
        assert limits.max_disk is None or sub.disk_bytes <= limits.max_disk
        assert limits.max_walltime is None or sub.walltime <= limits.max_walltime
        assert limits.max_out_size is None or sub.out_bytes <= limits.max_out_size
        assert len(master) <= limits.hard_max_files


@settings(max_examples=100, deadline=None)
@given(records=jedi_records(), limits=jedi_limits(), per_site=st.lists(st.integers(1, 4), min_size=1, max_size=30),
       ratio=st.sampled_from([1, 2, 0.5]), n_secondary=st.integers(0, 20))
def test_jedi_splitting_site_by_site_equals_splitting_at_once(records, limits, per_site, ratio, n_secondary):
    secondary = SecondaryInput(9, tuple(InputFile(k, f"s{k}", 10, 5) for k in range(n_secondary)), ratio=ratio)
    chunk = InputChunk(records, (secondary,))
    whole = split_chunk(chunk, limits)
    pieces, cursor, rounds = [], None, 0
    while True:
        step = per_site[rounds % len(per_site)]
        part = split_at_site(chunk, limits, *(() if cursor is None else (cursor,)), max_sub_chunks=step)
        pieces.extend(part.sub_chunks)
        cursor, rounds = part.cursor, rounds + 1
        if len(part.sub_chunks) < step:
            break
    assert tuple(pieces) == whole.sub_chunks
    # secondaries are used in order and never twice (no repeat, no reuse)
    used = [record.lfn for sub in whole.sub_chunks for record in sub.secondaries[0]]
    assert used == [f"s{k}" for k in range(len(used))]


# -------------------------------------------------------------------------------------- WMCore

@st.composite
def filesets(draw, with_lumis: bool = False) -> Fileset:
    files = []
    next_lumi: dict[int, int] = {}
    for index in range(draw(st.integers(0, 25))):
        runs: dict[int, list[int]] = {}
        for run in sorted(draw(st.sets(st.integers(1, 3), min_size=1 if with_lumis else 0, max_size=2))):
            count = draw(st.integers(1 if with_lumis else 0, 5))
            start = next_lumi.get(run, 1) + draw(st.integers(0, 2))  # lumis unique per run, sometimes with gaps
            runs[run] = list(range(start, start + count))
            next_lumi[run] = start + count
        locations = draw(st.sets(st.sampled_from(SITES), min_size=1, max_size=2))
        files.append(wm_file(f"/store/f{index:03d}.root", draw(st.integers(0, 3000)), draw(st.integers(0, 700)),
                             sorted(locations), runs))
    return Fileset(tuple(files), draw(st.booleans()))


def _group_order(fileset: Fileset) -> dict[str, int]:
    return {f.lfn: position for position, f in enumerate(fileset.files)}


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(), per_job=st.integers(1, 6))
def test_file_based_family_places_every_file_once(fileset, per_job):
    order = _group_order(fileset)
    by_lfn = {f.lfn: f for f in fileset.files}
    for algorithm in ("FileBased", "MinFileBased", "SiblingProcessingBased"):
        jobs = split_fileset(algorithm, fileset, {"files_per_job": per_job})
        placed = Counter(lfn for job in jobs for lfn in job.files)
        assert all(count == 1 for count in placed.values())
        if fileset.closed or algorithm == "FileBased":
            assert set(placed) == set(order)
        for job in jobs:
            assert 1 <= len(job.files) <= per_job
            if algorithm != "SiblingProcessingBased":  # groups by first location, not by location set
                assert len({frozenset(by_lfn[lfn].locations) for lfn in job.files}) == 1
            if algorithm == "FileBased":
                assert list(job.files) == sorted(job.files)
            else:
                assert [order[lfn] for lfn in job.files] == sorted(order[lfn] for lfn in job.files)
            if algorithm == "MinFileBased" and not fileset.closed:
                assert len(job.files) == per_job


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(), per_job=st.integers(1, 2000))
def test_size_based_within_limit_unless_one_file_alone(fileset, per_job):
    jobs = split_fileset("SizeBased", fileset, {"size_per_job": per_job})
    sizes = {f.lfn: f.size for f in fileset.files}
    order = _group_order(fileset)
    assert sorted(lfn for job in jobs for lfn in job.files) == sorted(sizes)
    for job in jobs:
        # over the limit only with a file that alone is (WMCore adds it to a job holding only empty files)
        assert sum(sizes[lfn] for lfn in job.files) <= per_job or max(sizes[lfn] for lfn in job.files) > per_job
        assert [order[lfn] for lfn in job.files] == sorted(order[lfn] for lfn in job.files)


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(), per_job=st.integers(10, 250))
def test_event_based_ranges_partition_every_file(fileset, per_job):
    jobs = split_fileset("EventBased", fileset, {"events_per_job": per_job})
    for file in fileset.files:
        mine = [(job.first_event, job.last_event) for job in jobs if job.files == (file.lfn,)]
        if file.events == 0:
            assert mine == [(file.first_event, None)]
            continue
        covered = [event for first, last in mine for event in range(first, last + 1)]
        assert covered == list(range(file.first_event, file.first_event + file.events))
        assert all(last - first + 1 <= per_job for first, last in mine)


def _lumis_of(jobs) -> Counter:
    return Counter((run, lumi) for job in jobs for run, ranges in (job.lumis or ()) for first, last in ranges
                   for lumi in range(first, last + 1))


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(with_lumis=True), per_job=st.integers(1, 7), halt=st.booleans(), split_on_run=st.booleans())
def test_lumi_based_every_lumi_in_exactly_one_job(fileset, per_job, halt, split_on_run):
    params = {"lumis_per_job": per_job, "halt_job_on_file_boundaries": halt, "splitOnRun": split_on_run}
    jobs = split_fileset("LumiBased", Fileset(fileset.files, True), params)
    expected = Counter((run, lumi) for f in fileset.files for run, lumis in f.runs for lumi in lumis)
    assert _lumis_of(jobs) == expected
    lumi_files = {(run, lumi): f.lfn for f in fileset.files for run, lumis in f.runs for lumi in lumis}
    for job in jobs:
        mine = _lumis_of([job])
        assert sum(mine.values()) <= per_job
        assert set(job.files) == {lumi_files[key] for key in mine}
        if split_on_run:
            assert len({run for run, _lumi in mine}) == 1


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(with_lumis=True), per_job=st.integers(1, 1500))
def test_event_aware_lumi_based_every_lumi_in_exactly_one_job(fileset, per_job):
    jobs = split_fileset("EventAwareLumiBased", Fileset(fileset.files, True), {"events_per_job": per_job})
    expected = Counter((run, lumi) for f in fileset.files for run, lumis in f.runs for lumi in lumis)
    assert _lumis_of(jobs) == expected


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(with_lumis=True), max_size=st.integers(1, 6000), min_size=st.integers(0, 3000))
def test_parentless_merge_stays_below_the_maximum_and_closed_filesets_merge_everything(fileset, max_size, min_size):
    params = {"max_merge_size": max_size, "min_merge_size": min_size}
    jobs = split_fileset("ParentlessMergeBySize", fileset, params)
    sizes = {f.lfn: f.size for f in fileset.files}
    placed = Counter(lfn for job in jobs for lfn in job.files)
    assert all(count == 1 for count in placed.values())
    if fileset.closed:
        assert set(placed) == set(sizes)
    for job in jobs:
        assert sum(sizes[lfn] for lfn in job.files) <= max_size or len(job.files) == 1


@settings(max_examples=100, deadline=None)
@given(fileset=filesets(with_lumis=True), by_run=st.booleans())
def test_harvest_covers_every_file_and_lumi(fileset, by_run):
    params = {"dqmHarvestUnit": "byRun" if by_run else "multiRun"}
    jobs = split_fileset("Harvest", Fileset(fileset.files, True), params)
    assert {lfn for job in jobs for lfn in job.files} == {f.lfn for f in fileset.files}
    assert set(_lumis_of(jobs)) == {(run, lumi) for f in fileset.files for run, lumis in f.runs for lumi in lumis}
