"""The retry module: rules by error source and code, which rule a failed job matches, and its one action.

Follows panda-server.md §4 (rule storage, matching, actions, when it runs) and jedi-inventory.md §10.2;
seed 000 "Memory increase in job retry" (next step of 1000 ... 8000 MB above max(maxPSS, current);
the whole task when more than 30 % of its files already needed more). As panda-server §4.5 recommends, the
decision is made before the job's result is propagated, on the file rows as the job left them, so
`no_retry`/`limit_retry` need no counter corrections: `apply_file_changes` then `jobs.results.propagate`.

Matching: the job's errors are tried in order and the first one with a matching rule is acted on.
A rule matches on (source, code), its message regex (anchored at the start, DOTALL, like PanDA) and
every scope field it sets (vo, label, architecture, release, work queue); expired rules are ignored.
Among matching rules the most specific wins (scope fields set, a message pattern counts as one),
ties go to the smallest maxAttempt (no_retry < limit_retry N < other actions), then the lowest id.
Exactly one rule acts per job; an inactive rule still wins its slot but only reports (PanDA's passive mode).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jedictl.clock import parse_time
from jedictl.config import Settings
from jedictl.engine.input import fields
from jedictl.engine.input.documents import parse_text
from jedictl.engine.input.regexes import compile_pattern
from jedictl.engine.jobs.resources import SiteResources
from jedictl.engine.jobs.results import FileRecord, is_retryable
from jedictl.errors import BadInput
from jedictl.model.choices import RETRY_ACTIONS
from jedictl.model.retry import RULE_KEYS as _RULE_KEYS
from jedictl.model.retry import RetryRule, SCOPE_FIELDS, normalise_source

ACTIONS = RETRY_ACTIONS
#: files.type the retry module changes: the job's inputs, never its random seed or outputs.
RETRY_FILE_TYPES = frozenset({"input", "pseudo_input", "trn_output", "trn_log"})
_REDUCE_DEFAULTS = {"excluded_rules": ["nEventsPerJob", "nFilesPerJob"], "steps": [2, 4, 7]}
_ALIASES = {"errorsource": "error_source", "errorcode": "error_code", "error_diag": "message_pattern",
            "errordiag": "message_pattern", "label": "prod_source_label", "workqueue": "work_queue",
            "expiration_date": "expires_at", "params": "parameters"}


# ------------------------------------------------------------------------------ loading rule files

def parse_rules_text(text: str, source: str = "rules") -> tuple[RetryRule, ...]:
    """`jedictl retry-rules import FILE`: a YAML or JSON list of rules (or {"rules": [...]})."""

    return load_rules(parse_text(text, source), source)


def load_rules(document: Any, path: str = "rules") -> tuple[RetryRule, ...]:
    if isinstance(document, dict) and set(document) == {"rules"}:
        document, path = document["rules"], f"{path}.rules"
    if not isinstance(document, list) or not document:
        raise BadInput("must be a non-empty list of rules", path)
    return tuple(_load_rule(item, f"{path}[{index}]") for index, item in enumerate(document))


def _load_rule(item: Any, path: str) -> RetryRule:
    if not isinstance(item, dict):
        raise BadInput("must be a mapping", path)
    raw: dict[str, Any] = {}
    for key, value in item.items():
        name = _ALIASES.get(str(key).lower(), str(key))
        if name not in _RULE_KEYS:
            raise BadInput(f"unknown key; expected one of {', '.join(sorted(_RULE_KEYS))}", f"{path}.{key}")
        raw[name] = value
    action = fields.text(raw.get("action"), f"{path}.action", required=True, max_length=32) or ""
    if action not in ACTIONS:
        raise BadInput(f"must be one of {', '.join(ACTIONS)}", f"{path}.action")
    source = fields.text(raw.get("error_source"), f"{path}.error_source", required=True, max_length=32) or ""
    code = fields.integer(raw.get("error_code"), f"{path}.error_code", -fields.INT32_MAX - 1, fields.INT32_MAX)
    if code is None:
        raise BadInput("is required", f"{path}.error_code")
    pattern = fields.text(raw.get("message_pattern"), f"{path}.message_pattern", max_length=512)
    if pattern is not None:
        compile_pattern(pattern, f"{path}.message_pattern", re.DOTALL)
    scope = {name: fields.text(raw.get(name), f"{path}.{name}", max_length=256) for name in SCOPE_FIELDS}
    expires = raw.get("expires_at")
    if expires is not None:
        # YAML reads an unquoted time itself (aware when it has an offset); jedictl keeps naive UTC.
        try:
            expires = parse_time(expires.isoformat() if isinstance(expires, datetime) else str(expires))
        except ValueError as exc:
            raise BadInput("must be an ISO-8601 time", f"{path}.expires_at") from exc
    return RetryRule(
        id=None, error_source=source, error_code=code, action=action,
        parameters=_parameters(action, raw.get("parameters"), f"{path}.parameters"), message_pattern=pattern,
        active=fields.flag(raw.get("active", True), f"{path}.active"),
        description=fields.text(raw.get("description"), f"{path}.description", max_length=2000),
        expires_at=expires, **scope,
    )


def _parameters(action: str, value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, str):  # PanDA's `k=v&k2=v2`
        pairs = [item.partition("=") for item in value.split("&") if item.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise BadInput("must be k=v pairs joined by &", path)
        value = {key.strip(): text.strip() for key, _, text in pairs}
    given = dict(fields.mapping(value, path))
    if action == "limit_retry":
        if "max_attempt" in given:
            given["maxAttempt"] = given.pop("max_attempt")
        _only(given, {"maxAttempt"}, path)
        limit = fields.integer(given.get("maxAttempt"), f"{path}.maxAttempt", minimum=1, maximum=1000)
        if limit is None:
            raise BadInput("is required for limit_retry", f"{path}.maxAttempt")
        return {"maxAttempt": limit}
    if action == "reduce_input_per_job":
        _only(given, set(_REDUCE_DEFAULTS), path)
        excluded = fields.names(given.get("excluded_rules", _REDUCE_DEFAULTS["excluded_rules"]), f"{path}.excluded_rules")
        unknown = set(excluded) - {"nEventsPerJob", "nFilesPerJob"}
        if unknown:
            raise BadInput(f"{min(unknown)} is not nEventsPerJob or nFilesPerJob", f"{path}.excluded_rules")
        steps = given.get("steps", _REDUCE_DEFAULTS["steps"])
        steps = [s.strip() for s in steps.split(",")] if isinstance(steps, str) else steps
        if not isinstance(steps, list) or len(steps) != 3:
            raise BadInput("must be three attempt numbers (halve, quarter, one)", f"{path}.steps")
        numbers = [fields.integer(step, f"{path}.steps[{i}]", minimum=1, maximum=1000) for i, step in enumerate(steps)]
        if None in numbers:
            raise BadInput("must be three attempt numbers (halve, quarter, one)", f"{path}.steps")
        if not numbers[0] < numbers[1] < numbers[2]:  # type: ignore[operator]
            raise BadInput("must increase", f"{path}.steps")
        return {"excluded_rules": excluded, "steps": numbers}
    _only(given, set(), path)
    return {}


def _only(given: Mapping[str, Any], allowed: set[str], path: str) -> None:
    for key in given:
        if key not in allowed:
            raise BadInput(f"unknown parameter{'; expected ' + ', '.join(sorted(allowed)) if allowed else ''}",
                           f"{path}.{key}")


# --------------------------------------------------------------------------------------- matching

@dataclass(frozen=True)
class JobError:
    source: str  # pilot, exe, ddm, sup, jobdispatcher, taskbuffer, trans ... (PanDA's "pilotErrorCode" too)
    code: int
    diag: str = ""


@dataclass(frozen=True)
class FailedJob:
    """The `jobs` row of the failed job."""

    id: int
    attempt_nr: int
    vo: str | None = None
    prod_source_label: str | None = None
    architecture: str | None = None
    release: str | None = None  # trans_uses
    work_queue: str | None = None
    core_count: int | None = 1
    min_ram_count: int | None = None  # MB, compensated, as generated
    max_pss: int | None = None  # kB, as the executor reports it (PanDA's unit)
    n_events: int | None = None


def job_errors(error_source: str | None, error_code: int | None, error_diag: str | None = None,
               trans_exit_code: int | None = None) -> tuple[JobError, ...]:
    """The ordered error list of a `jobs` row: its error triple, then the payload's exit code."""
    errors = []
    if error_source and error_code is not None:
        errors.append(JobError(error_source, error_code, error_diag or ""))
    if trans_exit_code:
        errors.append(JobError("trans", trans_exit_code, error_diag or ""))
    return tuple(errors)


def matches(rule: RetryRule, job: FailedJob, error: JobError, now: datetime) -> bool:
    if rule.expires_at is not None and rule.expires_at <= now:
        return False
    if normalise_source(rule.error_source) != normalise_source(error.source) or rule.error_code != error.code:
        return False
    if rule.message_pattern and not re.match(rule.message_pattern, error.diag or "", re.DOTALL):
        return False
    return all(getattr(rule, name) in (None, "", getattr(job, name)) for name in SCOPE_FIELDS)


def select_rule(rules: Sequence[RetryRule], job: FailedJob, errors: Sequence[JobError],
                now: datetime) -> tuple[RetryRule, JobError] | None:
    """The one rule that acts on this job, and the error it acts on."""
    for error in errors:
        candidates = [rule for rule in rules if matches(rule, job, error, now)]
        if candidates:
            return min(candidates, key=lambda rule: (-rule.specificity(), _strictness(rule), rule.id or 0)), error
    return None


def _strictness(rule: RetryRule) -> float:
    """The maxAttempt a rule amounts to: no retry is the smallest of all, other actions do not limit."""
    if rule.action == "no_retry":
        return 0
    if rule.action == "limit_retry":
        return rule.parameters.get("maxAttempt", math.inf)
    return math.inf


# ---------------------------------------------------------------------------------------- actions

@dataclass(frozen=True)
class TaskRetryState:
    """What the actions read from the task: `tasks` columns, task options and two file counts."""

    ram_count: int | None = None
    ram_unit: str | None = None
    base_ram_count: int | None = None
    cpu_time: float | None = None
    cpu_time_unit: str | None = None
    n_files_per_job: int | None = None  # options
    n_events_per_job: int | None = None
    n_gb_per_job: float | None = None
    n_max_files_per_job: int | None = None
    base_n_gb_per_job: float | None = None  # values before the first reduction (JEDI's RM sub-rule)
    base_n_max_files_per_job: int | None = None
    n_input_files: int = 0  # master input files of the task
    n_input_files_above_task_ram: int = 0  # of those, files whose ram_count exceeds the task's
    has_finished_jobs: bool = False
    retry_ram_offset: int | None = None  # options: the task's own RAM ladder (offset + n x step, capped)
    retry_ram_step: int | None = None
    retry_ram_max: int | None = None


@dataclass(frozen=True)
class FileChange:
    file_id: int
    max_attempt: int | None = None  # new files.max_attempt
    ram_count: int | None = None  # new files.ram_count


@dataclass(frozen=True)
class TaskChange:
    ram_count: int | None = None  # then re-match the task's resource type
    cpu_time: float | None = None
    recalculate: bool = False  # ask the finalizer to recompute scout statistics
    options: Mapping[str, Any] = field(default_factory=dict)  # n_gb_per_job / n_max_files_per_job
    base_options: Mapping[str, Any] = field(default_factory=dict)  # record once: the values before reducing


@dataclass(frozen=True)
class RetryDecision:
    rule_id: int | None
    action: str
    active: bool  # False: passive rule, reported but nothing changes
    error: JobError
    message: str
    file_changes: tuple[FileChange, ...] = ()
    task_change: TaskChange | None = None
    #: the relation the generator records (old job -> new job) when it regenerates these files;
    #: None when the files are not to be retried
    retry_relation: str | None = "retry"


def decide(rules: Sequence[RetryRule], job: FailedJob, errors: Sequence[JobError], files: Sequence[FileRecord],
           task: TaskRetryState, site: SiteResources, settings: Settings, now: datetime) -> RetryDecision | None:
    """The retry module's decision for a failed job, or None when no rule applies."""
    chosen = select_rule(rules, job, errors, now)
    if chosen is None:
        return None
    rule, error = chosen
    case = _Case(rule, error, job, tuple(f for f in files if f.type in RETRY_FILE_TYPES), task, site, settings)
    decision = _ACTIONS[rule.action](case)
    if not rule.active:
        return replace(decision, active=False, message=f"passive rule, would: {decision.message}",
                       file_changes=(), task_change=None, retry_relation="retry")
    return decision


@dataclass(frozen=True)
class _Case:
    """Everything an action reads."""

    rule: RetryRule
    error: JobError
    job: FailedJob
    inputs: tuple[FileRecord, ...]
    task: TaskRetryState
    site: SiteResources
    settings: Settings

    def decision(self, message: str, **changes: Any) -> RetryDecision:
        return RetryDecision(self.rule.id, self.rule.action, True, self.error, message, **changes)


def _no_retry(case: _Case) -> RetryDecision:
    # attemptNr + 1 is this job's attempt once counted: propagation then finds the attempts used up.
    changes = tuple(FileChange(f.id, max_attempt=f.attempt_nr + 1) for f in case.inputs
                    if is_retryable(f.attempt_nr + 1, f.max_attempt, 0, None))
    return case.decision(f"no retry: {len(changes)} input file(s) will not be tried again",
                         file_changes=changes, retry_relation=None)


def _limit_retry(case: _Case) -> RetryDecision:
    limit = case.rule.parameters["maxAttempt"]
    changes = tuple(FileChange(f.id, max_attempt=limit) for f in case.inputs
                    if f.max_attempt is None or f.max_attempt > limit)  # lowered, never raised
    return case.decision(f"maxAttempt lowered to {limit} on {len(changes)} input file(s)", file_changes=changes)


def _increase_memory(case: _Case) -> RetryDecision:
    task, job, settings = case.task, case.job, case.settings
    if task.ram_unit == "MBPerCoreFixed":
        return case.decision("RAM is fixed by the task (MBPerCoreFixed): not increased")
    per_core = (task.ram_unit or "").startswith("MBPerCore")
    # The job's RAM as generated, back in the task's units: undo the 0.9 compensation, base and cores.
    job_ram: float = round((job.min_ram_count or 0) / settings.refine.memory_compensation)
    pss: float = (job.max_pss or 0) / 1024
    if per_core:
        base, cores = task.base_ram_count or 0, job.core_count or 1
        job_ram, pss = (job_ram - base) / cores, (pss - base) / cores
    unit = "MB per core" if per_core else "MB"
    current = max(job_ram, pss, task.ram_count or 0, *(f.ram_count or 0 for f in case.inputs))
    target = next_ram(current, settings.retry.ram_ladder_mb, task.retry_ram_offset, task.retry_ram_step, task.retry_ram_max)
    if target is None:
        top = "retry_ram_max" if task.retry_ram_max is not None and current >= task.retry_ram_max else "the memory ladder"
        return case.decision(f"already at the top of {top} ({current:.0f} {unit})")
    share = task.n_input_files_above_task_ram / task.n_input_files if task.n_input_files else 0.0
    if share > settings.retry.task_ram_failure_fraction:
        return case.decision(f"task RAM raised to {target} {unit} ({share:.0%} of its files needed more)",
                             task_change=TaskChange(ram_count=target))
    changes = tuple(FileChange(f.id, ram_count=target) for f in case.inputs if (f.ram_count or 0) < target)
    return case.decision(f"RAM of {len(changes)} input file(s) raised to {target} {unit}", file_changes=changes)


def next_ram(current: float, ladder: Sequence[int], offset: int | None, step: int | None, ceiling: int | None) -> int | None:
    """The next RAM step above `current`, or None at the top. The task's retryRamStep replaces the ladder
    with offset + n x step (n >= 1, offset default 0); retryRamMax caps either (split rules RX/RY/RZ,
    JEDI's get_ram_for_retry). Same unit as the task's ramCount (per core for MBPerCore)."""
    if ceiling is not None and current >= ceiling:
        return None
    if step:
        base = offset or 0
        target: int | None = base + max(1, math.floor((current - base) / step) + 1) * step
    else:
        target = next((value for value in ladder if value > current), None)
    if target is not None and ceiling is not None:
        target = min(target, ceiling)
    return target


def _increase_cputime(case: _Case) -> RetryDecision:
    task, job, site = case.task, case.job, case.site
    events = job.n_events or 0
    if not task.has_finished_jobs and events and site.max_walltime and site.core_power:
        # The job used the whole queue walltime: at least this much HS06 s per event, plus a margin.
        per_event = site.max_walltime * site.core_power * (job.core_count or 1) / events
        per_event *= case.settings.scouts.cputime_margin
        if (task.cpu_time_unit or "").startswith("mHS06"):
            per_event *= 1000
        if per_event > (task.cpu_time or 0):
            return case.decision(f"task cpuTime raised to {math.ceil(per_event)} {task.cpu_time_unit or 'HS06sPerEvent'}",
                                 task_change=TaskChange(cpu_time=math.ceil(per_event)))
    return case.decision("task parameters to be recalculated from finished jobs", task_change=TaskChange(recalculate=True))


def _reduce_input_per_job(case: _Case) -> RetryDecision:
    task, attempt = case.task, case.job.attempt_nr
    used = {"nFilesPerJob": task.n_files_per_job, "nEventsPerJob": task.n_events_per_job}
    excluded = [name for name in case.rule.parameters.get("excluded_rules", ()) if used.get(name)]
    if excluded:
        return case.decision(f"input per job not reduced: the task sets {excluded[0]}")
    halve, quarter, one = case.rule.parameters.get("steps", _REDUCE_DEFAULTS["steps"])
    if attempt < halve:
        return case.decision(f"input per job not reduced before attempt {halve}")
    base_gb = task.base_n_gb_per_job or task.n_gb_per_job
    base_files = task.base_n_max_files_per_job or task.n_max_files_per_job or case.settings.generate.max_files_per_job
    divisor = None if attempt >= one else (4 if attempt >= quarter else 2)  # None: down to one
    options: dict[str, Any] = {"n_max_files_per_job": 1 if divisor is None else max(1, base_files // divisor)}
    if base_gb:
        options["n_gb_per_job"] = 1 if divisor is None else base_gb / divisor
    bases: dict[str, Any] = {"n_max_files_per_job": base_files} if task.base_n_max_files_per_job is None else {}
    if base_gb and task.base_n_gb_per_job is None:
        bases["n_gb_per_job"] = base_gb
    summary = ", ".join(f"{key}={value:g}" for key, value in options.items())
    return case.decision(f"input per job reduced at attempt {attempt}: {summary}",
                         task_change=TaskChange(options=options, base_options=bases))


_ACTIONS = {"no_retry": _no_retry, "limit_retry": _limit_retry, "increase_memory": _increase_memory,
            "increase_cputime": _increase_cputime, "reduce_input_per_job": _reduce_input_per_job}


def apply_file_changes(files: Sequence[FileRecord], decision: RetryDecision | None) -> tuple[FileRecord, ...]:
    """The job's file records as they are after the decision (what `jobs.results.propagate` should see)."""
    if decision is None:
        return tuple(files)
    changes = {change.file_id: change for change in decision.file_changes}
    updated = []
    for record in files:
        change = changes.get(record.id)
        if change is not None:
            record = record._replace(max_attempt=record.max_attempt if change.max_attempt is None else change.max_attempt,
                                     ram_count=record.ram_count if change.ram_count is None else change.ram_count)
        updated.append(record)
    return tuple(updated)
