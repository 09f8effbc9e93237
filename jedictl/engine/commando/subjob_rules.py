"""Ganga's subjob operations on jedictl's jobs (seed 003 "GPI operations on subjobs", "Subjob submission",
"Subjob monitoring, kill, resubmit"; docs/subjobs.md): when a job may be resubmitted, what its
resubmission writes, and how the numbering of the two systems meets. Pure.

A task is Ganga's master job and its jobs are the subjobs. Ganga resubmits the same subjob; jedictl,
like JEDI, never sends a job through its states twice (peers.md §5 lesson 5): a job is an attempt, and
resubmitting it gives its input one more attempt, from which the next `generate` makes the new job --
linked to the old one in `job_retry_history`, as every retry is. So a resubmission is `task retry`
restricted to one job's input (the same reset, `rules.plan_retry`, with exactly one attempt more),
taken only where the automatic retry gave up: every tracked input record of the job is `failed`, at
the attempt the job left it, with the job as its last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jedictl.engine.commando.rules import plan_retry
from jedictl.engine.task.final_status import DatasetRecord
from jedictl.model import FileStatus, JobStatus, TaskStatus
from jedictl.model.files import FileRecord

#: A job is resubmitted from these statuses only (Ganga: failed or killed subjobs).
RESUBMITTABLE_JOBS = frozenset({JobStatus.FAILED.value, JobStatus.CANCELLED.value, JobStatus.CLOSED.value})
#: Tasks whose jobs are resubmitted as they are: the next `generate` takes the input given back.
LIVE_TASKS = frozenset({TaskStatus.READY.value, TaskStatus.SCOUTING.value, TaskStatus.RUNNING.value})
#: Ended tasks a resubmission reopens (to `ready`, as `task retry` does): Ganga's master goes from any
#: state back to submitted when one of its subjobs is resubmitted.
REOPENED_TASKS = frozenset({TaskStatus.FINISHED.value, TaskStatus.FAILED.value})


@dataclass(frozen=True)
class InputRecord:
    """One input record of the job being resubmitted, as it is now."""

    file: FileRecord
    lfn: str
    last_job_id: int | None  # the job that holds (or held last) the record
    job_attempt_nr: int  # the attempt this job ran it at


@dataclass(frozen=True)
class Candidate:
    """The job as a resubmission judges it."""

    ref: str  # "12.3"
    job_id: int
    status: str
    kind: str
    resubmitted_at: Any  # when it already was, else None
    task_id: int
    task_status: str
    leased_by: str | None  # an agent pass holding the task now (lease not expired), else None
    inputs: tuple[InputRecord, ...]
    no_retry_rule: str | None = None  # "retry rule 4 (pilot:1099)": a no_retry rule matches its error


@dataclass(frozen=True)
class ResubmitPlan:
    files: tuple[tuple[int, int, Mapping[str, Any]], ...]  # (file id, attempt it is at, new values)
    datasets: tuple[tuple[int, Mapping[str, int], str | None], ...]  # (dataset id, counter deltas, new status)
    task_status: str | None  # the task's new status (an ended task reopened), None: unchanged


def refusal(job: Candidate) -> str | None:
    """Why the job is not resubmitted (one line naming it), or None."""
    ref = f"job {job.ref}"
    if job.resubmitted_at is not None:
        return f"{ref} was already resubmitted (at {job.resubmitted_at:%Y-%m-%d %H:%M:%S})"
    if job.status == JobStatus.FINISHED.value:
        return f"{ref} finished: only a failed or killed job is resubmitted (`jedictl jobs copy {job.ref}` runs its input again as a new task)"
    if job.status not in RESUBMITTABLE_JOBS:
        return f"{ref} is {job.status}: only a job that ended failed, cancelled or closed is resubmitted (kill it first)"
    if job.kind != "normal":
        return f"{ref} is a {job.kind} job: its input is merged again by the next merge job at its site, not resubmitted"
    if job.task_status not in LIVE_TASKS | REOPENED_TASKS:
        return (f"{ref}: its task {job.task_id} is {job.task_status}; a resubmission takes jobs of a task that is "
                "ready, scouting, running, finished or failed")
    tracked = [record for record in job.inputs if record.file.keep_track]
    if not tracked:
        return f"{ref} has no input records to run again"
    for record in tracked:
        if record.last_job_id != job.job_id:
            return f"{ref}: its input {record.lfn} is now with job {record.last_job_id} (retried automatically)"
        if record.file.status == FileStatus.READY.value:
            return f"{ref}: its input {record.lfn} is back in the pool with attempts left; the next generate retries it"
        if record.file.status != FileStatus.FAILED.value:
            return f"{ref}: its input {record.lfn} is {record.file.status}"
    if job.no_retry_rule:
        return (f"{ref}: {job.no_retry_rule} says no_retry for its error, so retrying cannot help; "
                f"`jedictl task retry {job.task_id}` overrides the rules for the whole task")
    if job.leased_by:
        return f"{ref}: task {job.task_id} is leased by {job.leased_by} (an agent pass is working on it); try again"
    return None


def plan(jobs: Sequence[Candidate], datasets: Sequence[DatasetRecord]) -> ResubmitPlan | str:
    """What resubmitting jobs of one task (each accepted by `refusal`) writes, or why it cannot: their
    tracked input records back to `ready` with one attempt (and one failure) more than they had, the
    counters given back once for them all, and an ended task reopened to `ready` with its datasets as
    `task retry` leaves them."""
    records = [record.file for job in jobs for record in job.inputs if record.file.keep_track]
    task_status = jobs[0].task_status
    refs = ", ".join(job.ref for job in jobs)
    reopen = task_status in REOPENED_TASKS
    retry = plan_retry(task_status if reopen else TaskStatus.FAILED.value, None, datasets, records, attempt_increase=1)
    if retry.outcome != "retried":
        return f"job {refs}: {retry.reason or 'its input cannot be given another attempt'}"
    at = {record.id: record.attempt_nr for record in records}
    files = tuple((change.file_id, at[change.file_id], {k: (str(v) if k == "status" else v) for k, v in change.values.items()})
                  for change in retry.files if change.file_id in at)
    if len(files) != len(records):
        return f"job {refs}: {len(records) - len(files)} of the input records cannot be given another attempt"
    # A live task keeps its datasets' statuses (they are in use); an ended one gets task retry's.
    dataset_changes = tuple((d.dataset_id, dict(d.deltas), (str(d.status) if reopen and d.status is not None else None))
                            for d in retry.datasets if d.deltas or reopen)
    return ResubmitPlan(files, dataset_changes, TaskStatus.READY.value if reopen else None)


def subjob_index(subjob_id: int) -> int:
    """jedictl's TASK.INDEX of Ganga's 0-based subjob id: the task's jobs are numbered from 1 in the order
    they were made, Ganga's subjobs from 0 in the order the splitter made them."""
    if subjob_id < 0:
        raise ValueError("a subjob id is 0 or more")
    return subjob_id + 1


# ------------------------------------------------------------------------------------------- copy

_INPUT_PARAM_TYPES = ("input", "pseudo_input")
_OUTPUT_PARAM_TYPES = ("output", "log")


def copy_document(format: str, document: Mapping[str, Any], ref: str, lfns: Sequence[str]) -> dict[str, Any]:
    """Ganga's `subjob.copy()`: "another job (not subjob)", made new and left to the user to edit and submit.

    The task's document as it was submitted (a jedictl spec or PanDA task parameters), made into a new
    task that reads the job's master input files alone (`files`, the key both formats have; `offset` is
    dropped, include/exclude still apply), with no parent, and with its name and its output and log
    dataset names given the suffix `.copy<TASK>_<INDEX>` -- an output dataset belongs to one task. The
    secondary inputs, the splitting and everything else are the task's. ValueError when it cannot be done."""
    suffix = ".copy" + ref.replace(".", "_")
    copied: dict[str, Any] = _deep_copy(document)
    files = sorted(dict.fromkeys(lfns))
    if not files:
        raise ValueError(f"job {ref} read no input files: there is nothing to copy")
    if format == "panda":
        copied["taskName"] = str(copied.get("taskName", "task")) + suffix
        master = next((item for item in copied.get("jobParameters", []) if isinstance(item, dict)
                       and item.get("type") == "template" and item.get("param_type") in _INPUT_PARAM_TYPES), None)
        if master is None or master.get("param_type") == "pseudo_input" or copied.get("noInput"):
            raise ValueError(f"job {ref} reads no input dataset: its task makes its jobs from no input")
        master["files"] = files
        master.pop("offset", None)
        for item in copied.get("jobParameters", []):
            if isinstance(item, dict) and item.get("param_type") in _OUTPUT_PARAM_TYPES and item.get("dataset"):
                item["dataset"] = _renamed(item["dataset"], suffix)
        for key in ("log", "log_merge"):
            if isinstance(copied.get(key), dict) and copied[key].get("dataset"):
                copied[key]["dataset"] = _renamed(copied[key]["dataset"], suffix)
        return copied
    copied["name"] = str(copied.get("name", "task")) + suffix
    copied.pop("parent", None)
    inputs = copied.get("inputs") or []
    if copied.get("no_input") or not inputs or not isinstance(inputs[0], dict):
        raise ValueError(f"job {ref} reads no input dataset: its task makes its jobs from no input")
    inputs[0]["files"] = files
    inputs[0].pop("offset", None)
    for output in [*(copied.get("outputs") or []), copied.get("log")]:
        if isinstance(output, dict) and output.get("dataset"):
            output["dataset"] = _renamed(output["dataset"], suffix)
    return copied


def _renamed(name: str, suffix: str) -> str:
    """`suffix` inside the name: before the trailing `/` of an output container."""
    return name[:-1] + suffix + "/" if name.endswith("/") else name + suffix


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _deep_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_deep_copy(item) for item in value]
    return value
