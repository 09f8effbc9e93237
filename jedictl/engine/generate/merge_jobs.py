"""Merge jobs of a mergeOutput task (jedi-inventory.md §6.12).

Jobs of such a task write unmerged twins (`trn_log`, `trn_output`, names `panda.um.*`). When one
finishes, its unmerged files wait in `merging` at the site it ran at, tagged with the producer
(`boundary_id`), and the unmerged log's dataset -- the master of merge jobs -- gets its watermark
raised. This module turns the waiting files of one task into merge jobs: grouped by the producer's
site, split with the merge limits (nFilesPerMergeJob, nGBPerMergeJob, 50 files / 5 GB by default;
many producers per job, each producer's outputs travel with its log), rendered from the task's merge
template (`${TRN_OUTPUT0:OUTPUT0}`, `${LOG_MERGE}` ...), priority 5000, processing type `pmerge`,
kind `merge`, and written in the caller's transaction with the producers recorded as relation
`merge` in the retry history.

A merge job that would take the last few files of a site waits while the task can still produce more
(released input not yet terminal): merging them now would leave small merged files behind.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from jedictl.config import Settings
from jedictl.engine.generate.job_builder import C_ATTEMPT, C_CHECKSUM, C_GUID, C_ID, C_LFN, C_RAM, C_SCOPE, C_SIZE, TaskContext
from jedictl.engine.jobs.resources import ChunkFile, OutputTemplate, SiteResources, allocate_output_names, job_serial_nr, plan_job_resources, retry_relations
from jedictl.engine.shares.resource_types import match_resource_type
from jedictl.engine.generate.splitters import START, InputChunk, InputFile, SecondaryInput, SplitDefaults, job_limits, site_limits, split_at_site
from jedictl.engine.task.templates import InputStream, JobContext, OutputFile, render_job_parameters
from jedictl.model import DatasetType, JobStatus
from jedictl.store import datasets as dataset_store
from jedictl.store import jobs as job_store
from jedictl.store import merges as merge_store
from jedictl.store import site_datasets as site_dataset_store
from jedictl.store import tasks as task_store

MERGE_PROCESSING_TYPE = "pmerge"


class MergeConflict(Exception):
    """An unmerged record moved between reading and claiming it (the chunk's transaction rolls back)."""


@dataclass(frozen=True)
class MergeContext:
    """What merge jobs of one task need beyond `TaskContext`."""

    master: Any  # the unmerged log dataset row
    secondaries: tuple[Any, ...]  # unmerged output dataset rows
    templates: tuple[OutputTemplate, ...]  # final outputs and the merge log
    destinations: dict[int, str | None]
    job_template: str
    transformation: str | None
    more_to_come: bool  # released input is not terminal yet: hold back short merges
    site_containers: tuple[Any, ...] = ()  # output containers: merged files go to the merge site's dataset in them

    @classmethod
    def load(cls, conn: Any, ctx: TaskContext) -> MergeContext | None:
        rows = dataset_store.datasets_of(conn, ctx.task.id)
        master = next((d for d in rows if d.type == DatasetType.TRN_LOG.value and d.master_id is None), None)
        if master is None:
            return None
        finals = [d for d in rows if d.type == DatasetType.OUTPUT.value]
        logs = [d for d in rows if d.type == DatasetType.LOG.value]
        # A merge-only log (`log_merge`) takes the merge jobs' logs; otherwise the task's log does.
        merge_log = next((d for d in logs if (d.attributes or {}).get("merge_only")), logs[0] if logs else None)
        chosen = {d.id: d for d in finals + ([merge_log] if merge_log is not None else [])}
        templates = tuple(OutputTemplate(t.id, t.dataset_id, t.filename_template, t.serial_nr, t.stream_name, t.out_type, t.max_serial_nr)
                          for t in dataset_store.templates_of(conn, ctx.task.id) if t.dataset_id in chosen)
        inputs = [d for d in rows if d.type in ("input", "pseudo_input") and d.master_id is None]
        more = any(d.n_files_to_be_used > d.n_files_finished + d.n_files_failed for d in inputs)
        return cls(
            master=master,
            secondaries=tuple(d for d in rows if d.type == DatasetType.TRN_OUTPUT.value and d.master_id == master.id),
            templates=templates,
            destinations={d.id: d.destination for d in chosen.values()},
            job_template=dataset_store.job_templates_of(conn, ctx.task.id).get("merge", ""),
            transformation=_merge_transformation(conn, ctx),
            more_to_come=more,
            site_containers=tuple(d for d in chosen.values() if (d.attributes or {}).get("per_site")),
        )


def _merge_transformation(conn: Any, ctx: TaskContext) -> str | None:
    """mergeSpec.transPath (or the spec's merge.transformation), else the task's own."""
    params = task_store.get_params(conn, ctx.task.id)
    document = params.document if params is not None else {}
    spec = document.get("mergeSpec") or document.get("merge") or {}
    value = spec.get("transPath") or spec.get("transformation") if isinstance(spec, dict) else None
    return value or ctx.task.trans_path


def make_merge_jobs(conn: Any, ctx: TaskContext, settings: Settings, sites: dict[str, Any], now: datetime,
                    max_jobs: int | None) -> tuple[int, list[str]]:
    """Plan, claim and write the merge jobs of one task in the caller's transaction.

    Returns (jobs made, notes on records left waiting)."""
    merge = MergeContext.load(conn, ctx)
    if merge is None or not merge.job_template:
        return 0, []
    waiting = merge_store.waiting_masters(conn, merge.master.id, settings.generate.n_files)
    by_site: dict[str, list[Any]] = defaultdict(list)
    for row in waiting:
        by_site[row.site].append(row)
    defaults = SplitDefaults.from_settings(settings)
    plan: list[tuple[Any, Any]] = []
    rows_by_id: dict[int, Any] = {}
    notes: list[str] = []
    for site_name in sorted(by_site, key=lambda name: name or ""):
        site = sites.get(site_name)
        if site is None or getattr(site, "status", "online") not in ("online", "brokeroff"):
            notes.append(f"{len(by_site[site_name])} unmerged files wait for site {site_name}")
            continue
        room = None if max_jobs is None else max_jobs - len(plan)
        if room is not None and room <= 0:
            break
        masters = by_site[site_name]
        producers = [row.boundary_id for row in masters]
        secondary_rows = [merge_store.waiting_secondaries(conn, d.id, producers) for d in merge.secondaries]
        chunk = InputChunk(
            master=tuple(_record(row) for row in masters),
            secondaries=tuple(SecondaryInput(d.id, tuple(_record(r) for r in rows)) for d, rows in zip(merge.secondaries, secondary_rows, strict=True)),
        )
        limits = job_limits(ctx.live_options, site_limits(site), merging=True, defaults=defaults)
        result = split_at_site(chunk, limits, START, max_sub_chunks=room)
        subs = list(result.sub_chunks)
        if subs and merge.more_to_come and result.cursor.master >= len(chunk.master) and len(subs[-1].master) < (limits.max_files or 0):
            subs.pop()  # the site's last, short merge waits for more unmerged files
        if not subs:
            notes.append(f"{len(masters)} unmerged files at {site_name} wait for more")
            continue
        plan.extend((site, sub) for sub in subs)
        rows_by_id.update((row.id, row) for row in masters)
        rows_by_id.update((row.id, row) for rows in secondary_rows for row in rows)
    if not plan:
        return 0, notes
    used = [record.file_id for _, sub in plan for record in sub.master] + \
           [record.file_id for _, sub in plan for records in sub.secondaries for record in records]
    if merge_store.claim(conn, used) != len(used):
        raise MergeConflict(f"unmerged files of task {ctx.task.id} changed while merge jobs were planned")
    MergeBuilder(ctx, merge, settings, now).write(conn, plan, rows_by_id)
    return len(plan), notes


def _record(row: Any) -> InputFile:
    return InputFile(row.id, row.lfn, row.size or 0, row.n_events, None, None, None, row.boundary_id, None, row.dataset_id)


class MergeBuilder:
    """Rows of merge jobs, as tuples for the bulk writers (the shapes `JobBuilder` writes)."""

    def __init__(self, ctx: TaskContext, merge: MergeContext, settings: Settings, now: datetime):
        self.ctx, self.merge, self.settings, self.now = ctx, merge, settings, now

    def write(self, conn: Any, plan: Sequence[tuple[Any, Any]], rows: dict[int, Any]) -> None:
        ctx, merge, task, now = self.ctx, self.merge, self.ctx.task, self.now
        n = len(plan)
        job_ids = job_store.reserve_ids(conn, "jobs", n)
        first_index = job_store.next_task_job_index(conn, task.id)
        names = allocate_output_names(merge.templates, n, task.id)
        record_ids = iter(job_store.reserve_ids(conn, "files", n * len(merge.templates)))
        streams = {d.id: ("TRN_" + (d.stream_name or ""), d.container_name or d.name) for d in (merge.master, *merge.secondaries)}
        shared = (task.id, "merge", task.nucleus, task.work_queue, task.gshare, task.prod_source_label, MERGE_PROCESSING_TYPE, task.vo,
                  task.working_group, merge.transformation, task.architecture, task.trans_uses, task.trans_home, task.container_name,
                  now, now, now)
        job_rows, file_rows, output_rows, retries = [], [], [], []
        used: dict[int, int] = defaultdict(int)
        in_site_datasets = site_dataset_store.site_datasets(conn, merge.site_containers, {site.name for site, _ in plan}, now) \
            if merge.site_containers else None
        for index, ((site, sub), job_id) in enumerate(zip(plan, job_ids, strict=True)):
            inputs = [rows[r.file_id] for r in sub.master] + [rows[r.file_id] for records in sub.secondaries for r in records]
            chunk = [ChunkFile(row[C_ATTEMPT], row[C_SIZE] or 0, row.n_events, None, None, row[C_RAM]) for row in inputs[:len(sub.master)]]
            chunk.extend(ChunkFile(0, row[C_SIZE] or 0, row.n_events, is_master=False) for row in inputs[len(sub.master):])
            resources = plan_job_resources(ctx.resources, SiteResources(site.name, site.core_count, site.core_power, site.max_walltime,
                                                                        site.max_scratch_mb),
                                           chunk, self.settings, is_merge=True, direct_io=bool(site.direct_io))
            outputs = names.jobs[index]
            in_streams = [InputStream(*streams[merge.master.id], sub.master, True)]
            in_streams.extend(InputStream(*streams[d.id], records) for d, records in zip(merge.secondaries, sub.secondaries, strict=True))
            rendered = render_job_parameters(merge.job_template, JobContext(
                task_id=task.id, inputs=tuple(in_streams), outputs=tuple(OutputFile(o.stream, o.lfn) for o in outputs),
                serial_nr=job_serial_nr(outputs), attempt_nr=resources.attempt_nr, source_url=task.source_url, panda_id=job_id,
                is_merge=True))
            job_rows.append((
                job_id, first_index + index, JobStatus.ACTIVATED.value, False, resources.attempt_nr, resources.max_attempt,
                resources.assigned_priority, resources.current_priority, site.name, site.cloud,
                match_resource_type(ctx.rtypes, resources.core_count, (resources.min_ram_count or 0) / max(resources.core_count, 1))
                or task.resource_type,
                rendered.text, resources.core_count, resources.min_ram_count, resources.max_walltime, resources.max_disk_count,
                resources.max_cpu_count, *shared,
            ))
            for row in inputs:
                file_rows.append((job_id, task.id, row.dataset_id, row[C_ID], row[C_LFN], "input", row[C_ATTEMPT], "ready",
                                  row[C_SCOPE], row[C_GUID], row[C_SIZE], row[C_CHECKSUM], None))
                used[row.dataset_id] += 1
            dropped = set(rendered.dropped_outputs)
            site_ids = in_site_datasets[site.name] if in_site_datasets else None
            for output in outputs:
                if output.stream in dropped:
                    continue  # no unmerged input for this stream: its merged file is not made
                record_id = next(record_ids)
                dataset_id = site_ids.get(output.dataset_id, output.dataset_id) if site_ids else output.dataset_id
                output_rows.append((record_id, task.id, dataset_id, output.lfn, output.out_type, "defined", 0, 0, True, job_id, None, now))
                file_rows.append((job_id, task.id, dataset_id, record_id, output.lfn, output.out_type, 0, "defined", None, None, None,
                                  None, merge.destinations.get(output.dataset_id)))
            producers = [row.boundary_id for row in inputs[:len(sub.master)]]
            retries.extend(dataclasses.asdict(r) | {"task_id": task.id, "created_at": now}
                           for r in retry_relations(job_id, producers, is_merge=True))
        job_store.write_jobs(conn, job_rows, file_rows, output_rows, [], retries)
        job_store.start_used_files(conn, min(job_ids), max(job_ids), now)
        job_store.add_used(conn, dict(used), now)
        job_store.advance_serials(conn, names.next_serial_nr)
