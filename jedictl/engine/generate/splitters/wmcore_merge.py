"""WMCore's algorithms that wait for their moment: ParentlessMergeBySize and WMBSMergeBySize (merge
unmerged files by size, the second keeping the files of one parent together) and Harvest (one job over
the whole fileset, periodically or at the end of the run); peers.md §1.4 and seed 004.

Both read a clock (`JobFactoryParams.now`) and, for Harvest, what is known about earlier harvesting
jobs (`HarvestState`), so that the decision stays a pure function.
"""

from __future__ import annotations

from dataclasses import dataclass

from jedictl.engine.generate.splitters.wmcore_model import (
    Fileset,
    JobDraft,
    JobFactoryParams,
    PlannedJob,
    WMFile,
    build_lumi_mask,
    freeze_all,
    is_good_lumi,
    is_good_run,
    param,
)


@dataclass(frozen=True)
class ParentlessMergeBySizeParams:
    max_merge_size: int = param(1_000_000_000, "largest merged file (bytes)", minimum=1)
    min_merge_size: int = param(1_048_576, "a merge job is made once its files exceed this (bytes)", minimum=0)
    max_merge_events: int = param(100_000_000, "most events in a merged file", minimum=1)
    merge_across_runs: bool = param(True, "a merged file may hold several runs")
    max_wait_time: int = param(12 * 3600, "seconds; a file waiting longer forces its merge job", minimum=0)


def parentless_merge_by_size(fileset: Fileset, params: ParentlessMergeBySizeParams, factory: JobFactoryParams) -> list[PlannedJob]:
    """Unmerged files grouped by storage location (a file counts at its first location) and by run
    unless merging across runs, sorted by (run, lumi, first event); files without run/lumi information
    or location are not mergeable (WMCore's query joins both). A closed fileset forces every merge."""
    groups: dict[str, dict[int | None, list[_Mergeable]]] = {}  # site -> run (None across runs) -> files
    seen: set[str] = set()
    for file in fileset.files:
        if not file.runs or not file.lumi_count or not file.locations or file.lfn in seen:
            continue
        seen.add(file.lfn)
        lowest_lumi = min(lumis[0] for _run, lumis in file.runs if lumis)
        mergeable = _Mergeable(file, file.locations[0], file.runs[0][0], lowest_lumi,
                               file.insert_time if file.insert_time is not None else factory.now)
        run_key = None if params.merge_across_runs else mergeable.run
        groups.setdefault(mergeable.site, {}).setdefault(run_key, []).append(mergeable)
    drafts: list[JobDraft] = []
    for by_run in groups.values():
        for files in by_run.values():
            drafts.extend(_merge_jobs(files, params, force=fileset.closed, now=factory.now))
    return freeze_all(drafts, factory)


@dataclass(frozen=True)
class _Mergeable:
    file: WMFile
    site: str
    run: int
    lumi: int
    inserted: float

    @property
    def order(self) -> tuple[int, int, int]:
        return self.run, self.lumi, self.file.first_event


def _merge_jobs(files: list[_Mergeable], params: ParentlessMergeBySizeParams, force: bool, now: float) -> list[JobDraft]:
    drafts: list[JobDraft] = []
    size = events = 0
    pending: list[_Mergeable] = []
    earliest = float("inf")  # WMCore never resets it after a job is made
    for item in sorted(files, key=lambda m: m.order):
        file = item.file
        if file.size > params.max_merge_size or file.events > params.max_merge_events:
            drafts.append(_merge_job([item]))  # too big to merge with anything
            continue
        if size + file.size > params.max_merge_size or events + file.events > params.max_merge_events:
            if size > params.min_merge_size or force or now - item.inserted > params.max_wait_time:
                drafts.append(_merge_job(pending))
                size = events = 0
                pending = []
            else:
                continue  # the group is still too small: this file waits for a later cycle
        pending.append(item)
        size += file.size
        events += file.events
        earliest = min(earliest, item.inserted)
    if pending and (size > params.min_merge_size or force or now - earliest > params.max_wait_time):
        drafts.append(_merge_job(pending))
    return drafts


def _merge_job(items: list[_Mergeable]) -> JobDraft:
    draft = JobDraft()
    for item in sorted(items, key=lambda m: m.order):
        draft.add_file(item.file)
    draft.sites = (items[0].site,)
    return draft


@dataclass(frozen=True)
class WMBSMergeBySizeParams:
    max_merge_size: int = param(1_000_000_000, "largest merged file (bytes)", minimum=1)
    min_merge_size: int = param(1_048_576, "a merge job is made once its files exceed this (bytes)", minimum=0)
    max_merge_events: int = param(50_000, "most events in a merged file", minimum=1)
    unfinished_parents: tuple[str, ...] = param((), "parent LFNs some job of which has not succeeded (yet): their children wait")


def wmbs_merge_by_size(fileset: Fileset, params: WMBSMergeBySizeParams, factory: JobFactoryParams) -> list[PlannedJob]:
    """Merge the outputs of a processing task honouring the files they came from (WMBSMergeBySize).

    Mergeable are the files with parents, runs and a location whose parents' processing jobs all
    succeeded (GetFilesForMerge). Files with the same (lowest) parent form a *merge unit* that is never
    split; units are grouped by location set and lowest run and, in the order they were formed, packed
    into jobs as ParentlessMergeBySize packs files: a unit above either maximum is merged alone, a job is
    made when the next unit would overflow and the job is above `min_merge_size` (or the fileset is
    closed: the workflow is fully injected, every merge is forced), otherwise that unit waits. A job's
    files are its units by (run, lumi), each unit's files by first event."""
    unfinished = set(params.unfinished_parents)
    units: dict[frozenset[str], dict[int, list[_MergeUnit]]] = {}
    last_created: _MergeUnit | None = None
    for file in fileset.files:
        if not file.parents or not file.runs or not file.lumi_count or not file.locations:
            continue
        if unfinished.intersection(file.parents):
            continue
        parent = min(file.parents)  # MIN(parent id): the parent of lowest id stands for the unit
        run = file.runs[0][0]
        lumi = min(lumis[0] for _run, lumis in file.runs if lumis)
        bucket = units.setdefault(frozenset(file.locations), {}).setdefault(run, [])
        for unit in bucket:
            if unit.parent == parent:
                unit.files.append(file)
                unit.size += file.size
                unit.events += file.events
                if (run, lumi) < (unit.run, unit.lumi) and last_created is not None:
                    # WMCore writes the lower run/lumi into the unit it created last, not into this one.
                    last_created.run, last_created.lumi = run, lumi
                break
        else:
            last_created = _MergeUnit(parent, run, lumi, [file], file.size, file.events)
            bucket.append(last_created)
    drafts: list[JobDraft] = []
    for by_run in units.values():
        for bucket in by_run.values():
            drafts.extend(_merge_units(bucket, params, force=fileset.closed))
    return freeze_all(drafts, factory)


@dataclass
class _MergeUnit:
    parent: str
    run: int
    lumi: int
    files: list[WMFile]
    size: int
    events: int


def _merge_units(units: list[_MergeUnit], params: WMBSMergeBySizeParams, force: bool) -> list[JobDraft]:
    drafts: list[JobDraft] = []
    size = events = 0
    pending: list[_MergeUnit] = []
    for unit in units:
        if unit.size > params.max_merge_size or unit.events > params.max_merge_events:
            drafts.append(_units_job([unit]))  # too big to merge with anything
            continue
        if unit.size + size > params.max_merge_size or unit.events + events > params.max_merge_events:
            if size > params.min_merge_size or force:
                drafts.append(_units_job(pending))
                size = events = 0
                pending = []
            else:
                continue  # the job is still too small: this unit waits for a later cycle
        pending.append(unit)
        size += unit.size
        events += unit.events
    if (size > params.min_merge_size or force) and pending:
        drafts.append(_units_job(pending))
    return drafts


def _units_job(units: list[_MergeUnit]) -> JobDraft:
    draft = JobDraft()
    for unit in sorted(units, key=lambda u: (u.run, u.lumi)):
        for file in sorted(unit.files, key=lambda f: f.first_event):
            draft.add_file(file)
    return draft


@dataclass(frozen=True)
class HarvestParams:
    periodic_harvest_interval: int = param(0, "seconds between periodic harvesting jobs (0 = end of run only)", minimum=0)
    periodic_harvest_sibling: bool = param(False, "the end-of-run job waits for the periodic sibling to finish")
    dqm_harvest_unit: str = param("byRun", "byRun: one job per run; anything else: one multi-run job per location", wmcore="dqmHarvestUnit")
    runs: tuple[int, ...] = param((), "lumi mask: run numbers (with `lumis`)")
    lumis: tuple[str, ...] = param((), "lumi mask: one 'first,last,first,last...' string per run (runs separated by ;)", separator=";")
    run_whitelist: tuple[int, ...] = param((), "only these runs (minus runBlacklist)", wmcore="runWhitelist")
    run_blacklist: tuple[int, ...] = param((), "not these runs; WMCore applies it only together with runWhitelist", wmcore="runBlacklist")


@dataclass(frozen=True)
class HarvestState:
    """What WMCore reads from WMBS before harvesting (jedictl-only inputs of `split`)."""

    last_job_time: float | None = None  # epoch seconds of the last state change of an earlier harvest job
    jobs_running: bool = False  # an earlier harvest job still holds files
    sibling_complete: bool = True  # the periodic sibling subscription has finished


def harvest(fileset: Fileset, params: HarvestParams, factory: JobFactoryParams, state: HarvestState = HarvestState()) -> list[PlannedJob]:
    """One job per location and run (or per location), over all files, when it is time to harvest:
    periodically once `periodic_harvest_interval` has passed since the last job ended, or once at the
    end when the fileset is closed."""
    if params.periodic_harvest_interval > 0:
        due = _released(fileset, state, factory.now, params.periodic_harvest_interval)
    elif fileset.closed:
        due = _released(fileset, state, factory.now, 3600)
        if due and params.periodic_harvest_sibling:
            due = state.sibling_complete
    else:
        due = False
    if not due:
        return []
    return freeze_all(_harvest_jobs(fileset.files, params), factory)


def _released(fileset: Fileset, state: HarvestState, now: float, period: float) -> bool:
    """WMCore's ReleasePeriodicJob: files are available and no earlier job is running or changed
    state within the period."""
    if not fileset.files:
        return False
    if state.last_job_time is None:
        return True
    return not state.jobs_running and now - state.last_job_time >= period


def _harvest_jobs(files: tuple[WMFile, ...], params: HarvestParams) -> list[JobDraft]:
    good_runs = set(params.run_whitelist) - set(params.run_blacklist)
    mask = build_lumi_mask(params.runs, params.lumis)
    by_location: dict[frozenset[str], dict[int, list[WMFile]]] = {}
    kept_runs: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
    for file in files:
        runs = by_location.setdefault(frozenset(file.locations), {})
        if good_runs:
            kept = [(run, lumis) for run, lumis in file.runs if run in good_runs]
        elif mask:
            kept = []
            for run, lumis in file.runs:
                good = tuple(lumi for lumi in lumis if is_good_lumi(mask, run, lumi)) if is_good_run(mask, run) else ()
                if good:
                    kept.append((run, good))
        else:
            kept = list(file.runs)
        kept_runs[file.lfn] = kept
        for run, _lumis in kept:
            runs.setdefault(run, []).append(file)
    drafts: list[JobDraft] = []
    for runs in by_location.values():
        if params.dqm_harvest_unit == "byRun":
            for run, run_files in runs.items():
                draft = JobDraft()
                for file in run_files:
                    _add_run(draft, run, kept_runs[file.lfn])
                    draft.add_file(file)
                _merge_ranges(draft)
                drafts.append(draft)
        else:
            draft = JobDraft()
            for run, run_files in runs.items():
                for file in run_files:
                    _add_run(draft, run, kept_runs[file.lfn])
                    draft.add_file(file)
            _merge_ranges(draft)
            drafts.append(draft)
    return drafts


def _add_run(draft: JobDraft, run: int, file_runs: list[tuple[int, tuple[int, ...]]]) -> None:
    """The file's lumis of `run` as contiguous ranges (Mask.addRun)."""
    for number, lumis in file_runs:
        if number != run or not lumis:
            continue
        first = last = lumis[0]
        for lumi in lumis[1:]:
            if lumi <= last + 1:
                last = lumi
            else:
                draft.add_lumis(run, first, last)
                first = last = lumi
        draft.add_lumis(run, first, last)
        return


def _merge_ranges(draft: JobDraft) -> None:
    """Overlapping or adjacent ranges of a run become one (Harvest.mergeLumiRange); a range inside the
    previous one no longer shortens it, as WMCore's version does."""
    for run, ranges in draft.mask.items():
        merged: list[tuple[int, int]] = []
        for first, last in sorted(ranges, key=lambda r: r[0]):
            if merged and merged[-1][1] + 1 >= first:
                merged[-1] = (merged[-1][0], max(merged[-1][1], last))
            else:
                merged.append((first, last))
        draft.mask[run] = merged
