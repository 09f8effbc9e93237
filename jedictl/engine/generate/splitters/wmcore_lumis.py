"""WMCore's lumi-section algorithms: LumiBased and EventAwareLumiBased (peers.md §1.4, seed 004).

Files of a location set are sorted by their lowest run and walked run by run, lumi by lumi. A job ends
when it holds its lumis, when the run changes (`splitOnRun`), or at every file (`halt_job_on_file_
boundaries`). Lumis outside the `runs`/`lumis` mask break a range; non-contiguous lumis become separate
ranges of the same job. EventAwareLumiBased adapts lumis per job to each file's average events per
lumi and creates a single-lumi file too long for `job_time_limit` as a job failed on creation.

While the fileset is open, a location with less than one job's worth of lumis (events) waits
("enough work"); a closed fileset is split completely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from jedictl.engine.generate.splitters.wmcore_model import (
    Fileset,
    JobDraft,
    JobFactoryParams,
    LumiMask,
    Performance,
    TOO_MANY_EVENTS_CODE,
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


@dataclass(frozen=True)
class LumiBasedParams:
    lumis_per_job: int = param(1, "lumi sections per job", minimum=1)
    total_lumis: int = param(0, "stop after this many lumis (0 = all)", minimum=0)
    halt_job_on_file_boundaries: bool = param(False, "a job never spans two files")
    split_on_run: bool = param(True, "a job never spans two runs", wmcore="splitOnRun")
    run_whitelist: tuple[int, ...] = param((), "only these runs", wmcore="runWhitelist")
    runs: tuple[int, ...] = param((), "lumi mask: run numbers (with `lumis`)")
    lumis: tuple[str, ...] = param((), "lumi mask: one 'first,last,first,last...' string per run (runs separated by ;)", separator=";")
    apply_lumi_correction: bool = param(False, "a lumi seen in several files stays in its first job, which gets those files", wmcore="applyLumiCorrection")
    include_parents: bool = param(False, "give each job the parents of its files (files[].parents; a real task's from the catalog)")


@dataclass(frozen=True)
class EventAwareLumiBasedParams:
    events_per_job: int = param(5000, "target events per job; lumis per job = events_per_job / avg events per lumi", minimum=1)
    job_limit: int = param(0, "refuse to split into more jobs than this (0 = no limit)", minimum=0)
    job_time_limit: int = param(48 * 3600, "seconds; a single-lumi file expected to run longer is a failed job", minimum=1)
    max_events_per_lumi: int | None = param(None, "a single-lumi file with more (average) events is a failed job (WMCore until 2018)",
                                            minimum=1)
    total_events: int = param(0, "stop after this many (average) events (0 = all)", minimum=0)
    halt_job_on_file_boundaries: bool = param(False, "a job never spans two files")
    split_on_run: bool = param(True, "a job never spans two runs", wmcore="splitOnRun")
    run_whitelist: tuple[int, ...] = param((), "only these runs", wmcore="runWhitelist")
    runs: tuple[int, ...] = param((), "lumi mask: run numbers (with `lumis`)")
    lumis: tuple[str, ...] = param((), "lumi mask: one 'first,last,first,last...' string per run (runs separated by ;)", separator=";")
    apply_lumi_correction: bool = param(False, "a lumi seen in several files stays in its first job, which gets those files", wmcore="applyLumiCorrection")
    allow_creation_failure: bool = param(True, "create the too-long single-lumi jobs as failed (else as normal jobs)", wmcore="allowCreationFailure")
    performance: dict | None = param(None, 'the task\'s performance section, e.g. {"timePerEvent": 12.5}')  # noqa: RUF009 - param() only adds metadata
    include_parents: bool = param(False, "give each job the parents of its files (files[].parents; a real task's from the catalog)")


class _LumiChecker:
    """applyLumiCorrection: a (run, lumi) already in a job is skipped; its file joins that job at the end."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.owner: dict[tuple[int, int], JobDraft | None] = {}
        self.split_files: dict[tuple[int, int], list[WMFile]] = {}

    def is_split(self, run: int, lumi: int, file: WMFile) -> bool:
        if not self.enabled:
            return False
        key = (run, lumi)
        if key in self.owner:
            self.split_files.setdefault(key, []).append(file)
            return True
        self.owner[key] = None
        return False

    def close_job(self, job: JobDraft | None) -> None:
        if self.enabled and job is not None:
            for key in job.lumi_pairs():
                self.owner[key] = job

    def fix_input_files(self) -> None:
        for key, files in self.split_files.items():
            job = self.owner.get(key)
            if job is not None:
                for file in files:
                    job.add_file(file)


def _prepared(groups: Sequence[Sequence[WMFile]]) -> list[list[WMFile]]:
    """The files with lumis of each location group, sorted by their lowest run (then its lumis)."""
    return [sorted((f for f in group if f.runs and f.lumi_count), key=lambda f: f.runs[0]) for group in groups]


def lumi_based(fileset: Fileset, params: LumiBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    drafts: list[JobDraft] = []
    mask = build_lumi_mask(params.runs, params.lumis)
    for batch in load_batches(fileset.files, factory.file_load_limit):
        groups = location_groups(batch, factory.trust_sitelists)
        if not fileset.closed:
            groups = [g for g in groups if sum(f.lumi_count for f in g) >= params.lumis_per_job]
        extend_groups(drafts, _walk_lumis(_prepared(groups), params, mask))
    return freeze_all(drafts, factory, params.include_parents)


def _walk_lumis(groups: list[list[WMFile]], params: LumiBasedParams, mask: LumiMask) -> list[JobDraft]:
    drafts: list[JobDraft] = []
    checker = _LumiChecker(params.apply_lumi_correction)
    current: JobDraft | None = None
    first_lumi = last_lumi = last_run = None
    lumis_in_job = lumis_in_task = 0
    whitelist = set(params.run_whitelist)
    for number, group in enumerate(groups):  # a job group per location set
        stop_job, stop_task = True, False
        for file in group:
            if params.halt_job_on_file_boundaries:
                stop_job = True
            for run, lumis in file.runs:
                if not is_good_run(mask, run) or (whitelist and run not in whitelist):
                    continue
                first_lumi = None
                if params.split_on_run and run != last_run:
                    stop_job = True
                for lumi in lumis:
                    if not is_good_lumi(mask, run, lumi) or checker.is_split(run, lumi, file):
                        # a lumi outside the mask ends the current range
                        if first_lumi is not None and first_lumi != lumi:
                            current.add_lumis(run, first_lumi, last_lumi)  # type: ignore[union-attr,arg-type]
                            first_lumi = last_lumi = None
                        continue
                    if last_lumi and lumi != last_lumi + 1:
                        current.add_lumis(run, first_lumi, last_lumi)  # type: ignore[union-attr,arg-type]
                        first_lumi = last_lumi = None
                    if first_lumi is None:
                        first_lumi = lumi
                    if lumis_in_job == params.lumis_per_job:
                        stop_job = True
                    if stop_job:
                        if first_lumi is not None and last_lumi is not None and last_run is not None:
                            current.add_lumis(last_run, first_lumi, last_lumi)  # type: ignore[union-attr]
                        checker.close_job(current)
                        current = JobDraft(group=number)
                        drafts.append(current)
                        first_lumi, lumis_in_job = lumi, 0
                    lumis_in_job += 1
                    lumis_in_task += 1
                    last_lumi, last_run, stop_job = lumi, run, False
                    current.add_file(file)  # type: ignore[union-attr]
                    if params.total_lumis > 0 and lumis_in_task >= params.total_lumis:
                        stop_task = True
                        break
                if first_lumi is not None and last_lumi is not None:
                    current.add_lumis(run, first_lumi, last_lumi)  # type: ignore[union-attr]
                    first_lumi = last_lumi = None
                if stop_task:
                    break
            if stop_task:
                break
        if stop_task:
            break
    checker.close_job(current)
    checker.fix_input_files()
    return drafts


def event_aware_lumi_based(fileset: Fileset, params: EventAwareLumiBasedParams, factory: JobFactoryParams) -> list[PlannedJob]:
    drafts: list[JobDraft] = []
    mask = build_lumi_mask(params.runs, params.lumis)
    time_per_event = Performance.from_mapping(params.performance).time_per_event
    for batch in load_batches(fileset.files, factory.file_load_limit):
        groups = location_groups(batch, factory.trust_sitelists)
        if not fileset.closed:
            groups = [g for g in groups if sum(f.events for f in g) >= params.events_per_job]
        extend_groups(drafts, _walk_event_aware(_prepared(groups), params, mask, time_per_event))
    return freeze_all(drafts, factory, params.include_parents)


def _lumis_for(target: int, file: WMFile) -> int:
    """Lumis of this file that make about `target` events (all of them for a file without events)."""
    average = file.avg_events_per_lumi
    return max(math.floor(target / average), 1) if average else file.lumi_count


def _too_long_reason(file: WMFile, run: int, lumi: int, time_per_lumi: float) -> str:
    """EventAwareLumiBased's failedReason, word for word (the time printed with %d: truncated)."""
    return (f"File {file.lfn} has a single lumi {lumi}, in run {run} "
            f"with too many events {file.events} and it would take {int(time_per_lumi)} sec to run")


def _too_many_reason(file: WMFile) -> str:
    """The failedReason of WMCore's max_events_per_lumi rule (EventAwareLumiBased before Jan 2018)."""
    return f"File {file.lfn} has too many events ({file.events}) in {file.lumi_count} lumi(s)"


def _walk_event_aware(groups: list[list[WMFile]], params: EventAwareLumiBasedParams, mask: LumiMask,
                      time_per_event: float) -> list[JobDraft]:
    drafts: list[JobDraft] = []
    checker = _LumiChecker(params.apply_lumi_correction)
    current: JobDraft | None = None
    first_lumi = last_lumi = last_run = None
    lumis_in_job = total_jobs = 0
    lumis_per_job = 1
    total_avg_events = job_avg_events = 0
    whitelist = set(params.run_whitelist)
    halt = params.halt_job_on_file_boundaries
    for number, group in enumerate(groups):  # a job group per location set
        stop_job, stop_task = True, False
        for file in group:
            average = file.avg_events_per_lumi
            lumis_in_job_in_file = 0
            carry_over = fail_next = False
            time_per_lumi = average * time_per_event
            too_long = time_per_lumi > params.job_time_limit
            too_many = params.max_events_per_lumi is not None and average > params.max_events_per_lumi
            if (too_long or too_many) and file.lumi_count == 1:
                # one lumi that alone runs too long: its own job, failed on creation
                lumis_per_job, stop_job, fail_next = 1, True, params.allow_creation_failure
            elif halt:
                stop_job = True
                lumis_per_job = _lumis_for(params.events_per_job, file)
            else:
                # fill the current job up to the target with this file's lumis
                carry_over = True
                remaining = max(params.events_per_job - job_avg_events, 0)
                allowed = math.floor(remaining / average) if average else file.lumi_count
                lumis_per_job = max(lumis_in_job + allowed, 1)
            for run, lumis in file.runs:
                if not is_good_run(mask, run) or (whitelist and run not in whitelist):
                    continue
                first_lumi = None
                if params.split_on_run and run != last_run:
                    stop_job = True
                for lumi in lumis:
                    if not is_good_lumi(mask, run, lumi) or checker.is_split(run, lumi, file):
                        if first_lumi is not None and first_lumi != lumi:
                            current.add_lumis(run, first_lumi, last_lumi)  # type: ignore[union-attr,arg-type]
                            first_lumi = last_lumi = None
                        continue
                    if last_lumi and lumi != last_lumi + 1:
                        current.add_lumis(run, first_lumi, last_lumi)  # type: ignore[union-attr,arg-type]
                        first_lumi = last_lumi = None
                    if first_lumi is None:
                        first_lumi = lumi
                    if lumis_in_job == lumis_per_job:
                        stop_job = True
                    if stop_job:
                        if first_lumi is not None and last_lumi is not None and last_run is not None:
                            current.add_lumis(last_run, first_lumi, last_lumi)  # type: ignore[union-attr]
                        reason = None
                        if fail_next:
                            reason = _too_long_reason(file, run, lumi, time_per_lumi) if too_long else _too_many_reason(file)
                        checker.close_job(current)
                        current = JobDraft(failed=fail_next, failed_reason=reason,
                                           failed_code=TOO_MANY_EVENTS_CODE if fail_next else None, group=number)
                        drafts.append(current)
                        fail_next = False
                        first_lumi, lumis_in_job, lumis_in_job_in_file, job_avg_events = lumi, 0, 0, 0
                        total_jobs += 1
                        if params.job_limit and total_jobs > params.job_limit:
                            raise BadInput(f"the input needs more than {params.job_limit} jobs", "--param job_limit")
                        if carry_over:
                            # the job carried over from the previous file ended: size jobs by this file now
                            carry_over = False
                            lumis_per_job = _lumis_for(params.events_per_job, file)
                    lumis_in_job += 1
                    lumis_in_job_in_file += 1
                    last_lumi, last_run, stop_job = lumi, run, False
                    total_avg_events += average
                    current.add_file(file)  # type: ignore[union-attr]
                    if params.total_events > 0 and total_avg_events >= params.total_events:
                        stop_task = True
                        break
                if first_lumi is not None and last_lumi is not None:
                    current.add_lumis(run, first_lumi, last_lumi)  # type: ignore[union-attr]
                    first_lumi = last_lumi = None
                if stop_task:
                    break
            if not halt:
                job_avg_events += average * lumis_in_job_in_file
            if stop_task:
                break
        if stop_task:
            break
    checker.close_job(current)
    checker.fix_input_files()
    return drafts
