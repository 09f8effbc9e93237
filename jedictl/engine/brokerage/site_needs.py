"""What one job of a task needs at a given site: cores, memory, scratch disk and walltime.

These are the quantities the job brokerage compares with a site's limits (jedi-inventory.md §6.5) and
that the job generator writes into a job (§6.7: coreCount, minRamCount, maxDiskCount, maxWalltime).
They are computed for the chunk's largest indivisible input (its "atom": one file, or the files or
events of one job when the task fixes them), because if that does not fit, no job of the chunk does.

Units follow JEDI: RAM in MB (per job, or per core with `MBPerCore*`), plus the base RAM for per-core
units, then the 0.9 memory compensation; cpuTime in HS06 s per event (`mHS06...` in thousandths,
`...Fixed` per job); walltime in s per MB of input (`...Fixed` per job); outDiskCount per input byte
(`...PerEvent` per event, `...Fixed` per job) scaled by a kB/MB/GB prefix; workDiskCount in MB.
Seed 000 "Memory probe and brokerage" and "HS06sPerEvent" give the formulas.
"""

from __future__ import annotations

import math

from jedictl.engine.brokerage.model import ChunkInput, Site, TaskRequirements

MIB = 1024 * 1024
_PREFIX_BYTES = {"kB": 1024, "KB": 1024, "MB": MIB, "GB": 1024 * MIB, "TB": 1024 * 1024 * MIB}


def task_cores(task: TaskRequirements, chunk: ChunkInput) -> int:
    """Cores the task asks for (0 = any); merge jobs use mergeCoreCount (default 1)."""
    if chunk.is_merge:
        return task.merge_core_count or 1
    return 1 if task.core_count is None else task.core_count


def job_cores(wanted: int, site: Site) -> int:
    """Cores a job gets at a site (§6.7): single-core stays 1, an unset site (0/None) gives 1, a
    dynamic site (-1) the task's count, otherwise the site's slot size."""
    if wanted == 1 or site.core_count in (None, 0):
        return 1
    if site.core_count == -1:
        return max(wanted, 1)
    return site.core_count


def needed_memory_mb(task: TaskRequirements, chunk: ChunkInput, site: Site, compensation: float,
                     merge_default_mb: int) -> int:
    """Memory a job needs at this site (0 = no requirement): per-core RAM x the job's cores at the site
    + base, then the memory compensation (JobUtils: x 0.9), as JEDI's brokerage compares it."""
    if chunk.is_merge:
        ram = max(task.merge_ram_count or merge_default_mb, chunk.ram_count or 0)
        return math.floor(ram * compensation)
    ram = max(task.ram_count or 0, chunk.ram_count or 0)
    if ram <= 0:
        return 0
    if (task.ram_unit or "").startswith("MBPerCore"):
        ram = ram * job_cores(task_cores(task, chunk), site) + (task.base_ram_count or 0)
    return math.floor(ram * compensation)


def _unit_factor(unit: str | None) -> float:
    if not unit:
        return 1.0
    for prefix, factor in _PREFIX_BYTES.items():
        if unit.startswith(prefix):
            return float(factor)
    return 1.0


def output_bytes(task: TaskRequirements, chunk: ChunkInput) -> float:
    """Estimated output of one job from outDiskCount (0 when the task says nothing)."""
    count = task.out_disk_count or 0
    if count <= 0:
        return 0.0
    unit = task.out_disk_unit or ""
    scaled = count * _unit_factor(unit)
    if unit.endswith("PerEvent"):
        return scaled * chunk.atom_events
    if unit.endswith("Fixed"):
        return scaled
    return scaled * chunk.atom_bytes


def work_disk_mb(task: TaskRequirements) -> float:
    count = task.work_disk_count or 0
    unit = task.work_disk_unit or "MB"  # PanDA gives workDiskCount in MB unless it says otherwise
    if unit in ("B", "bytes"):
        return count / MIB
    return count * _unit_factor(unit) / MIB


def uses_direct_io(task: TaskRequirements, site: Site) -> bool:
    return site.direct_io and not task.use_local_io


def needed_scratch_mb(task: TaskRequirements, chunk: ChunkInput, site: Site, default_output_mb: float) -> float:
    """Scratch disk of one job: output (at least the 1.5 GB default) + work dir + input copied in
    (nothing for the input at direct-IO sites)."""
    output_mb = max(output_bytes(task, chunk) / MIB, default_output_mb)
    input_mb = 0.0 if uses_direct_io(task, site) else chunk.atom_bytes / MIB
    return output_mb + work_disk_mb(task) + input_mb


def uses_hs06(task: TaskRequirements) -> bool:
    """cpuTime-based (HS06) walltime, as opposed to JEDI's older walltime-per-MB model."""
    return task.cpu_time is not None and task.cpu_time > 0


def walltime_defined(task: TaskRequirements) -> bool:
    return uses_hs06(task) or bool(task.walltime and task.walltime > 0)


def expected_walltime_s(task: TaskRequirements, chunk: ChunkInput, cores: int, core_power: float) -> float | None:
    """Expected walltime of the chunk's largest job at a site; None when the task defines none.

    HS06 model (seed 000): wall = cpuTime x nEvents / (cores x corePower x cpuEfficiency) + baseWalltime;
    cpuEfficiency 0 switches the scaling off (wall = baseWalltime). Walltime model: s per MB / cores.
    """
    cores = max(cores, 1)
    if uses_hs06(task):
        unit = task.cpu_time_unit or "HS06sPerEvent"
        per_event = task.cpu_time / 1000.0 if unit.startswith("m") else task.cpu_time  # type: ignore[operator]
        work = per_event if unit.endswith("Fixed") else per_event * chunk.atom_events
        base = task.base_walltime or 0
        efficiency = 100 if task.cpu_efficiency is None else task.cpu_efficiency
        if efficiency <= 0:
            return float(base)
        return base + work / (cores * core_power * efficiency / 100.0)
    if task.walltime and task.walltime > 0:
        if (task.walltime_unit or "").endswith("Fixed"):
            return float(task.walltime)
        return task.walltime * (chunk.atom_bytes / MIB) / cores
    return None
