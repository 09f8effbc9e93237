"""A task split by one of WMCore's algorithms: the spec's `splitting` block (docs/task-spec.md,
docs/splitting.md "WMCore splitting for real tasks").

    splitting: {algorithm: LumiBased, lumis_per_job: 2, splitOnRun: false}

The parameters are WMCore's, checked and typed by the splitter registry that `jedictl split` uses, so a
bad one is refused at submission with the same words. What the task spec says elsewhere about job
sizes is JEDI's splitting and cannot be combined with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from jedictl.errors import BadInput

#: Parameters of WMCore's Harvest that the generator supplies from the store (its jobs), not the author.
GENERATOR_STATE = ("last_job_time", "jobs_running", "sibling_complete")
#: Parameters only the preview takes, and why a task's spec refuses them: WMBSMergeBySize's `unfinished_parents`
#: stands for WMCore's look-up of the parents' jobs, and a real task's inputs are registered outputs, whose
#: producing jobs have ended; FileBased's and MinFileBased's `jobs_per_group` sizes WMCore's job groups, which
#: the preview shows (`group`) but jedictl's jobs do not have -- each is written, brokered and run on its own.
PREVIEW_ONLY = {
    "unfinished_parents": "is for `jedictl split` only: a real task's inputs are outputs whose jobs have ended",
    "jobs_per_group": "is for `jedictl split` only (its `group` column): a task's jobs are not put in job groups, "
                      "each is written and brokered on its own",
}
#: JEDI's per-job splitting options: a WMCore-split task's jobs are cut by its algorithm alone.
JEDI_SPLIT_OPTIONS = ("n_files_per_job", "n_events_per_job", "tgt_num_events_per_job", "n_gb_per_job", "n_max_files_per_job",
                      "max_events_per_job", "respect_lb", "order_by_lb", "max_walltime_hours", "skip_short_output", "order_input_by",
                      "event_service")


@dataclass(frozen=True)
class SplittingDef:
    algorithm: str  # the registry's spelling
    params: Mapping[str, Any]  # WMCore-named values as written (re-parsed by the registry at each use)


def parse_splitting(raw: Any, path: str = "splitting") -> SplittingDef:
    """The block, checked: a known WMCore algorithm and parameters its registry entry accepts."""
    from jedictl.engine.generate.splitters.registry import JEDI, WMCORE_ALGORITHMS, canonical_name

    if not isinstance(raw, Mapping):
        raise BadInput("must be a mapping with an algorithm and its WMCore parameters, e.g. {algorithm: LumiBased, lumis_per_job: 2}", path)
    if not isinstance(raw.get("algorithm"), str) or not raw["algorithm"].strip():
        raise BadInput(f"must name a WMCore algorithm ({', '.join(WMCORE_ALGORITHMS)})", f"{path}.algorithm")
    try:
        name = canonical_name(raw["algorithm"])
    except BadInput:
        raise BadInput(f"unknown algorithm {raw['algorithm']!r} (known: {', '.join(WMCORE_ALGORITHMS)})", f"{path}.algorithm") from None
    if name == JEDI:
        raise BadInput("JEDI's rules split a task by default: leave out the splitting block and use the split section", f"{path}.algorithm")
    params = {str(key): value for key, value in raw.items() if key != "algorithm"}
    for key in params:
        if key in GENERATOR_STATE:
            raise BadInput("is read from the task's jobs by the generator, not given in the spec", f"{path}.{key}")
    check_params(name, params, path)
    for key in params:  # after the algorithm's own check: one that does not take the key says so first
        if key in PREVIEW_ONLY:
            raise BadInput(PREVIEW_ONLY[key], f"{path}.{key}")
    return SplittingDef(name, params)


def check_params(algorithm: str, params: Mapping[str, Any], path: str = "splitting") -> None:
    """Refuse a parameter the algorithm does not know or a value of the wrong type, naming it."""
    try:
        parsed_params(algorithm, params)
    except BadInput as exc:
        key = (exc.path or "").removeprefix("--param ").strip()
        message = str(exc).split(": ", 1)[1] if exc.path else str(exc)
        raise BadInput(message, f"{path}.{key}" if key else path) from None


def parsed_params(algorithm: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of the algorithm by WMCore name, typed, defaults filled in."""
    from jedictl.engine.generate.splitters.registry import WMCORE_ALGORITHMS, param_names, parse_params

    spec = WMCORE_ALGORITHMS[algorithm]
    parsed, factory = parse_params(spec, params)
    values: dict[str, Any] = {}
    for value in (*parsed, factory):
        names = param_names(type(value))
        for field, name in zip([f for f in dataclasses.fields(value) if f.name != "now"], names, strict=True):
            values[name] = getattr(value, field.name)
    return values


def check_task(splitting: SplittingDef, options: Any, datasets: Any, no_input: bool, path_of: Mapping[str, str]) -> Any:
    """The rest of the spec against a WMCore-split task: one master input (parents come with
    include_parents), none of JEDI's per-job options; returns the options it runs with (no scouts --
    WMCore has none --, an open input used while it grows, and, for EventBased, records of events_per_job events each, fed as JEDI feeds
    event-level splitting, so that every job's event range is a record of its own)."""
    if no_input:
        raise BadInput("a task split by a WMCore algorithm reads an input dataset", "no_input")
    for dataset in datasets:
        if not dataset.is_master and dataset.type.value == "input":
            raise BadInput("a task split by a WMCore algorithm reads one input dataset (parents come with include_parents)",
                           dataset.path or "inputs")
    for name in JEDI_SPLIT_OPTIONS:
        if getattr(options, name) not in (None, False):
            raise BadInput(f"cannot be combined with splitting ({splitting.algorithm} cuts the jobs)", path_of.get(name, name))
    # WMCore's subscriptions work on a fileset while it grows: the task takes an open input as it is fed
    # (PanDA's runUntilClosed) and its waiting algorithms hold files back until the dataset closes.
    options = dataclasses.replace(options, skip_scout=True, run_until_closed=True)
    if splitting.algorithm == "EventBased":
        options = dataclasses.replace(options, n_events_per_job=parsed_params("EventBased", splitting.params)["events_per_job"])
    return options
