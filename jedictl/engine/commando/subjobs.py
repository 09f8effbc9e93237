"""Ganga's collective subjob operations (seed 003 "Subjob monitoring, kill, resubmit"; docs/subjobs.md):
resubmitting jobs, and killing or resubmitting many with Ganga's `keep_going` hint.

keep_going (the default): every job is tried and every failure listed. Without it, the jobs are taken in
the order given and the first failure stops the operation: it is named, the jobs after it are reported
`not_attempted`, and what was done before it stays done. With keep_going, kill and resubmit are bulk
paths (a batch of jobs per transaction, set-based reads and writes); without it they are emulated one
job at a time, as Ganga emulates keep_going=False over a bulk backend ("keep_going=True is guaranteed to
be always faster").

A resubmission transaction locks the jobs' tasks, judges every job (`subjob_rules.refusal`) before it
writes anything, then records the accepted ones once (`job_resubmissions`, keyed by the job), gives
their input one more attempt and -- for an ended task -- reopens the task, all or nothing. So the jobs
not resubmitted stay as they were (Ganga: "not submitted subjobs ... are left in the new state"), and
when none is resubmitted the task keeps its previous status (Ganga: "if all subjobs would be in new
state after submission the entire master job is rolled back"): an ended task is reopened only by a
resubmission that commits. A batch whose guarded writes find the store changed (a racing command
resubmitted one of its jobs) is rolled back and redone job by job, so only that job is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.commando import subjob_rules
from jedictl.engine.commando.subjob_rules import Candidate, InputRecord
from jedictl.engine.jobs.outcomes import KillResult, kill_jobs
from jedictl.engine.jobs.retry_rules import FailedJob, job_errors, select_rule
from jedictl.engine.task.final_status import DatasetRecord, from_row
from jedictl.errors import BadInput, NotFound
from jedictl.model.files import FileRecord
from jedictl.store import retry_rules as rule_store
from jedictl.store import subjobs as subjob_store
from jedictl.store import task_commands as command_store
from jedictl.store import tasks as task_store
from jedictl.store import workqueue as workqueue_store

_NO_LEASE = {"lease_owner": None, "lease_expires_at": None}


@dataclass(frozen=True)
class SubjobResult:
    job_id: int
    outcome: str  # resubmitted | refused | not_attempted
    task_job: str | None
    status: str | None  # the job's status
    task_status: str | None  # the task's status after (reopened: ready)
    reason: str

    def as_item(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "job_id": self.job_id, "task_job": self.task_job, "status": self.status,
                "task_status": self.task_status, "reason": self.reason}


class _Changed(Exception):
    """The store moved under the resubmission: its transaction is rolled back whole."""

    def __init__(self, ref: str | None, message: str):
        super().__init__(message)
        self.ref = ref


def resubmit_jobs(store: Any, job_ids: Sequence[int], settings: Settings, now: datetime, *, by: str,
                  keep_going: bool = True, batch_size: int = 500) -> list[SubjobResult]:
    """Resubmit jobs in order. Keeping going, a batch of jobs per transaction (set-based reads and
    writes); without `keep_going`, one job per transaction, stopping at the first refusal."""
    results: list[SubjobResult] = []
    with store.read() as conn:
        rules = rule_store.load_rules(conn, now)
    size = max(batch_size, 1) if keep_going else 1
    for start in range(0, len(job_ids), size):
        batch = list(job_ids[start:start + size])
        done = _resubmit_batch(store, batch, rules, now, by)
        if done is None:  # the store moved under the batch (a racing command): each job on its own
            done = [outcome for job_id in batch for outcome in (_resubmit_batch(store, [job_id], rules, now, by) or [])]
        results.extend(done)
        stop = next((result for result in done if result.outcome != "resubmitted"), None)
        if stop is not None and not keep_going:
            results.extend(SubjobResult(later, "not_attempted", None, None, None, f"not attempted: job {stop.task_job or stop.job_id} "
                                        "failed first (--no-keep-going)") for later in job_ids[start + size:])
            break
    return results


def task_resubmittable(store: Any, task_id: int) -> list[int]:
    """The failed subjobs of a task (`jobs resubmit --task`), in TASK.INDEX order; NotFound for no task."""
    with store.read() as conn:
        if task_store.get_task(conn, task_id) is None:
            raise NotFound(f"task {task_id} does not exist")
        return subjob_store.resubmittable_jobs(conn, task_id)


def _resubmit_batch(store: Any, job_ids: Sequence[int], rules: Sequence[Any], now: datetime, by: str) -> list[SubjobResult] | None:
    """One transaction: lock the jobs' tasks, judge every job, write the accepted ones together -- or
    nothing. None when a guarded write found the store changed (a racing resubmission) and there is more
    than one job to tell apart; for one job that is its refusal."""
    try:
        with store.begin() as conn:
            return _judge_and_write(conn, job_ids, rules, now, by)
    except _Changed as exc:
        if len(job_ids) > 1:
            return None
        return [SubjobResult(job_ids[0], "refused", exc.ref, None, None, str(exc))]


def _judge_and_write(conn: Any, job_ids: Sequence[int], rules: Sequence[Any], now: datetime, by: str) -> list[SubjobResult]:
    rows = subjob_store.read_jobs(conn, job_ids)
    tasks = {task_id: command_store.lock_task(conn, task_id) for task_id in sorted({row.task_id for row in rows.values()})}
    inputs = subjob_store.inputs_of_jobs(conn, list(rows))
    results: dict[int, SubjobResult] = {}
    accepted: dict[int, list[Candidate]] = {}
    for job_id in job_ids:
        row = rows.get(job_id)
        if row is None:
            results[job_id] = SubjobResult(job_id, "refused", None, None, None, f"unknown job {job_id}")
            continue
        task = tasks[row.task_id]
        job = _candidate(row, task, inputs.get(job_id, []), rules, now)
        reason = subjob_rules.refusal(job)
        if reason is not None:
            results[job_id] = SubjobResult(job_id, "refused", job.ref, row.status, task.status, reason)
        else:
            accepted.setdefault(row.task_id, []).append(job)
    records, resets = [], []
    for task_id, jobs in accepted.items():
        task = tasks[task_id]
        decided = subjob_rules.plan(jobs, [from_row(DatasetRecord, d) for d in command_store.datasets_of(conn, task_id)])
        if isinstance(decided, str):
            results.update({job.job_id: SubjobResult(job.job_id, "refused", job.ref, job.status, task.status, decided) for job in jobs})
            continue
        owner = {record.file.id: job.job_id for job in jobs for record in job.inputs}
        resets += [(owner[file_id], file_id, attempt_nr, values) for file_id, attempt_nr, values in decided.files]
        command_store.change_datasets(conn, decided.datasets, now)
        new_status = task.status
        if decided.task_status is not None:
            if not task_store.change_status(conn, task_id, decided.task_status, [task.status], f"jobs {', '.join(j.ref for j in jobs)} resubmitted",
                                            by, now, old_status=None, frozen_at=None, error_dialog=None, **_NO_LEASE):
                raise _Changed(jobs[0].ref, f"job {jobs[0].ref}: task {task_id} changed while its jobs were resubmitted; nothing was changed")
            new_status = decided.task_status
        for position, job in enumerate(jobs):
            n = sum(1 for record in job.inputs if record.file.keep_track)
            records.append((job.job_id, task_id, job.status, task.status, n, by, now))
            reopened = f"; task {task_id} reopened ({task.status} -> {new_status})" if position == 0 and new_status != task.status else ""
            results[job.job_id] = SubjobResult(job.job_id, "resubmitted", job.ref, job.status, new_status,
                                               f"{n} input record{'s' if n != 1 else ''} back in the pool with one more attempt"
                                               f"{reopened}; the next generate makes the new job")
    if records:
        ref = next(result.task_job for result in results.values() if result.outcome == "resubmitted")
        if not subjob_store.record_resubmissions(conn, records):
            raise _Changed(ref, f"job {ref} was already resubmitted (just now)")
        if subjob_store.reset_inputs(conn, resets) != len(resets):
            raise _Changed(ref, f"job {ref}: its input changed while it was resubmitted; nothing was changed")
        for task_id in accepted:  # an ended work-queue element whose block has input to process again is queued again
            workqueue_store.requeue_ended(conn, by, now, task_id)
    return [results[job_id] for job_id in job_ids]


def _candidate(row: Any, task: Any, inputs: Sequence[Any], rules: Sequence[Any], now: datetime) -> Candidate:
    records = tuple(InputRecord(FileRecord(r.id, r.dataset_id, r.type, r.status, r.attempt_nr, r.max_attempt, r.failed_attempt,
                                           r.max_failure, bool(r.keep_track)), r.lfn, r.last_job_id, r.job_attempt_nr) for r in inputs)
    leased = task.lease_owner if task.lease_owner and task.lease_expires_at and task.lease_expires_at > now else None
    return Candidate(f"{row.task_id}.{row.task_job_index}", row.id, row.status, row.kind, row.resubmitted_at, task.id, task.status,
                     leased, records, _no_retry_rule(row, rules, now))


def _no_retry_rule(row: Any, rules: Sequence[Any], now: datetime) -> str | None:
    """The no_retry rule the retry module chose for the job's error, named (None: no such rule)."""
    errors = job_errors(row.error_source, row.error_code, row.error_diag, row.trans_exit_code)
    if not rules or not errors:
        return None
    failed = FailedJob(row.id, row.attempt_nr, vo=row.vo, prod_source_label=row.prod_source_label, architecture=row.architecture,
                       release=row.trans_uses, work_queue=row.work_queue, core_count=row.core_count, min_ram_count=row.min_ram_count,
                       max_pss=row.max_pss, n_events=row.n_events)
    chosen = select_rule(rules, failed, errors, now)
    if chosen is None or chosen[0].action != "no_retry" or not chosen[0].active:
        return None  # a passive rule only reports what it would do
    rule, error = chosen
    return f"retry rule {rule.id} ({error.source}:{error.code})"


def kill_in_order(store: Any, job_ids: Sequence[int], settings: Settings, now: datetime, *, code: int | None = None,
                  keep_going: bool = True) -> list[KillResult]:
    """`jobs kill` with Ganga's keep_going: the bulk kill, or one job at a time stopping at the first refusal."""
    if keep_going:
        return kill_jobs(store, job_ids, settings, now, code=code)
    results: list[KillResult] = []
    for position, job_id in enumerate(job_ids):
        result = kill_jobs(store, [job_id], settings, now, code=code)[0]
        results.append(result)
        if result.outcome == "refused":
            results.extend(KillResult(later, "not_attempted", None, f"not attempted: job {job_id} failed first (--no-keep-going)")
                           for later in job_ids[position + 1:])
            break
    return results


def copy_job(store: Any, job_id: int) -> dict[str, Any]:
    """`jobs copy`: the document of a new task that runs the job's master input files alone
    (`subjob_rules.copy_document`); NotFound for no such job, BadInput when it cannot be copied."""
    with store.read() as conn:
        row = subjob_store.read_job(conn, job_id)
        if row is None:
            raise NotFound(f"job {job_id} does not exist")
        ref = f"{row.task_id}.{row.task_job_index}"
        if row.kind != "normal":
            raise BadInput(f"job {ref} is a {row.kind} job: it reads its task's unmerged files, not a copyable input", "JOB")
        params = task_store.get_params(conn, row.task_id)
        lfns = [r.lfn for r in subjob_store.job_inputs(conn, job_id) if r.master_id is None and r.type == "input"]
    if params is None:
        raise NotFound(f"task {row.task_id} keeps no submitted document")
    try:
        return subjob_rules.copy_document(params.format, params.document, ref, lfns)
    except ValueError as exc:
        raise BadInput(str(exc), "JOB") from None
