"""Operator commands on tasks (JEDI's Task Commando): which command is allowed in which status, the
transient "doing" status and the final "done" status of each, what happens to the task's jobs, and the
retry/incexec reset of input files (jedi-inventory.md §9, panda-server.md §1.2, §2.8, §2.9; seed 001
"Task Commando"; seed 000 "Task retry", "Broken tasks").

A command is validated twice, as JEDI does: when it is queued (`refusal`) and again when the commando
pass takes it (`start`), because the task may have moved in between. What a kill code does to one job
(archived at once, or told to stop) is `jobs.states.plan_kill`; this module says which jobs a command
kills and with which code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jedictl.engine.task.final_status import TOABORT, DatasetRecord
from jedictl.model import (
    DATASET_INPUT_TYPES,
    TASK_FINAL,
    DatasetStatus,
    DatasetType,
    FileStatus,
    JobStatus,
    TaskStatus,
)
from jedictl.model.files import FileRecord

#: JEDI statuses that `model.TaskStatus` does not list yet (reassign's doing and done statuses).
TOREASSIGN = "toreassign"
REASSIGNING = "reassigning"
STAGING = "staging"

#: The PanDA kill code each command uses (panda-server.md §2.8, jedi-inventory.md §9.3).
KILL_CODE_JEDI = 50  # killed by JEDI (kill command) -> cancelled
KILL_CODE_REASSIGN = 51  # reassigned by JEDI -> closed, sub-status toreassign
KILL_CODE_FINISH = 52  # force-kill by JEDI (hard finish) -> cancelled

#: Jobs not yet taken by an executor: what a soft finish or a reassign kills, what pause throttles.
QUEUED_JOB_STATUSES = frozenset({JobStatus.DEFINED, JobStatus.ASSIGNED, JobStatus.ACTIVATED, JobStatus.THROTTLED})
ACTIVE_JOB_STATUSES = frozenset(set(JobStatus) - {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.CLOSED})

_KILL_REFUSED = frozenset({TaskStatus.FINISHED, TaskStatus.DONE, TaskStatus.PREPARED, TaskStatus.BROKEN,
                           TaskStatus.ABORTED, TOABORT, TaskStatus.ABORTING, TaskStatus.FAILED})


@dataclass(frozen=True)
class CommandRule:
    """One row of the command table: accepted statuses, and the statuses the command moves the task to."""

    command: str
    accepted: frozenset[str] | None  # None: every status not in `refused`
    refused: frozenset[str] = frozenset()
    doing: str | None = None  # transient status while JEDI works on it
    done: str | None = None  # status once the work is done
    kill_code: int | None = None
    qualifiers: frozenset[str] = frozenset()

    def accepts(self, status: str) -> bool:
        return status not in self.refused if self.accepted is None else status in self.accepted


COMMANDS: dict[str, CommandRule] = {rule.command: rule for rule in (
    CommandRule("kill", None, _KILL_REFUSED, TaskStatus.ABORTING, TOABORT, KILL_CODE_JEDI),
    CommandRule("finish", None, _KILL_REFUSED, TaskStatus.FINISHING, TaskStatus.PASSED, KILL_CODE_FINISH, frozenset({"soft"})),
    CommandRule("retry", frozenset({TaskStatus.FINISHED, TaskStatus.FAILED, TaskStatus.EXHAUSTED}),
                doing=TaskStatus.TORETRY, done=TaskStatus.READY,
                qualifiers=frozenset({"sole", "keep", "transcend", "discard", "staged"})),
    CommandRule("incexec", frozenset({TaskStatus.FINISHED, TaskStatus.FAILED, TaskStatus.ABORTED, TaskStatus.DONE, TaskStatus.EXHAUSTED}),
                doing=TaskStatus.TOINCEXEC, done=TaskStatus.REREFINE, qualifiers=frozenset({"sole", "keep", "transcend"})),
    CommandRule("pause", None, frozenset(TASK_FINAL | {TaskStatus.PAUSED}), TaskStatus.PAUSED, TaskStatus.PAUSED),
    CommandRule("resume", frozenset({TaskStatus.PAUSED, TaskStatus.THROTTLED, STAGING})),
    CommandRule("avalanche", frozenset({TaskStatus.SCOUTING}), doing=TaskStatus.SCOUTING, done=TaskStatus.SCOUTED),
    CommandRule("reassign", frozenset({TaskStatus.DEFINED, TaskStatus.READY, TaskStatus.RUNNING, TaskStatus.SCOUTING, TaskStatus.SCOUTED,
                                       TaskStatus.PENDING, TaskStatus.ASSIGNING, TaskStatus.EXHAUSTED}),
                doing=TOREASSIGN, done=REASSIGNING, kill_code=KILL_CODE_REASSIGN, qualifiers=frozenset({"soft", "nokill", "hard"})),
    CommandRule("release", frozenset({TaskStatus.SCOUTING, TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.READY,
                                      TaskStatus.ASSIGNING, TaskStatus.DEFINED})),
)}
#: Statuses the commando moves a task into while it works (a task left there is picked up again).
DOING_STATUSES = frozenset({TaskStatus.ABORTING, TaskStatus.FINISHING, TaskStatus.TORETRY, TaskStatus.TOINCEXEC, TOREASSIGN})


def refusal(command: str, status: str, *, task_id: int | None = None, production_role: bool = True,
            qualifier: str | None = None) -> str | None:
    """None when the command may run on a task in `status`, else the one-line reason to print."""
    rule = COMMANDS.get(command)
    who = f"task {task_id}" if task_id is not None else "the task"
    if rule is None:
        return f"unknown command {command!r} (known: {', '.join(COMMANDS)})"
    if qualifier is not None and qualifier not in rule.qualifiers:
        known = ", ".join(sorted(rule.qualifiers)) or "none"
        return f"{command} takes no qualifier {qualifier!r} (allowed: {known})"
    if not rule.accepts(status):
        if command == "retry" and status == TaskStatus.BROKEN:
            return f"cannot retry {who}: it is broken; fix the task definition and submit a new task"
        return f"cannot {command} {who}: its status is {status} ({describe(rule)})"
    if command == "retry" and status == TaskStatus.EXHAUSTED and not production_role:
        return f"cannot retry {who}: retrying an exhausted task needs the production role"
    return None


def describe(rule: CommandRule) -> str:
    if rule.accepted is None:
        return f"{rule.command} is refused in {', '.join(sorted(rule.refused))}"
    return f"{rule.command} needs {' or '.join(sorted(rule.accepted))}"


@dataclass(frozen=True)
class CommandTask:
    """The `tasks` columns a command reads."""

    id: int
    status: str
    old_status: str | None = None
    walltime_unit: str | None = None  # set once scout statistics exist


@dataclass(frozen=True)
class CommandStart:
    """What taking a queued command does to the task and its jobs (before the jobs are gone)."""

    status: str  # the task's new status
    old_status: str | None  # value for tasks.old_status
    kill_job_statuses: frozenset[str] = frozenset()
    kill_code: int | None = None
    flip_jobs: tuple[str, str] | None = None  # (from, to) for every job of the task in `from`
    clear_waits: bool = False  # frozen_at and wait_until back to NULL (the task is no longer on hold)


def start(command: str, task: CommandTask, qualifier: str | None = None) -> CommandStart:
    """The doing status, the old status to keep, and the jobs to act on (§9.2, §9.3). Call `refusal` first."""
    rule = COMMANDS[command]
    status = task.status
    if status == TaskStatus.PENDING:
        old = task.old_status  # pending already remembers where the task came from
    elif status == TaskStatus.THROTTLED and command in ("pause", "reassign"):
        old = task.old_status
    elif status == TaskStatus.PAUSED:
        old = None
    else:
        old = status
    if command in ("kill", "finish", "reassign"):
        kill = ACTIVE_JOB_STATUSES
        if (command == "finish" and qualifier == "soft") or (command == "reassign" and qualifier in (None, "soft")):
            kill = QUEUED_JOB_STATUSES
        if command == "reassign" and qualifier == "nokill":
            kill = frozenset()
        return CommandStart(rule.doing or status, old, frozenset(kill), rule.kill_code)
    if command == "pause":
        return CommandStart(TaskStatus.PAUSED, old, flip_jobs=(JobStatus.ACTIVATED, JobStatus.THROTTLED))
    if command == "resume":
        target = task.old_status or TaskStatus.READY
        return CommandStart(target, None, flip_jobs=(JobStatus.THROTTLED, JobStatus.ACTIVATED), clear_waits=True)
    if command == "retry" and status == TaskStatus.EXHAUSTED and task.old_status in (TaskStatus.RUNNING, TaskStatus.SCOUTING):
        # exhausted in the middle of processing: the work simply goes on
        back = TaskStatus.RUNNING if task.old_status == TaskStatus.SCOUTING and task.walltime_unit else task.old_status
        return CommandStart(back, None, clear_waits=True)
    if command == "avalanche":
        return CommandStart(TaskStatus.SCOUTED, task.old_status)
    if command == "release":
        return CommandStart(status, task.old_status)
    return CommandStart(rule.doing or status, old)


def done_status(command: str, active_jobs: int) -> str | None:
    """kill/finish/reassign wait in their doing status until the task has no active job left."""
    return COMMANDS[command].done if active_jobs == 0 else None


@dataclass(frozen=True)
class FileChange:
    """New values for one `files` row, written as they are (the command holds the task's lock)."""

    file_id: int
    values: Mapping[str, Any]  # column -> new value


@dataclass(frozen=True)
class DatasetChange:
    """Counter deltas (any `datasets` counter, unlike job results' fixed `model.files.DatasetDelta`) and an
    optional new status for one dataset."""

    dataset_id: int
    deltas: Mapping[str, int] = field(default_factory=dict)  # counter column -> change
    status: str | None = None


def finish_files(datasets: Sequence[DatasetRecord], files: Iterable[FileRecord]) -> tuple[list[FileChange], list[DatasetChange]]:
    """A finish with no job left: every still-ready tracked input file is made terminal -- `failed` with no
    attempt left, as job results leave a file whose attempts are used up -- and counted failed, so the
    task's phase completes (JEDI updateDatasetsToFinishTask). A later retry gives it fresh attempts.

    A failed file counts as used (as one a job used up does), so `n_files_used` grows with
    `n_files_failed`, and the release watermark `n_files_to_be_used` is raised to cover it."""
    by_id = {d.id: d for d in datasets if d.type in DATASET_INPUT_TYPES}
    updates, counts = [], {}
    for file in files:
        if file.dataset_id in by_id and file.keep_track and file.status == FileStatus.READY and not file.exhausted:
            updates.append(FileChange(file.id, {"status": FileStatus.FAILED, "max_attempt": file.attempt_nr}))
            counts[file.dataset_id] = counts.get(file.dataset_id, 0) + 1
    deltas = []
    for dataset_id, n in sorted(counts.items()):
        dataset = by_id[dataset_id]
        change = {"n_files_failed": n, "n_files_used": n}
        raise_to = dataset.n_files_used + n - dataset.n_files_to_be_used
        if raise_to > 0:
            change["n_files_to_be_used"] = raise_to
        deltas.append(DatasetChange(dataset_id, change))
    return updates, deltas


@dataclass(frozen=True)
class RetryPlan:
    outcome: str  # "retried" | "unchanged" (back to the old status) | "exhausted" | "refused"
    status: str
    reason: str | None = None
    files: tuple[FileChange, ...] = ()
    datasets: tuple[DatasetChange, ...] = ()
    task_values: Mapping[str, Any] = field(default_factory=dict)
    retry_children: bool = True


def plan_retry(
    status: str,
    old_status: str | None,
    datasets: Sequence[DatasetRecord],
    files: Iterable[FileRecord],
    *,
    attempt_increase: int,
    incexec: bool = False,
    max_attempt: int | None = None,
    qualifiers: Iterable[str] = (),
    task_attempt_nr: int = 0,
    task_priority: int | None = None,
    task_max_attempt: int | None = None,
    job_max_attempt: int | None = None,
) -> RetryPlan:
    """JEDI retryTask for a task in toretry/toincexec whose previous status was `old_status`.

    Only unsuccessful inputs come back: exhausted files get `attempt_increase` more attempts (the
    setting RetrySettings.task_retry_attempt_increase) or the operator's `max_attempt` as their new
    ceiling; files left picked/running are put back to ready. incexec also brings back lost and missing
    files and forgets per-file RAM. Hard limits (skipped with `transcend`): `task_max_attempt` task
    attempts -> exhausted; a file reaching `job_max_attempt` -> refused.
    """
    qualifiers = set(qualifiers)
    previous = old_status or status
    if not COMMANDS["incexec" if incexec else "retry"].accepts(previous):
        return RetryPlan("refused", previous, f"cannot {'incexec' if incexec else 'retry'} a task that was {previous}")
    if "transcend" not in qualifiers and task_max_attempt is not None and task_attempt_nr >= task_max_attempt:
        return RetryPlan("exhausted", TaskStatus.EXHAUSTED, f"the task was already attempted {task_attempt_nr} times (limit {task_max_attempt})")

    by_dataset: dict[int, list[FileRecord]] = {}
    for file in files:
        by_dataset.setdefault(file.dataset_id, []).append(file)
    inputs = [d for d in datasets if d.type in DATASET_INPUT_TYPES]
    changed_masters: set[int] = set()
    file_updates: list[FileChange] = []
    dataset_deltas: list[DatasetChange] = []
    for dataset in sorted(inputs, key=lambda d: (d.master_id is not None, d.id)):
        if dataset.master_id is not None and dataset.master_id not in changed_masters:
            continue
        if not incexec and dataset.master_id is None and dataset.n_files and dataset.n_files_finished >= dataset.n_files:
            continue  # nothing to retry in a fully successful master
        tally = {"retried": 0, "reset": 0, "recovered": 0}
        for file in by_dataset.get(dataset.id, []):
            if not file.keep_track:
                continue
            kind, values = _reset(file, previous, incexec, attempt_increase, max_attempt)
            if (kind == "retried" and "transcend" not in qualifiers and job_max_attempt is not None
                    and values["max_attempt"] > job_max_attempt):
                return RetryPlan("refused", previous, f"file {file.id} would exceed {job_max_attempt} attempts")
            if kind:
                tally[kind] += 1
            if values:
                file_updates.append(FileChange(file.id, values))
        retried, reset, recovered = tally["retried"], tally["reset"], tally["recovered"]
        if retried or reset or recovered:
            if dataset.master_id is None:
                changed_masters.add(dataset.id)
            deltas = {
                "n_files_used": -min(retried + reset, dataset.n_files_used),
                "n_files_failed": -min(retried, dataset.n_files_failed),
            }
            if recovered:
                deltas.update(n_files=recovered, n_files_to_be_used=recovered,
                              n_files_missing=-min(recovered, dataset.n_files_missing))
            dataset_deltas.append(DatasetChange(dataset.id, {k: v for k, v in deltas.items() if v},
                                               DatasetStatus.TOUPDATE if incexec else DatasetStatus.READY))
        elif incexec:
            dataset_deltas.append(DatasetChange(dataset.id, {}, DatasetStatus.TOUPDATE))

    if not incexec and not changed_masters and previous != TaskStatus.EXHAUSTED:
        return RetryPlan("unchanged", previous, "no new or unprocessed files to retry")
    for dataset in datasets:
        if dataset.type in (DatasetType.OUTPUT, DatasetType.LOG):
            dataset_deltas.append(DatasetChange(dataset.id, {}, DatasetStatus.DONE))
        elif dataset.type in (DatasetType.TRN_OUTPUT, DatasetType.TRN_LOG) and dataset.status != DatasetStatus.DEFINED:
            # The unmerged datasets open again as they were made: a closed merge master (done, or failed
            # by the kill) is skipped by "phase complete", so the task would end while merges still run.
            dataset_deltas.append(DatasetChange(dataset.id, {}, DatasetStatus.DEFINED))
    task_values: dict[str, Any] = {"attempt_nr": task_attempt_nr + 1, "started_at": None, "frozen_at": None, "old_status": None}
    if "keep" not in qualifiers and task_priority is not None:
        task_values["current_priority"] = task_priority  # a retried task starts again from its assigned priority
    return RetryPlan("retried", TaskStatus.REREFINE if incexec else TaskStatus.READY, None, tuple(file_updates),
                     tuple(dataset_deltas), task_values, "sole" not in qualifiers)


def _reset(file: FileRecord, previous: str, incexec: bool, attempt_increase: int,
           max_attempt: int | None) -> tuple[str | None, dict[str, Any]]:
    """How a retry resets one tracked file: what happened to it (retried, reset, recovered or None) and
    its new column values."""
    kind: str | None = None
    values: dict[str, Any] = {}
    if file.exhausted:
        ceiling = max_attempt if max_attempt is not None else (file.max_attempt or file.attempt_nr) + attempt_increase
        if ceiling > file.attempt_nr:  # a ceiling the file already reached gives it nothing
            kind, values = "retried", {"status": FileStatus.READY, "max_attempt": ceiling}
            if file.max_failure is not None:
                values["max_failure"] = file.max_failure + attempt_increase
    elif file.status in (FileStatus.PICKED, FileStatus.RUNNING) and previous != TaskStatus.EXHAUSTED:
        # left behind by jobs that were killed: this attempt is over
        kind, values = "reset", {"status": FileStatus.READY, "attempt_nr": file.attempt_nr + 1,
                                 "max_attempt": (file.max_attempt or file.attempt_nr) + attempt_increase}
    elif incexec and file.status in (FileStatus.LOST, FileStatus.MISSING):
        kind, values = "recovered", {"status": FileStatus.READY}
    if incexec and file.ram_count:
        values["ram_count"] = 0  # a fresh look: the retry module's per-file RAM is forgotten
    return kind, values


def children_to_retry(children: Iterable[tuple[int, str]]) -> list[int]:
    """Children retried with their parent: those a retry accepts, except aborted, broken or failed ones."""
    excluded = {TaskStatus.ABORTED, TaskStatus.BROKEN, TaskStatus.FAILED}
    return [task_id for task_id, status in children if status not in excluded and COMMANDS["retry"].accepts(status)]


def reassign_target(nucleus: str | None, old_status: str | None) -> str:
    """Where a `reassigning` task goes once its jobs are gone: back to task brokerage without a nucleus,
    else to ready (or back to the status it had)."""
    if not nucleus:
        return TaskStatus.ASSIGNING
    if old_status in (None, TaskStatus.ASSIGNING, TaskStatus.EXHAUSTED):
        return TaskStatus.READY
    return old_status


def default_comment(command: str, user: str, qualifier: str | None = None) -> str:
    return f"{qualifier + ' ' if qualifier else ''}{command} by {user}"

