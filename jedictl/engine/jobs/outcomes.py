"""Ending jobs and taking heartbeats: executor reports, kills and timeouts flow through here.

One batch = one transaction (panda-server §2.5-2.6, §4.5). The batch locks its jobs and their file
records, then for each job: a failed job first meets the retry module (its decision changes the file
rows as the job left them), then `jobs.results.propagate` decides the job's final status, its files'
new statuses and the counter deltas; late jobs of a final task change only their own row (gotcha 2).
Writes are set-based; every guarded statement must hit exactly the rows decided on, or the batch rolls
back. `end_jobs_safely` then replays the batch one job per transaction, so a fault in one job's data
never blocks the others and each job's outcome stays all-or-nothing either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from jedictl.config import Settings
from jedictl.engine.input import fields
from jedictl.engine.jobs.resources import SiteResources
from jedictl.engine.jobs.results import (
    ADDER_ERROR,
    COUNTERS,
    OUTPUT_JOB_FILE_TYPES,
    UNMERGED_FILE_TYPES,
    DatasetDelta,
    FileRecord,
    FileUpdate,
    JobRecord,
    JobReport,
    Propagation,
    propagate,
    report_conflict,
)
from jedictl.engine.jobs.states import JobEvent, next_status, plan_kill, status_after_kill_command
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.jobs.reports import ExecutorReport, Heartbeat
from jedictl.engine.shares.resource_types import load_resource_types, match_resource_type, ram_per_core
from jedictl.engine.jobs.retry_rules import (
    FailedJob,
    RetryDecision,
    RetryRule,
    TaskRetryState,
    apply_file_changes,
    decide,
    job_errors,
    select_rule,
)
from jedictl.model import JOB_FINAL, JOB_KIND_ES, JOB_KIND_ES_MERGE, JOB_KIND_JUMBO, TASK_FINAL, FileStatus, JobStatus
from jedictl.store import job_outcomes as job_store
from jedictl.store import retry_rules as rule_store


class Ending(NamedTuple):
    """A request to end one job: from an executor's report, a kill or a timeout."""

    job_id: int
    status: str  # finished | failed | cancelled | closed
    line: int | None = None  # the report line, for messages
    attempt_nr: int | None = None  # the attempt the executor ran (None: not checked)
    report: ExecutorReport | None = None
    sub_status: str | None = None
    error: tuple[str, int, str] | None = None  # (source, code, diag) for kills and timeouts
    expected_status: str | None = None  # kills/timeouts: act only if the job is still in this status


class EndResult(NamedTuple):
    job_id: int
    outcome: str  # applied | duplicate | conflict (a different report already ended the job) | refused
    line: int | None = None
    status: str | None = None  # the job's new status
    reason: str = ""
    retry: str | None = None  # what the retry module did

    def as_item(self) -> dict[str, Any]:
        # Every key always present (docs/json-output.md): null where there is nothing to say.
        return {"line": self.line, "job_id": self.job_id, "outcome": self.outcome, "status": self.status, "reason": self.reason or None,
                "retry": self.retry or None}

    def as_report_item(self) -> dict[str, Any]:
        """`as_item` as a pass report holds it: the outcome first (PassReport.add)."""
        return {"outcome": self.outcome, "line": self.line, "job_id": self.job_id, "status": self.status, "reason": self.reason or None,
                "retry": self.retry or None}


class Conflict(Exception):
    """A guarded write hit other rows than decided on: someone changed them; the batch rolls back."""


@dataclass
class _Batch:
    """What one batch writes, collected while the decisions are made."""

    job_rows: list[tuple] = field(default_factory=list)  # store.job_outcomes.end_jobs rows
    file_updates: list[FileUpdate] = field(default_factory=list)
    counters: dict[int, list[int]] = field(default_factory=dict)  # dataset id -> summed DatasetDelta counters
    outputs: list[tuple] = field(default_factory=list)
    file_limits: dict[int, FileRecord] = field(default_factory=dict)
    task_values: dict[int, dict[str, Any]] = field(default_factory=dict)
    # (dataset name, lfn) of every output already in the catalog or registered by an earlier job of
    # this batch: a second job reporting one of them fails (never an overwrite, never a silent drop).
    registered: set[tuple[str, str]] = field(default_factory=set)
    produced: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # job id -> (dataset name, lfn) its report registers
    targets: dict[int, tuple[str, str | None]] = field(default_factory=dict)  # dataset id -> (name, destination), read once
    ending_ids: set[int] = field(default_factory=set)  # the jobs this batch ends (event service: a kill of several at once)
    es_ended: set[int] = field(default_factory=set)  # event-service jobs this batch ended (their merge jobs must not end them again)

    def read_targets(self, conn: Any, dataset_ids: set[int]) -> dict[int, tuple[str, str | None]]:
        """The (name, destination) of these datasets, each read once per batch."""
        missing = dataset_ids - self.targets.keys()
        if missing:
            self.targets.update(job_store.dataset_targets(conn, missing))
        return self.targets


# ------------------------------------------------------------------------------------ ending jobs

def end_jobs_safely(store: Any, endings: Iterable[Ending], settings: Settings, now: datetime,
                    rules: Sequence[RetryRule] = ()) -> list[EndResult]:
    """End `endings` in batches of settings.report.batch_size; a batch that meets a database fault or
    a conflict is replayed one job per transaction -- also a batch of one: replayed, a report whose
    output another process registered meanwhile sees the registration and fails its job (ddm 200)."""
    results: list[EndResult] = []
    for batch in batches(endings, settings.report.batch_size):
        try:
            with store.begin() as conn:
                results.extend(end_jobs(conn, batch, settings, now, rules))
        except Exception:  # noqa: BLE001 - replay alone; a genuine fault then surfaces on its own job
            for ending in batch:
                results.extend(_end_one(store, ending, settings, now, rules))
    return results


def _end_one(store: Any, ending: Ending, settings: Settings, now: datetime, rules: Sequence[RetryRule]) -> list[EndResult]:
    try:
        with store.begin() as conn:
            return end_jobs(conn, [ending], settings, now, rules)
    except Conflict as exc:
        return [EndResult(ending.job_id, "refused", ending.line, reason=f"{exc}; send the report again")]


def batches(endings: Iterable[Ending], size: int) -> Iterator[list[Ending]]:
    """Slices of at most `size`, never holding one job twice (a second report for a job waits for the
    next batch, so it sees the first one's effect and is found a duplicate)."""
    current: list[Ending] = []
    seen: set[int] = set()
    for ending in endings:
        if len(current) >= max(size, 1) or ending.job_id in seen:
            yield current
            current, seen = [], set()
        current.append(ending)
        seen.add(ending.job_id)
    if current:
        yield current


def end_jobs(conn: Any, endings: Sequence[Ending], settings: Settings, now: datetime,
             rules: Sequence[RetryRule] = ()) -> list[EndResult]:
    """Decide and write the end of each job in `endings` (distinct jobs) in the caller's transaction."""
    jobs = job_store.lock_jobs_to_end(conn, [e.job_id for e in endings])
    job_files = job_store.job_files_of(conn, jobs)
    records = job_store.lock_files(conn, [jf.file_id for listed in job_files.values() for jf in listed if jf.file_id is not None])
    task_rows = job_store.task_states(conn, [job.task_id for job in jobs.values()])
    batch, results = _Batch(), []
    batch.ending_ids = {e.job_id for e in endings}
    _known_outputs(conn, endings, job_files, batch)
    # A report for a job already final is compared with what ended it: the same again, or a conflict.
    ended = job_store.recorded_ends(conn, [e.job_id for e in endings if e.report is not None and e.job_id in jobs
                                           and jobs[e.job_id].status in JOB_FINAL])
    for ending in endings:
        job = jobs.get(ending.job_id)
        result = _decide_one(conn, ending, job, job_files.get(ending.job_id, []), records,
                             task_rows.get(job.task_id) if job else None, settings, now, rules, batch, ended.get(ending.job_id))
        results.append(result)
    _write(conn, batch, records, jobs, settings, now)
    return results


def _registrable(ending: Ending, listed: Sequence[Any]) -> list[Any]:
    """The job files a finished report registers in the data catalog (outputs it did produce)."""
    if ending.report is None or ending.status != _FINISHED or not ending.report.outputs:
        return []
    produced = {o.lfn for o in ending.report.outputs if not o.no_output}
    return [jf for jf in listed if jf.type in _PRODUCED_TYPES and jf.lfn in produced]


def _known_outputs(conn: Any, endings: Sequence[Ending], job_files: dict[int, list[Any]], batch: _Batch) -> None:
    """Each job's (dataset name, lfn) of the outputs its report registers, and which of the batch's
    are in the catalog already."""
    producing = {}
    for ending in endings:
        listed = _registrable(ending, job_files.get(ending.job_id, ()))
        if listed:
            producing[ending.job_id] = listed
    if not producing:
        return
    targets = batch.read_targets(conn, {jf.dataset_id for listed in producing.values() for jf in listed})
    for job_id, listed in producing.items():
        batch.produced[job_id] = [(targets[jf.dataset_id][0], jf.lfn) for jf in listed]
    batch.registered = job_store.registered_outputs(conn, {pair for pairs in batch.produced.values() for pair in pairs})


#: Statuses as plain strings (an enum member's `.value` is a Python-level property; these are read per report).
_FINISHED, _FAILED = JobStatus.FINISHED.value, JobStatus.FAILED.value
_F_FINISHED, _F_MERGING = FileStatus.FINISHED.value, FileStatus.MERGING.value
_PRODUCED_TYPES = OUTPUT_JOB_FILE_TYPES | UNMERGED_FILE_TYPES
_NOTHING_TAKEN: frozenset[str] = frozenset()


def _decide_one(conn: Any, ending: Ending, job: Any, listed: list[Any], records: dict[int, FileRecord], task: Any,
                settings: Settings, now: datetime, rules: Sequence[RetryRule], batch: _Batch,
                recorded: dict[str, Any] | None = None) -> EndResult:
    if job is None:
        return EndResult(ending.job_id, "refused", ending.line, reason=f"unknown job {ending.job_id}")
    if ending.expected_status is not None and job.status != ending.expected_status:
        return EndResult(ending.job_id, "refused", ending.line, reason=f"job {job.id} is {job.status} now, not {ending.expected_status}")
    if job.kind in _ES_KINDS:
        return _decide_event_service(conn, ending, job, listed, records, task, settings, now, batch)
    status = ending.status
    report = ending.report
    if report is not None:
        status = status_after_kill_command(status, job.command_to_pilot).value if job.command_to_pilot else str(status)
        if report.outputs:
            own = {jf.lfn for jf in listed if jf.type in _PRODUCED_TYPES}
            for index, output in enumerate(report.outputs):
                if output.lfn not in own:  # never registered, never counted: a name no job of ours was told to write
                    return EndResult(ending.job_id, "refused", ending.line,
                                     reason=f"outputs[{index}].lfn: {output.lfn!r} is not an output of job {job.id}")
        if recorded is not None and (ending.attempt_nr is None or ending.attempt_nr == job.attempt_nr):
            conflict = report_conflict(recorded, status, report)
            if conflict is not None:
                return EndResult(job.id, "conflict", ending.line, job.status, conflict)
            return EndResult(job.id, "duplicate", ending.line, job.status, f"duplicate report: job {job.id} is already {job.status}")
    job_report = JobReport(job.id, status, ending.attempt_nr, report.outputs if report is not None else ())
    record = JobRecord(job.id, job.status, job.attempt_nr)
    task_final = task is None or task.status in TASK_FINAL
    files_view = {jf.file_id: records[jf.file_id] for jf in listed if jf.file_id in records}
    error = _error_of(ending)
    decision: RetryDecision | None = None
    produced = batch.produced.get(ending.job_id, ())
    registered = batch.registered
    taken = frozenset(lfn for name, lfn in produced if (name, lfn) in registered) if produced and registered else _NOTHING_TAKEN
    merge_attempts = settings.report.merge_input_extra_attempts
    propagation = propagate(record, job_report, listed, files_view, merge_input_extra_attempts=merge_attempts, registered=taken)
    if propagation.accepted and propagation.job_status == _FAILED:
        if status == _FINISHED:
            error = (*ADDER_ERROR, propagation.reason)  # the adder turned it into a failure: that is the error
        if not task_final:
            decision = _retry_decision(conn, job, error, report, files_view, task, settings, now, rules)
            if decision is not None and (decision.file_changes or decision.task_change):
                files_view = {record.id: record for record in apply_file_changes(list(files_view.values()), decision)}
                propagation = propagate(record, job_report._replace(status=_FAILED), listed, files_view,
                                        merge_input_extra_attempts=merge_attempts)
                _collect_retry(decision, files_view, job.task_id, task, settings, batch, now)
    if propagation.duplicate:
        return EndResult(job.id, "duplicate", ending.line, job.status, propagation.reason)
    if not propagation.accepted:
        return EndResult(ending.job_id, "refused", ending.line, reason=propagation.reason)
    batch.job_rows.append(_job_row(job, propagation, ending, error, now))
    if not task_final:
        _collect_files(propagation, job, listed, batch, stay_on_site=bool(task.options and task.options.get("stay_output_on_site")))
        if produced and propagation.job_status == _FINISHED:
            batch.registered.update(produced)
    reason = propagation.reason or ("task is final: its files and counters are left as they are" if task_final else "")
    return EndResult(job.id, "applied", ending.line, propagation.job_status, reason, decision.message if decision else None)


_ES_KINDS = frozenset({JOB_KIND_ES, JOB_KIND_ES_MERGE, JOB_KIND_JUMBO})


def _decide_event_service(conn: Any, ending: Ending, job: Any, listed: list[Any], records: dict[int, FileRecord], task: Any,
                          settings: Settings, now: datetime, batch: _Batch) -> EndResult:
    """Event-service and ES merge jobs end by their ranges (engine.jobs.event_outcomes)."""
    from jedictl.engine.jobs import event_outcomes

    error = _error_of(ending)
    if job.kind == JOB_KIND_ES_MERGE:
        produced = batch.produced.get(ending.job_id, ())
        taken = frozenset(lfn for name, lfn in produced if (name, lfn) in batch.registered) if produced else _NOTHING_TAKEN
        outcome, status, reason = event_outcomes.end_merge(conn, ending, job, listed, records, task, batch, now, error, _job_row,
                                                           _collect_files, taken, settings.report.merge_input_extra_attempts)
        if outcome == "applied" and status == _FINISHED and produced:
            batch.registered.update(produced)
    elif job.kind == JOB_KIND_JUMBO:
        outcome, status, reason = event_outcomes.end_jumbo(conn, ending, job, batch, now, error, _job_row)
    else:
        outcome, status, reason = event_outcomes.end_es(conn, ending, job, listed, records, task, batch, now, error, _job_row,
                                                        _collect_files)
    return EndResult(job.id, outcome, ending.line, status, reason)


def _error_of(ending: Ending) -> tuple[str, int, str] | None:
    if ending.error is not None:
        return ending.error
    report = ending.report
    if report is not None and report.error_source is not None and report.error_code is not None:
        return (report.error_source, report.error_code, report.error_diag or "")
    return None


def _retry_decision(conn: Any, job: Any, error: tuple[str, int, str] | None, report: ExecutorReport | None,
                    files_view: dict[int, FileRecord], task: Any, settings: Settings, now: datetime,
                    rules: Sequence[RetryRule]) -> RetryDecision | None:
    """The retry module, on a failed job's errors (pilot/exe/... first, then the payload's exit code)."""
    if not rules:
        return None
    source, code, diag = error if error else (None, None, None)
    errors = job_errors(source, code, diag, report.trans_exit_code if report else None)
    failed = FailedJob(job.id, job.attempt_nr, vo=job.vo, prod_source_label=job.prod_source_label, architecture=job.architecture,
                       release=job.trans_uses, work_queue=job.work_queue, core_count=job.core_count, min_ram_count=job.min_ram_count,
                       max_pss=report.max_pss if report else None, n_events=report.n_events if report else None)
    chosen = select_rule(rules, failed, errors, now)
    if chosen is None:
        return None
    action = chosen[0].action
    options = options_from_dict(task.options or {})
    retry_base = (task.options or {}).get("retry_module", {})
    n_files, above = job_store.task_input_ram_counts(conn, task.id, task.ram_count) if action == "increase_memory" else (0, 0)
    state = TaskRetryState(
        ram_count=task.ram_count, ram_unit=task.ram_unit, base_ram_count=task.base_ram_count, cpu_time=task.cpu_time,
        cpu_time_unit=task.cpu_time_unit, n_files_per_job=options.n_files_per_job, n_events_per_job=options.n_events_per_job,
        n_gb_per_job=options.n_gb_per_job, n_max_files_per_job=options.n_max_files_per_job,
        base_n_gb_per_job=retry_base.get("base_n_gb_per_job"), base_n_max_files_per_job=retry_base.get("base_n_max_files_per_job"),
        n_input_files=n_files, n_input_files_above_task_ram=above,
        retry_ram_offset=options.retry_ram_offset, retry_ram_step=options.retry_ram_step, retry_ram_max=options.retry_ram_max,
        has_finished_jobs=job_store.task_has_finished_jobs(conn, task.id) if action == "increase_cputime" else False)
    site = job_store.site_row(conn, job.site) if action == "increase_cputime" else None
    site_resources = SiteResources(job.site or "", site.core_count, site.core_power, site.max_walltime, site.max_scratch_mb) if site \
        else SiteResources(job.site or "")
    return decide(rules, failed, errors, list(files_view.values()), state, site_resources, settings, now)


def _collect_retry(decision: RetryDecision, files_view: dict[int, FileRecord], task_id: int, task: Any, settings: Settings,
                   batch: _Batch, now: datetime) -> None:
    for change in decision.file_changes:
        if change.file_id in files_view:
            batch.file_limits[change.file_id] = files_view[change.file_id]
    change = decision.task_change
    if change is None:
        return
    values = batch.task_values.setdefault(task_id, {})
    if change.ram_count is not None:
        values["ram_count"] = change.ram_count
        types = load_resource_types(settings.resource_types)
        cores = task.core_count or 1
        per_core = ram_per_core(change.ram_count, task.ram_unit, task.base_ram_count, cores, settings.refine.memory_compensation)
        values["resource_type"] = match_resource_type(types, cores, per_core) or task.resource_type
    if change.cpu_time is not None:
        values["cpu_time"] = change.cpu_time
    if change.recalculate:
        values["walltime_unit"] = None  # JEDI's requestTaskParameterRecalculation: the finalizer recomputes
    if change.options or change.base_options:
        options = dict(values.get("options") or task.options or {})
        options.update(change.options)
        base = dict(options.get("retry_module") or {})
        base.update({f"base_{key}": value for key, value in change.base_options.items()})
        options["retry_module"] = base
        values["options"] = options
    values["modified_at"] = now


def _job_row(job: Any, propagation: Propagation, ending: Ending, error: tuple[str, int, str] | None, now: datetime) -> tuple:
    """The job's new END_COLUMNS values, then its guard (id, the status and attempt decided on)."""
    report = ending.report
    source, code, diag = error if error and propagation.job_status != _FINISHED else (None, None, None)
    if report is None:
        return (propagation.job_status, ending.sub_status, source, code, diag, None, None, None, None, None, None, None,
                job.started_at, now, now, now, job.id, job.status, job.attempt_nr)
    output_bytes = 0
    for output in report.outputs:
        output_bytes += output.size or 0
    return (propagation.job_status, ending.sub_status, source, code, diag, report.trans_exit_code, report.wall_time, report.cpu_time,
            report.max_pss, report.max_rss, report.n_events, output_bytes,
            report.started_at or job.started_at, report.ended_at or now, now, now, job.id, job.status, job.attempt_nr)


def _collect_files(propagation: Propagation, job: Any, listed: list[Any], batch: _Batch, stay_on_site: bool = False) -> None:
    batch.file_updates.extend(propagation.file_updates)
    counters = batch.counters
    lfn_of: dict[int, str] | None = None
    for change in propagation.file_updates:
        delta = change.delta
        if delta is not None:  # summed as plain numbers (COUNTERS order): this runs for every file of every report
            total = counters.get(delta.dataset_id)
            if total is None:
                total = counters[delta.dataset_id] = [0] * len(COUNTERS)
            total[0] += delta.n_files_used
            total[1] += delta.n_files_finished
            total[2] += delta.n_files_failed
            total[3] += delta.n_files_on_hold
            total[4] += delta.n_events_used
            total[5] += delta.n_events
            total[6] += delta.n_files_to_be_used
            total[7] += delta.n_files
        values = change.values
        if not values:
            continue
        # A finished output; or an unmerged output its job produced (tagged with it), not an unmerged
        # input a failed merge job gave back, which is registered already.
        if (change.status == _F_FINISHED and "keep_track" in values) or (change.status == _F_MERGING and "boundary_id" in values):
            if lfn_of is None:
                lfn_of = {jf.file_id: jf.lfn for jf in listed}
            batch.outputs.append((change.file_id, job.site, lfn_of.get(change.file_id), values.get("guid"), values.get("size"),
                                  values.get("checksum"), values.get("n_events"), stay_on_site))


def _write(conn: Any, batch: _Batch, records: dict[int, FileRecord], jobs: dict[int, Any], settings: Settings, now: datetime) -> None:
    job_store.set_file_limits(conn, list(batch.file_limits.values()))
    if job_store.end_jobs(conn, batch.job_rows) != len(batch.job_rows):
        raise Conflict("a job changed while its report was applied")
    if job_store.update_files(conn, batch.file_updates) != len(batch.file_updates):
        raise Conflict("a file record changed while a job's report was applied")
    job_store.add_counters(conn, [DatasetDelta(dataset_id, *total) for dataset_id, total in batch.counters.items()], now)
    for task_id, values in sorted(batch.task_values.items()):
        job_store.update_task(conn, task_id, values)
    if batch.outputs:
        targets = batch.read_targets(conn, {records[o[0]].dataset_id for o in batch.outputs})
        endpoints = job_store.write_endpoints(conn, {o[1] for o in batch.outputs})
        rows = []
        for file_id, site, lfn, guid, size, checksum, events, stay_on_site in batch.outputs:
            name, destination = targets[records[file_id].dataset_id]
            # stayOutputOnSite (split rule SO): the file stays where its job ran, whatever the dataset's destination.
            endpoint = endpoints.get(site or "") if stay_on_site else (destination or endpoints.get(site or ""))
            rows.append((name, endpoint, lfn, guid, size, checksum, events))
        if job_store.register_outputs(conn, rows, now) != len(rows):
            # Checked beforehand, so another process registered one of these files meanwhile: replayed,
            # the job whose file it was not fails.
            raise Conflict("an output file was registered by another job while this report was applied")


# ------------------------------------------------------------------------------------------- kills

@dataclass(frozen=True)
class KillResult:
    job_id: int
    outcome: str  # killed | tobekilled | refused
    status: str | None
    reason: str

    def as_item(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "outcome": self.outcome, "status": self.status, "reason": self.reason}


def kill_jobs(store: Any, job_ids: Sequence[int], settings: Settings, now: datetime, *, code: int | None = None,
              killed_by: str = "a person") -> list[KillResult]:
    """Kill jobs (panda-server §2.8): queued ones end at once (cancelled by a person, closed by the
    system, per `code`), their input back in the pool with an attempt used but no failure; a job on a
    worker gets `tobekilled` and ends when its executor reports."""
    fields.integer(code, "--code", -fields.INT32_MAX - 1, fields.INT32_MAX)  # kept as the jobs' error_code
    with store.read() as conn:
        current = job_store.read_jobs(conn, job_ids)
    endings, to_stop, results = [], [], {}
    for job_id in job_ids:
        job = current.get(job_id)
        if job is None:
            results[job_id] = KillResult(job_id, "refused", None, f"unknown job {job_id}")
            continue
        plan = plan_kill(job.status, code, killed_by)
        if plan is None:
            results[job_id] = KillResult(job_id, "refused", job.status, f"job {job_id} is already {job.status}")
        elif plan.new is None:
            to_stop.append((job_id, plan))
        else:
            endings.append(Ending(job_id, plan.new.value, sub_status=plan.sub_status, expected_status=job.status,
                                  error=("kill", code if code is not None else 0, plan.reason)))
    if to_stop:
        with store.begin() as conn:
            for job_id, plan in to_stop:
                job_store.mark_to_be_killed(conn, [job_id], plan.sub_status, now)
                results[job_id] = KillResult(job_id, "tobekilled", current[job_id].status,
                                             f"{plan.reason}: its executor is told to stop at the next heartbeat")
    for ended in end_jobs_safely(store, endings, settings, now):
        outcome = "killed" if ended.outcome == "applied" else "refused"
        results[ended.job_id] = KillResult(ended.job_id, outcome, ended.status, ended.reason or _kill_reason(endings, ended.job_id))
    return [results[job_id] for job_id in job_ids if job_id in results]


def _kill_reason(endings: Sequence[Ending], job_id: int) -> str:
    ending = next(e for e in endings if e.job_id == job_id)
    return ending.error[2] if ending.error else ""


# -------------------------------------------------------------------------------------- heartbeats

@dataclass(frozen=True)
class BeatReply:
    """What an executor hears back: `command` is "tobekilled" when it must stop the job."""

    job_id: int
    line: int | None
    status: str | None
    command: str | None
    reason: str = ""

    def as_item(self) -> dict[str, Any]:
        return {"line": self.line, "job_id": self.job_id, "status": self.status, "command": self.command, "reason": self.reason or None}


def take_heartbeats(store: Any, beats: Sequence[Heartbeat], now: datetime, batch_size: int = 500) -> list[BeatReply]:
    """Apply heartbeats with PanDA's guards (job_states._heartbeat); reply per beat."""
    replies: list[BeatReply] = []
    for start in range(0, len(beats), max(batch_size, 1)):
        with store.begin() as conn:
            replies.extend(_beat_batch(conn, beats[start:start + batch_size], now))
    return replies


def _beat_batch(conn: Any, beats: Sequence[Heartbeat], now: datetime) -> list[BeatReply]:
    jobs = job_store.lock_jobs(conn, [b.job_id for b in beats])
    # The job as the batch has left it so far (a batch may carry several beats for one job).
    state = {job_id: {"status": job.status, "started_at": job.started_at, "ended_at": job.ended_at,
                      "state_changed_at": job.state_changed_at} for job_id, job in jobs.items()}
    replies, rows = [], {}
    for beat in beats:
        job = jobs.get(beat.job_id)
        if job is None:
            replies.append(BeatReply(beat.job_id, beat.line, None, "tobekilled", f"unknown job {beat.job_id}"))
            continue
        if beat.attempt_nr is not None and beat.attempt_nr != job.attempt_nr:
            replies.append(BeatReply(job.id, beat.line, job.status, "tobekilled",
                                     f"attempt mismatch: job {job.id} is at attempt {job.attempt_nr}"))
            continue
        current = state[job.id]
        if current["status"] in JOB_FINAL:
            replies.append(BeatReply(job.id, beat.line, current["status"], "alreadydone", f"job {job.id} is already {current['status']}"))
            continue
        move = next_status(current["status"], JobEvent.HEARTBEAT, beat.status)
        if move.changed:
            new = move.new.value
            current.update(status=new, state_changed_at=now)
            if new == JobStatus.RUNNING.value and current["started_at"] is None:
                current["started_at"] = now  # PanDA: startTime on the first running
            if new in (JobStatus.HOLDING.value, JobStatus.TRANSFERRING.value) and current["ended_at"] is None:
                current["ended_at"] = now  # PanDA: endTime on the first holding
        rows[job.id] = {"b_id": job.id, "b_status": job.status, "heartbeat_at": now, "modified_at": now, **current}
        # A guard that kept the status (e.g. running after holding) is worth saying; "already running" is not.
        reason = move.reason if not move.changed and beat.status != current["status"] else ""
        replies.append(BeatReply(job.id, beat.line, current["status"], job.command_to_pilot, reason))
    if job_store.beat_jobs(conn, list(rows.values())) != len(rows):
        raise Conflict("a job changed while its heartbeat was applied")
    return replies


# ------------------------------------------------------------------------------------ job reports

def ingest_reports(store: Any, reports: Iterable[ExecutorReport], settings: Settings, now: datetime) -> list[EndResult]:
    """Apply executors' final reports; the retry rules are read once for the whole input. `reports`
    is consumed lazily, one batch at a time (a stream of 100,000 reports is never held at once)."""
    with store.read() as conn:
        rules = rule_store.load_rules(conn, now)
    endings = (Ending(r.job_id, r.status, line=r.line, attempt_nr=r.attempt_nr, report=r) for r in reports)
    results = end_jobs_safely(store, endings, settings, now, rules)
    # A build job that ended releases (or closes) the run jobs at its site (engine.jobs.builds).
    from jedictl.engine.jobs.builds import settle_builds  # imports this module
    from jedictl.engine.jobs.preprocess import settle_preprocessing

    settle_builds(store, settings, now)
    settle_preprocessing(store, now)  # a preprocess job that ended moves its task on
    return results
