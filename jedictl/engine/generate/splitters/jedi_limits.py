"""From task options and a site to the limits of one job: JEDI's JobSplitter parameter table (§6.6), the
per-site rules of its site loop (maxSize from nGBPerJob, scratch disk or direct-IO caps; max walltime
from maxWalltime and the site; cores and core power), scouts (§6.11: one file per job unless the task
says otherwise) and merge jobs (§6.12: ZF/ZE/ZM/ZG with 50 files / 5 GB defaults).

Every JEDI constant arrives through `SplitDefaults`, built from the settings by the generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from jedictl.engine.task.options import TaskOptions
from jedictl.engine.generate.splitters.jedi_model import (
    BOUNDARY_MANY,
    BOUNDARY_SPLIT,
    BOUNDARY_WHOLE,
    GB,
    MB,
    JobLimits,
)
from jedictl.errors import BadInput

if TYPE_CHECKING:
    from jedictl.config import Settings


@dataclass(frozen=True)
class SplitDefaults:
    """JEDI's splitting constants. The first group mirrors `GenerateSettings`; the rest are new settings
    (listed in docs/splitting.md) with JEDI's values."""

    max_files_per_job: int = 200  # MF default (InputChunk.getSubChunk)
    hard_max_files_per_job: int = 1000  # InputChunk.maxTotalNumFiles
    max_files_per_merge_job: int = 50  # ZM default
    max_gb_per_merge_job: float = 5.0  # ZG default
    max_size_gb: float = 20.0  # input size per job when nothing else limits it
    scout_max_input_gb: float = 50.0  # direct-IO scouts without NF/NE
    max_input_gb: float = 500.0  # direct-IO jobs without NF/NE after the avalanche
    jobs_per_site_round: int = 25  # consecutive sub-chunks given to one site
    scout_jobs_per_site: int = 2
    default_output_mb: float = 1500.0  # InputChunk.defaultOutputSize (BrokerageSettings)
    # --- new settings
    work_disk_margin_mb: float = 300.0  # JediTaskSpec.getWorkDiskSize safety margin
    max_output_gb: float = 10.0  # largest unmerged output of one dataset per job (JobSplitter)
    merge_work_disk_mb: float = 500.0  # merge jobs: intercept at least this (JobSplitter)
    merge_input_factor: float = 1.2  # merge jobs: output = 1.2 x input (JobSplitter)
    default_base_walltime: int = 600  # RefineSettings.default_base_walltime
    default_cpu_efficiency: int = 90  # RefineSettings.default_cpu_efficiency

    @classmethod
    def from_settings(cls, settings: Settings) -> SplitDefaults:
        generate, refine = settings.generate, settings.refine
        return cls(
            max_files_per_job=generate.max_files_per_job,
            hard_max_files_per_job=generate.hard_max_files_per_job,
            max_files_per_merge_job=generate.max_files_per_merge_job,
            max_gb_per_merge_job=generate.max_gb_per_merge_job,
            max_size_gb=generate.max_size_gb,
            scout_max_input_gb=generate.scout_max_input_gb,
            max_input_gb=generate.max_input_gb,
            jobs_per_site_round=generate.jobs_per_site_round,
            scout_jobs_per_site=generate.scout_jobs_per_site,
            default_output_mb=settings.brokerage.default_output_size_mb,
            default_base_walltime=refine.default_base_walltime,
            default_cpu_efficiency=refine.default_cpu_efficiency,
        )


DEFAULTS = SplitDefaults()


@dataclass(frozen=True)
class SiteLimits:
    """What a site (PanDA queue) imposes on a job; names follow the site catalog (`Site`)."""

    name: str | None = None
    max_walltime: int | None = None  # maxtime, s (0/None: none)
    core_count: int | None = None  # cores per slot (0/None/-1: one core for the estimate)
    core_power: float | None = None  # HS06 per core
    max_scratch_mb: int | None = None  # maxwdir
    direct_io: bool = False  # jobs read their input directly (no copy to scratch)


class _SiteLike(Protocol):
    name: str
    max_walltime: int | None
    core_count: int | None
    core_power: float | None
    max_scratch_mb: int | None
    direct_io: bool


def site_limits(site: _SiteLike) -> SiteLimits:
    """SiteLimits from a site catalog entry (anything with the `Site` attribute names)."""
    return SiteLimits(site.name, site.max_walltime, site.core_count, site.core_power, site.max_scratch_mb, site.direct_io)


NO_SITE = SiteLimits()

_GROUP_BOUNDARY = {1: BOUNDARY_SPLIT, 2: BOUNDARY_SPLIT, 3: BOUNDARY_WHOLE, 4: BOUNDARY_WHOLE}


def boundary_mode(group_boundary_id: int | None) -> str | None:
    """Split-rule GB=1..4 to a boundary mode (1/2: inputs of a boundary may be split; 3/4: not)."""
    if group_boundary_id is None:
        return None
    if group_boundary_id not in _GROUP_BOUNDARY:
        raise BadInput("must be 1, 2, 3 or 4", "groupBoundaryID")
    return _GROUP_BOUNDARY[group_boundary_id]


def sub_chunks_per_site(scout: bool, defaults: SplitDefaults = DEFAULTS, job_chunk_size: int | None = None) -> int:
    """Consecutive jobs a site gets before the next site is drawn: the queue's job chunk size, else 2 for
    scouts, else 25 (§6.6 site loop)."""
    if job_chunk_size:
        return job_chunk_size
    return defaults.scout_jobs_per_site if scout else defaults.jobs_per_site_round


def _scaled(count: float | None, unit: str | None) -> float:
    """Bytes from a count with a kB/MB/GB unit prefix (JediTaskSpec getOutDiskSize/getWorkDiskSize)."""
    if not count or count < 0:
        return 0.0
    unit = unit or ""
    for prefix, factor in (("GB", GB), ("MB", MB), ("kB", 1024)):
        if unit.startswith(prefix):
            return count * factor
    return float(count)


def job_limits(
    options: TaskOptions,
    site: SiteLimits = NO_SITE,
    *,
    scout: bool = False,
    merging: bool = False,
    group_boundary_id: int | None = None,
    defaults: SplitDefaults = DEFAULTS,
) -> JobLimits:
    """The limits of the next jobs of a task at `site` (JobSplitter.doSplit + the site loop)."""
    margin = defaults.work_disk_margin_mb * MB
    # The refiner stores workDiskCount 0 when a task gives none, so the margin always applies.
    work_disk = _scaled(options.work_disk_count, options.work_disk_unit) + margin
    if merging:
        n_files_per_job = options.n_files_per_merge_job
        n_events_per_job = options.n_events_per_merge_job
        max_files = options.n_max_files_per_merge_job or defaults.max_files_per_merge_job
        size_gradient, per_event, per_in_size = 0.0, False, defaults.merge_input_factor
        intercept = max(work_disk, defaults.merge_work_disk_mb * MB)
        max_out = (options.n_gb_per_merge_job or defaults.max_gb_per_merge_job) * GB
        max_size_per_job = None
        mode = BOUNDARY_MANY
        walltime_gradient, use_hs06 = 0.0, False
        task_max_walltime = None  # merge jobs run within the site's maxtime
        max_events_cap = n_events_per_job
    else:
        n_files_per_job = options.n_files_per_job
        n_events_per_job = options.n_events_per_job
        if n_files_per_job is None and n_events_per_job is None and scout and not options.respect_split_rule:
            n_files_per_job = 1  # scouts: one file per job unless the task says otherwise (§6.11)
        max_files = options.n_max_files_per_job or defaults.max_files_per_job
        size_gradient = _scaled(options.out_disk_count, options.out_disk_unit)
        per_event = "PerEvent" in (options.out_disk_unit or "")
        per_in_size = None
        intercept = work_disk
        max_out = defaults.max_output_gb * GB
        # nGBPerJob covers the input; the default output is added on top of it (JobSplitter).
        max_size_per_job = options.n_gb_per_job * GB + defaults.default_output_mb * MB if options.n_gb_per_job else None
        mode = boundary_mode(group_boundary_id)
        use_hs06 = (options.cpu_time_unit or "").lstrip("m").startswith("HS06")
        if use_hs06:
            walltime_gradient = (options.cpu_time or 0.0) / (1000.0 if (options.cpu_time_unit or "").startswith("m") else 1.0)
        else:
            walltime_gradient = float(options.walltime or 0)
        task_max_walltime = options.max_walltime_hours * 3600 if options.max_walltime_hours else None
        # maxEventsPerJob caps events when NE does not (JEDI uses it only with dynamic events).
        max_events_cap = n_events_per_job or options.max_events_per_job

    # maxSize per site (JobSplitter): nGBPerJob, else the scratch disk, else direct-IO caps.
    scratch = site.max_scratch_mb * MB if site.max_scratch_mb else None
    if max_size_per_job is not None:
        max_size: float | None = max_size_per_job + intercept
    elif not site.direct_io:
        max_size = scratch
    elif n_events_per_job is not None or n_files_per_job is not None:
        max_size = None
    else:
        cap = defaults.scout_max_input_gb if scout else defaults.max_input_gb
        max_size = max(cap * GB, scratch or 0)
    if max_size is None and n_files_per_job is None and n_events_per_job is None:
        max_size = defaults.max_size_gb * GB  # getSubChunk's default
    # The task's maxWalltime never exceeds the site's maxtime; a site without maxtime imposes nothing.
    site_max = site.max_walltime if site.max_walltime and site.max_walltime > 0 else None
    max_walltime = min(w for w in (task_max_walltime, site_max) if w) if (task_max_walltime or site_max) else None

    if mode == BOUNDARY_WHOLE:
        # GB=3/4: only a boundaryID change ends a job (maxima and NF/NE grouping are unset).
        n_files_per_job = n_events_per_job = max_events_cap = None
        max_files = None
        max_size = None
        max_walltime = None
    if n_files_per_job is not None:
        max_files = n_files_per_job
    return JobLimits(
        site=site.name,
        n_files_per_job=n_files_per_job,
        n_events_per_job=n_events_per_job,
        max_files=max_files,
        max_events=max_events_cap,
        max_size=int(max_size) if max_size is not None else None,
        max_disk=scratch,
        max_walltime=max_walltime,
        max_out_size=int(max_out),
        hard_max_files=defaults.hard_max_files_per_job,
        min_out_size=int(defaults.default_output_mb * MB),
        size_gradient=size_gradient,
        gradient_per_event=per_event,
        size_gradient_per_in_size=per_in_size,
        size_intercept=int(intercept),
        walltime_gradient=walltime_gradient,
        use_hs06=use_hs06,
        base_walltime=options.base_walltime if options.base_walltime is not None else defaults.default_base_walltime,
        cpu_efficiency=options.cpu_efficiency if options.cpu_efficiency is not None else defaults.default_cpu_efficiency,
        core_count=site.core_count if site.core_count and site.core_count > 0 else 1,
        core_power=site.core_power,
        direct_io=site.direct_io,
        boundary_mode=mode,
        respect_lb=bool(options.respect_lb),
        split_by_fields=_fields(options) if not merging else None,
        skip_short_output=bool(options.skip_short_output),
    )


def _fields(options: TaskOptions) -> tuple[int, ...] | None:
    """addNthFieldToLFN with useFileAsSourceLFN: jobs split where those LFN fields change (§3.4 AN)."""
    if options.add_nth_field_to_lfn and options.use_file_as_source_lfn:
        return tuple(int(part) for part in options.add_nth_field_to_lfn.split(","))
    return None
