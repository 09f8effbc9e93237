"""Scout evaluation: the task's resource model measured on its finished scout jobs, the exhausted checks,
and the verdict scouted / exhausted / tobroken (jedi-inventory.md §6.11, §7.2; seed 000 "exhausted").

Units follow JEDI: input sizes in MB (bytes / 2**20); `walltime` in kSI2kseconds per MB (1.5 x the
largest CPU consumption over the largest input, 0 when the longest job ran under an hour); `cpuTime` in
HS06 s per event (mHS06 when below 10); `ramCount` in MB or MBPerCore; `outDiskCount` in kB per MB of
input (or kB per event); `ioIntensity` in kB/s per core; `workDiskCount` in MB. Percentiles interpolate
linearly between the two nearest ranks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import ScoutSettings
from jedictl.model import TaskStatus

MB = 1024 * 1024
#: Core power assumed when neither the host nor the site says (JEDI's final fallback).
DEFAULT_CORE_POWER = 10.0
#: walltime: 1.5 x the largest CPU consumption, counted only when that job consumed an hour or more.
_WALLTIME_MARGIN = 1.5
_WALLTIME_MIN_CONSUMPTION = 3600
#: Jobs with fewer events than this say nothing about output size.
_MIN_EVENTS_FOR_OUTPUT = 10
#: Jobs with fewer events than this (x cores) only count for cpuTime if they ran long.
_MIN_EVENTS_PER_CORE = 10
_LONG_JOB_SECONDS = 6 * 3600
#: The cpuTime check only fires when the scout behind the value ran longer than this.
_WRONG_CPUTIME_MIN_EXEC = timedelta(hours=24)
#: Output per input is capped at 10 MB per MB (in kB).
_OUT_DISK_CAP_KB = 10 * 1024
#: CPU abuse: consumption above wall x cores x this.
_CPU_ABUSE_FACTOR = 2
#: Files per job the "many short jobs" split-rule fix raises nMaxFilesPerJob to.
_SHORT_JOB_MAX_FILES = 200
#: tgtMaxOutputForNG: the nGBPerJob it sets lies between these (GB; JEDI's floor and maxNG).
_TARGET_NG_MIN, _TARGET_NG_MAX = 1, 100
GB = 1024 * MB


@dataclass(frozen=True)
class ScoutJob:
    """One finished scout job: a `jobs` row (id, input_bytes, n_events, output_bytes, wall_time, cpu_time,
    core_count, max_pss) plus the core power of its site (`sites.core_power`)."""

    id: int
    input_bytes: int = 0
    n_events: int | None = None
    output_bytes: int | None = None
    wall_time: float | None = None  # s, end - start
    cpu_time: float | None = None  # s of CPU consumed, all cores together
    core_count: int | None = 1
    max_pss: int | None = None  # kB, as pilots report it
    core_power: float | None = None  # HS06 per core
    work_dir_mb: float | None = None
    pseudo_input: bool = False  # the job read only pseudo (seed/seq number) input
    forced_copy_to_scratch: bool = False  # the site forced copy-to-scratch; excused from the short-job check
    # Its output files (not the log) as tgtMaxOutputForNG reads them: all together, and the largest
    # output dataset's share (a job writes one file or more per output dataset). None: not read.
    output_file_bytes: int | None = None
    largest_output_bytes: int | None = None


@dataclass(frozen=True)
class ScoutRequest:
    """What the task asked for: the user's request (TaskOptions) and the task row's model columns."""

    ram_count: int | None = None  # requested (options.ram_count)
    ram_unit: str | None = "MBPerCore"
    base_ram_count: int | None = 0
    cpu_time: float | None = None  # requested (options.cpu_time)
    cpu_time_unit: str | None = None
    walltime: int | None = None  # tasks.walltime preset
    base_walltime: int | None = 0
    cpu_efficiency: int | None = None
    out_disk_unit: str | None = None
    work_disk_count: int | None = None
    min_cpu_efficiency: int | None = None  # MC, percent
    scout_success_rate: int | None = None  # SS, tenths
    uses_scouts: bool = True
    n_files_per_job: int | None = None
    n_gb_per_job: float | None = None
    n_max_files_per_job: int | None = None
    n_events_per_job: int | None = None
    tgt_max_output_for_ng: int | None = None  # GB: nGBPerJob is reset so the largest output gets this big


@dataclass(frozen=True)
class ScoutCounts:
    """Master-input totals (datasets counters) and the scout outcome counts of distinct jobs."""

    n_files: int = 0
    n_files_finished: int = 0
    n_files_used: int = 0
    n_events: int = 0
    n_events_finished: int = 0
    n_jobs_ok: int = 0  # distinct scout jobs whose files finished
    n_jobs_failed: int = 0  # distinct scout jobs whose files failed for good


@dataclass(frozen=True)
class ScoutThresholds:
    """JEDI's per-label DB-config values (SCOUT_*_<label>, RAM_THR...). None switches a check off."""

    short_exec_minutes: float | None = None
    short_job_tenths: float | None = None
    short_job_min_expected: int | None = None
    change_split_rule: bool = False
    low_cpu_efficiency: int | None = None
    cpu_inefficient_tenths: float | None = None
    cpu_inefficient_min_expected: int | None = None
    high_io_intensity: float | None = 200.0  # kB/s per core above which low CPU efficiency is excused
    min_ok_rate_exhausted: float | None = None  # tenths
    ram_count_min: int | None = None  # SCOUT_RAMCOUNT_MIN
    avalanche_input_ratio: float = 10.0  # GenerateSettings.max_input_gb / scout_max_input_gb
    default_output_mb: float = 1500.0  # InputChunk.defaultOutputSize: the splitter adds it on top of nGBPerJob


@dataclass(frozen=True)
class ScoutStatistics:
    """The `tasks` columns the scouts set (None: left as they are)."""

    walltime: int | None = None
    walltime_unit: str | None = None
    cpu_time: int | None = None
    cpu_time_unit: str | None = None
    ram_count: int | None = None
    ram_unit: str | None = None
    out_disk_count: int | None = None
    out_disk_unit: str | None = None
    io_intensity: int | None = None
    io_intensity_unit: str | None = None
    work_disk_count: int | None = None
    work_disk_unit: str | None = None

    def columns(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class ScoutAssessment:
    outcome: str  # scouted | exhausted | tobroken
    reason: str | None
    statistics: ScoutStatistics
    expected_jobs: int = 0
    expected_jobs_by_events: int | None = None
    new_jobs: int = 0
    success_rate: float | None = None
    median_cpu_efficiency: int | None = None
    split_rule_changes: Mapping[str, Any] = field(default_factory=dict)


def percentile(values: Sequence[float], rank: float) -> tuple[float, int]:
    """The `rank`-th percentile (linear interpolation) and the index, in sorted order, of the upper of the
    two values it was taken from."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * rank / 100.0
    low, high = math.floor(position), math.ceil(position)
    if low == high:
        return float(ordered[low]), high
    return ordered[low] * (high - position) + ordered[high] * (position - low), high


def early_avalanche_due(n_scout_jobs: int, n_finished: int, assessed_at: datetime | None, now: datetime,
                        settings: ScoutSettings) -> bool:
    """Evaluate a scouting task before all its scouts ended: at least half of them finished, and the
    last assessment is older than the assessment interval."""
    if n_scout_jobs <= 0 or n_finished < n_scout_jobs * settings.min_success_fraction:
        return False
    return assessed_at is None or assessed_at + timedelta(minutes=settings.assessment_interval_minutes) <= now


def measure(jobs: Sequence[ScoutJob], request: ScoutRequest, settings: ScoutSettings,
            ram_count_min: int | None = None) -> tuple[ScoutStatistics, dict[str, Any]]:
    """The statistics of §7.2 and the per-job facts the exhausted checks need."""
    facts: dict[str, Any] = {}
    values: dict[str, Any] = {}
    values.update(_out_disk(jobs, request, settings, facts))
    values.update(_walltime(jobs, request, facts))
    values.update(_cpu_time(jobs, request, settings, facts))
    values.update(_ram_count(jobs, request, settings, ram_count_min))
    intensities = [(_input_mb(job) * 1024 + (job.output_bytes or 0) / 1024) / job.wall_time / _cores(job)
                   for job in jobs if job.wall_time]
    if intensities:
        values.update(io_intensity=math.ceil(max(intensities)), io_intensity_unit="kBPerS")
    work = [job.work_dir_mb for job in jobs if job.work_dir_mb is not None]
    if work:
        values.update(work_disk_count=max(int(max(work)), request.work_disk_count or 0), work_disk_unit="MB")
    efficiencies = [math.ceil(job.cpu_time / (_cores(job) * job.wall_time) * 100)
                    for job in jobs if job.cpu_time is not None and job.wall_time]
    facts["efficiencies"] = efficiencies
    facts["median_efficiency"] = int(statistics.median(efficiencies)) if efficiencies else None
    return ScoutStatistics(**values), facts


def _out_disk(jobs: Sequence[ScoutJob], request: ScoutRequest, settings: ScoutSettings, facts: dict[str, Any]) -> dict[str, Any]:
    """Output per MB of input (or per event), in kB, from jobs with at least 10 events when they say."""
    unit = request.out_disk_unit or ""
    if "Fixed" in unit:
        return {}
    per_event = unit.endswith("PerEvent")
    ratios: list[tuple[int, int]] = []  # (output per unit, job id)
    for job in jobs:
        if job.output_bytes is None or (job.n_events is not None and job.n_events < _MIN_EVENTS_FOR_OUTPUT):
            continue
        denominator = job.n_events if per_event else _input_mb(job)
        if denominator:
            ratios.append((math.ceil(job.output_bytes / denominator), job.id))
    if not ratios:
        return {}
    value, upper = percentile([ratio for ratio, _ in ratios], settings.outdisk_rank)
    # The job whose ratio is the upper of the two the percentile was taken from "set" outDiskCount
    # (JEDI tags it): tgtMaxOutputForNG scales that job's outputs.
    facts["out_disk_job"] = sorted(ratios)[upper][1]
    kb = min(value / 1024, _OUT_DISK_CAP_KB)
    return {"out_disk_count": int(kb), "out_disk_unit": "kBPerEvent" if per_event else "kB"}


def _walltime(jobs: Sequence[ScoutJob], request: ScoutRequest, facts: dict[str, Any]) -> dict[str, Any]:
    """1.5 x the largest CPU consumption over the largest input; a larger (or negative) preset wins."""
    timed = [job for job in jobs if job.cpu_time is not None]
    if not timed:
        return {}
    longest = max(timed, key=lambda job: job.cpu_time or 0.0)
    facts["max_cpu_consumption"] = (longest.cpu_time, longest.wall_time or 0.0, _cores(longest))
    consumption = longest.cpu_time or 0.0
    if consumption < _WALLTIME_MIN_CONSUMPTION:
        consumption = 0.0  # short scouts say nothing about walltime
    largest_input = max(_input_mb(job) for job in jobs)
    walltime = math.ceil(_WALLTIME_MARGIN * consumption / largest_input) if largest_input else 0
    if request.walltime is not None and (request.walltime > walltime or request.walltime < 0):
        walltime = request.walltime
    return {"walltime": int(walltime), "walltime_unit": "kSI2kseconds"}


def _cpu_time(jobs: Sequence[ScoutJob], request: ScoutRequest, settings: ScoutSettings, facts: dict[str, Any]) -> dict[str, Any]:
    """HS06 s per event = (wall - baseWalltime) x core power x cores x cpuEfficiency, its 95th percentile
    x 1.5; jobs with few events per core only count when they ran long (or read pseudo input)."""
    if (request.cpu_time_unit or "").endswith("Fixed"):
        return {}
    efficiency = request.cpu_efficiency if request.cpu_efficiency is not None else 100
    samples: list[tuple[float, float]] = []  # (HS06 s per event, exec time)
    for job in jobs:
        if job.wall_time is None:
            continue
        cores = _cores(job)
        hs06 = max(job.wall_time - (request.base_walltime or 0), 0.0) * (job.core_power or DEFAULT_CORE_POWER) * cores * efficiency / 100.0
        events = job.n_events or 0
        if events > 0:
            hs06 /= events
        if not events or events >= _MIN_EVENTS_PER_CORE * cores or job.pseudo_input or job.wall_time > _LONG_JOB_SECONDS:
            samples.append((hs06, job.wall_time))
    if not samples:
        return {}
    value, upper = percentile([hs06 for hs06, _ in samples], settings.cputime_rank)
    value *= settings.cputime_margin
    facts["cpu_time_hs06"] = value
    facts["cpu_time_exec"] = timedelta(seconds=sorted(samples)[upper][1])
    if value < 10:
        return {"cpu_time": math.ceil(value * 1000), "cpu_time_unit": "mHS06sPerEvent"}
    return {"cpu_time": math.ceil(value), "cpu_time_unit": "HS06sPerEvent"}


def _ram_count(jobs: Sequence[ScoutJob], request: ScoutRequest, settings: ScoutSettings,
               ram_count_min: int | None) -> dict[str, Any]:
    """75th percentile of PSS (per core, minus baseRamCount, for MBPerCore) + 10 %, in MB."""
    unit = request.ram_unit or "MB"
    if unit == "MBPerCoreFixed":
        return {}
    pss = []
    for job in jobs:
        if not job.max_pss or job.max_pss <= 0:
            continue
        if unit == "MBPerCore":
            pss.append(math.ceil((job.max_pss - (request.base_ram_count or 0) * 1024) / _cores(job)))
        else:
            pss.append(job.max_pss)
    if not pss:
        return {}
    mb = int(percentile(pss, settings.ramcount_rank)[0] * (100 + settings.ramcount_margin_percent) // 100 / 1024)
    mb = max(mb, 1, ram_count_min or 0)
    return {"ram_count": mb, "ram_unit": "MBPerCore" if unit == "MBPerCore" else "MB"}


def evaluate(
    jobs: Sequence[ScoutJob],
    request: ScoutRequest,
    counts: ScoutCounts,
    settings: ScoutSettings,
    *,
    forced: bool = False,
    exhausted_checks: bool = True,
    thresholds: ScoutThresholds = ScoutThresholds(),
) -> ScoutAssessment:
    """Measure the scouts and decide: `scouted`, `exhausted` (a check failed) or `tobroken` (no or not
    enough scouts succeeded). A forced avalanche (operator command) is scouted whatever the scouts did;
    its statistics are still written and the exhausted checks still apply when the scouts succeeded."""
    stats, facts = measure(jobs, request, settings, thresholds.ram_count_min)
    expected, by_events, new_jobs = _expected_jobs(len(jobs), counts)
    rate = None
    success_floor = request.scout_success_rate
    low_rate_tenths = None
    if success_floor and thresholds.min_ok_rate_exhausted and success_floor > thresholds.min_ok_rate_exhausted:
        # between the lower rate and the requested one the task is exhausted, below it broken
        low_rate_tenths, success_floor = success_floor, thresholds.min_ok_rate_exhausted
    verdict, reason = TaskStatus.SCOUTED, None
    if not jobs:
        verdict, reason = TaskStatus.TOBROKEN, "no scout jobs succeeded"
    elif request.uses_scouts and counts.n_jobs_ok + counts.n_jobs_failed > 0:
        rate = counts.n_jobs_ok / (counts.n_jobs_ok + counts.n_jobs_failed)
        if success_floor and rate < success_floor / 10:
            verdict, reason = TaskStatus.TOBROKEN, "not enough scout jobs succeeded"
    changes: dict[str, Any] = {}
    if verdict == TaskStatus.SCOUTED and exhausted_checks and new_jobs > settings.min_new_jobs_for_checks:
        reason, changes = _exhausted_reason(jobs, request, stats, facts, settings, thresholds,
                                            expected, by_events, rate, low_rate_tenths)
        if reason:
            verdict = TaskStatus.EXHAUSTED
    if forced and verdict == TaskStatus.TOBROKEN:
        verdict, reason = TaskStatus.SCOUTED, "avalanche forced by command"
    if "n_gb_per_job" not in changes:  # the short-jobs fix drops nGBPerJob: it is not set again (JEDI's order)
        changes.update(measurement_changes(jobs, request, stats, facts, thresholds))
    return ScoutAssessment(verdict, reason, stats, expected, by_events, new_jobs, rate,
                           facts["median_efficiency"], changes)


def measurement_changes(jobs: Sequence[ScoutJob], request: ScoutRequest, stats: ScoutStatistics, facts: Mapping[str, Any],
                        thresholds: ScoutThresholds) -> dict[str, Any]:
    """The task options a measurement changes by itself (whatever the verdict, as JEDI writes them with
    the statistics): nGBPerJob reset for tgtMaxOutputForNG."""
    target = target_n_gb_per_job(jobs, request, stats, facts, thresholds)
    return {"n_gb_per_job": target} if target is not None else {}


def target_n_gb_per_job(jobs: Sequence[ScoutJob], request: ScoutRequest, stats: ScoutStatistics, facts: Mapping[str, Any],
                        thresholds: ScoutThresholds) -> int | None:
    """tgtMaxOutputForNG (split rule TN; seed 000 "tgtMaxOutputForNG", jedi-inventory.md §7.2): after the
    scouts nGBPerJob is reset so that a job's largest output reaches the target size.

    Read from the scout that set outDiskCount: its outputs (not the log) scale together, so a job whose
    largest output dataset gets `target` GB writes target x total / largest in all. outDiskCount turns
    that into the input it takes (MB of input, or events, per output byte); nGBPerJob is input + output
    -- plus, per event, the work directory and the job's input per event -- less the default output the
    splitter adds on top of nGBPerJob, in whole GB between 1 and 100. None without a target, without
    outDiskCount (a *Fixed unit, or no usable scout) or when that scout's output sizes are unknown."""
    target = request.tgt_max_output_for_ng
    job_id = facts.get("out_disk_job")
    if not target or stats.out_disk_count is None or job_id is None:
        return None
    job = next((job for job in jobs if job.id == job_id), None)
    if job is None or not job.output_file_bytes or not job.largest_output_bytes:
        return None
    expected_out = job.output_file_bytes * target * GB // job.largest_output_bytes
    per_unit = stats.out_disk_count * 1024 or 1  # output bytes per MB of input, or per event
    scale = expected_out // per_unit  # MB of input, or events
    if (stats.out_disk_unit or "").endswith("PerEvent"):
        if not job.n_events:
            return None
        expected_in = job.input_bytes * scale // job.n_events
        work_mb = stats.work_disk_count if stats.work_disk_count is not None else (request.work_disk_count or 0)
        size = expected_out + expected_in + work_mb * MB - thresholds.default_output_mb * MB
    else:
        size = expected_out + scale * MB - thresholds.default_output_mb * MB
    n_gb = size / GB
    if n_gb <= 0:
        return _TARGET_NG_MIN
    return int(min(n_gb, _TARGET_NG_MAX))


def _exhausted_reason(jobs: Sequence[ScoutJob], request: ScoutRequest, stats: ScoutStatistics, facts: Mapping[str, Any],
                      settings: ScoutSettings, thresholds: ScoutThresholds, expected: int, by_events: int | None,
                      rate: float | None, low_rate_tenths: float | None) -> tuple[str | None, dict[str, Any]]:
    """The first exhausted check (§7.2, in JEDI's order) that fails, with its message."""
    requested_cpu = request.cpu_time
    if requested_cpu and (request.cpu_time_unit or "").startswith("m"):
        requested_cpu /= 1000.0
    scout_cpu = facts.get("cpu_time_hs06")
    if (requested_cpu and scout_cpu is not None and settings.wrong_cputime_threshold > 0
            and scout_cpu > settings.wrong_cputime_threshold * requested_cpu
            and facts["cpu_time_exec"] > _WRONG_CPUTIME_MIN_EXEC):
        return (f"scout cpuTime ({scout_cpu:.1f} HS06s/event) is larger than {settings.wrong_cputime_threshold:g} x "
                f"the requested cpuTime ({requested_cpu:g}) and the scout ran {facts['cpu_time_exec']}"), {}

    ram_limit = settings.ram_exhausted_gb * 1000
    if ((request.ram_unit or "").startswith("MBPerCore") and stats.ram_count is not None
            and request.ram_count is not None and request.ram_count < ram_limit < stats.ram_count):
        return (f"scout ramCount {stats.ram_count} MB per core is larger than {ram_limit:g} MB while the requested "
                f"{request.ram_count} MB is less"), {}

    changes: dict[str, Any] = {}
    short_reason = _short_jobs_reason(jobs, request, thresholds, expected, by_events)
    if short_reason == "change":
        # JEDI's fix: drop nFilesPerJob and nGBPerJob, raise nMaxFilesPerJob to 200
        changes = {name: None for name in ("n_files_per_job", "n_gb_per_job") if getattr(request, name) is not None}
        if request.n_max_files_per_job is not None and request.n_max_files_per_job < _SHORT_JOB_MAX_FILES:
            changes["n_max_files_per_job"] = _SHORT_JOB_MAX_FILES
    elif short_reason:
        return short_reason, {}

    if not changes:
        median = facts["median_efficiency"]
        waived = (thresholds.high_io_intensity is not None and stats.io_intensity is not None
                  and stats.io_intensity > thresholds.high_io_intensity)
        if request.min_cpu_efficiency and median is not None:
            if median < request.min_cpu_efficiency and not waived:
                return f"median CPU efficiency {median}% is less than minCpuEfficiency {request.min_cpu_efficiency}%", {}
        elif (thresholds.low_cpu_efficiency and thresholds.cpu_inefficient_tenths and thresholds.cpu_inefficient_min_expected
              and facts["efficiencies"] and not waived):
            slow = sum(1 for value in facts["efficiencies"] if value < thresholds.low_cpu_efficiency)
            if (slow / len(facts["efficiencies"]) >= thresholds.cpu_inefficient_tenths / 10
                    and max(expected, by_events or 0) > thresholds.cpu_inefficient_min_expected):
                return (f"{slow}/{len(facts['efficiencies'])} scouts had a CPU efficiency below "
                        f"{thresholds.low_cpu_efficiency}% and {max(expected, by_events or 0)} jobs are expected"), {}

    abuse = facts.get("max_cpu_consumption")
    if abuse and abuse[1] and abuse[0] > abuse[1] * abuse[2] * _CPU_ABUSE_FACTOR:
        return (f"CPU consumption {abuse[0]:g} s is larger than wall time x cores x {_CPU_ABUSE_FACTOR} "
                f"({abuse[1]:g} x {abuse[2]} x {_CPU_ABUSE_FACTOR}): a multi-core payload on single-core slots?"), changes

    if low_rate_tenths is not None and rate is not None and rate < low_rate_tenths / 10:
        return f"scout success rate {rate:.2f} is below the requested {low_rate_tenths / 10:g}", changes
    return None, changes


def _short_jobs_reason(jobs: Sequence[ScoutJob], request: ScoutRequest, thresholds: ScoutThresholds,
                       expected: int, by_events: int | None) -> str | None:
    """'many short jobs': a reason to exhaust the task, "change" to fix its split rule instead, or None."""
    limit, tenths, min_expected = thresholds.short_exec_minutes, thresholds.short_job_tenths, thresholds.short_job_min_expected
    if not (limit and tenths and min_expected):
        return None
    counted = [job for job in jobs if job.wall_time is not None and not (job.forced_copy_to_scratch and job.wall_time <= limit * 60)]
    short = [job for job in counted if job.wall_time <= limit * 60]  # type: ignore[operator]
    if not counted or len(short) / len(counted) < tenths / 10:
        return None
    estimates = [expected] + ([by_events] if by_events is not None else [])
    if min(estimates) < min_expected:
        return None
    if thresholds.change_split_rule and (request.n_files_per_job is not None or request.n_gb_per_job is not None
                                         or (request.n_max_files_per_job or _SHORT_JOB_MAX_FILES) < _SHORT_JOB_MAX_FILES):
        return "change"
    if request.uses_scouts:
        longest = max(job.wall_time for job in short)  # type: ignore[type-var]
        if int(longest * thresholds.avalanche_input_ratio / 60) > limit:
            return None  # with the full input size per job, jobs will be long enough
    return (f"{len(short)}/{len(counted)} scout jobs ran shorter than {limit:g} min and {min(estimates)} jobs are "
            f"expected (at least {min_expected})")


def _expected_jobs(n_scouts: int, counts: ScoutCounts) -> tuple[int, int | None, int]:
    """Jobs the whole task and its remaining files will need, scaled from what the scouts did."""
    if not counts.n_files_finished or not n_scouts:
        return 0, None, 0
    expected = counts.n_files * n_scouts // counts.n_files_finished
    new_jobs = (counts.n_files - counts.n_files_used) * n_scouts // counts.n_files_finished
    by_events = counts.n_events * n_scouts // counts.n_events_finished if counts.n_events_finished else None
    return expected, by_events, max(new_jobs, 0)


def _input_mb(job: ScoutJob) -> float:
    return job.input_bytes / MB


def _cores(job: ScoutJob) -> int:
    return job.core_count if job.core_count and job.core_count > 0 else 1
