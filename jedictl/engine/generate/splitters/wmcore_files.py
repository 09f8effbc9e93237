"""WMCore's file-granular algorithms: FileBased, MinFileBased, SizeBased, RunBased,
SiblingProcessingBased, and EventBased (peers.md §1.4, seed 004 "JobCreator").

Each works per location set (per storage location for SiblingProcessingBased) and keeps the order
WMCore gives the files: FileBased sorts by LFN, RunBased groups by lowest run and takes files from the
end of each run's list as WMCore pops them, the others keep the fileset's order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from jedictl.engine.generate.splitters.wmcore_model import (
    Fileset,
    JobDraft,
    JobFactoryParams,
    PlannedJob,
    WMFile,
    build_lumi_mask,
    extend_groups,
    freeze_all,
    is_good_lumi,
    is_good_run,
    load_batches,
    location_groups,
    param,
)
from jedictl.errors import BadInput

MAX_EVENT_NUMBER = 2**32 - 1  # CMSSW event numbers are unsigned 32-bit


@dataclass(frozen=True)
class FileBasedParams:
    files_per_job: int = param(10, "files per job", minimum=1)
    jobs_per_group: int = param(0, "a new job group after jobs_per_group + 1 jobs, as WMCore counts (0 = one group per location set; "
                                   "the `group` of the preview, refused in a task's spec)", minimum=0)
    total_files: int = param(0, "use only the first N files by LFN (0 = all)", minimum=0)
    respect_run_boundaries: bool = param(False, "start a new job when a file's lowest run changes")
    runs: tuple[int, ...] = param((), "lumi mask: run numbers (with `lumis`)")
    lumis: tuple[str, ...] = param((), "lumi mask: one 'first,last,first,last...' string per run (runs separated by ;)", separator=";")
    include_parents: bool = param(False, "give each job the parents of its files (files[].parents; a real task's from the catalog)")


def file_based(fileset: Fileset, params: FileBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    drafts: list[JobDraft] = []
    for batch in load_batches(fileset.files, factory.file_load_limit):
        extend_groups(drafts, _file_based(batch, params, factory))
    return freeze_all(drafts, factory, params.include_parents)


class _Groups:
    """WMCore's job groups of FileBased and MinFileBased: one per location set, and with `jobs_per_group`
    a new one before a job once the group already holds more than that many jobs (WMCore compares with
    `>`, so a full group holds jobs_per_group + 1 jobs)."""

    def __init__(self, jobs_per_group: int) -> None:
        self.jobs_per_group = jobs_per_group
        self.group = -1
        self.jobs_in_group = 0

    def new_group(self) -> None:
        self.group += 1
        self.jobs_in_group = 0

    def new_job(self) -> JobDraft:
        if self.jobs_per_group and self.jobs_in_group > self.jobs_per_group:
            self.new_group()
        self.jobs_in_group += 1
        return JobDraft(group=self.group)


def _file_based(files: Sequence[WMFile], params: FileBasedParams, factory: JobFactoryParams) -> list[JobDraft]:
    mask = build_lumi_mask(params.runs, params.lumis)
    groups = []
    for group in location_groups(files, factory.trust_sitelists):
        if mask:
            group = [f for f in group if f.runs and f.lumi_count]
        groups.append(sorted(group, key=lambda f: f.lfn))
    if params.total_files:
        # The first N files by LFN over all locations; files with no good lumi do not count.
        ordered = sorted((f for group in groups for f in group), key=lambda f: f.lfn)
        if mask:
            ordered = [f for f in ordered if _has_good_lumi(f, mask)]
        if params.total_files < len(ordered):
            kept = {f.lfn for f in ordered[:params.total_files]}
            groups = [[f for f in group if f.lfn in kept] for group in groups]
    drafts: list[JobDraft] = []
    job_groups = _Groups(params.jobs_per_group)
    for group in groups:
        job_groups.new_group()
        current: JobDraft | None = None
        files_in_job = 0
        job_run: int | None = None
        for file in group:
            file_run = file.min_run
            new_job = files_in_job in (0, params.files_per_job) or (params.respect_run_boundaries and file_run != job_run)
            if not mask:
                if new_job:
                    current = job_groups.new_job()
                    drafts.append(current)
                    files_in_job, job_run = 0, file_run
                current.add_file(file)  # type: ignore[union-attr]
                files_in_job += 1
                continue
            # With a mask the file joins at its first good lumi and the job lists only good ranges.
            for run, lumis in file.runs:
                if not is_good_run(mask, run):
                    continue
                first = last = None
                for lumi in lumis:
                    if not is_good_lumi(mask, run, lumi):
                        if first is not None and last is not None:
                            current.add_lumis(run, first, last)  # type: ignore[union-attr]
                            first = last = None
                        continue
                    if last is not None and lumi != last + 1:
                        current.add_lumis(run, first, last)  # type: ignore[union-attr,arg-type]
                        first = last = None
                    if new_job:
                        current = job_groups.new_job()
                        drafts.append(current)
                        files_in_job, job_run, new_job = 0, file_run, False
                        current.add_file(file)
                        files_in_job += 1
                    if first is None:
                        first = lumi
                    last = lumi
                    if current is not None and not current.has_file(file):
                        current.add_file(file)
                        files_in_job += 1
                if first is not None and last is not None:
                    current.add_lumis(run, first, last)  # type: ignore[union-attr]
    return drafts


def _has_good_lumi(file: WMFile, mask: dict) -> bool:
    return any(is_good_lumi(mask, run, lumi) for run, lumis in file.runs if is_good_run(mask, run) for lumi in lumis)


@dataclass(frozen=True)
class MinFileBasedParams:
    files_per_job: int = param(10, "files per job; while the fileset is open only full jobs are made", minimum=1)
    jobs_per_group: int = param(0, "a new job group after jobs_per_group + 1 jobs, as WMCore counts (0 = one group per location set; "
                                   "the `group` of the preview, refused in a task's spec)", minimum=0)
    respect_run_boundaries: bool = param(False, "start a new job when a file's lowest run changes")
    include_parents: bool = param(False, "give each job the parents of its files (files[].parents; a real task's from the catalog)")


def min_file_based(fileset: Fileset, params: MinFileBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    drafts: list[JobDraft] = []
    is_open = not fileset.closed
    for batch in load_batches(fileset.files, factory.file_load_limit):
        made: list[JobDraft] = []
        job_groups = _Groups(params.jobs_per_group)
        for group in location_groups(batch, factory.trust_sitelists):
            if len(group) < params.files_per_job and is_open:
                continue
            job_groups.new_group()
            current: JobDraft | None = None
            files_in_job = used = 0
            job_run: int | None = None
            for file in group:
                file_run = file.min_run
                if files_in_job in (0, params.files_per_job) or (params.respect_run_boundaries and file_run != job_run):
                    files_in_job = 0
                    if len(group) - used < params.files_per_job and is_open:
                        continue  # not a full job's worth left: wait for the fileset to grow or close
                    current = job_groups.new_job()
                    made.append(current)
                    job_run = file_run
                files_in_job += 1
                current.add_file(file)  # type: ignore[union-attr]
                used += 1
        extend_groups(drafts, made)
    return freeze_all(drafts, factory, params.include_parents)


@dataclass(frozen=True)
class SizeBasedParams:
    size_per_job: int = param(1000, "total file size per job, in the unit of the files' size", minimum=1)


def size_based(fileset: Fileset, params: SizeBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    limit = params.size_per_job
    drafts: list[JobDraft] = []
    for batch in load_batches(fileset.files, factory.file_load_limit):
        made: list[JobDraft] = []
        for number, group in enumerate(location_groups(batch, factory.trust_sitelists)):  # a job group per location set
            current = JobDraft(group=number)
            made.append(current)
            current_size = 0
            for file in group:
                if file.size > limit:
                    # An oversized file gets a job of its own.
                    if current_size > 0:
                        current = JobDraft(group=number)
                        made.append(current)
                    current.add_file(file)
                    current_size += file.size
                    continue
                if current_size + file.size > limit:
                    current = JobDraft(group=number)
                    made.append(current)
                    current_size = 0
                current.add_file(file)
                current_size += file.size
        extend_groups(drafts, made)
    return freeze_all(drafts, factory)


@dataclass(frozen=True)
class RunBasedParams:
    files_per_job: int = param(300, "files per job within one run", minimum=1)
    require_run_closed: bool = param(False, "accepted; WMCore's RunBased does not read it")


def run_based(fileset: Fileset, params: RunBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    drafts: list[JobDraft] = []
    for batch in load_batches(fileset.files, factory.file_load_limit):
        # One dict of runs for all location groups, as in WMCore: runs keep the order they first appeared.
        by_run: dict[int, list[WMFile]] = {}
        made: list[JobDraft] = []
        number = -1
        for group in location_groups(batch, factory.trust_sitelists):
            for file in group:
                if file.min_run is None:
                    raise BadInput("RunBased needs the runs of every file", f"{file.lfn}.runs")
                by_run.setdefault(file.min_run, []).append(file)
            for files in by_run.values():
                number += 1  # a job group per run at each location (a run emptied earlier makes an empty one)
                while files:
                    # WMCore pops from the end of the run's list, so jobs hold the last files first.
                    current = JobDraft(group=number)
                    for _ in range(min(params.files_per_job, len(files))):
                        current.add_file(files.pop())
                    made.append(current)
        extend_groups(drafts, made)
    return freeze_all(drafts, factory)


@dataclass(frozen=True)
class SiblingProcessingBasedParams:
    files_per_job: int = param(10, "files per job; while the fileset is open only full jobs are made", minimum=1)


def sibling_processing_based(fileset: Fileset, params: SiblingProcessingBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    """The fileset holds the files every sibling subscription has finished; jobs group them per storage
    location (a file counts at its first location), full jobs only until the fileset closes."""
    per_site: dict[str, list[WMFile]] = {}
    seen: set[str] = set()
    for file in fileset.files:
        if not file.locations or file.lfn in seen:
            continue
        seen.add(file.lfn)
        per_site.setdefault(file.locations[0], []).append(file)
    drafts: list[JobDraft] = []
    size = params.files_per_job
    for number, (site, files) in enumerate(per_site.items()):  # a job group per storage location
        if len(files) < size and not fileset.closed:
            continue
        full = len(files) // size * size
        chunks = [files[k:k + size] for k in range(0, full, size)]
        if fileset.closed and full < len(files):
            chunks.append(files[full:])
        for chunk in chunks:
            draft = JobDraft(group=number)
            draft.sites = (site,)
            for file in chunk:
                draft.add_file(file)
            drafts.append(draft)
    return freeze_all(drafts, factory)


@dataclass(frozen=True)
class EventBasedParams:
    events_per_job: int = param(100, "events per job; a job never spans two files", minimum=1)
    events_per_lumi: int = param(0, "Monte Carlo (MCFakeFile) events per lumi section (0 = events_per_job)", minimum=0)
    lhe_input_files: bool = param(False, "Monte Carlo jobs read LHE files (passed to the job)", wmcore="lheInputFiles")
    include_parents: bool = param(False, "give each job the parents of its files (files[].parents; a real task's from the catalog)")


def event_based(fileset: Fileset, params: EventBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    per_job = params.events_per_job
    per_lumi = params.events_per_lumi or per_job
    drafts: list[JobDraft] = []
    for batch in load_batches(fileset.files, factory.file_load_limit):
        made: list[JobDraft] = []
        for number, group in enumerate(location_groups(batch, factory.trust_sitelists)):  # a job group per location set
            for file in group:
                if file.lfn.startswith("MCFakeFile"):
                    made.extend(_monte_carlo_jobs(file, per_job, per_lumi, number))
                    continue
                if file.events == 0:
                    # A file without (or with unknown) events still gets one job, over the whole file:
                    # the mask skips to the file's first event and sets no last event.
                    draft = JobDraft(group=number)
                    draft.add_file(file)
                    draft.first_event = file.first_event
                    made.append(draft)
                    continue
                event, remaining = file.first_event, file.events
                while remaining > 0:
                    n = min(per_job, remaining)
                    draft = JobDraft(group=number)
                    draft.add_file(file)
                    draft.first_event, draft.last_event = event, event + n - 1
                    made.append(draft)
                    remaining -= per_job
                    event += per_job
        extend_groups(drafts, made)
    return freeze_all(drafts, factory, params.include_parents)


def _monte_carlo_jobs(file: WMFile, per_job: int, per_lumi: int, group: int) -> list[JobDraft]:
    """Production jobs over a fake input file: event ranges plus the lumis they fill, numbering
    restarting at 1 before an event number would pass 2^32 - 1."""
    if not file.runs or not file.runs[0][1]:
        raise BadInput("a Monte Carlo (MCFakeFile) input needs a run with its first lumi", f"{file.lfn}.runs")
    run, lumis = file.runs[0]
    lumi = min(lumis)
    lumis_per_job = math.ceil(per_job / per_lumi)
    event, remaining = file.first_event, file.events
    drafts = []
    while remaining > 0:
        if event + per_job - 1 > MAX_EVENT_NUMBER and event + remaining > MAX_EVENT_NUMBER:
            event = 1
        n = min(per_job, remaining)
        job_lumis = lumis_per_job if remaining >= per_job else math.ceil(remaining / per_lumi)
        draft = JobDraft(group=group)
        draft.add_file(file)
        draft.first_event, draft.last_event = event, event + n - 1
        draft.add_lumis(run, lumi, lumi + job_lumis - 1)
        drafts.append(draft)
        remaining -= per_job
        event += per_job
        lumi += job_lumis
    return drafts
