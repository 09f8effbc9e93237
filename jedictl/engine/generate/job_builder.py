"""Turning a split plan into job rows (jedi-inventory.md §6.7-6.10), and writing them in bulk.

`TaskContext` is everything about a task that its jobs need, loaded once per generation. `JobBuilder`
takes the (site, sub-chunk) plan of one chunk and produces every row: the job with its resources
(engine.jobs.resources), its rendered parameters (engine.task.templates), its input, seed and output files,
new output and seed records, retry lineage, serial numbers -- as tuples for the bulk writers.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

from jedictl.config import Settings
from jedictl.engine.brokerage.model import TaskRequirements, task_requirements_from_row
from jedictl.engine.generate.input_transfers import InputTransfer
from jedictl.engine.jobs.resources import (
    ChunkFile,
    OutputTemplate,
    SeedRecord,
    SiteResources,
    TaskResources,
    allocate_output_names,
    assign_random_seeds,
    job_max_disk_count,
    job_serial_nr,
    plan_job_resources,
    retry_relations,
    site_refusal,
)
from jedictl.engine.task.options import TaskOptions, options_from_dict
from jedictl.engine.shares.resource_types import ResourceTypeDef, load_resource_types, match_resource_type
from jedictl.engine.task.templates import InputStream, JobContext, OutputFile, render_job_parameters
from jedictl.engine.generate.build_jobs import site_libs
from jedictl.engine.generate.wmcore_tasks import load_splitting
from jedictl.engine.task.build import run_job_status
from jedictl.engine.task.preprocess import WAITING as PREPROCESS_WAITING
from jedictl.engine.task.preprocess import parse_panda_prepro_spec, parse_preprocess_spec
from jedictl.engine.jobs import event_ranges
from jedictl.model import JOB_KIND_ES, LIB_JOB_FILE_TYPE, PREPROCESS_JOB_KIND, DatasetType, EventStatus, FileStatus, JobStatus, TaskStatus
from jedictl.store import datasets as dataset_store
from jedictl.store import events as event_store
from jedictl.store import jobs as job_store
from jedictl.store import site_datasets as site_dataset_store
from jedictl.store import recovery as recovery_store
from jedictl.store import tasks as task_store

RESOURCE_COLUMNS = ("core_count", "ram_count", "ram_unit", "base_ram_count", "walltime", "walltime_unit", "base_walltime", "cpu_time",
                    "cpu_time_unit", "cpu_efficiency", "out_disk_count", "out_disk_unit", "work_disk_count", "work_disk_unit",
                    "io_intensity", "io_intensity_unit")
INPUT_TYPES = (DatasetType.INPUT.value, DatasetType.PSEUDO_INPUT.value)
# Positions in a claimed row (store.jobs.CLAIM_COLUMNS): index access keeps the per-file loop cheap.
C_ID, C_LFN, C_SIZE, C_DATASET, C_ATTEMPT, C_JOB, C_RAM, C_GUID, C_SCOPE, C_CHECKSUM = 0, 1, 2, 9, 10, 11, 12, 13, 14, 15
C_EVENTS, C_START, C_END = 3, 4, 5


@dataclass(frozen=True)
class TaskContext:
    task: Any
    status: str
    options: TaskOptions
    live_options: TaskOptions  # the options with the task's current resource model (scouts refine it)
    requirements: TaskRequirements
    resources: TaskResources
    scout: bool
    merge: bool
    masters: tuple[Any, ...]
    secondaries: tuple[Any, ...]
    seed_dataset: Any | None
    templates: tuple[OutputTemplate, ...]
    destinations: dict[int, str | None]
    job_template: str
    rtypes: tuple[ResourceTypeDef, ...]
    site_containers: tuple[Any, ...] = ()  # output containers: jobs write a dataset per site inside them
    group_boundary_id: int | None = None  # split rule GB: a recovery task re-runs each original job as one job
    build_template: str = ""  # a task that ships sources: its build jobs' parameters (engine.generate.build_jobs)
    preprocess: bool = False  # the task waits for its preprocess job: the one job made is that (engine.task.preprocess)
    job_kind: str = "normal"
    transformation: str | None = None  # the jobs' program when not the task's (the preprocess job's)
    splitting: Any | None = None  # engine.generate.wmcore_tasks.Splitting: a WMCore algorithm cuts the jobs

    @classmethod
    def load(cls, conn: Any, task_id: int, settings: Settings) -> TaskContext:
        task = task_store.get_task(conn, task_id)
        options = options_from_dict(task.options)
        live = dataclasses.replace(options, **{name: getattr(task, name) for name in RESOURCE_COLUMNS})
        rows = dataset_store.datasets_of(conn, task_id)
        merge = bool(options.merge_output)
        # Jobs of a mergeOutput task write the unmerged twins; merge jobs make the final files.
        out_types = ("trn_output", "trn_log") if merge else ("output", "log")
        out_datasets = {d.id: d for d in rows if d.type in out_types}
        templates = tuple(OutputTemplate(t.id, t.dataset_id, t.filename_template, t.serial_nr, t.stream_name, t.out_type, t.max_serial_nr)
                          for t in dataset_store.templates_of(conn, task_id) if t.dataset_id in out_datasets)
        job_templates = dataset_store.job_templates_of(conn, task_id)
        if task.status in PREPROCESS_WAITING:
            # One job from the pp_input master's pseudo record: no outputs, the preprocess template, no build.
            return cls(
                task=task, status=task.status, options=options, live_options=live,
                requirements=task_requirements_from_row(task._mapping, options),
                resources=TaskResources(current_priority=task.current_priority, core_count=task.core_count, ram_count=task.ram_count,
                                        ram_unit=task.ram_unit, base_ram_count=task.base_ram_count),
                scout=False, merge=False,
                masters=tuple(d for d in rows if d.type == DatasetType.PP_INPUT.value),
                secondaries=(), seed_dataset=None, templates=(), destinations={},
                job_template=job_templates.get("preprocess", ""), rtypes=tuple(load_resource_types(settings.resource_types)),
                preprocess=True, job_kind=PREPROCESS_JOB_KIND, transformation=_preprocess_transformation(conn, task_id),
            )
        return cls(
            task=task, status=task.status, options=options, live_options=live,
            requirements=task_requirements_from_row(task._mapping, options),
            resources=TaskResources(current_priority=task.current_priority, **{name: getattr(task, name) for name in (
                "core_count", "ram_count", "ram_unit", "base_ram_count", "base_walltime", "cpu_time", "cpu_time_unit", "cpu_efficiency",
                "out_disk_count", "out_disk_unit", "work_disk_count", "work_disk_unit")},
                merge_ram_count=options.merge_ram_count, merge_core_count=options.merge_core_count,
                disable_auto_retry=bool(options.disable_auto_retry)),
            scout=not options.skip_scout and not task.scouts_done and task.status in (TaskStatus.READY.value, TaskStatus.SCOUTING.value),
            merge=merge,
            masters=tuple(d for d in rows if d.type in INPUT_TYPES and d.master_id is None),
            secondaries=tuple(d for d in rows if d.type in INPUT_TYPES and d.master_id is not None),
            seed_dataset=next((d for d in rows if d.type == DatasetType.RANDOM_SEED.value), None),
            templates=templates,
            destinations={d.id: d.destination for d in out_datasets.values()},
            job_template=job_templates.get("job", ""),
            rtypes=tuple(load_resource_types(settings.resource_types)),
            site_containers=tuple(d for d in out_datasets.values() if (d.attributes or {}).get("per_site")),
            group_boundary_id=recovery_store.GROUP_BOUNDARY if recovery_store.recovery_of(conn, task_id) is not None else None,
            build_template=job_templates.get("build", ""),
            splitting=load_splitting(conn, task_id),
        )


@dataclass(frozen=True)
class TaskOutline:
    """What a generator decides its pass on before the first chunk loads the whole `TaskContext`: the
    task's status, whether it makes merge jobs, whether a WMCore algorithm splits it -- the same values
    `TaskContext.load` gives, read in two statements instead of six (a one-job task's pass loaded the
    whole context twice, before its chunk and again inside it)."""

    status: str
    merge: bool
    wmcore: bool

    @classmethod
    def load(cls, conn: Any, task_id: int) -> TaskOutline:
        task = task_store.get_task(conn, task_id)
        if task.status in PREPROCESS_WAITING:  # the preprocess job: no merges, JEDI's split (TaskContext.load)
            return cls(task.status, False, False)
        return cls(task.status, bool(options_from_dict(task.options).merge_output), load_splitting(conn, task_id) is not None)


@dataclass(frozen=True)
class Written:
    per_site: dict[str, int]
    used: frozenset[int]  # records read for the chunk that are now in a job (the others stay ready)
    assigned: dict[str, int] = dataclasses.field(default_factory=dict)  # of per_site: jobs waiting `assigned` for input
    job_ids: tuple[int, ...] = ()  # the jobs written, in plan order


class JobBuilder:
    def __init__(self, context: TaskContext, settings: Settings, now: datetime, cvmfs_lfns: frozenset[str] = frozenset()):
        self.ctx, self.settings, self.now = context, settings, now
        self.cvmfs_lfns = cvmfs_lfns  # inputs read in place on cvmfs: no scratch space for them
        self._rtype_cache: dict[tuple[int, int | None], str | None] = {}
        self._site_cache: dict[str, SiteResources] = {}
        self._uncapped_cache: dict[str, SiteResources] = {}
        self._planned: dict[int, tuple[Any, str, Any]] = {}  # id(sub-chunk) -> (it, site, resources) from `refusal`

    def write(self, conn: Any, plan: Sequence[tuple[Any, Any]], claimed: dict[int, Any], secondary_rows: dict[int, Any],
              claimed_secondaries: set[int], transfers: Mapping[str, InputTransfer] | None = None,
              references: set[tuple[int, int]] | None = None) -> Written:
        """Build and insert the jobs of `plan` [(site, sub-chunk)] in the caller's transaction.

        `claimed` and `secondary_rows` map file ids to their claimed rows (store.jobs.CLAIM_COLUMNS);
        `claimed_secondaries` are the secondary records this chunk claimed (tracked datasets), as opposed
        to read-only ones (nosplit, repeat, reusable). `transfers` names the sites whose jobs may need
        their input moved first (site name -> InputTransfer). `references` (WMCore-split tasks): (plan
        index, record id) of master records a job reads that an earlier job of the plan holds -- written
        as job files without a record, neither claimed nor counted. This loop runs once per job of a big task:
        values shared by all jobs are computed before it.
        """
        ctx, task, now = self.ctx, self.ctx.task, self.now
        n = len(plan)
        # A task that ships sources: each site's lib file, a build job written first where there is none
        # yet (ids on SQLite are max(id) + 1: reserved rows must be written before the next reservation).
        libs = site_libs(conn, ctx, {site.name: site for site, _ in plan}, now)[0] if ctx.build_template else {}
        job_ids = job_store.reserve_ids(conn, "jobs", n)
        first_index = job_store.next_task_job_index(conn, task.id)
        names = allocate_output_names(ctx.templates, n, task.id)
        seeds = self._seeds(conn, n)
        record_ids = iter(job_store.reserve_ids(conn, "files", n * len(ctx.templates) + sum(1 for s in seeds if s.file_id is None)))
        streams = {d.id: (d.stream_name, d.container_name or d.name, d.type) for d in ctx.masters + ctx.secondaries}
        # Output containers: the dataset of each site in them, found or made once per chunk, not per job.
        in_site_datasets = site_dataset_store.site_datasets(conn, ctx.site_containers, {site.name for site, _ in plan}, now) \
            if ctx.site_containers else None
        # An event-service task's run jobs are `es` jobs; its build and preprocess jobs keep their kind.
        kind = JOB_KIND_ES if ctx.options.event_service and ctx.job_kind == "normal" else ctx.job_kind
        shared = (task.id, kind, task.nucleus, task.work_queue, task.gshare, task.prod_source_label, task.processing_type, task.vo,
                  task.working_group, ctx.transformation or task.trans_path, task.architecture, task.trans_uses, task.trans_home, task.container_name, now, now, now)
        status, scout, source_url, template, unmerged = JobStatus.ACTIVATED.value, ctx.scout, task.source_url, ctx.job_template, ctx.merge
        event_service = kind == JOB_KIND_ES  # <PANDA_ES_ONLY> parts of the parameters are kept
        running = FileStatus.RUNNING.value
        job_rows, file_rows, output_rows, seed_rows, retries, reused_seeds, started = [], [], [], [], [], [], []
        per_site: dict[str, int] = defaultdict(int)
        assigned: dict[str, int] = defaultdict(int)
        used: dict[int, set[int]] = defaultdict(set)
        transfers = transfers or {}
        for index, ((site, sub), job_id) in enumerate(zip(plan, job_ids, strict=True)):
            masters = [claimed[record.file_id] for record in sub.master]
            transfer = transfers.get(site.name)
            missing = set()
            if transfer:  # every input the job reads that the site lacks: master and secondary alike
                missing = {row[C_LFN] for row in masters if row[C_LFN] not in transfer.held}
                missing.update(record.lfn for records in sub.secondaries for record in records if record.lfn not in transfer.held)
            fetch_to = transfer.endpoint if missing else None
            job_status = JobStatus.ASSIGNED.value if missing else status
            lib = libs.get(site.name) if libs else None
            if lib is not None:  # waits `defined` until its site's build job finished
                job_status = run_job_status(lib.built, bool(missing))
            planned = self._planned.get(id(sub))
            if planned is not None and planned[0] is sub and planned[1] == site.name:
                resources = planned[2]
            else:
                resources = plan_job_resources(ctx.resources, self._site(site), self._chunk_files(sub, masters), self.settings,
                                               is_scout=scout, direct_io=bool(site.direct_io))
            outputs = names.jobs[index]
            seed = seeds[index] if seeds else None
            master_stream = streams[sub.master[0].dataset_id]
            inputs = [InputStream(master_stream[0], master_stream[1], sub.master, True)]
            for secondary, records in zip(ctx.secondaries, sub.secondaries, strict=True):
                inputs.append(InputStream(secondary.stream_name, secondary.container_name or secondary.name, records))
            params = render_job_parameters(template, JobContext(
                task_id=task.id, inputs=tuple(inputs), outputs=tuple(OutputFile(o.stream, o.lfn, unmerged=unmerged) for o in outputs),
                serial_nr=job_serial_nr(outputs), attempt_nr=resources.attempt_nr, random_seed=seed.rndmseed if seed else None,
                source_url=source_url, panda_id=job_id, extra={"LIB": lib.lfn} if lib is not None else {},
                event_service=event_service)).text
            job_rows.append((
                job_id, first_index + index, job_status, scout, resources.attempt_nr, resources.max_attempt, resources.assigned_priority,
                resources.current_priority, site.name, site.cloud, self._resource_type(resources.core_count, resources.min_ram_count),
                params, resources.core_count, resources.min_ram_count, resources.max_walltime, resources.max_disk_count,
                resources.max_cpu_count, *shared,
            ))
            if lib is not None:
                file_rows.append((job_id, task.id, lib.dataset_id, lib.file_id, lib.lfn, LIB_JOB_FILE_TYPE, 0,
                                  FileStatus.READY.value if lib.built else FileStatus.PENDING.value, None, None, None, None, None))
            previous = []
            for row in masters:
                if references and (index, row[C_ID]) in references:  # another job of the plan holds the record
                    file_rows.append((job_id, task.id, row[C_DATASET], None, row[C_LFN], streams[row[C_DATASET]][2], row[C_ATTEMPT], "ready",
                                      row[C_SCOPE], row[C_GUID], row[C_SIZE], row[C_CHECKSUM], fetch_to if row[C_LFN] in missing else None))
                    continue
                # An input to be transferred names the endpoint it must reach (the job waits `assigned` for it).
                file_rows.append((job_id, task.id, row[C_DATASET], row[C_ID], row[C_LFN], streams[row[C_DATASET]][2], row[C_ATTEMPT], "ready",
                                  row[C_SCOPE], row[C_GUID], row[C_SIZE], row[C_CHECKSUM], fetch_to if row[C_LFN] in missing else None))
                used[row[C_DATASET]].add(row[C_ID])
                started.append((job_id, now, running, row[C_ID]))
                if row[C_ATTEMPT]:
                    previous.append(row[C_JOB])
            for records in sub.secondaries:
                for record in records:
                    row = secondary_rows[record.file_id]
                    file_rows.append((job_id, task.id, row[C_DATASET], row[C_ID], row[C_LFN], streams[row[C_DATASET]][2], row[C_ATTEMPT],
                                      "ready", row[C_SCOPE], row[C_GUID], row[C_SIZE], row[C_CHECKSUM],
                                      fetch_to if row[C_LFN] in missing else None))
                    if row[C_ID] in claimed_secondaries:
                        used[row[C_DATASET]].add(row[C_ID])
                        started.append((job_id, now, running, row[C_ID]))
            if seed is not None:
                seed_id = seed.file_id if seed.file_id is not None else next(record_ids)
                if seed.file_id is None:
                    seed_rows.append((seed_id, task.id, ctx.seed_dataset.id, str(seed.value), DatasetType.RANDOM_SEED.value, "running",
                                      0, 0, True, seed.value, job_id, now, now))
                else:
                    reused_seeds.append((seed.file_id, job_id))
                used[ctx.seed_dataset.id].add(seed_id)
                file_rows.append((job_id, task.id, ctx.seed_dataset.id, seed_id, str(seed.value), DatasetType.PSEUDO_INPUT.value,
                                  seed.attempt_nr, "ready", None, None, None, None, None))
            site_ids = in_site_datasets[site.name] if in_site_datasets else None
            for output in outputs:
                record_id = next(record_ids)
                dataset_id = site_ids.get(output.dataset_id, output.dataset_id) if site_ids else output.dataset_id
                output_rows.append((record_id, task.id, dataset_id, output.lfn, output.out_type, "defined", 0, 0, True, job_id, None, now))
                file_rows.append((job_id, task.id, dataset_id, record_id, output.lfn, output.out_type, 0, "defined", None, None, None,
                                  None, _destination(ctx, output.dataset_id, site)))
            if previous:
                retries.extend(dataclasses.asdict(r) | {"task_id": task.id, "created_at": now} for r in retry_relations(job_id, previous))
            per_site[site.name] += 1
            if missing:
                assigned[site.name] += 1
        job_store.write_jobs(conn, job_rows, file_rows, output_rows, seed_rows, retries)
        job_store.start_files(conn, started)
        job_store.start_seeds(conn, reused_seeds)
        if ctx.seed_dataset is not None:
            job_store.count_new_seeds(conn, ctx.seed_dataset.id, len(seed_rows), now)
        job_store.add_used(conn, {dataset_id: len(ids) for dataset_id, ids in used.items()}, now)
        job_store.advance_serials(conn, names.next_serial_nr)
        if kind == JOB_KIND_ES:
            self._event_ranges(conn, [(job_id, claimed[sub.master[0].file_id]) for (_, sub), job_id in zip(plan, job_ids, strict=True)])
        return Written(dict(per_site), frozenset().union(*used.values()), dict(assigned), tuple(job_ids))

    def _event_ranges(self, conn: Any, holders: list[tuple[int, Any]]) -> None:
        """Each event-service job's record gets its ranges (seed 000 "Event-level splitting" step 4): new
        ranges for a record taken the first time, its ready ranges for a retried one (its done ranges wait
        for the merge, its fatal ones stay)."""
        options, task, now = self.ctx.options, self.ctx.task, self.now
        size = options.n_events_per_range or event_ranges.DEFAULT_EVENTS_PER_RANGE
        max_attempt = options.max_attempt_es or event_ranges.DEFAULT_MAX_ATTEMPT
        retried = [row[C_ID] for _, row in holders if row[C_ATTEMPT]]
        known = event_store.records_with_ranges(conn, retried) if retried else set()
        ready = EventStatus.READY.value
        new = [(task.id, row[C_DATASET], row[C_ID], job_id, start, end, ready, 0, max_attempt, False, now, now)
               for job_id, row in holders if row[C_ID] not in known
               for start, end in event_ranges.ranges_of(row[C_EVENTS], row[C_START], row[C_END], size)]
        event_store.insert_ranges(conn, new)
        event_store.reattach(conn, [(job_id, row[C_ID]) for job_id, row in holders if row[C_ID] in known], now)

    def refusal(self, site: Any, sub: Any, claimed: dict[int, Any]) -> str | None:
        """Why `site` refuses the job `sub` would become (None: it takes it): the same resources `write`
        gives the job, compared with the site's limits. The first group of nFilesPerJob files is taken
        whatever it needs, so only this look says whether the job can run there at all."""
        masters = [claimed[record.file_id] for record in sub.master]
        files = self._chunk_files(sub, masters)
        site_resources = self._site(site)
        direct_io = bool(site.direct_io)
        # The written disk count is capped at the site's scratch; the need itself is not: computed once.
        disk_mb = job_max_disk_count(self.ctx.resources, self._uncapped_site(site_resources), files, direct_io=direct_io)
        resources = plan_job_resources(self.ctx.resources, site_resources, files, self.settings, is_scout=self.ctx.scout,
                                       direct_io=direct_io, disk_need_mb=disk_mb)
        # `write` needs the very same resources for the sub-chunks the split keeps: computed once. The
        # entry holds the sub-chunk itself, so its id cannot be reused by another object meanwhile.
        self._planned[id(sub)] = (sub, site.name, resources)
        return site_refusal(resources, disk_mb, site.max_walltime, site.max_memory, site.max_scratch_mb)

    def _seeds(self, conn: Any, n: int) -> tuple[Any, ...]:
        ctx = self.ctx
        if ctx.seed_dataset is None:
            return ()
        released, largest = job_store.released_seeds(conn, ctx.seed_dataset.id, n)
        return assign_random_seeds(n, [SeedRecord(r.id, r.first_event, r.attempt_nr) for r in released], largest,
                                   ctx.options.random_seed_offset or 0)

    def _chunk_files(self, sub: Any, masters: list[Any]) -> list[ChunkFile]:
        cvmfs = self.cvmfs_lfns
        chunk = [ChunkFile(row[C_ATTEMPT], r.size, r.n_events, r.start_event, r.end_event, row[C_RAM], cached=r.lfn in cvmfs)
                 for r, row in zip(sub.master, masters, strict=True)]
        for records in sub.secondaries:
            chunk.extend(ChunkFile(0, r.size, r.n_events, is_master=False, cached=r.lfn in cvmfs) for r in records)
        return chunk

    def _site(self, site: Any) -> SiteResources:
        cached = self._site_cache.get(site.name)
        if cached is None:
            cached = self._site_cache[site.name] = SiteResources(site.name, site.core_count, site.core_power, site.max_walltime, site.max_scratch_mb)
        return cached

    def _uncapped_site(self, site: SiteResources) -> SiteResources:
        cached = self._uncapped_cache.get(site.name)
        if cached is None:
            cached = self._uncapped_cache[site.name] = dataclasses.replace(site, max_scratch_mb=None)
        return cached

    def _resource_type(self, cores: int, ram: int | None) -> str | None:
        key = (cores, ram)
        if key not in self._rtype_cache:
            per_core = (ram or 0) / max(cores, 1)
            self._rtype_cache[key] = match_resource_type(self.ctx.rtypes, cores, per_core) or self.ctx.task.resource_type
        return self._rtype_cache[key]


def _preprocess_transformation(conn: Any, task_id: int) -> str | None:
    """preproSpec.transPath (or the spec's preprocess.transformation); None: the task's own."""
    params = task_store.get_params(conn, task_id)
    document = params.document if params is not None else {}
    if document.get("preproSpec") is not None:
        return parse_panda_prepro_spec(document["preproSpec"]).trans_path
    if document.get("preprocess") is not None:
        return parse_preprocess_spec(document["preprocess"]).trans_path
    return None


def _destination(ctx: Any, dataset_id: int, site: Any) -> str | None:
    """Where a job writes an output: its dataset's destination, or -- with stayOutputOnSite (SO) -- the
    execution site's first write endpoint, the one its files are registered at (job_outcomes.write_endpoints)."""
    if ctx.options.stay_output_on_site and site.write_endpoints:
        return sorted(site.write_endpoints)[0]
    return ctx.destinations.get(dataset_id)
