"""Typed task options: one declaration per option drives validation, both input formats, the PanDA
`splitRule` export and `docs/task-spec.md`.

Each field's metadata names its PanDA task-parameter key, its two-letter split-rule code (if JEDI has
one), the section it belongs to in jedictl's own spec, limits, and a help line
(reference: jedi-inventory.md §3.3-3.5).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, get_type_hints

from jedictl.errors import BadInput

SECTIONS = ("split", "retry", "scouts", "completion", "dependencies", "placement", "merge", "resources", "events")
#: The widest value an integer option may take when it declares no maximum of its own (an INTEGER column).
INT32_MAX = 2**31 - 1


def _opt(
    section: str,
    panda: str,
    help: str,
    code: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] | None = None,
    aliases: tuple[str, ...] = (),
    default: Any = None,
) -> Any:
    return field(
        default=default,
        metadata={
            "section": section, "panda": panda, "help": help, "code": code, "minimum": minimum,
            "maximum": maximum, "choices": choices, "aliases": aliases,
        },
    )


@dataclass(frozen=True)
class TaskOptions:
    # --- splitting (jedi-inventory §3.4, §6.6)
    n_files_per_job: int | None = _opt("split", "nFilesPerJob", "exactly this many master input files per job", "NF", 1, 1000)
    n_events_per_job: int | None = _opt("split", "nEventsPerJob", "event-level splitting: events per job", "NE", 1)
    tgt_num_events_per_job: int | None = _opt("split", "tgtNumEventsPerJob", "split each file into ~equal ranges near this many events", None, 1)
    n_gb_per_job: float | None = _opt("split", "nGBPerJob", "at most this much input+output+work disk (GB) per job", "NG", 0.001)
    n_max_files_per_job: int | None = _opt("split", "nMaxFilesPerJob", "at most this many input files per job (default 200)", "MF", 1, 1000)
    max_events_per_job: int | None = _opt("split", "maxEventsPerJob", "at most this many events per job", "MX", 1)
    n_events_per_input_file: int | None = _opt("split", "nEventsPerInputFile", "events in each input file, when the catalog does not say", "EI", 1, aliases=("nEventsPerFile",))
    n_files: int | None = _opt("split", "nFiles", "use at most this many master input files", None, 1)
    n_events: int | None = _opt("split", "nEvents", "use at most this many events (no-input tasks: events to generate)", None, 1)
    min_granularity: int | None = _opt("split", "nEventsPerRange", "dynamic number of events per job, in multiples of this", "DY", 1, aliases=("minGranularity",))
    max_walltime_hours: int | None = _opt("split", "maxWalltime", "expected walltime per job at most this many hours", "MW", 1)
    respect_lb: bool | None = _opt("split", "respectLB", "never mix lumiblocks in a job", "RL")
    order_by_lb: bool | None = _opt("split", "orderByLB", "order input files by lumiblock then name", "OL")
    respect_split_rule: bool | None = _opt("split", "respectSplitRule", "scouts and released chunks follow the full split rules", "RR")
    skip_short_input: bool | None = _opt("split", "skipShortInput", "skip files with fewer events than nEventsPerInputFile")
    skip_short_output: bool | None = _opt("split", "skipShortOutput", "drop the short last chunk")
    use_real_num_events: bool | None = _opt("split", "useRealNumEvents", "use the catalog's per-file event counts even with n_events_per_input_file (which otherwise sets every file's count)", "UE")
    order_input_by: str | None = _opt("split", "orderInputBy", "eventsAlignment: input files whose events fill whole jobs (a multiple of n_events_per_job) first, then by descending events; needs n_events_per_job", "OI", choices=("eventsAlignment",))
    add_nth_field_to_lfn: str | None = _opt("split", "addNthFieldToLFN", "fields of the input name joined into ${MIDDLENAME} (comma list of numbers)", "AN")
    use_file_as_source_lfn: bool | None = _opt("split", "useFileAsSourceLFN", "take MIDDLENAME fields from the input file name", "UF")
    max_num_jobs: int | None = _opt("split", "maxNumJobs", "generate at most this many jobs", "MN", 1)
    pfn_list: list | None = _opt("split", "pfnList", "explicit input file URLs instead of a catalog dataset (suffix ^N gives N events)", "PL")
    # Set from the `offset` of the job-parameter item that holds ${RNDMSEED} / ${FIRSTEVENT} (PanDA).
    random_seed_offset: int | None = _opt("split", "", "added to every random seed (${RNDMSEED})", "RS", 0)
    first_event_offset: int | None = _opt("split", "", "added to the first-event numbering (${FIRSTEVENT} = 1 + offset)", "FT", 0)
    # --- retries (§10)
    max_attempt: int | None = _opt("retry", "maxAttempt", "attempts per input file (default 3)", None, 1, 1000)
    max_failure: int | None = _opt("retry", "maxFailure", "genuine failures per input file", None, 1, 1000)
    disable_auto_retry: bool | None = _opt("retry", "disableAutoRetry", "one attempt per file", "DR")
    retry_ram_offset: int | None = _opt("retry", "retryRamOffset", "increase_memory retries step RAM to offset + n x retry_ram_step (MB, default 0; needs retry_ram_step)", "RX", 0)
    retry_ram_step: int | None = _opt("retry", "retryRamStep", "increase_memory retries raise RAM to the next offset + n x this (MB) instead of the 1000-8000 ladder", "RY", 1)
    retry_ram_max: int | None = _opt("retry", "retryRamMax", "increase_memory retries never raise RAM above this (MB; per core with MBPerCore)", "RZ", 1)
    # --- scouts (§6.11, §7.2)
    skip_scout: bool | None = _opt("scouts", "skipScout", "run no scout jobs")
    scout_success_rate: int | None = _opt("scouts", "scoutSuccessRate", "required scout success, in tenths (5 = 50 %)", "SS", 0, 10)
    min_cpu_efficiency: int | None = _opt("scouts", "minCpuEfficiency", "minimum scout CPU efficiency (%)", "MC", 0, 100)
    tgt_max_output_for_ng: int | None = _opt("scouts", "tgtMaxOutputForNG", "target size (GB) of a job's largest output: after the scouts n_gb_per_job is reset so that the largest output of the scout that set out_disk_count, scaled up, reaches it; not with n_files_per_job or n_events_per_job", "TN", 1)
    # --- completion (§7.3)
    goal: float | None = _opt("completion", "goal", "completeness goal in percent", None, 0.1, 100)
    fail_when_goal_unreached: bool | None = _opt("completion", "failWhenGoalUnreached", "finished below the goal becomes failed", "FG")
    use_exhausted: bool | None = _opt("completion", "useExhausted", "finished below the goal becomes exhausted (retryable)", "UX")
    disable_auto_finish: bool | None = _opt("completion", "disableAutoFinish", "no automatic finish at the goal or from exhausted", "DF")
    allow_empty_input: bool | None = _opt("completion", "allowEmptyInput", "an empty input finishes the task instead of breaking it", "AE")
    allow_partial_finish: bool | None = _opt("completion", "allowPartialFinish", "a job may finish having processed part of its input", "AP")
    no_auto_pause: bool | None = _opt("completion", "noAutoPause", "never pause on a high failure rate", "NP")
    no_throttle: bool | None = _opt("completion", "noThrottle", "never throttle on repeated failures")
    # --- dependencies and inputs (§3.3)
    no_wait_parent: bool | None = _opt("dependencies", "noWaitParent", "start before the parent completes, reading its outputs as they appear", "NW")
    wait_input: bool | None = _opt("dependencies", "waitInput", "an input dataset the catalog does not know makes the task wait (pending, 7 days) instead of breaking it", "WI")
    run_until_closed: bool | None = _opt("dependencies", "runUntilClosed", "keep running until the input dataset is closed", "RC")
    ignore_missing_in_ds: bool | None = _opt("dependencies", "ignoreMissingInDS", "inputs whose metadata cannot be read are skipped", "IM")
    allow_incomplete_in_ds: bool | None = _opt("dependencies", "allowIncompleteInDS", "brokerage may use incomplete input replicas", "AI")
    skip_files_used_by: str | None = _opt("dependencies", "skipFilesUsedBy", "skip input files (and event ranges) these tasks finished (comma list of task ids)")
    allow_task_duplication: bool | None = _opt("dependencies", "allowTaskDuplication", "this task may write output datasets another task writes (by default an output dataset belongs to one task)")
    # --- placement (§5, §6.5)
    included_sites: list | None = _opt("placement", "includedSite", "only these sites (patterns allowed)", "LS")
    excluded_sites: list | None = _opt("placement", "excludedSite", "never these sites (patterns allowed)", "LS")
    t1_weight: int | None = _opt("placement", "t1Weight", "weight of sites at the task's nucleus; -1 = only there", "TW", -1)
    ip_connectivity: str | None = _opt("placement", "ipConnectivity", "worker-node connectivity: full or http[#IPv4|IPv6]", "IP")
    allow_input_lan: str | None = _opt("placement", "allowInputLAN", "only: jobs go only to sites that read input directly (direct_io)", "IL", choices=("use", "only"))
    allow_input_wan: bool | None = _opt("placement", "allowInputWAN", "remote (WAN) input reading allowed", "IW")
    use_local_io: bool | None = _opt("placement", "useLocalIO", "always copy input to scratch", "LI", aliases=("forceStaged",))
    stay_output_on_site: bool | None = _opt("placement", "stayOutputOnSite", "outputs are written to and registered at the execution site's storage (its first write endpoint), not the dataset's destination", "SO")
    avoid_vp: bool | None = _opt("placement", "avoidVP", "ignore virtual-placement replicas", "AV")
    disable_reassign: bool | None = _opt("placement", "disableReassign", "queued jobs are never moved to another site when their site's queue is long and does not move (docs/reassignment.md)", "DI")
    # --- merging (§6.12)
    merge_output: bool | None = _opt("merge", "mergeOutput", "jobs write unmerged outputs that merge jobs combine", "MO")
    n_files_per_merge_job: int | None = _opt("merge", "nFilesPerMergeJob", "files per merge job", "ZF", 1)
    n_events_per_merge_job: int | None = _opt("merge", "nEventsPerMergeJob", "events per merge job", "ZE", 1)
    n_gb_per_merge_job: float | None = _opt("merge", "nGBPerMergeJob", "output GB per merge job (default 5)", "ZG", 0.001)
    n_max_files_per_merge_job: int | None = _opt("merge", "nMaxFilesPerMergeJob", "at most this many files per merge job (default 50)", "ZM", 1)
    um_name_at_end: bool | None = _opt("merge", "umNameAtEnd", "unmerged names end in .panda.um instead of starting with panda.um.")
    # --- resources (§3.5): initial values of the task's resource model, refined by scouts
    core_count: int | None = _opt("resources", "coreCount", "cores per job (0 = any, default 1)", None, 0, 1024)
    max_core_count: int | None = _opt("resources", "maxCoreCount", "sites whose slots have more cores than this are not used", "CC", 1, 1024)
    ram_count: int | None = _opt("resources", "ramCount", "RAM per job or per core, see ram_unit (default 2000 MBPerCore)", None, 0)
    ram_unit: str | None = _opt("resources", "ramUnit", "unit of ram_count", None, choices=("MB", "MBPerCore", "MBPerCoreFixed"), aliases=("ramCountUnit",))
    base_ram_count: int | None = _opt("resources", "baseRamCount", "RAM shared by all cores (MB); default: refine.base_ram_count for the task's processing type (simul 1000, pile 1500, reco 1000), else 0", None, 0)
    walltime: int | None = _opt("resources", "walltime", "walltime per unit of input (see walltime_unit)", None, 0)
    walltime_unit: str | None = _opt("resources", "walltimeUnit", "unit of walltime")
    base_walltime: int | None = _opt("resources", "baseWalltime", "walltime not scaling with CPU power, seconds (default 600)", None, 0)
    cpu_time: float | None = _opt("resources", "cpuTime", "CPU per event (see cpu_time_unit)", None, 0)
    cpu_time_unit: str | None = _opt("resources", "cpuTimeUnit", "unit of cpu_time", None, choices=("HS06sPerEvent", "HS06sPerEventFixed", "mHS06sPerEvent", "mHS06sPerEventFixed"))
    cpu_efficiency: int | None = _opt("resources", "cpuEfficiency", "expected CPU efficiency in % (default 90)", None, 0, 100)
    out_disk_count: float | None = _opt("resources", "outDiskCount", "output size per input unit (see out_disk_unit)", None, 0)
    out_disk_unit: str | None = _opt("resources", "outDiskUnit", "unit of out_disk_count (kB, MB, GB, *PerEvent, *Fixed)")
    work_disk_count: int | None = _opt("resources", "workDiskCount", "work directory size", None, 0)
    work_disk_unit: str | None = _opt("resources", "workDiskUnit", "unit of work_disk_count")
    io_intensity: float | None = _opt("resources", "ioIntensity", "input+output kB/s per core", None, 0)
    io_intensity_unit: str | None = _opt("resources", "ioIntensityUnit", "unit of io_intensity")
    merge_ram_count: int | None = _opt("resources", "mergeRamCount", "RAM of merge jobs (MB)", None, 0)
    merge_core_count: int | None = _opt("resources", "mergeCoreCount", "cores of merge jobs", None, 1)
    # --- event service (seed 000 "Event server", "Final status of Event Service jobs"; docs/event-service.md)
    event_service: bool | None = _opt("events", "eventService", "an event-service task: each job takes one input file whose events are handed to its executor as ranges, reported one by one (jobs events report), and merged by an ES merge job")
    n_events_per_range: int | None = _opt("events", "nEventsPerWorker", "events per event range (default 100); sets event_service", "ES", 1)
    max_attempt_es: int | None = _opt("events", "maxAttemptES", "attempts per event range (default 3)", "XA", 1, 100)
    n_jumbo_jobs: int | None = _opt("events", "nJumboJobs", "jumbo jobs the task may have once the jumbo watchdog enables them (0: none; default jumbo.per_task)", "NJ", 0, 1000)
    max_jumbo_per_site: int | None = _opt("events", "maxJumboPerSite", "jumbo jobs of the task per jumbo site (default jumbo.per_site)", "MJ", 1, 1000)

    def as_dict(self) -> dict[str, Any]:
        """Only the options that are set, for storage and display."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value is not None}


@dataclass(frozen=True)
class OptionSpec:
    name: str
    kind: type
    section: str
    panda: str
    help: str
    code: str | None
    minimum: float | None
    maximum: float | None
    choices: tuple[str, ...] | None
    aliases: tuple[str, ...]


def option_specs() -> list[OptionSpec]:
    hints = get_type_hints(TaskOptions)
    specs = []
    for f in dataclasses.fields(TaskOptions):
        kind = _base_type(hints[f.name])
        specs.append(OptionSpec(name=f.name, kind=kind, **{k: f.metadata[k] for k in (
            "section", "panda", "help", "code", "minimum", "maximum", "choices", "aliases")}))
    return specs


def _base_type(hint: Any) -> type:
    for candidate in (bool, int, float, str, list):
        if hint is candidate or candidate in getattr(hint, "__args__", ()):
            return candidate
    raise TypeError(hint)


SPECS = option_specs()
BY_NAME = {spec.name: spec for spec in SPECS}
BY_PANDA_KEY = {key: spec for spec in SPECS for key in (spec.panda, *spec.aliases) if key}

#: Options jedictl has no model for: refused at submission (and by incexec) with the reason, rather than
#: accepted and silently ignored. A flag set to false asks for nothing and is accepted.
REFUSED = {
    "min_granularity": "dynamic events per job need a pilot that picks its own event ranges; jedictl's executors "
                       "process the ranges a job is given (use n_events_per_job)",
    "allow_partial_finish": "job reports carry no per-file outcome, so a job cannot finish with part of its input processed",
    "ignore_missing_in_ds": "the data catalog has no temporary metadata errors to ignore; an unknown input breaks the task "
                            "(wait_input makes it wait)",
    "allow_incomplete_in_ds": "brokerage already uses incomplete replicas for the files they hold; there is no "
                              "complete-replica requirement to lift",
    "ip_connectivity": "sites describe no worker-node connectivity to match it against",
    "allow_input_wan": "jobs read their input at their site or through its direct-IO storage; jedictl has no remote (WAN) reading",
    "avoid_vp": "the data catalog has no virtual-placement replicas to avoid",
    "max_num_jobs": "a cap on a task's jobs is JEDI's for hyperparameter-optimisation tasks, which jedictl does not model; "
                    "bound the work with n_files or n_events",
}
#: Refused values of an otherwise implemented option.
REFUSED_VALUES = {
    ("allow_input_lan", "use"): "direct LAN reading is already used at direct_io sites (use_local_io turns it off); "
                                "only 'only' changes anything",
}

# Options that cannot be combined: each pair names a contradiction a task author should fix.
CONFLICTS = (
    ("n_files_per_job", "n_gb_per_job"),
    ("n_events_per_job", "n_gb_per_job"),
    ("n_events_per_job", "tgt_num_events_per_job"),
    ("fail_when_goal_unreached", "use_exhausted"),
)


def coerce(spec: OptionSpec, value: Any, path: str) -> Any:
    """Convert `value` to the option's type and check its limits; PanDA's falsy maxAttempt is dropped."""
    if value is None:
        return None
    kind = spec.kind
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise BadInput("must be true or false", path)
    if kind is list:
        if isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise BadInput("must be a list of names", path)
        return value or None
    if kind is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise BadInput("must be a string", path)
        value = str(value)
        if spec.choices and value not in spec.choices:
            raise BadInput(f"must be one of {', '.join(spec.choices)}", path)
        return value
    # numbers
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadInput(f"must be {'an integer' if kind is int else 'a number'}", path)
    try:
        number = kind(value) if not isinstance(value, str) else (int(value) if kind is int else float(value))
    except ValueError as exc:
        raise BadInput(f"must be {'an integer' if kind is int else 'a number'}", path) from exc
    except OverflowError as exc:  # int(inf)
        raise BadInput("must be an integer", path) from exc
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise BadInput("must be an integer", path)
    if isinstance(number, float) and not math.isfinite(number):
        raise BadInput("must be a finite number", path)
    if spec.minimum is not None and number < spec.minimum:
        raise BadInput(f"must be at least {_fmt(spec.minimum)}", path)
    if spec.maximum is not None and number > spec.maximum:
        raise BadInput(f"must be at most {_fmt(spec.maximum)}", path)
    if kind is int and not -INT32_MAX - 1 <= number <= INT32_MAX:
        # Integer options end up in INTEGER columns (tasks, jobs, files) or multiply into them.
        raise BadInput(f"must be at most {INT32_MAX}" if number > 0 else f"must be at least {-INT32_MAX - 1}", path)
    return number


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def build_options(values: Mapping[str, Any], path_of: Mapping[str, str]) -> TaskOptions:
    """TaskOptions from already-coerced values; checks the cross-option rules (`path_of` names fields)."""
    options = TaskOptions(**{name: value for name, value in values.items() if value is not None})
    for name, reason in REFUSED.items():
        if getattr(options, name) not in (None, False):
            raise BadInput(f"is not supported by jedictl: {reason}", path_of.get(name, name))
    for (name, value), reason in REFUSED_VALUES.items():
        if getattr(options, name) == value:
            raise BadInput(f"{value!r} is not supported by jedictl: {reason}", path_of.get(name, name))
    if options.skip_files_used_by is not None and not re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)*", options.skip_files_used_by):
        raise BadInput("must be a comma list of task ids", path_of.get("skip_files_used_by", "skip_files_used_by"))
    if options.order_input_by and not options.n_events_per_job:
        raise BadInput(f"needs {path_of.get('n_events_per_job', 'n_events_per_job')} (files are aligned to whole jobs of events)",
                       path_of.get("order_input_by", "order_input_by"))
    if options.max_core_count and options.core_count and options.core_count > options.max_core_count:
        raise BadInput(f"is larger than {path_of.get('max_core_count', 'max_core_count')}", path_of.get("core_count", "core_count"))
    if options.allow_input_lan == "only" and options.use_local_io:
        raise BadInput(f"cannot be combined with {path_of.get('use_local_io', 'use_local_io')}", path_of.get("allow_input_lan", "allow_input_lan"))
    if options.tgt_max_output_for_ng and (options.n_files_per_job or options.n_events_per_job):
        other = "n_files_per_job" if options.n_files_per_job else "n_events_per_job"
        raise BadInput(f"cannot be combined with {path_of.get(other, other)} (it sets n_gb_per_job)",
                       path_of.get("tgt_max_output_for_ng", "tgt_max_output_for_ng"))
    if options.retry_ram_offset is not None and options.retry_ram_step is None:
        raise BadInput(f"needs {path_of.get('retry_ram_step', 'retry_ram_step')} (the RAM ladder is offset + n x step)",
                       path_of.get("retry_ram_offset", "retry_ram_offset"))
    for first, second in CONFLICTS:
        if getattr(options, first) not in (None, False) and getattr(options, second) not in (None, False):
            raise BadInput(f"cannot be combined with {path_of.get(second, second)}", path_of.get(first, first))
    if options.n_files_per_job and options.n_max_files_per_job and options.n_files_per_job > options.n_max_files_per_job:
        raise BadInput(f"is larger than {path_of.get('n_max_files_per_job', 'n_max_files_per_job')}", path_of.get("n_files_per_job", "n_files_per_job"))
    if options.add_nth_field_to_lfn and not re.fullmatch(r"\d+(,\d+)*", options.add_nth_field_to_lfn):
        raise BadInput("must be a comma list of field numbers", path_of.get("add_nth_field_to_lfn", "add_nth_field_to_lfn"))
    options = _event_service_rules(options, path_of)
    merge_settings = [name for name in ("n_files_per_merge_job", "n_events_per_merge_job", "n_gb_per_merge_job", "n_max_files_per_merge_job")
                      if getattr(options, name) is not None]
    if merge_settings and not options.merge_output:
        raise BadInput(f"needs {path_of.get('merge_output', 'merge_output')}", path_of.get(merge_settings[0], merge_settings[0]))
    return options


def _event_service_rules(options: TaskOptions, path_of: Mapping[str, str]) -> TaskOptions:
    """nEventsPerWorker makes an event-service task (PanDA); such a task's job takes one input file, whose
    events are its ranges -- so event-level splitting and pre-merge outputs have no meaning there."""
    here = path_of.get("event_service", "event_service")
    if options.event_service is False and (options.n_events_per_range or options.max_attempt_es):
        other = "n_events_per_range" if options.n_events_per_range else "max_attempt_es"
        raise BadInput(f"is false but {path_of.get(other, other)} asks for an event-service task", here)
    if not (options.event_service or options.n_events_per_range):
        for name in ("max_attempt_es", "n_jumbo_jobs", "max_jumbo_per_site"):
            if getattr(options, name) is not None:
                wanted = here if "event_service" in path_of else "event_service (eventService)"
                raise BadInput(f"needs {wanted}: ranges exist only in event-service tasks", path_of.get(name, name))
        return options
    for name, reason in (("n_events_per_job", "an event-service job's events are its ranges (use n_events_per_range)"),
                         ("tgt_num_events_per_job", "an event-service job's events are its ranges (use n_events_per_range)"),
                         ("merge_output", "the ES merge step merges an event-service job's outputs"),
                         ("n_gb_per_job", "an event-service job takes one input file")):
        if getattr(options, name) not in (None, False):
            raise BadInput(f"cannot be combined with an event-service task: {reason}", path_of.get(name, name))
    if options.n_files_per_job not in (None, 1):
        raise BadInput("must be 1 in an event-service task (one input file per job, split into event ranges)",
                       path_of.get("n_files_per_job", "n_files_per_job"))
    return dataclasses.replace(options, event_service=True, n_files_per_job=1)


def skip_task_ids(value: str | None) -> list[int]:
    """The task ids of `skip_files_used_by` ("12,15")."""
    return [int(part) for part in (value or "").split(",") if part.strip()]


def options_from_dict(values: Mapping[str, Any]) -> TaskOptions:
    """Re-read options stored as JSON (already validated at submission)."""
    return TaskOptions(**{name: value for name, value in values.items() if name in BY_NAME})


def iter_by_section(section: str) -> Iterator[OptionSpec]:
    return (spec for spec in SPECS if spec.section == section)
