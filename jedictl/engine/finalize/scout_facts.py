"""What the scout policy reads, built from store rows: one `ScoutJob` per finished job, the task's
`ScoutRequest`, the master totals, and the task columns a measurement writes back
(jedi-inventory.md §7.2; the policy itself is engine.finalize.scouts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jedictl.config import Settings
from jedictl.engine.task.final_status import DatasetRecord, masters
from jedictl.engine.task.options import TaskOptions
from jedictl.engine.shares.resource_types import load_resource_types, match_resource_type, ram_per_core
from jedictl.engine.finalize.scouts import ScoutAssessment, ScoutCounts, ScoutJob, ScoutRequest, ScoutStatistics, ScoutThresholds
from jedictl.model import DatasetStatus

#: The unit a task's walltime carries once scouts (or the first finished jobs) measured it.
MEASURED_WALLTIME_UNIT = "kSI2kseconds"
#: outDiskCount as output bytes per input byte (what brokerage, splitting and job disk sizes read).
OUT_DISK_RATIO_UNIT = "B"


def scout_job(row: Any, output_sizes: tuple[int, int] | None = None) -> ScoutJob:
    """A `store.completion.finished_jobs` row; the wall time falls back to end - start. `output_sizes`:
    (its output files' bytes, the largest output dataset's bytes) from `store.completion.output_sizes`,
    read only for a task with tgtMaxOutputForNG."""
    wall = row.wall_time
    if wall is None and row.started_at is not None and row.ended_at is not None:
        wall = max((row.ended_at - row.started_at).total_seconds(), 0.0)
    total, largest = output_sizes if output_sizes is not None else (None, None)
    return ScoutJob(row.id, input_bytes=int(row.input_bytes or 0), n_events=row.n_events, output_bytes=row.output_bytes,
                    wall_time=wall, cpu_time=row.cpu_time, core_count=row.core_count, max_pss=row.max_pss,
                    core_power=row.core_power, pseudo_input=bool(row.pseudo_input), output_file_bytes=total,
                    largest_output_bytes=largest)


def scout_request(task: Any, options: TaskOptions) -> ScoutRequest:
    """What the user asked for (the options) and the model columns of the task row."""
    return ScoutRequest(
        ram_count=options.ram_count if options.ram_count is not None else task.ram_count, ram_unit=task.ram_unit,
        base_ram_count=task.base_ram_count, cpu_time=options.cpu_time, cpu_time_unit=task.cpu_time_unit, walltime=task.walltime,
        base_walltime=task.base_walltime, cpu_efficiency=task.cpu_efficiency, out_disk_unit=task.out_disk_unit,
        work_disk_count=task.work_disk_count, min_cpu_efficiency=options.min_cpu_efficiency,
        scout_success_rate=options.scout_success_rate, uses_scouts=not options.skip_scout,
        n_files_per_job=options.n_files_per_job, n_gb_per_job=options.n_gb_per_job, n_max_files_per_job=options.n_max_files_per_job,
        n_events_per_job=options.n_events_per_job, tgt_max_output_for_ng=options.tgt_max_output_for_ng,
    )


def scout_counts(datasets: Sequence[DatasetRecord], n_jobs_ok: int, n_jobs_failed: int) -> ScoutCounts:
    live = [d for d in masters(datasets) if d.status != DatasetStatus.REMOVED]
    return ScoutCounts(n_files=sum(d.n_files for d in live), n_files_finished=sum(d.n_files_finished for d in live),
                       n_files_used=sum(d.n_files_used for d in live), n_events=sum(d.n_events for d in live),
                       n_events_finished=sum(d.n_events_used for d in live), n_jobs_ok=n_jobs_ok, n_jobs_failed=n_jobs_failed)


def thresholds(settings: Settings) -> ScoutThresholds:
    generate = settings.generate
    ratio = generate.max_input_gb / generate.scout_max_input_gb if generate.scout_max_input_gb else 10.0
    return ScoutThresholds(avalanche_input_ratio=ratio, default_output_mb=settings.brokerage.default_output_size_mb)


def task_values(task: Any, options: TaskOptions, statistics: ScoutStatistics, settings: Settings,
                assessment: ScoutAssessment | None = None, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `tasks` columns a measurement sets: the statistics, a walltime unit that says "measured"
    (so the task is not measured again), the resource type for the new RAM, and the option changes --
    the split-rule fix of the many-short-jobs check, nGBPerJob for tgtMaxOutputForNG -- written into
    the options (`changes`: those of a measurement without a verdict, scouts.measurement_changes)."""
    values = statistics.columns()
    values.setdefault("walltime_unit", task.walltime_unit or MEASURED_WALLTIME_UNIT)
    if values.get("out_disk_unit") == "kB":
        # JEDI's kB of output per MB of input, stored as the ratio every reader of the column uses:
        # output bytes per input byte (unit "B"; docs/architecture.md).
        values["out_disk_count"] = values["out_disk_count"] / 1024
        values["out_disk_unit"] = OUT_DISK_RATIO_UNIT
    if "ram_count" in values:
        cores = task.core_count or 1
        per_core = ram_per_core(values["ram_count"], values.get("ram_unit", task.ram_unit), task.base_ram_count, cores,
                                settings.refine.memory_compensation)
        values["resource_type"] = match_resource_type(load_resource_types(settings.resource_types), cores, per_core) or task.resource_type
    changes = dict(assessment.split_rule_changes) if assessment is not None else dict(changes or {})
    if changes:
        stored = dict(task.options or {})
        for name, value in changes.items():
            if value is None:
                stored.pop(name, None)
            else:
                stored[name] = value
        values["options"] = stored
    return values
