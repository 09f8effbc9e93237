"""`jedictl split --algorithm jedi`: preview how JEDI would split a file list for a task's options,
without a store. It does what the feeder and the generator do to one master dataset (§4.2 records,
§6.3 read order, §6.6 splitting) and reports the sub-chunks in the split contract.

Parameters are task options by PanDA key (`nFilesPerJob`) or jedictl name (`n_files_per_job`), plus:
`scout`, `merge` (split a scout / merge chunk), `groupBoundaryID` (GB=1..4), and the site's
`maxwdir` (MB), `maxtime` (s), `corecount`, `corepower`, `direct_access_lan` (jobs read directly).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from jedictl.engine.task import options as task_options
from jedictl.engine.task.options import TaskOptions
from jedictl.engine.generate.splitters.events import expand_event_ranges
from jedictl.engine.generate.splitters.jedi import split_chunk
from jedictl.engine.generate.splitters.jedi_limits import (
    DEFAULTS,
    SiteLimits,
    SplitDefaults,
    job_limits,
)
from jedictl.engine.generate.splitters.jedi_model import InputChunk, InputFile, SubChunk
from jedictl.engine.generate.splitters.params import coerce
from jedictl.engine.generate.splitters.wmcore_model import Fileset, PlannedJob
from jedictl.errors import BadInput

#: Preview-only parameters: (type, help).
EXTRA_PARAMS: dict[str, tuple[type, str]] = {
    "scout": (bool, "split as a scout chunk (one file per job unless the task says otherwise)"),
    "merge": (bool, "split as a merge chunk (nFilesPerMergeJob ... rules)"),
    "groupBoundaryID": (int, "split rule GB: 1/2 jobs never mix boundaryIDs; 3/4 only boundaries split"),
    "maxwdir": (int, "site scratch disk per job, MB"),
    "maxtime": (int, "site walltime limit, s"),
    "corecount": (int, "site cores per job"),
    "corepower": (float, "site HS06 per core"),
    "direct_access_lan": (bool, "jobs read their input directly (no copy to scratch)"),
}


def parse_jedi_params(params: Mapping[str, Any]) -> tuple[TaskOptions, dict[str, Any]]:
    """Task options (checked as at submission) and the preview-only values."""
    values: dict[str, Any] = {}
    path_of: dict[str, str] = {}
    extras: dict[str, Any] = {}
    for key, value in params.items():
        path = f"--param {key}"
        if key in EXTRA_PARAMS:
            kind, _help = EXTRA_PARAMS[key]
            extras[key] = coerce(value, kind, {"minimum": None if kind is bool else 0}, path)
            continue
        spec = task_options.BY_PANDA_KEY.get(key) or task_options.BY_NAME.get(key)
        if spec is None:
            raise BadInput("unknown parameter for jedi: give a task option (nFilesPerJob, nEventsPerJob, nGBPerJob, ...) "
                           f"or one of {', '.join(EXTRA_PARAMS)}", path)
        values[spec.name] = task_options.coerce(spec, value.strip() if isinstance(value, str) else value, path)
        path_of[spec.name] = path
    if extras.get("merge") and values.get("merge_output") is None:
        values["merge_output"] = True  # merge rules belong to tasks with merged outputs
    options = task_options.build_options(values, path_of)
    return _as_refined(options), extras


def _as_refined(options: TaskOptions) -> TaskOptions:
    """The refiner's derivations (§3.5, extractCommon): tgtNumEventsPerJob stands for nEventsPerJob,
    and nFilesPerJob = nEventsPerJob // nEventsPerInputFile when a job holds whole files."""
    changes: dict[str, Any] = {}
    if options.n_files_per_job is None and options.n_events_per_job is None and options.tgt_num_events_per_job:
        changes["n_events_per_job"] = options.tgt_num_events_per_job
    per_job = changes.get("n_events_per_job", options.n_events_per_job)
    if options.n_files_per_job is None and options.n_events_per_input_file and per_job and per_job >= options.n_events_per_input_file:
        changes["n_files_per_job"] = per_job // options.n_events_per_input_file
    return dataclasses.replace(options, **changes) if changes else options


def split_with_jedi(fileset: Fileset, params: Mapping[str, Any], defaults: SplitDefaults = DEFAULTS) -> list[PlannedJob]:
    options, extras = parse_jedi_params(params)
    records = master_records(fileset, options)
    site = SiteLimits(
        max_walltime=extras.get("maxtime"),
        core_count=extras.get("corecount"),
        core_power=extras.get("corepower"),
        max_scratch_mb=extras.get("maxwdir"),
        direct_io=bool(extras.get("direct_access_lan")),
    )
    limits = job_limits(options, site, scout=bool(extras.get("scout")), merging=bool(extras.get("merge")),
                        group_boundary_id=extras.get("groupBoundaryID"), defaults=defaults)
    result = split_chunk(InputChunk(tuple(records)), limits)
    return [planned_job(sub_chunk) for sub_chunk in result.sub_chunks]


def master_records(fileset: Fileset, options: TaskOptions) -> list[InputFile]:
    """The records the feeder would write for the master: events per file (nEventsPerInputFile unless
    useRealNumEvents), lumiblock order with respectLB/orderByLB, nFiles, and event ranges."""
    files = list(fileset.files)
    if options.respect_lb or options.order_by_lb:
        files.sort(key=lambda f: (f.lumi_block is None, f.lumi_block or 0, f.lfn))
    if options.n_files is not None:
        files = files[:options.n_files]
    per_file = options.n_events_per_input_file if not options.use_real_num_events else None
    records = [
        InputFile(index, f.lfn, f.size, per_file or f.events or None, boundary_id=f.boundary_id,
                  lumi_block=f.lumi_block, locations=f.locations)
        for index, f in enumerate(files)
    ]
    return expand_event_ranges(
        records, options.n_events_per_job, options.tgt_num_events_per_job,
        n_events_per_input_file=options.n_events_per_input_file,
        skip_short_input=bool(options.skip_short_input),
        first_event=1 + (options.first_event_offset or 0),
    )


def planned_job(sub_chunk: SubChunk) -> PlannedJob:
    """A sub-chunk in the split contract: distinct LFNs, the event span of ranges (${SKIPEVENTS} and
    ${MAXEVENTS} as first/last event), and the sites holding every file of the job."""
    first = sub_chunk.skip_events
    common: list[str] = list(sub_chunk.master[0].locations) if sub_chunk.master else []
    for record in sub_chunk.master[1:]:
        if common:
            common = [site for site in common if site in record.locations]
    return PlannedJob(
        files=sub_chunk.lfns,
        first_event=first,
        last_event=first + sub_chunk.n_events - 1 if first is not None else None,
        lumis=None,
        locations=tuple(common),
        short=sub_chunk.short,
    )
