"""How a task ends: "phase complete", the avalanche, the final task status, the final dataset statuses and
what happens to child tasks (jedi-inventory.md §7.1, §7.3, §7.4; panda-server.md §1.2 "Final status").

Everything here is decided from the task's dataset counters (the `datasets` rows), never from files or
jobs, exactly as JEDI's post processor does: a master input is finished with when every released file
is terminal (`n_files_to_be_used <= n_files_finished + n_files_failed`), and the final status reads the
master totals. The finalize agent loads the rows into `DatasetRecord`, calls these functions and
writes the answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jedictl.model import (
    DATASET_INPUT_TYPES,
    TASK_PARENT_COMPLETED,
    TASK_PARENT_CORRUPTED,
    DatasetState,
    DatasetStatus,
    DatasetType,
    FileStatus,
    TaskStatus,
)

#: JEDI's "to abort" status (kill command done, post processor pending). Not in `model.TaskStatus` yet.
TOABORT = "toabort"

#: Task statuses whose "phase complete" (all released inputs terminal) leads to `prepared` (§7.1).
PROCESSING_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.READY, TaskStatus.THROTTLED})
#: Statuses the post processor finalises (JEDI getTasksToBeFinished).
TO_BE_FINISHED = frozenset({TaskStatus.PREPARED, TaskStatus.SCOUTED, TaskStatus.TOBROKEN, TOABORT, TaskStatus.PASSED})
#: JediTaskSpec.statusToRejectExtChange: a child in one of these is not touched when its parent dies.
REJECT_EXTERNAL_CHANGE = frozenset({
    TaskStatus.FINISHED, TaskStatus.DONE, TaskStatus.PREPARED, TaskStatus.BROKEN, TaskStatus.TOBROKEN,
    TaskStatus.ABORTED, TOABORT, TaskStatus.ABORTING, TaskStatus.FAILED, TaskStatus.PASSED,
})
#: Dataset statuses that take a master out of the "still has unprocessed files" test.
_CLOSED_DATASET = frozenset({DatasetStatus.FINISHED, DatasetStatus.DONE, DatasetStatus.FAILED, DatasetStatus.REMOVED})
#: File statuses that are not released by the avalanche (not yet available or gone).
NOT_RELEASABLE = frozenset({FileStatus.PENDING, FileStatus.LOST, FileStatus.MISSING, "staging"})
_OUTPUT_TYPES = frozenset({DatasetType.OUTPUT, DatasetType.LOG})
_TRANSIENT_TYPES = frozenset({DatasetType.TRN_OUTPUT, DatasetType.TRN_LOG})


def from_row(cls: type, row: Any, **extra: Any) -> Any:
    """Build a record dataclass from a store row (SQLAlchemy Row or mapping) whose columns share its field
    names; columns the dataclass does not declare are ignored, missing ones take their defaults."""
    mapping = row._mapping if hasattr(row, "_mapping") else row
    values = {f.name: mapping[f.name] for f in dataclasses.fields(cls) if f.name in mapping and f.name not in extra}
    return cls(**values, **extra)


@dataclass(frozen=True)
class DatasetRecord:
    """One `datasets` row: the identity, status and counters the completion rules read."""

    id: int
    type: str
    status: str
    master_id: int | None = None
    state: str | None = None
    n_files: int = 0
    n_files_to_be_used: int = 0
    n_files_used: int = 0
    n_files_finished: int = 0
    n_files_failed: int = 0
    n_files_missing: int = 0
    n_events: int = 0
    n_events_used: int = 0

    @property
    def is_master_input(self) -> bool:
        return self.master_id is None and self.type in DATASET_INPUT_TYPES

    @property
    def has_unprocessed(self) -> bool:
        """Released files that are not terminal yet (JEDI: nFilesToBeUsed > nFilesFinished + nFilesFailed)."""
        return self.n_files_to_be_used > self.n_files_finished + self.n_files_failed

    @property
    def is_mutable(self) -> bool:
        return self.state == DatasetState.MUTABLE


@dataclass(frozen=True)
class DatasetUpdate:
    """New values for one `datasets` row (None: unchanged)."""

    dataset_id: int
    status: str | None = None
    n_files: int | None = None
    n_files_to_be_used: int | None = None


@dataclass(frozen=True)
class PrepareDecision:
    """What the prepare step does with a task whose released inputs may all be terminal (§7.1)."""

    action: str  # "wait" (inputs still running) | "refeed" (a master is mutable) | "prepared"
    task_status: str | None
    datasets: tuple[DatasetUpdate, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class FinalStatus:
    status: str
    reason: str | None = None
    completeness: float = 0.0  # percent of master events (or files) finished


@dataclass(frozen=True)
class ChildTask:
    id: int
    parent_id: int
    status: str


@dataclass(frozen=True)
class ChildAction:
    task_id: int
    action: str  # "kill" (-> toabort) | "kick" (re-evaluate now)
    new_status: str | None = None
    reason: str | None = None


def masters(datasets: Iterable[DatasetRecord]) -> list[DatasetRecord]:
    return [d for d in datasets if d.is_master_input]


def phase_complete(datasets: Iterable[DatasetRecord]) -> bool:
    """True when no open master input still has a released file that is not terminal -- including the
    unmerged log, the master of merge jobs, whatever its status: a mergeOutput task is not complete
    while merges wait (a merge master closed by an earlier end of the task does not end its merges)."""
    return not any(d.has_unprocessed for d in datasets
                   if (d.is_master_input and d.status not in _CLOSED_DATASET) or (d.type == DatasetType.TRN_LOG and d.master_id is None))


def avalanche_count(file_counts: Mapping[str, int]) -> int:
    """A master's new `n_files_to_be_used` at the avalanche: every file that is available at all."""
    return sum(count for status, count in file_counts.items() if status not in NOT_RELEASABLE)


def avalanche(datasets: Iterable[DatasetRecord], file_counts: Mapping[int, Mapping[str, int]]) -> list[DatasetUpdate]:
    """`scouted -> running`: release every usable file of every master (`file_counts`: per dataset id,
    files per status). Only masters whose watermark moves are returned."""
    updates = []
    for dataset in masters(datasets):
        released = avalanche_count(file_counts.get(dataset.id, {}))
        if released != dataset.n_files_to_be_used:
            updates.append(DatasetUpdate(dataset.id, n_files_to_be_used=released))
    return updates


def prepare(datasets: Sequence[DatasetRecord]) -> PrepareDecision:
    """The processing phase of §7.1 for a running/ready/throttled task.

    A mutable input sends the task back to the feeder (`defined`, the mutable datasets `toupdate`);
    otherwise, once every released master file is terminal, masters become done/finished/failed,
    secondaries done, outputs prepared and the task `prepared`.
    """
    mutable = [d for d in datasets if d.type in DATASET_INPUT_TYPES and d.is_mutable]
    if mutable:
        return PrepareDecision(
            "refeed", TaskStatus.DEFINED,
            tuple(DatasetUpdate(d.id, status=DatasetStatus.TOUPDATE) for d in mutable),
            "input is still mutable",
        )
    if not phase_complete(datasets):
        return PrepareDecision("wait", None, reason="released input files are still being processed")
    updates = []
    for dataset in datasets:
        if dataset.status == DatasetStatus.REMOVED:
            continue
        if dataset.is_master_input:
            updates.append(DatasetUpdate(dataset.id, status=master_status(dataset)))
        elif dataset.type in DATASET_INPUT_TYPES:
            updates.append(DatasetUpdate(dataset.id, status=DatasetStatus.DONE))
        else:
            updates.append(DatasetUpdate(dataset.id, status=DatasetStatus.PREPARED))
    return PrepareDecision("prepared", TaskStatus.PREPARED, tuple(updates))


def master_status(dataset: DatasetRecord) -> str:
    """done when every file finished, failed when none did, finished in between."""
    if dataset.n_files_finished >= dataset.n_files:
        return DatasetStatus.DONE
    if dataset.n_files_finished == 0:
        return DatasetStatus.FAILED
    return DatasetStatus.FINISHED


def completeness(datasets: Iterable[DatasetRecord]) -> float:
    """Percent of master input done: events when the masters know their events, else files."""
    live = [d for d in masters(datasets) if d.status != DatasetStatus.REMOVED]
    events = sum(d.n_events for d in live)
    if events:
        return 100.0 * sum(d.n_events_used for d in live) / events
    files = sum(d.n_files for d in live)
    return 100.0 * sum(d.n_files_finished for d in live) / files if files else 0.0


def final_status(
    status: str,
    datasets: Sequence[DatasetRecord],
    *,
    parent_status: str | None = None,
    goal: float | None = None,
    fail_when_goal_unreached: bool = False,
    use_exhausted: bool = False,
    allow_empty_input: bool = False,
) -> FinalStatus:
    """JEDI's getFinalTaskStatus plus the useExhausted pre-check (§7.3).

    `status` is the task's status now (prepared, passed, tobroken, toabort, paused...); `parent_status`
    is None when the task has no parent; `goal` is in percent (default 100).
    """
    live = [d for d in masters(datasets) if d.status != DatasetStatus.REMOVED]
    n_files = sum(d.n_files for d in live)
    n_finished = sum(d.n_files_finished for d in live)
    done_percent = completeness(datasets)
    target = 100.0 if goal is None else goal

    if status == TaskStatus.TOBROKEN:
        return FinalStatus(TaskStatus.BROKEN, None, done_percent)
    if status == TOABORT:
        return FinalStatus(TaskStatus.ABORTED, None, done_percent)
    if status == TaskStatus.PAUSED:
        return FinalStatus(TaskStatus.PAUSED, None, done_percent)
    if n_files == 0 and not allow_empty_input:
        return FinalStatus(TaskStatus.FAILED, "no input", done_percent)

    parent_ok = True
    if n_finished == n_files:
        result, reason = TaskStatus.DONE, None
        if parent_status is not None and parent_status in TASK_PARENT_CORRUPTED:
            result, reason = TaskStatus.FAILED, f"parent task is {parent_status}"
        elif parent_status is not None and parent_status != TaskStatus.DONE:
            result, reason, parent_ok = TaskStatus.FINISHED, f"parent task is {parent_status}", False
        elif any(d.is_mutable for d in live):
            result, reason = TaskStatus.FINISHED, "input is still mutable"
    elif n_finished == 0:
        result, reason = TaskStatus.FAILED, "no input file was processed successfully"
    else:
        result, reason = TaskStatus.FINISHED, f"{n_finished}/{n_files} input files processed"

    if result == TaskStatus.FINISHED and done_percent < target:
        # useExhausted parks a task below its goal for an operator; the goal is enforced (FG) only once
        # the task is forced to finish (passed), or always when the task does not use exhausted.
        if use_exhausted and status != TaskStatus.PASSED:
            why = "the parent task was incomplete" if not parent_ok and n_finished == n_files else "the task was incomplete"
            return FinalStatus(TaskStatus.EXHAUSTED, f"exhausted since {why} and didn't reach the goal", done_percent)
        if fail_when_goal_unreached:
            return FinalStatus(TaskStatus.FAILED, f"goal {target:g}% not reached ({done_percent:.1f}%)", done_percent)
    return FinalStatus(result, reason, done_percent)


def final_dataset_statuses(task_status: str, datasets: Sequence[DatasetRecord]) -> list[DatasetUpdate]:
    """§7.4: on failed/broken/aborted every dataset fails; otherwise outputs and logs are done when all
    their files finished and finished when some did not (and their `n_files` becomes what finished),
    transient (unmerged) datasets are done, inputs keep the status prepare gave them."""
    updates = []
    failed = task_status in (TaskStatus.FAILED, TaskStatus.BROKEN, TaskStatus.ABORTED)
    for dataset in datasets:
        if dataset.status == DatasetStatus.REMOVED:
            continue
        if failed:
            updates.append(DatasetUpdate(dataset.id, status=DatasetStatus.FAILED))
        elif dataset.type in _OUTPUT_TYPES:
            status = DatasetStatus.DONE if dataset.n_files_finished >= dataset.n_files else DatasetStatus.FINISHED
            updates.append(DatasetUpdate(dataset.id, status=status, n_files=dataset.n_files_finished))
        elif dataset.type in _TRANSIENT_TYPES:
            updates.append(DatasetUpdate(dataset.id, status=DatasetStatus.DONE))
        elif dataset.is_master_input and dataset.status not in _CLOSED_DATASET:
            # reached through passed (finish command) without prepare: settle the master now
            updates.append(DatasetUpdate(dataset.id, status=master_status(dataset)))
    return updates


def child_actions(task_id: int, task_status: str, descendants: Sequence[ChildTask]) -> list[ChildAction]:
    """Children of a task that just ended: killed (recursively, down the whole tree) when the parent
    failed, broke or was aborted; otherwise the direct children are kicked so that those waiting for
    their parent are re-evaluated now. Children already ending are left alone."""
    by_parent: dict[int, list[ChildTask]] = {}
    for child in descendants:
        by_parent.setdefault(child.parent_id, []).append(child)
    if task_status not in TASK_PARENT_CORRUPTED:
        return [ChildAction(c.id, "kick", None, f"parent task is {task_status}") for c in by_parent.get(task_id, [])
                if c.status not in REJECT_EXTERNAL_CHANGE]
    actions: list[ChildAction] = []
    stack = [(task_id, task_status)]
    seen = {task_id}
    while stack:
        parent, parent_status = stack.pop()
        for child in by_parent.get(parent, []):
            if child.id in seen or child.status in REJECT_EXTERNAL_CHANGE:
                continue
            seen.add(child.id)
            actions.append(ChildAction(child.id, "kill", TOABORT, f"parent task is {parent_status}"))
            stack.append((child.id, TOABORT))
    return actions


def parent_completed(parent_status: str | None) -> bool:
    """No parent, or a parent that let its children run to the end."""
    return parent_status is None or parent_status in TASK_PARENT_COMPLETED
