"""The finalize pass over a claimed batch of tasks at once (issue 18): the common path -- a processing
task whose released input is all terminal, measured if it has no scout statistics yet, prepared and
ended; or a task already `prepared`/`passed`/`tobroken` ended -- for the whole batch in one write
transaction, instead of five or six small transactions per task.

The transaction re-reads every task and its datasets under lock (PostgreSQL row locks in id order;
SQLite's BEGIN IMMEDIATE), decides each task on exactly what it is about to write over (the pure rules
of engine.task.final_status, as TaskFinalizer applies them), then writes set-based: the tasks in one
UPDATE per set of columns, each row guarded by the status it was decided on and our lease (which it
also releases); their status history; the dataset statuses and counters; the output datasets closed
in the data catalog; the waiting children kicked. If any guard misses (a task moved under us), the
transaction rolls back and every task of the batch goes the one-task way, which reports what moved.

Tasks about to end done or finished have their outputs checked against the data catalog (docs/
post-processing.md): one statement tells which of them have anything to remove or disagree with the
catalog, and only those leave the batch for the one-task path; the others end here as before.

Anything off that path -- scouts, the avalanche, `toabort`, a mutable input sent back to the feeder, a
task that ends failed/broken/aborted (its children are killed first, one command each), exhausted or
paused, or whose measurement changes the options -- is left to TaskFinalizer, task by task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.finalize.output_check import lock_catalog_datasets, tasks_to_check
from jedictl.engine.finalize.post_check import checked, stale_dialog
from jedictl.engine.finalize.scout_facts import scout_job, scout_request, task_values
from jedictl.engine.finalize.scouts import measure
from jedictl.engine.task.final_status import (
    TASK_PARENT_CORRUPTED,
    ChildTask,
    DatasetRecord,
    DatasetUpdate,
    child_actions,
    final_dataset_statuses,
    final_status,
    from_row,
    prepare,
)
from jedictl.engine.task.options import options_from_dict
from jedictl.model import TASK_FINAL, DatasetType, TaskStatus
from jedictl.store import completion

S = TaskStatus
_PROCESSING = frozenset({S.RUNNING, S.READY, S.THROTTLED})
_FINAL_STEP = frozenset({S.PREPARED, S.PASSED, S.TOBROKEN})
_CATALOG_TYPES = (DatasetType.OUTPUT.value, DatasetType.LOG.value)
PREPARED_REASON = "every released input file is processed"


class _Moved(Exception):
    """A guarded write of the batch missed: something changed a task under us."""


@dataclass
class _Plan:
    """What the batch writes for one task, and how it reports it."""

    task_id: int
    status: str  # the status it was decided on (the guard)
    values: dict[str, Any] = field(default_factory=dict)  # task columns, the lease's release included
    history: list[tuple[str, str, str | None]] = field(default_factory=list)  # (new, previous, reason)
    datasets: dict[int, dict[str, Any]] = field(default_factory=dict)  # dataset id -> new values
    outputs: list[str] = field(default_factory=list)  # catalog datasets to close
    final: str | None = None
    path: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    measured: bool = False


def finalize_batch(store: Any, task_ids: Sequence[int], settings: Settings, owner: str, now: datetime,
                   report: PassReport) -> dict[int, tuple[str, str | None]]:
    """End what it can of `task_ids` (leased by `owner`) in one transaction; (outcome, reason) per task
    it handled. The others are the caller's, for the one-task path."""
    with store.read() as conn:  # the measurements read many jobs: outside the write lock
        first = completion.tasks_by_id(conn, task_ids)
        to_measure = [row for row in first.values() if row.lease_owner == owner and row.status == S.RUNNING and row.walltime_unit is None]
        finished = completion.finished_jobs_of_tasks(conn, [row.id for row in to_measure], limit=settings.finalize.max_scout_jobs)
    try:
        with store.begin() as conn:
            rows = completion.tasks_by_id(conn, task_ids)
            by_task = completion.datasets_of_tasks(conn, task_ids, lock=True)
            parents = completion.statuses_of(conn, {row.parent_id for row in rows.values() if row.parent_id})
            plans = {}
            for task_id in task_ids:
                row = rows.get(task_id)
                if row is None or row.lease_owner != owner:
                    continue
                plan = _plan(row, by_task.get(task_id, []), parents.get(row.parent_id), finished.get(task_id), settings, owner, now)
                if plan is not None:
                    plans[task_id] = plan
            for task_id in _need_output_check(conn, plans):
                del plans[task_id]  # something to remove, or outputs that disagree with the catalog: the one-task path
            if plans:
                _write(conn, list(plans.values()), owner, now, report)
    except _Moved:
        return {}
    return {task_id: _outcome(plan) for task_id, plan in plans.items()}


def _plan(task: Any, rows: list[Any], parent_status: str | None, finished: list[Any] | None, settings: Settings, owner: str,
          now: datetime) -> _Plan | None:
    """The steps TaskFinalizer would take, decided on the locked rows; None: not this path's task."""
    status = task.status
    if status not in _PROCESSING and status not in _FINAL_STEP:
        return None
    options = options_from_dict(task.options or {})
    plan = _Plan(task.id, status, path=[status])
    plan.values.update(lease_owner=None, lease_expires_at=None)
    records = [from_row(DatasetRecord, row) for row in rows]
    if status in _PROCESSING:
        if status == S.RUNNING and task.walltime_unit is None:
            plan.measured = True
            if finished and options.tgt_max_output_for_ng:
                return None  # nGBPerJob is reset from the outputs' sizes per dataset: the one-task path reads them
            if finished:
                statistics, _ = measure([scout_job(row) for row in finished], scout_request(task, options), settings.scouts)
                values = task_values(task, options, statistics, settings)
                if "options" in values:
                    return None
                plan.values.update(values, modified_at=now)
                plan.notes.append(f"resource model measured on {len(finished)} finished jobs")
        decision = prepare(records)
        if decision.action == "wait":
            return plan
        if decision.action != "prepared":
            return None  # refeed: a mutable input goes back to the feeder
        records = _apply(records, decision.datasets, plan)
        plan.history.append((S.PREPARED.value, status, PREPARED_REASON))
        plan.path.append(S.PREPARED.value)
        status = S.PREPARED.value
    result = final_status(status, records, parent_status=parent_status, goal=options.goal,
                          fail_when_goal_unreached=bool(options.fail_when_goal_unreached), use_exhausted=bool(options.use_exhausted),
                          allow_empty_input=bool(options.allow_empty_input))
    if result.status in TASK_PARENT_CORRUPTED or result.status not in TASK_FINAL:
        return None  # children to kill, exhausted or paused: the one-task path
    reason = result.reason or f"{result.completeness:.1f}% of the input processed"
    counted = _outputs_counted(result.status, records)
    _apply(counted, final_dataset_statuses(result.status, counted), plan)
    plan.outputs = [row.name for row in rows if row.type in _CATALOG_TYPES]
    plan.values.update(status=str(result.status), modified_at=now, state_changed_at=now, ended_at=now)
    if result.reason:
        plan.values["error_dialog"] = result.reason[:2000]
    elif stale_dialog(task.error_dialog):
        plan.values["error_dialog"] = None  # the output check's pause is over
    plan.history.append((str(result.status), status, reason))
    plan.path.append(str(result.status))
    plan.final = str(result.status)
    plan.notes.append(reason)
    return plan


def _need_output_check(conn: Any, plans: dict[int, _Plan]) -> set[int]:
    """The output check's common path (docs/post-processing.md): one statement tells which of the tasks
    about to end done or finished have anything for it to do -- those go the one-task way, the others
    end here. Their catalog datasets are locked first, as the one-task check does."""
    ending = [plan for plan in plans.values() if plan.final is not None and checked(plan.final)]
    if not ending:
        return set()
    lock_catalog_datasets(conn, [name for plan in ending for name in plan.outputs])
    return tasks_to_check(conn, [plan.task_id for plan in ending])


def _apply(records: list[DatasetRecord], updates: Sequence[DatasetUpdate], plan: _Plan) -> list[DatasetRecord]:
    """The records with `updates` applied, which are also added to what the plan writes."""
    by_id = {record.id: record for record in records}
    for change in updates:
        values = {name: getattr(change, name) for name in ("status", "n_files", "n_files_to_be_used") if getattr(change, name) is not None}
        if not values or change.dataset_id not in by_id:
            continue
        values = {name: str(value) if name == "status" else value for name, value in values.items()}
        by_id[change.dataset_id] = dataclasses.replace(by_id[change.dataset_id], **values)
        plan.datasets.setdefault(change.dataset_id, {}).update(values)
    return [by_id[record.id] for record in records]


def _outputs_counted(status: str, datasets: list[DatasetRecord]) -> list[DatasetRecord]:
    from jedictl.engine.finalize.postprocessor import _outputs_counted as counted

    return counted(status, datasets)


def _write(conn: Any, plans: list[_Plan], owner: str, now: datetime, report: PassReport) -> None:
    # Datasets first, in id order (the lock order of every counter writer), then the tasks.
    changes = [(dataset_id, plan.task_id, values) for plan in plans for dataset_id, values in plan.datasets.items()]
    if completion.update_many_datasets(conn, changes, now) != len(changes):
        raise _Moved()
    tasks = [(plan.task_id, plan.status, plan.values) for plan in plans]
    if completion.end_leased_tasks(conn, owner, tasks) != len(tasks):
        raise _Moved()
    completion.record_statuses(conn, [(plan.task_id, new, previous, reason, now, owner) for plan in plans
                                      for new, previous, reason in plan.history])
    ended = {plan.task_id: plan for plan in plans if plan.final}
    closed = set(completion.close_catalog_datasets(conn, [name for plan in ended.values() for name in plan.outputs], now))
    for plan in ended.values():
        count = sum(1 for name in plan.outputs if name in closed)
        if count:
            plan.notes[-1] += f"; {count} output datasets closed in the catalog"
    if ended:
        tree = [ChildTask(row.id, row.parent_id, row.status) for row in completion.children_of(conn, ended)]
        for plan in ended.values():
            for action in child_actions(plan.task_id, plan.final or "", tree):
                if action.action == "kick":
                    completion.kick_task(conn, action.task_id, now)
                    report.add("kick_child", task_id=action.task_id, parent_id=plan.task_id, reason=action.reason)


def _outcome(plan: _Plan) -> tuple[str, str | None]:
    """As TaskFinalizer reports it: the status reached and the path, or waiting/measured."""
    path = " -> ".join(plan.path)
    notes = "; ".join(note for note in plan.notes if note)
    if len(plan.path) == 1:
        return ("measured" if plan.measured else "waiting"), f"{path}: {notes}" if notes else path
    return plan.path[-1], f"{path}: {notes}" if notes else path
