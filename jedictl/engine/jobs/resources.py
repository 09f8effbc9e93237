"""What is written for each job: attempts, cores, RAM, walltime, disk, priority, output names and seeds.

Follows jedi-inventory.md §6.7 (job attributes), §6.8 (output names and serial numbers), §6.10 (random
seeds), panda-server.md §1.6 (the job columns), seed 000 "Naming of output file" (option B: every
generated job -- a retry too -- takes the next serial number of every output template, so no name is
ever reused) and "Random seed assignment" (seeds of failed jobs are reused first, lowest value first).
The generator loads task, site and file rows into these dataclasses and writes what comes back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from jedictl.config import Settings
from jedictl.engine.task.templates import TemplateError, UnresolvedPlaceholder

_MB = 1024 * 1024


@dataclass(frozen=True)
class TaskResources:
    """The task's resource model: `tasks` columns of the same names, plus three task options."""

    current_priority: int
    core_count: int | None = 1
    ram_count: int | None = None
    ram_unit: str | None = None  # MB | MBPerCore | MBPerCoreFixed
    base_ram_count: int | None = None
    base_walltime: int | None = None
    cpu_time: float | None = None
    cpu_time_unit: str | None = None  # HS06sPerEvent | mHS06sPerEvent (+Fixed)
    cpu_efficiency: int | None = None  # percent
    out_disk_count: float | None = None
    out_disk_unit: str | None = None  # B (output bytes per input byte) | kB | MB | GB, optionally ...PerEvent
    work_disk_count: int | None = None
    work_disk_unit: str | None = None  # B | kB | MB | GB
    merge_ram_count: int | None = None  # options.merge_ram_count
    merge_core_count: int | None = None  # options.merge_core_count
    disable_auto_retry: bool = False  # options.disable_auto_retry (DR)


@dataclass(frozen=True)
class SiteResources:
    """A `sites` row (PanDA queue): cores, core power (HS06 per core), limits."""

    name: str
    core_count: int | None = None  # 0/None single core, -1 dynamic
    core_power: float | None = None
    max_walltime: int | None = None  # s
    max_scratch_mb: int | None = None


class ChunkFile(NamedTuple):
    """An input file of the job: `files` columns (attempt_nr, size, n_events, start/end_event, ram_count).

    A NamedTuple: the generator builds one per input file of every job (a million per big task).
    """

    attempt_nr: int = 0
    size: int | None = 0
    n_events: int | None = None
    start_event: int | None = None
    end_event: int | None = None
    ram_count: int | None = None  # per-file RAM raised by the retry module
    is_master: bool = True
    cached: bool = False  # already in the site's cache: needs no scratch space


@dataclass(frozen=True)
class JobResources:
    """`jobs` columns of the same names."""

    attempt_nr: int
    max_attempt: int
    core_count: int
    min_ram_count: int | None  # MB for the whole job
    max_walltime: int | None  # s
    max_cpu_count: int | None
    max_disk_count: int  # MB
    assigned_priority: int
    current_priority: int


def plan_job_resources(task: TaskResources, site: SiteResources, files: Sequence[ChunkFile], settings: Settings, *,
                       is_scout: bool = False, is_merge: bool = False, direct_io: bool = False,
                       merge_default_ram_mb: int = 2000, merge_max_walltime_hours: float | None = None,
                       disk_need_mb: int | None = None) -> JobResources:
    """Every resource column of one job (jedi-inventory §6.7). `disk_need_mb`: the job's scratch need
    before the site's cap, when the caller has it already (job_max_disk_count without max_scratch_mb)."""
    # One pass over the files (this runs for every job of a big task); same values as job_attempt_nr etc.
    attempt_nr, chunk_ram, master_events = 1, 0, 0
    for f in files:
        if f.is_master:
            attempt_nr = max(attempt_nr, 1 + (f.attempt_nr or 0))
            chunk_ram = max(chunk_ram, f.ram_count or 0)
            master_events += _events(f)
    cores = job_core_count(task, site, is_merge)
    walltime, cpu_count = job_max_walltime(task, site, cores, master_events, is_merge,
                                           merge_max_walltime_hours=merge_max_walltime_hours)
    priority = job_priority(task.current_priority, is_scout, is_merge, settings.brokerage.scout_priority_floor,
                            settings.generate.merge_priority)
    return JobResources(
        attempt_nr=attempt_nr,
        max_attempt=job_max_attempt(attempt_nr, task.disable_auto_retry),
        core_count=cores,
        min_ram_count=_column(job_min_ram_count(task, chunk_ram, cores, is_merge, settings.refine.memory_compensation,
                                                merge_default_ram_mb=merge_default_ram_mb)),
        max_walltime=_column(walltime),
        max_cpu_count=_column(cpu_count, INT64_MAX),
        max_disk_count=_column(job_max_disk_count(task, site, files, is_merge, direct_io) if disk_need_mb is None
                               else cap_scratch(disk_need_mb, site.max_scratch_mb)),
        assigned_priority=priority,
        current_priority=priority,
    )


#: The widest values of the jobs' INTEGER and BIGINT columns: a need beyond them is written as the widest
#: (a walltime of 68 years, 2 PB of RAM are "more than any slot has", which is all they can mean).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _column(value: int | None, widest: int = INT32_MAX) -> int | None:
    return None if value is None else min(value, widest)


def job_attempt_nr(files: Iterable[ChunkFile]) -> int:
    """1 + the largest attemptNr among the master input files (0 when none was tried yet)."""
    return 1 + max((f.attempt_nr or 0 for f in files if f.is_master), default=0)


def job_max_attempt(attempt_nr: int, disable_auto_retry: bool = False) -> int:
    """The job's own maxAttempt = its attemptNr: executors never retry, JEDI regenerates (-1 with DR)."""
    return -1 if disable_auto_retry else attempt_nr


def job_core_count(task: TaskResources, site: SiteResources, is_merge: bool = False) -> int:
    """Task 1 -> 1; a single-core site (0/None) -> 1; a dynamic site (-1) -> the task's; else the site's."""
    if is_merge:
        return task.merge_core_count or 1
    if task.core_count == 1 or site.core_count in (None, 0):
        return 1
    if site.core_count == -1:
        return task.core_count or 1
    return site.core_count


def job_min_ram_count(task: TaskResources, chunk_ram: int | None, cores: int, is_merge: bool, compensation: float,
                      *, merge_default_ram_mb: int = 2000) -> int | None:
    """max(task, chunk) RAM, x cores + base for per-core units, then x 0.9 (JEDI's memory compensation).

    Merge jobs take mergeRamCount or 2000 MB as a whole-job value, uncompensated (§6.12 "RAM >= 2000")."""
    if is_merge:
        return max(task.merge_ram_count or merge_default_ram_mb, chunk_ram or 0)
    ram = max(task.ram_count or 0, chunk_ram or 0)
    if (task.ram_unit or "").startswith("MBPerCore"):
        ram = ram * (cores or 1) + (task.base_ram_count or 0)
    return int(ram * compensation) if ram else None


def job_max_walltime(task: TaskResources, site: SiteResources, cores: int, n_events: int, is_merge: bool = False,
                     *, merge_max_walltime_hours: float | None = None) -> tuple[int | None, int | None]:
    """(maxWalltime, maxCpuCount) in seconds.

    cpuTime (HS06 s per event) x events / cores / core power / cpuEfficiency + baseWalltime; without a
    cpuTime the site's maxtime. cpuEfficiency 0 turns the event scaling off (wall = baseWalltime, seed
    000 "HS06sPerEvent"). Merge jobs: MERGE_JOB_MAX_WALLTIME hours when configured, else site maxtime."""
    base = task.base_walltime or 0
    if is_merge:
        if merge_max_walltime_hours is None:
            return site.max_walltime, 0
        seconds = int(merge_max_walltime_hours * 3600)
        return seconds + base, seconds
    cpu_time = task.cpu_time or 0
    if (task.cpu_time_unit or "").startswith("mHS06"):
        cpu_time /= 1000.0
    if not cpu_time:
        return site.max_walltime, site.max_walltime
    if task.cpu_efficiency == 0:
        return base, base
    seconds = cpu_time * n_events / (cores or 1)
    if site.core_power:
        seconds /= site.core_power
    if task.cpu_efficiency:
        seconds /= task.cpu_efficiency / 100.0
    walltime = int(min(seconds + base, INT64_MAX))  # cpuTime x events may pass any clock (or be inf)
    return walltime, walltime


def job_max_disk_count(task: TaskResources, site: SiteResources, files: Sequence[ChunkFile], is_merge: bool = False,
                       direct_io: bool = False, *, work_disk_margin_mb: int = 300, merge_output_factor: float = 1.2,
                       merge_min_work_disk_mb: int = 500) -> int:
    """Scratch disk in MB: outDisk x (master bytes | events) + workDisk + input (unless direct IO),
    capped at the site's maxwdir. Merge jobs: 1.2 x input + max(workDisk, 500 MB) + input (§6.6)."""
    input_bytes = sum(f.size or 0 for f in files if not f.cached)
    work_bytes = _work_disk_bytes(task, work_disk_margin_mb)
    if is_merge:
        total = merge_output_factor * input_bytes + max(work_bytes, merge_min_work_disk_mb * _MB) + input_bytes
    else:
        per_unit, per_event = _out_disk_per_unit(task)
        masters = [f for f in files if f.is_master]
        scale = sum(_events(f) for f in masters) if per_event else sum(_effective_size(f) for f in masters)
        total = per_unit * scale + work_bytes + (0 if direct_io else input_bytes)
    return cap_scratch(int(min(total / _MB, INT64_MAX)), site.max_scratch_mb)


def cap_scratch(megabytes: int, max_scratch_mb: int | None) -> int:
    """A scratch need as written on the job: at most the site's maxwdir (0 or None: no cap)."""
    if max_scratch_mb and megabytes > max_scratch_mb:
        return max_scratch_mb
    return megabytes


def site_refusal(resources: JobResources, disk_mb: int, max_walltime: int | None, max_memory: int | None,
                 max_scratch_mb: int | None) -> str | None:
    """Why a site refuses a job with these needs (None: it takes it). `disk_mb` is the scratch the job
    needs before the cap at the site's maxwdir; limits of 0 or None are no limits. The job brokerage
    judged the task's typical job; this judges the very job about to be written."""
    if max_walltime and max_walltime > 0 and resources.max_walltime and resources.max_walltime > max_walltime:
        return f"walltime: the job needs {resources.max_walltime} s, site max {max_walltime} s"
    if max_memory and max_memory > 0 and resources.min_ram_count and resources.min_ram_count > max_memory:
        return f"memory: the job needs {resources.min_ram_count} MB, site max {max_memory} MB"
    if max_scratch_mb and max_scratch_mb > 0 and disk_mb > max_scratch_mb:
        return f"scratch disk: the job needs {disk_mb} MB, site has {max_scratch_mb} MB"
    return None


def job_priority(current_priority: int, is_scout: bool, is_merge: bool, scout_priority_floor: int,
                 merge_priority: int) -> int:
    """Merge jobs 5000; scouts max(901, task current priority + 1); others the task's current priority."""
    if is_merge:
        return merge_priority
    if is_scout:
        return max(scout_priority_floor, current_priority + 1)
    return current_priority


_UNIT_FACTORS = {"GB": 1024 ** 3, "MB": _MB, "kB": 1024}


def _unit_factor(unit: str | None) -> int:
    return next((factor for prefix, factor in _UNIT_FACTORS.items() if (unit or "").startswith(prefix)), 1)


def _out_disk_per_unit(task: TaskResources) -> tuple[float, bool]:
    count = task.out_disk_count or 0
    if count < 0:
        return 0.0, False
    return count * _unit_factor(task.out_disk_unit), "PerEvent" in (task.out_disk_unit or "")


def _work_disk_bytes(task: TaskResources, margin_mb: int) -> float:
    if task.work_disk_count is None:
        return 0.0
    # JEDI adds a 300 MB safety margin to every declared work directory.
    return task.work_disk_count * _unit_factor(task.work_disk_unit) + margin_mb * _MB


def _events(f: ChunkFile) -> int:
    if f.start_event is not None and f.end_event is not None:
        return f.end_event - f.start_event + 1
    return f.n_events or 0


def _effective_size(f: ChunkFile) -> float:
    """Bytes of the file this job reads: an event range counts pro rata."""
    size = f.size or 0
    if f.start_event is not None and f.end_event is not None and f.n_events:
        return size * (f.end_event - f.start_event + 1) / f.n_events
    return size


# --------------------------------------------------------------------------- output names (§6.8)

@dataclass(frozen=True)
class OutputTemplate:
    """An `output_templates` row: `serial_nr` is the next serial number to hand out."""

    id: int
    dataset_id: int
    filename_template: str
    serial_nr: int
    stream_name: str
    out_type: str
    max_serial_nr: int | None = None


@dataclass(frozen=True)
class OutputName:
    """One output file of one job: a `files` row (type out_type, status defined) and a job file."""

    template_id: int
    dataset_id: int
    stream: str
    out_type: str
    lfn: str
    serial_nr: int


@dataclass(frozen=True)
class OutputAllocation:
    jobs: tuple[tuple[OutputName, ...], ...]  # per job, one name per template
    next_serial_nr: tuple[tuple[int, int], ...]  # (template id, new serial_nr): serial_nr += number of jobs


_SERIAL = re.compile(r"\$\{SN(?:/P|:0?(\d{1,2})d)?\}")
_TASK_ID = re.compile(r"\$\{JEDITASKID\}|\$JEDITASKID(?![A-Za-z0-9_])")
_LEFTOVER = re.compile(r"\$\{[^}]*\}")


def output_file_name(template: str, serial_nr: int, task_id: int, middle_name: str = "") -> str:
    """`ds.out.${SN}.root` -> `ds.out.000001.root`: ${SN} and ${SN/P} have 6 digits, `${SN:08d}` 8;
    $JEDITASKID is the task id, ${MIDDLENAME} the job's middle name. Anything else left is an error."""
    def serial(match: re.Match[str]) -> str:
        width = int(match.group(1)) if match.group(1) else 6
        return f"{serial_nr:0{width}d}"

    name = _SERIAL.sub(serial, template)
    name = _TASK_ID.sub(str(task_id), name).replace("${MIDDLENAME}", middle_name)
    leftover = _LEFTOVER.search(name)
    if leftover:
        raise UnresolvedPlaceholder(leftover.group(0), f"output file template {template!r} cannot name it")
    return name


def allocate_output_names(templates: Sequence[OutputTemplate], n_jobs: int, task_id: int,
                          middle_names: Sequence[str] | None = None) -> OutputAllocation:
    """Names for `n_jobs` jobs: job i gets serial `serial_nr + i` of every template (option B)."""
    for t in templates:
        if t.max_serial_nr is not None and t.serial_nr + n_jobs - 1 > t.max_serial_nr:
            raise TemplateError(f"output template {t.filename_template!r} has no serial number left "
                                f"(next {t.serial_nr}, last {t.max_serial_nr})")
    jobs = []
    for index in range(n_jobs):
        middle = middle_names[index] if middle_names else ""
        jobs.append(tuple(
            OutputName(t.id, t.dataset_id, t.stream_name, t.out_type,
                       output_file_name(t.filename_template, t.serial_nr + index, task_id, middle), t.serial_nr + index)
            for t in templates
        ))
    return OutputAllocation(jobs=tuple(jobs), next_serial_nr=tuple((t.id, t.serial_nr + n_jobs) for t in templates))


def job_serial_nr(names: Iterable[OutputName]) -> int | None:
    """${SN} of a job: the largest serial among its outputs (templates normally advance in lock-step)."""
    return max((n.serial_nr for n in names), default=None)


def middle_name(source: str, field_numbers: Sequence[int]) -> str:
    """${MIDDLENAME} (addNthFieldToLFN): the listed 1-based fields of a dataset or file name, each after a
    dot; empty when the name has fewer fields. `_tidNNN` counts as a separator, scopes are dropped."""
    if not field_numbers:
        return ""
    fields = re.split(r"\.|_tid\d+", source.rstrip("/").split(":")[-1])
    if len(fields) < max(field_numbers):
        return ""
    return "".join("." + fields[number - 1] for number in field_numbers)


# ------------------------------------------------------------------------------ random seeds (§6.10)

@dataclass(frozen=True)
class SeedRecord:
    """A released (`ready`) row of the task's random_seed dataset: `first_event` is the seed value."""

    file_id: int
    value: int
    attempt_nr: int = 0  # attempts of the jobs that had it (a failed job's seed comes back one attempt on)


@dataclass(frozen=True)
class SeedAssignment:
    value: int
    file_id: int | None  # None: a new seed row to write (lfn = first_event = value), status running
    rndmseed: int  # ${RNDMSEED} = value + the task's random-seed offset (RS)
    attempt_nr: int = 0  # the seed record's attempt, which the job's file row must carry


def assign_random_seeds(n_jobs: int, released: Iterable[SeedRecord], max_value: int | None,
                        offset: int = 0) -> tuple[SeedAssignment, ...]:
    """The N lowest released seeds first (they belonged to failed jobs), then new ones max+1, max+2 ...
    (the first seed of a task is 1). `max_value` is the largest seed value ever issued for the task."""
    reused = sorted(released, key=lambda seed: seed.value)[:n_jobs]
    assignments = [SeedAssignment(seed.value, seed.file_id, seed.value + offset, seed.attempt_nr) for seed in reused]
    next_value = (max_value or 0) + 1
    while len(assignments) < n_jobs:
        assignments.append(SeedAssignment(next_value, None, next_value + offset))
        next_value += 1
    return tuple(assignments)


# ------------------------------------------------------------------------------- retry lineage

@dataclass(frozen=True)
class RetryRelation:
    """A `job_retry_history` row: which earlier job's work a new job takes over."""

    old_job_id: int
    new_job_id: int
    relation_type: str  # retry | merge
    origin_job_id: int | None


def retry_relations(new_job_id: int, previous_job_ids: Iterable[int | None], is_merge: bool = False,
                    origins: Mapping[int, int] | None = None) -> tuple[RetryRelation, ...]:
    """One row per distinct earlier job: the inputs' former `job_id` (relation retry) or, for a merge
    job, the producers of its unmerged inputs (`out_job_id`, relation merge). The origin is the first
    job of the chain (`origins[old]`), or the old job itself."""
    relation = "merge" if is_merge else "retry"
    olds = dict.fromkeys(job_id for job_id in previous_job_ids if job_id is not None)
    return tuple(RetryRelation(old, new_job_id, relation, (origins or {}).get(old, old)) for old in olds)
