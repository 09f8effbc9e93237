"""The finalize pass (JEDI's Post Processor, jedi-inventory.md §6.11, §7): scouts evaluated, the
avalanche, "phase complete", and the end of a task.

A pass leases the tasks `store.completion.candidates` names and walks each one as far as it can go,
one transaction per step, every step guarded by the task's status and our lease:
    scouting  --scouts evaluated-->  scouted -> running (avalanche)  |  exhausted  |  tobroken
    scouted   --avalanche command--> running (scouts measured, forced)  |  exhausted
    running   --first finished job--> scout statistics written (tasks that skipped scouts)
    running, ready, throttled  --every released input terminal-->  prepared  |  defined (mutable input)
    prepared, passed, tobroken, toabort  -->  done | finished | failed | broken | aborted | exhausted

so a small task may go from `scouting` to `done` in one pass. The final step settles the dataset
statuses, closes the output datasets in the data catalog, releases the lease and kicks the waiting
children in the transaction that writes the final status; the children of a task that failed are
killed (the `kill` command, one transaction each) just before it. A process killed between two steps
leaves a task in a status the next pass (once the lease has expired) continues from.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.agent import PassReport, leased_pass
from jedictl.engine.task.final_status import (
    TOABORT,
    ChildTask,
    DatasetRecord,
    avalanche,
    child_actions,
    final_dataset_statuses,
    final_status,
    from_row,
    masters,
    phase_complete,
    prepare,
)
from jedictl.engine.commando.commands import Request, run_command
from jedictl.engine.finalize.scout_facts import scout_counts, scout_job, scout_request, task_values, thresholds
from jedictl.engine.finalize.batch import finalize_batch
from jedictl.engine.finalize.notify import notify_ended
from jedictl.engine.finalize.output_check import check_outputs
from jedictl.engine.finalize.post_check import checked, stale_dialog
from jedictl.engine.finalize.scouts import early_avalanche_due, evaluate, measure, measurement_changes
from jedictl.engine.task.options import TaskOptions, options_from_dict
from jedictl.errors import JedictlError, LeaseLost
from jedictl.model import TASK_FINAL, TASK_PARENT_CORRUPTED, DatasetType, TaskStatus
from jedictl.store import completion, task_leases
from jedictl.store import datasets as dataset_store
from jedictl.store import tasks as task_store

S = TaskStatus
#: Statuses whose next step is the final status.
_FINAL_STEP = frozenset({S.PREPARED, S.PASSED, S.TOBROKEN, TOABORT})
_PROCESSING = frozenset({S.RUNNING, S.READY, S.THROTTLED})
_CATALOG_TYPES = (DatasetType.OUTPUT.value, DatasetType.LOG.value)
#: Who the commands finalize gives (kills of child tasks) are recorded as.
BY = "jedictl finalize"


def finalize_pass(store: Any, settings: Settings, owner: str, now: datetime, limit: int | None = None) -> PassReport:
    """One pass of the post processor over the store."""
    report = PassReport("finalize")
    candidates = completion.candidates(now, settings.scouts.min_success_fraction, settings.scouts.assessment_interval_minutes)
    leased_pass(
        store, report, candidates, task_leases.BY_PRIORITY,
        lambda task_id: TaskFinalizer(store, task_id, settings, owner, now, report).run(),
        owner=owner, now=now, lease_seconds=settings.lease.seconds, limit=limit or settings.finalize.limit,
        claim_batch=settings.finalize.claim_batch,
        handle_batch=lambda ids: finalize_batch(store, ids, settings, owner, now, report),
    )
    # After the final writes have committed: telling the owners can fail, never hold a task back.
    notify_ended(store, settings, now, report)
    return report


class TaskFinalizer:
    """Takes one leased task through as many steps as its state allows."""

    def __init__(self, store: Any, task_id: int, settings: Settings, owner: str, now: datetime, report: PassReport):
        self.store, self.task_id, self.settings, self.owner, self.now, self.report = store, task_id, settings, owner, now, report
        self.path: list[str] = []
        self.notes: list[str] = []
        self.measured = False
        self.released = False

    def run(self) -> tuple[str, str | None]:
        try:
            for _ in range(8):  # at most: scouting, scouted, running, prepared, final
                task, datasets, parent_status = self._load()
                if not self.path:
                    self.path.append(task.status)
                if not self._step(task, datasets, parent_status) or self.released:
                    break
        except LeaseLost:
            with self.store.begin() as conn:  # the task moved under us: let go of it if it is still ours
                self._release(conn)
            raise
        if not self.released:
            with self.store.begin() as conn:
                self._release(conn)
        return self._outcome()

    # ------------------------------------------------------------------------------------- steps

    def _step(self, task: Any, datasets: list[DatasetRecord], parent_status: str | None) -> bool:
        """One step; False when the task has gone as far as it can in this pass."""
        status = task.status
        options = options_from_dict(task.options or {})
        if status == S.SCOUTING:
            return self._scouts(task, options, datasets, forced=False)
        if status == S.SCOUTED:
            return self._scouts(task, options, datasets, forced=True)
        if status in _PROCESSING:
            if status == S.RUNNING and task.walltime_unit is None and not self.measured:
                self.measured = True
                self._scout_data(task, options)
                return True
            return self._prepare(task, datasets)
        if status in _FINAL_STEP:
            return self._final(task, options, datasets, parent_status)
        self.notes.append(f"nothing to do for a {status} task")
        return False

    def _scouts(self, task: Any, options: TaskOptions, datasets: list[DatasetRecord], *, forced: bool) -> bool:
        """Evaluate the scouts: when every released file is terminal, early when enough scouts
        finished, or forced (the avalanche command left the task `scouted`)."""
        early = ""
        if not forced and not phase_complete(datasets):
            with self.store.read() as conn:
                counted, finished = completion.scout_job_counts(conn, task.id)
            if not early_avalanche_due(counted, finished, task.assessed_at, self.now, self.settings.scouts):
                with self.store.begin() as conn:
                    self._write(conn, task.status, assessed_at=self.now)
                self.notes.append(f"{finished}/{counted} scout jobs finished: scouts are still running")
                return False
            early = f" ({finished}/{counted} scout jobs finished)"
        with self.store.read() as conn:
            rows = completion.finished_jobs(conn, task.id, scouts_only=True, limit=self.settings.finalize.max_scout_jobs)
            ok, failed = completion.scout_outcomes(conn, task.id)
            jobs = self._scout_jobs(conn, rows, options)
        assessment = evaluate(jobs, scout_request(task, options), scout_counts(datasets, ok, failed), self.settings.scouts,
                              forced=forced, thresholds=thresholds(self.settings))
        values = task_values(task, options, assessment.statistics, self.settings, assessment)
        with self.store.begin() as conn:
            counts = completion.file_status_counts(conn, [d.id for d in masters(datasets)])
            releases = avalanche(datasets, counts)
            completion.update_datasets(conn, task.id, releases, self.now)
            before = {d.id: d.n_files_to_be_used for d in datasets}
            released = sum((u.n_files_to_be_used or 0) - before[u.dataset_id] for u in releases)
            if assessment.outcome == S.SCOUTED:
                why = assessment.reason or f"{len(jobs)} scout jobs succeeded{early}"
                if task.status == S.SCOUTING:
                    self._move(conn, S.SCOUTING, S.SCOUTED, why, assessed_at=self.now, **values)
                    values = {}
                self._move(conn, S.SCOUTED, S.RUNNING, f"avalanche: {released} more input files released", assessed_at=self.now,
                           scouts_done=True, **values)
                self.notes.append(why)
            else:
                extra = {"old_status": S.SCOUTING.value} if assessment.outcome == S.EXHAUSTED else {}
                self._move(conn, task.status, assessment.outcome, assessment.reason, assessed_at=self.now,
                           error_dialog=_dialog(assessment.reason), **extra, **values)
                self.notes.append(assessment.reason or assessment.outcome)
                if assessment.outcome == S.EXHAUSTED:
                    self._release(conn)  # exhausted waits for an operator (or the watchdog)
                    return False
        return True

    def _scout_data(self, task: Any, options: TaskOptions) -> None:
        """A running task without scout statistics (it skipped scouts, or the retry module asked for
        a new measurement) gets them from its finished jobs -- no verdict, no exhausted checks."""
        with self.store.read() as conn:
            rows = completion.finished_jobs(conn, task.id, scouts_only=False, limit=self.settings.finalize.max_scout_jobs)
            jobs = self._scout_jobs(conn, rows, options)
        if not rows:
            return
        request = scout_request(task, options)
        statistics, facts = measure(jobs, request, self.settings.scouts)
        changes = measurement_changes(jobs, request, statistics, facts, thresholds(self.settings))
        with self.store.begin() as conn:
            self._write(conn, S.RUNNING, **task_values(task, options, statistics, self.settings, changes=changes))
        self.notes.append(f"resource model measured on {len(rows)} finished jobs")

    @staticmethod
    def _scout_jobs(conn: Any, rows: list[Any], options: TaskOptions) -> list[Any]:
        """The measured jobs; with tgtMaxOutputForNG, each with its output files' sizes per dataset."""
        sizes = completion.output_sizes(conn, [row.id for row in rows]) if options.tgt_max_output_for_ng else {}
        return [scout_job(row, sizes.get(row.id)) for row in rows]

    def _prepare(self, task: Any, datasets: list[DatasetRecord]) -> bool:
        if prepare(datasets).action == "wait":  # seen on a snapshot: waiting is always safe
            return False
        with self.store.begin() as conn:
            decision = prepare(self._locked(conn))  # the decision that is written is taken on the counters it writes over
            if decision.action == "wait":
                return False
            completion.update_datasets(conn, task.id, decision.datasets, self.now)
            if decision.action == "refeed":
                self._move(conn, task.status, S.DEFINED, decision.reason, error_dialog=decision.reason, frozen_at=None)
                self._release(conn)
                self.notes.append(decision.reason or "")
                return False
            self._move(conn, task.status, S.PREPARED, "every released input file is processed")
        return True

    def _final(self, task: Any, options: TaskOptions, datasets: list[DatasetRecord], parent_status: str | None) -> bool:
        if task.status in (TOABORT, S.TOBROKEN):
            with self.store.read() as conn:
                live = completion.live_jobs(conn, task.id)
            if live:  # killed jobs still on workers: aborted (broken) once their executors stopped them
                self.notes.append(f"{live} killed jobs are still on workers")
                return False
        def decide(records: list[DatasetRecord]) -> Any:
            return final_status(task.status, records, parent_status=parent_status, goal=options.goal,
                                fail_when_goal_unreached=bool(options.fail_when_goal_unreached),
                                use_exhausted=bool(options.use_exhausted), allow_empty_input=bool(options.allow_empty_input))

        result = decide(datasets)
        reason = result.reason or f"{result.completeness:.1f}% of the input processed"
        if result.status in TASK_PARENT_CORRUPTED:
            # Children first, each killed in its own transaction: a pass that dies before the task's
            # final write kills the rest next time (a killed child is no longer a candidate).
            self._kill_children(task.id, result.status)
        with self.store.begin() as conn:
            # The counters the final status and the dataset statuses are written from, read again under
            # lock: a job report committed since the snapshot would otherwise be written over.
            datasets = self._locked(conn)
            if decide(datasets) != result:
                self.notes.append("the counters moved while the task was finalized: looking again")
                return True
            if result.status == S.EXHAUSTED:
                self._move(conn, task.status, S.EXHAUSTED, result.reason, old_status=None, error_dialog=_dialog(result.reason))
                self._release(conn)
                self._kick_children(conn, task.id, S.EXHAUSTED)  # waiting children look again
                self.notes.append(reason)
                return False
            if result.status not in TASK_FINAL:  # paused stays as it is
                self._release(conn)
                return False
            if checked(result.status) and not self._outputs_checked(conn, task):
                return False
            completion.update_datasets(conn, task.id, final_dataset_statuses(result.status, _outputs_counted(result.status, datasets)),
                                       self.now)
            outputs = [d.name for d in self._rows if d.type in _CATALOG_TYPES]
            closed = completion.close_catalog_datasets(conn, outputs, self.now)
            dialog: dict[str, Any] = {}
            if result.reason:
                dialog["error_dialog"] = _dialog(result.reason)
            elif stale_dialog(task.error_dialog):
                dialog["error_dialog"] = None  # the output check's pause is over
            self._move(conn, task.status, result.status, reason, ended_at=self.now, **dialog)
            self._release(conn)
            self._kick_children(conn, task.id, result.status)
        self.notes.append(reason + (f"; {len(closed)} output datasets closed in the catalog" if closed else ""))
        return False

    def _outputs_checked(self, conn: Any, task: Any) -> bool:
        """The output check (docs/post-processing.md) in the final step's transaction: what must go is
        removed from the catalog and recorded; False when the outputs disagree with the catalog -- the
        task is then paused, remembering the status it is finalized from, with the problems as its
        error dialog (JEDI pauses a task whose outputs are duplicated)."""
        check = check_outputs(conn, task.id, self.now, self.owner)
        if check.removals:
            self.notes.append(check.summary())
        if check.passed:
            return True
        dialog = check.dialog()
        self._move(conn, task.status, S.PAUSED, dialog, old_status=task.status, error_dialog=_dialog(dialog))
        self._release(conn)
        self.notes.append(f"{check.n_problems} outputs disagree with the data catalog: paused")
        return False

    def _kick_children(self, conn: Any, task_id: int, status: str) -> None:
        """The direct children of a task that ended well look again now (those waiting on it)."""
        tree = [ChildTask(row.id, row.parent_id, row.status) for row in completion.descendants(conn, task_id, depth=1)]
        for action in child_actions(task_id, status, tree):
            if action.action == "kick":
                completion.kick_task(conn, action.task_id, self.now)
                self.report.add("kick_child", task_id=action.task_id, parent_id=task_id, reason=action.reason)

    def _kill_children(self, task_id: int, status: str) -> None:
        """Kill every descendant of a task that failed, broke or was aborted -- the `kill` command, as
        JEDI sends it (the child's queued jobs end, a child without live jobs is aborted at once)."""

        with self.store.read() as conn:
            tree = [ChildTask(row.id, row.parent_id, row.status) for row in completion.descendants(conn, task_id)]
        for action in child_actions(task_id, status, tree):
            if action.action != "kill":
                continue
            try:
                outcome = run_command(self.store, Request("kill", action.task_id, BY, f"JEDI. {action.reason}"), self.settings, self.now)
            except JedictlError as exc:  # refused: it ended or was killed meanwhile (perhaps with its parent)
                self.report.add("skipped", task_id=action.task_id, parent_id=task_id, reason=f"kill: {exc}")
                continue
            self.report.add("kill_child", task_id=action.task_id, parent_id=task_id, status=outcome.status, reason=action.reason)

    # ----------------------------------------------------------------------------------- helpers

    def _load(self) -> tuple[Any, list[DatasetRecord], str | None]:
        with self.store.read() as conn:
            task = task_store.get_task(conn, self.task_id)
            self._rows = dataset_store.datasets_of(conn, self.task_id)
            parent = task_store.parent_status(conn, task.parent_id) if task.parent_id else None
        if task.lease_owner != self.owner:
            raise LeaseLost(f"task {self.task_id} is no longer leased by {self.owner}")
        return task, [from_row(DatasetRecord, row) for row in self._rows], parent

    def _locked(self, conn: Any) -> list[DatasetRecord]:
        """The task's datasets read again in the write transaction, locked until it ends."""
        self._rows = dataset_store.datasets_of(conn, self.task_id, lock=True)
        return [from_row(DatasetRecord, row) for row in self._rows]

    def _move(self, conn: Any, current: str, new: str, reason: str | None, **values: Any) -> None:
        if not task_store.change_status(conn, self.task_id, new, [current], reason, self.owner, self.now, owner=self.owner, **values):
            raise LeaseLost(f"task {self.task_id} changed while being finalized")
        self.path.append(str(new))

    def _write(self, conn: Any, status: str, **values: Any) -> None:
        """Task columns without a status change, under our lease and the status seen."""
        if not task_store.update_leased(conn, self.task_id, self.owner, [status], **values, modified_at=self.now):
            raise LeaseLost(f"task {self.task_id} changed while being finalized")

    def _release(self, conn: Any) -> None:
        task_leases.release(conn, self.task_id, self.owner)
        self.released = True

    def _outcome(self) -> tuple[str, str | None]:
        path = " -> ".join(self.path)
        notes = "; ".join(note for note in self.notes if note)
        if len(self.path) == 1:
            return ("measured" if self.measured else "waiting"), f"{path}: {notes}" if notes else path
        return self.path[-1], f"{path}: {notes}" if notes else path


def _outputs_counted(status: str, datasets: list[DatasetRecord]) -> list[DatasetRecord]:
    """Output and log datasets with the `n_files` the final rule compares with what finished. Output
    records are not counted when jobs are made, so the count is taken from the outcomes: every output
    of a done task was produced (a job finishes only with all its outputs); otherwise the outputs that
    failed -- jobs that failed for good, or attempts retried since -- make the dataset `finished`."""
    counted = []
    for dataset in datasets:
        if dataset.type in _CATALOG_TYPES:
            total = dataset.n_files_finished + (0 if status == S.DONE else dataset.n_files_failed)
            dataset = dataclasses.replace(dataset, n_files=max(total, dataset.n_files_finished))
        counted.append(dataset)
    return counted


def _dialog(reason: str | None) -> str | None:
    return reason[:2000] if reason else None
