"""Every splitting algorithm by name, with its parameters and their defaults, and the one entry point
`jedictl split` calls: `split_fileset(name, fileset, params)`.

WMCore's algorithms take WMCore's parameter names (peers.md §1.4); `jedi` takes JEDI's task options by
their PanDA or jedictl names (see `jedi_preview`). Values may be typed or text from `--param k=v`:
text is read as the parameter's type (JSON for lists and objects, or comma-separated lists).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, get_type_hints

from jedictl.engine.generate.splitters import jedi_preview
from jedictl.engine.generate.splitters.jedi_limits import DEFAULTS, SplitDefaults
from jedictl.engine.generate.splitters.params import coerce
from jedictl.engine.generate.splitters.wmcore_files import (
    EventBasedParams,
    FileBasedParams,
    MinFileBasedParams,
    RunBasedParams,
    SiblingProcessingBasedParams,
    SizeBasedParams,
    event_based,
    file_based,
    min_file_based,
    run_based,
    sibling_processing_based,
    size_based,
)
from jedictl.engine.generate.splitters.wmcore_lumis import (
    EventAwareLumiBasedParams,
    LumiBasedParams,
    event_aware_lumi_based,
    lumi_based,
)
from jedictl.engine.generate.splitters.wmcore_merge import (
    HarvestParams,
    HarvestState,
    ParentlessMergeBySizeParams,
    WMBSMergeBySizeParams,
    harvest,
    parentless_merge_by_size,
    wmbs_merge_by_size,
)
from jedictl.engine.generate.splitters.wmcore_model import Fileset, JobFactoryParams, PlannedJob
from jedictl.errors import BadInput

JEDI = "jedi"


@dataclass(frozen=True)
class Algorithm:
    name: str
    summary: str
    param_types: tuple[type, ...]  # parsed from the parameters, passed in this order after the fileset
    run: Callable[..., list[PlannedJob]]  # (fileset, *params, factory)
    needs_runs: bool = False


def _run_harvest(fileset: Fileset, params: HarvestParams, state: HarvestState, factory: JobFactoryParams) -> list[PlannedJob]:
    # Harvest also reads what is known of earlier harvest jobs, parsed like a second parameter set.
    return harvest(fileset, params, factory, state)


WMCORE_ALGORITHMS: dict[str, Algorithm] = {
    a.name: a for a in (
        Algorithm("FileBased", "files_per_job files per job, files sorted by LFN", (FileBasedParams,), file_based),
        Algorithm("MinFileBased", "like FileBased, but only full jobs while the fileset is open", (MinFileBasedParams,), min_file_based),
        Algorithm("EventBased", "each file cut into ranges of events_per_job events", (EventBasedParams,), event_based),
        Algorithm("LumiBased", "lumis_per_job lumi sections per job", (LumiBasedParams,), lumi_based),
        Algorithm("EventAwareLumiBased", "lumis per job adapted to reach events_per_job events", (EventAwareLumiBasedParams,),
                  event_aware_lumi_based),
        Algorithm("SizeBased", "files up to size_per_job per job", (SizeBasedParams,), size_based),
        Algorithm("RunBased", "files of one run per job, files_per_job at most", (RunBasedParams,), run_based, needs_runs=True),
        Algorithm("ParentlessMergeBySize", "merge jobs between min_merge_size and max_merge_size", (ParentlessMergeBySizeParams,),
                  parentless_merge_by_size),
        Algorithm("WMBSMergeBySize", "merge jobs of whole merge units (the outputs of one parent), by size and run",
                  (WMBSMergeBySizeParams,), wmbs_merge_by_size),
        Algorithm("SiblingProcessingBased", "files_per_job files per job over files all siblings finished",
                  (SiblingProcessingBasedParams,), sibling_processing_based),
        Algorithm("Harvest", "one job over all files per run (or per location), periodic or at the end",
                  (HarvestParams, HarvestState), _run_harvest),
    )
}
NAMES = (*WMCORE_ALGORITHMS, JEDI)


def canonical_name(name: str) -> str:
    """The registered spelling of an algorithm name (matched without regard to case)."""
    for known in NAMES:
        if known.lower() == name.strip().lower():
            return known
    raise BadInput(f"unknown algorithm {name!r} (known: {', '.join(NAMES)})", "--algorithm")


def split_fileset(
    algorithm: str,
    fileset: Fileset,
    params: Mapping[str, Any] | None = None,
    *,
    now: float = 0.0,
    defaults: SplitDefaults = DEFAULTS,
) -> list[PlannedJob]:
    """Split `fileset` with the named algorithm; `now` (epoch seconds) is the clock of time-based rules."""
    name = canonical_name(algorithm)
    params = dict(params or {})
    if name == JEDI:
        return jedi_preview.split_with_jedi(fileset, params, defaults)
    spec = WMCORE_ALGORITHMS[name]
    parsed, factory = parse_params(spec, params, now)
    if spec.needs_runs:
        for index, file in enumerate(fileset.files):
            if not file.runs:
                raise BadInput(f"{name} needs the run of every file", f"files[{index}].runs")
    if any(getattr(p, "include_parents", False) for p in parsed) and fileset.files and not any(f.parents for f in fileset.files):
        # WMCore refuses IncludeParents when the input dataset has no parents (validateInputDatasSetAndParentFlag).
        raise BadInput("is true but no input file has parents (files[].parents)", "--param include_parents")
    return spec.run(fileset, *parsed, factory)


def parse_params(spec: Algorithm, params: Mapping[str, Any], now: float = 0.0) -> tuple[list[Any], JobFactoryParams]:
    """The algorithm's parameter objects and the JobFactory's, from WMCore-named values."""
    remaining = dict(params)
    parsed = [_build(kind, remaining) for kind in spec.param_types]
    factory = dataclasses.replace(_build(JobFactoryParams, remaining), now=now)
    if remaining:
        key = next(iter(remaining))
        elsewhere = [other.name for other in WMCORE_ALGORITHMS.values()
                     if any(key in param_names(kind) for kind in other.param_types)]
        if elsewhere:
            # e.g. include_parents: an algorithm of WMCore that does not read it refuses it here.
            raise BadInput(f"unknown parameter for {spec.name}; only {', '.join(elsewhere)} take it", f"--param {key}")
        known = ", ".join(sorted(name for kind in (*spec.param_types, JobFactoryParams) for name in param_names(kind)))
        raise BadInput(f"unknown parameter for {spec.name} (known: {known})", f"--param {key}")
    return parsed, factory


def param_names(kind: type) -> list[str]:
    """The names a parameter dataclass accepts: WMCore's spelling where it has one."""
    return [f.metadata.get("wmcore") or f.name for f in dataclasses.fields(kind) if f.name != "now"]


def _build(kind: type, remaining: dict[str, Any]) -> Any:
    hints = get_type_hints(kind)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        if f.name == "now":
            continue
        for key in {f.metadata.get("wmcore") or f.name, f.name}:
            if key in remaining:
                values[f.name] = coerce(remaining.pop(key), hints[f.name], f.metadata, f"--param {key}")
    return kind(**values)


def describe() -> list[dict[str, Any]]:
    """Every algorithm's parameters with their defaults (for docs and `--help`-style listings)."""
    rows = []
    for spec in WMCORE_ALGORITHMS.values():
        for kind in spec.param_types:
            for f in dataclasses.fields(kind):
                rows.append({"algorithm": spec.name, "parameter": f.metadata.get("wmcore") or f.name,
                             "default": f.default, "help": f.metadata.get("help", "")})
    return rows
