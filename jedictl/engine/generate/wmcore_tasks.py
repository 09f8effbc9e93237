"""Generating the jobs of a task split by a WMCore algorithm (docs/splitting.md, "WMCore splitting for
real tasks"; decision 48).

The algorithm itself is the one `jedictl split` previews: `splitters.registry.split_fileset` turns a
fileset and the task's WMCore parameters into planned jobs. This module only adapts: the chunk's claimed
records become the fileset (runs, lumis, insert time and parents read from the data catalog at generate
time), and the planned jobs become the (site, sub-chunk) plan the JobBuilder writes, each with its mask.

- A file's locations are the sites brokerage found for the chunk, so a job's possible sites are those
  minus what the task's siteWhitelist/siteBlacklist exclude; a job with none is created failed.
- A record goes into the first job that reads it; a later job of the same pass reading other lumis of
  the same file (LumiBased with fewer lumis per job than the file has) references it (a job file with
  no record) -- one record is held by one job.
- Records no job took stay `ready`: an algorithm that waits on an open fileset (MinFileBased,
  ParentlessMergeBySize, Harvest, the lumi algorithms' "enough work") sees them again next pass, with
  whatever the feeder added meanwhile; a closed dataset makes it take them all, and a closed input of
  which it takes nothing (WMBSMergeBySize's files without parents) leaves the task `pending` with that
  reason rather than `running` for ever.
- Harvest's memory between passes (when it last made a job) is kept in task_splitting.state; whether
  an earlier job still runs is read from the task's jobs, as WMCore reads WMBS.
- The throttle's job budget of the pass (`max_jobs`) bounds the plan as it bounds JEDI's split
  (`within_budget`): the first jobs are written, the records of the others stay `ready` for the next
  pass -- never a part of a file whose other lumis a written job holds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from jedictl.engine.brokerage.job_brokerage import pick_site, start_picking
from jedictl.engine.generate.splitters.jedi_model import InputFile, SubChunk
from jedictl.engine.generate.splitters.registry import split_fileset
from jedictl.engine.generate.splitters.wmcore_model import Fileset, PlannedJob, WMFile
from jedictl.errors import BadInput
from jedictl.model import PARENT_JOB_FILE_TYPE, DatasetState
from jedictl.store import wmcore as wmcore_store

#: The error a job created failed carries (WMCore's JobCreator `createfailed`), as source and code.
CREATE_FAILED = ("jobgen", 1)


class SplitRefused(Exception):
    """The algorithm refused the input (RunBased without runs, EventAwareLumiBased past job_limit, ...):
    the task waits `pending` with the reason, as when no site can take it."""


@dataclass(frozen=True)
class Splitting:
    """The task's algorithm, its WMCore parameters as given, and the state it keeps between passes."""

    algorithm: str
    params: dict[str, Any]
    state: dict[str, Any]


def load_splitting(conn: Any, task_id: int) -> Splitting | None:
    row = wmcore_store.splitting_of(conn, task_id)
    return None if row is None else Splitting(row.algorithm, dict(row.params or {}), dict(row.state or {}))


@dataclass
class WMCorePlan:
    plan: list[tuple[Any, SubChunk]]  # (site row, sub-chunk) as JEDI's split gives the JobBuilder
    jobs: list[PlannedJob]  # the planned job of each plan entry
    failed: list[str | None]  # per plan entry: the reason it was created failed, else None
    references: set[tuple[int, int]]  # (plan index, record id) read but held by an earlier job of the plan
    parents: list[tuple[str, ...]]  # per plan entry: the parent LFNs attached (include_parents)


def fileset_of(conn: Any, ctx: Any, claimed: Sequence[Any], site_names: Sequence[str], whole: bool = True) -> Fileset:
    """The chunk's records as WMCore's fileset, each file with its parents from the catalog."""
    names = {d.id: d for d in ctx.masters}
    details: dict[tuple[int, str], Any] = {}
    by_dataset: dict[int, list[str]] = {}
    for row in claimed:
        by_dataset.setdefault(row[9], []).append(row[1])
    for dataset_id, lfns in by_dataset.items():
        for lfn, info in wmcore_store.catalog_details(conn, names[dataset_id].name, lfns).items():
            details[(dataset_id, lfn)] = info
    locations = tuple(sorted(site_names))
    files = []
    for row in claimed:
        run, lumis, created, file_parents = details.get((row[9], row[1]), (None, None, None, ()))
        if row[4] is not None and row[5] is not None:
            events, first = row[5] - row[4] + 1, row[4]  # an event range of the file (EventBased)
        else:
            events, first = row[3] or 0, 0
        runs = ((int(run), tuple(sorted(set(lumis)))),) if run is not None and lumis else ()
        files.append(WMFile(lfn=row[1], size=row[2] or 0, events=events, locations=locations, runs=runs, first_event=first,
                            insert_time=created.timestamp() if created is not None else None, parents=tuple(file_parents)))
    # Closed for the algorithm: the datasets are closed and `claimed` is all that is left of them (`whole`).
    closed = whole and all(d.state == DatasetState.CLOSED.value for d in names.values())
    return Fileset(tuple(files), closed)


def harvest_state(conn: Any, task_id: int, splitting: Splitting) -> dict[str, Any]:
    """What WMCore's Harvest reads from WMBS before a pass: its last job's time, and whether one runs."""
    times = [t.timestamp() for t in (wmcore_store.last_job_change(conn, task_id),) if t is not None]
    if splitting.state.get("last_job_time") is not None:
        times.append(float(splitting.state["last_job_time"]))
    return {"last_job_time": max(times) if times else None, "jobs_running": wmcore_store.live_jobs(conn, task_id) > 0,
            "sibling_complete": True}


def plan_jobs(conn: Any, ctx: Any, claimed: Sequence[Any], candidates: Sequence[Any], sites: dict[str, Any], rng: random.Random,
              now: datetime, whole: bool = True) -> WMCorePlan:
    splitting: Splitting = ctx.splitting
    names = [c.site for c in candidates]
    fileset = fileset_of(conn, ctx, claimed, names, whole)
    params = dict(splitting.params)
    if splitting.algorithm == "Harvest":
        params.update(harvest_state(conn, ctx.task.id, splitting))
    try:
        jobs = split_fileset(splitting.algorithm, fileset, params, now=now.timestamp())
    except BadInput as exc:
        raise SplitRefused(f"{splitting.algorithm} cannot split the input: {exc}") from None
    if not jobs and fileset.closed and fileset.files:
        # A closed input is final: what the algorithm takes no job of now it never will (WMBSMergeBySize's
        # files without parents, runs or a location; lumis outside the mask). Said, instead of a task
        # `running` for ever over `ready` records.
        raise SplitRefused(f"{splitting.algorithm} makes no job of the {len(fileset.files)} file(s) left of the closed input "
                           f"(first {fileset.files[0].lfn}); they stay unprocessed")
    by_lfn: dict[str, list[Any]] = {}
    for row in claimed:
        by_lfn.setdefault(row[1], []).append(row)
    state = start_picking(candidates)
    result = WMCorePlan([], [], [], set(), [])
    held: set[int] = set()
    for job in jobs:
        records = []
        for lfn in job.files:
            rows = by_lfn[lfn]
            row = rows[0] if len(rows) == 1 else next((r for r in rows if r[4] == job.first_event), rows[0])
            records.append(row)
        reason = job.failed_reason if job.failed else None
        site = None
        if not job.failed:
            allowed = set(job.locations)
            site, state = pick_site(candidates, state, rng, n_sub_chunks=1, excluded=[n for n in names if n not in allowed])
            if site is None:
                # JEDI's queued cap stops the draw; WMCore's jobs of one call are made whole: the least queued possible site.
                possible = [c for c in candidates if c.site in allowed]
                site = min(possible, key=lambda c: (state.queued.get(c.site, 0), c.site)) if possible else None
            if site is None:
                reason = f"no possible site: none of {', '.join(job.locations) or 'no site'} is a brokerage candidate"
        site_row = sites[site.site if site is not None else sorted(names)[0]]
        index = len(result.plan)
        for row in records:
            if row[0] in held:
                result.references.add((index, row[0]))
            held.add(row[0])
        master = tuple(_input_file(row) for row in records)
        sub = SubChunk(master=master, secondaries=(), short=False, n_events=sum(r.effective_events for r in master),
                       input_bytes=sum(r.size for r in master), estimated_bytes=0, disk_bytes=0, out_bytes=0, walltime=0,
                       site=site_row.name)
        result.plan.append((site_row, sub))
        result.jobs.append(job)
        result.failed.append(reason)
        result.parents.append(job.parents)  # the splitter's own include_parents (the preview's rule)
    return result


def within_budget(plan: WMCorePlan, max_jobs: int | None) -> WMCorePlan:
    """The plan's first jobs, at most `max_jobs` of them, cut where no job left out reads a record a kept
    job holds: that record would be `running` while the left-out job's lumis of it were never made (a lumi
    algorithm gives one file's lumis to two jobs). When no such cut fits the budget, the shortest one past
    it: a budget of one still makes the jobs that share the first file."""
    if max_jobs is None or len(plan.plan) <= max_jobs:
        return plan
    holder: dict[int, int] = {}  # record id -> the plan index that holds it
    for index, (_site, sub) in enumerate(plan.plan):
        for record in sub.master:
            if (index, record.file_id) not in plan.references:
                holder.setdefault(record.file_id, index)
    # A cut after k jobs is whole unless a job at k or later reads a record held before k.
    broken = set()
    for index, record_id in plan.references:
        broken.update(range(holder[record_id] + 1, index + 1))
    whole = [k for k in range(1, len(plan.plan) + 1) if k not in broken]
    fitting = [k for k in whole if k <= max_jobs]
    cut = fitting[-1] if fitting else next(k for k in whole if k > max_jobs)
    return WMCorePlan(plan.plan[:cut], plan.jobs[:cut], plan.failed[:cut], {(i, r) for i, r in plan.references if i < cut},
                      plan.parents[:cut])


def mask_row(job_id: int, task_id: int, job: PlannedJob) -> tuple[Any, ...] | None:
    """The job's mask as a job_masks row (MASK_COLUMNS), None when it takes its files whole."""
    if job.first_event is None and job.lumis is None:
        return None
    first_run = last_run = first_lumi = last_lumi = lumis = None
    if job.lumis:
        runs = [run for run, _ranges in job.lumis]
        first_run, last_run = min(runs), max(runs)
        first_lumi = min(first for run, ranges in job.lumis if run == first_run for first, _ in ranges)
        last_lumi = max(last for run, ranges in job.lumis if run == last_run for _, last in ranges)
        lumis = {str(run): [list(r) for r in ranges] for run, ranges in job.lumis}
    return (job_id, task_id, job.first_event, job.last_event, first_run, last_run, first_lumi, last_lumi, lumis)


def after_write(conn: Any, ctx: Any, plan: WMCorePlan, job_ids: Sequence[int], settings: Any, now: datetime) -> None:
    """With the jobs just written (same transaction): their masks, their parents, the jobs created
    failed ended as failed with their reason, and what the algorithm remembers."""
    from jedictl.engine.jobs.outcomes import Ending, end_jobs

    task_id = ctx.task.id
    masks = [row for job_id, job in zip(job_ids, plan.jobs, strict=True) if (row := mask_row(job_id, task_id, job)) is not None]
    wmcore_store.write_masks(conn, masks)
    if any(plan.parents):
        known = wmcore_store.parent_files(conn, [lfn for names in plan.parents for lfn in names])
        dataset_id = ctx.masters[0].id
        rows = []
        for job_id, names in zip(job_ids, plan.parents, strict=True):
            for lfn in names:
                info = known.get(lfn)
                rows.append((job_id, task_id, dataset_id, None, lfn, PARENT_JOB_FILE_TYPE, 0, "ready", info.scope if info else None,
                             info.guid if info else None, info.size if info else None, info.checksum if info else None, None))
        wmcore_store.write_parent_files(conn, rows)
    endings = [Ending(job_id, "failed", error=(*CREATE_FAILED, f"createfailed: {reason}"))
               for job_id, reason in zip(job_ids, plan.failed, strict=True) if reason is not None]
    if endings:
        wmcore_store.back_to_defined(conn, [ending.job_id for ending in endings])
        end_jobs(conn, endings, settings, now)
    remember(conn, ctx, plan, now)


def remember(conn: Any, ctx: Any, plan: WMCorePlan, now: datetime) -> None:
    """What the algorithm keeps between passes: Harvest the time of its last job."""
    if ctx.splitting.algorithm == "Harvest" and any(reason is None for reason in plan.failed):
        state = {**ctx.splitting.state, "last_job_time": now.timestamp(),
                 "harvested": int(ctx.splitting.state.get("harvested", 0)) + sum(len(j.files) for j in plan.jobs)}
        wmcore_store.set_state(conn, ctx.task.id, state, now)


def _input_file(row: Any) -> InputFile:
    """A splitter record from a claimed row (as the generator's: CLAIM_COLUMNS starts with InputFile's fields)."""
    if row[2] is None:
        return InputFile(row[0], row[1], 0, *row[3:10])
    return InputFile(*row[:10])

