"""The watch pass (JEDI's Watch Dog, jedi-inventory.md §8; seed 000 "throttled", "exhausted",
"Automatic priority boosting"): the housekeeping that keeps tasks moving when nobody watches.

In order, each over at most `watchdog.limit` tasks:

1. leases that expired are released, and files a dead process left `picked` go back to `ready`;
2. pending tasks go back to their old status after their wait -- or to `exhausted` after 7 days;
3. exhausted tasks nobody touched for 48 h move to `finishing`;
4. assigned jobs whose input has arrived at their site are activated (engine.watch.activation), then
   jobs past their timeouts are closed and their files placed again (engine.jobs.expiry);
5. the per-user caps (engine.watch.user_caps): a user (or working group) at his running-jobs cap has
   his activated analysis jobs throttled, and activated again below 90 % of it; then queued jobs of
   sites whose queue is long and does not move go to sites with room (engine.watch.reassignment);
6. tasks whose input keeps failing are throttled (120 min x n squared); tasks of a user whose input
   still to be staged from tape or transferred is over the limit are throttled until it falls;
   both are released again;
7. running tasks nearly done get priority 900 and the Express share;
8. running tasks whose jobs fail too often are paused (watchdog.pause_failure_rate, off by default);
9. tasks that reached their goal are finished softly;
10. finishing tasks with no live job left become `passed` (engine.commando.commands.settle_pass);
11. the jumbo watchdog (engine.watch.jumbo): jumbo jobs switched on and off in event-service tasks,
    made at jumbo sites, and co-jumbo jobs with nothing left to do ended.

Decisions are the pure functions of engine.watch.policy; each action is written in a transaction
of its own that first takes the task's lease (so an agent working on the task is never overtaken)
and guards the status it decided on; pause and finish go through the operator commands
(engine.commando.commands), so they act on the jobs and are recorded like any command. Every action is
one item of the pass report.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Callable

from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.task.final_status import DatasetRecord, from_row, masters, phase_complete
from jedictl.engine.watch.policy import (
    TaskProgress,
    WatchAction,
    WatchedTask,
    auto_pause,
    boost,
    goal_reached,
    kick_exhausted,
    may_boost,
    pause_same_request_type,
    reactivate_pending,
    release_lease,
    release_throttled,
    rescue_picked,
    throttle,
)
from jedictl.engine.commando.commands import Request, run_command, settle_pass
from jedictl.engine.watch.activation import activate_assigned
from jedictl.engine.watch.jumbo import jumbo_step
from jedictl.engine.watch.reassignment import rebalance
from jedictl.engine.watch.user_caps import apply_job_caps, transfer_throttles
from jedictl.engine.jobs.builds import settle_builds
from jedictl.engine.jobs.preprocess import settle_preprocessing
from jedictl.engine.jobs.expiry import close_expired_jobs
from jedictl.engine.shares.global_shares import load_shares
from jedictl.errors import BadInput, JedictlError
from jedictl.model import TASK_FOR_JOB_GENERATOR, DatasetType, TaskStatus
from jedictl.store import task_leases
from jedictl.store import tasks as task_store
from jedictl.store import watchdog as store
from jedictl.store.data_catalog import StoreDataCatalog

S = TaskStatus
BY = "jedictl watch"
_PICKING = (S.READY, S.SCOUTING, S.RUNNING)
_JOB_LIMIT = 10_000  # jobs looked at per pass by the job steps (activation; the expiry's own default)


class _Guarded(Exception):
    """The task moved (or got leased) between the decision and the write: nothing was written."""


def watch_pass(store: Any, settings: Settings, owner: str, now: datetime, limit: int | None = None) -> PassReport:
    """One pass of the watchdog; each action is one report item."""
    watchdog = Watchdog(store, settings, owner, now, limit or settings.watchdog.limit)
    for step in (watchdog.leases, watchdog.pending, watchdog.exhausted, watchdog.activate, watchdog.job_timeouts, watchdog.user_jobs,
                 watchdog.reassign,
                 watchdog.throttle, watchdog.transfers, watchdog.release_throttled, watchdog.boost, watchdog.pause, watchdog.goals,
                 watchdog.settle, watchdog.jumbo):
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - one failing action must not stop the others (a store refusing us does)
            watchdog.report.add_failure(exc, action=step.__name__)
    return watchdog.report


class Watchdog:
    def __init__(self, store: Any, settings: Settings, owner: str, now: datetime, limit: int):
        self.store, self.settings, self.owner, self.now, self.limit = store, settings, owner, now, limit
        self.watch = settings.watchdog
        self.report = PassReport("watch")

    # ------------------------------------------------------------------------------------ actions

    def leases(self) -> None:
        with self.store.read() as conn:
            expired = [WatchedTask.from_row(row) for row in store.expired_leases(conn, self.now, self.limit)]
            picked = store.picked_counts(conn, _PICKING)
            unleased = [WatchedTask.from_row(row) for row in store.tasks_by_id(conn, picked).values()
                        if row.lease_owner is None][: self.limit]
        for task in expired + unleased:
            action = rescue_picked(task, picked.get(task.id, {}), self.now, self.watch) or release_lease(task, self.now)
            if action is not None:
                self._apply(action, [task.status])

    def pending(self) -> None:
        # A task pending on its parent (old status registered) is re-checked by every refine pass and
        # never times out: retrying it here would only add history lines.
        with self.store.read() as conn:
            rows = store.free_tasks(conn, [S.PENDING], self.now, self.limit, old_status_except=S.REGISTERED.value)
            parents = store.parent_statuses(conn, rows)
        for row in rows:
            task = WatchedTask.from_row(row)
            self._apply(reactivate_pending(task, self.now, self.watch, parent_status=parents.get(row.parent_id)), [S.PENDING])

    def exhausted(self) -> None:
        cutoff = self.now - timedelta(hours=self.watch.wait_for_exhausted_hours)
        with self.store.read() as conn:
            rows = store.free_tasks(conn, [S.EXHAUSTED], self.now, self.limit, untouched_since=cutoff)
        for row in rows:
            self._apply(kick_exhausted(WatchedTask.from_row(row), self.now, self.watch), [S.EXHAUSTED])

    def activate(self) -> None:
        # Before the timeouts: a job whose input arrived is not closed for having waited for it.
        for item in activate_assigned(self.store, self.now, _JOB_LIMIT, StoreDataCatalog):
            self.report.add("activate", **item)
        # Run jobs whose site's build job ended (a report applied before a crash left them waiting).
        for item in settle_builds(self.store, self.settings, self.now):
            self.report.add(item.pop("action"), **item)
        for item in settle_preprocessing(self.store, self.now):  # tasks whose preprocess job decided
            self.report.add(item.pop("action"), **item)

    def job_timeouts(self) -> None:
        expired = close_expired_jobs(self.store, self.settings, self.now)
        for item in expired.items:
            outcome = "job_timeout" if item["outcome"] == "closed" else "skipped"
            self.report.add(outcome, job_id=item["job_id"], reason=item.get("reason"))

    def jumbo(self) -> None:
        """The jumbo watchdog (engine.watch.jumbo)."""
        for item in jumbo_step(self.store, self.settings, self.now):
            self.report.add(item.pop("action"), **item)

    def user_jobs(self) -> None:
        # After the timeouts (closed jobs no longer run) and the activation (jobs just activated count).
        for item in apply_job_caps(self.store, self.settings, self.now):
            self.report.add(item.pop("action"), **item)

    def reassign(self) -> None:
        # After the timeouts, the activation and the user caps: only jobs still queued are counted and moved.
        for item in rebalance(self.store, self.settings, self.owner, self.now, catalog_factory=StoreDataCatalog):
            self.report.add(item.pop("outcome"), **item)

    def transfers(self) -> None:
        for action in transfer_throttles(self.store, self.settings, self.now, StoreDataCatalog):
            expected = [S.THROTTLED] if action.kind == "release_transfers" else [action.values["old_status"]]
            self._apply(action, expected)

    def throttle(self) -> None:
        with self.store.read() as conn:
            rows = store.free_tasks(conn, sorted(TASK_FOR_JOB_GENERATOR), self.now, self.limit, throttling=True)
            averages = store.failed_attempt_averages(conn, [row.id for row in rows])
        for row in rows:
            if row.id in averages:
                self._apply(throttle(WatchedTask.from_row(row), averages[row.id], self.now, self.watch), [row.status])

    def release_throttled(self) -> None:
        with self.store.read() as conn:
            # A task held for its user's backlog of input to move is released by `transfers`, not by time.
            rows = [row for row in store.free_tasks(conn, [S.THROTTLED], self.now, self.limit) if row.throttle_reason is None]
            by_task = store.datasets_by_task(conn, [row.id for row in rows])
        for row in rows:
            records = [from_row(DatasetRecord, d) for d in by_task.get(row.id, [])]
            done = bool(masters(records)) and phase_complete(records)
            self._apply(release_throttled(WatchedTask.from_row(row), self.now, released_files_done=done), [S.THROTTLED])

    def boost(self) -> None:
        with self.store.read() as conn:
            rows, progress, parents = self._running(conn, counted=lambda task, totals: may_boost(task, totals, self.watch))
            available = self._share_available(conn)
        for row in rows:
            if row.id not in progress:
                continue  # its counters alone rule a boost out
            action = boost(WatchedTask.from_row(row), progress[row.id], self.watch, parent_status=parents.get(row.parent_id),
                           share_available=available)
            if action is not None:
                self._apply(action, [S.RUNNING], after=lambda conn, a=action: store.boost_jobs(
                    conn, a.task_id, a.values.get("current_priority"), a.values.get("gshare"), self.now))

    def pause(self) -> None:
        if not self.watch.pause_failure_rate or self.watch.pause_failure_rate <= 0:
            return  # auto-pause is off
        with self.store.read() as conn:
            rows, progress, _ = self._running(conn)
        tasks = [WatchedTask.from_row(row) for row in rows]
        paused: set[int] = set()
        for task in tasks:
            action = auto_pause(task, progress[task.id], self.watch)
            if action is None or task.id in paused:
                continue
            for each in [action, *pause_same_request_type(action, task.request_type, tasks)]:
                if each.task_id not in paused:
                    paused.add(each.task_id)
                    self._command(each)

    def goals(self) -> None:
        cutoff = self.now - timedelta(minutes=self.watch.wait_for_achieved_minutes)
        with self.store.read() as conn:
            rows = store.free_tasks(conn, [S.RUNNING, S.PENDING], self.now, self.limit, unassessed_since=cutoff)
            rows = [row for row in rows if (row.options or {}).get("goal") is not None]
            parents = store.parent_statuses(conn, rows)
            by_task = store.datasets_by_task(conn, [row.id for row in rows])
            fresh = {row.id: store.fresh_ready_files(conn, row.id) for row in rows}
        for row in rows:
            task = WatchedTask.from_row(row)
            data = by_task.get(row.id, [])
            inputs = [d for d in data if d.type in (DatasetType.INPUT.value, DatasetType.PSEUDO_INPUT.value)]
            outputs = [d for d in data if d.type == DatasetType.OUTPUT.value and d.template_id is None]
            # The first output, with the datasets of its sites when it is an output container.
            first_output = sum(d.n_events for d in data if outputs and outputs[0].id in (d.id, d.template_id))
            action = goal_reached(task, self.now, self.watch, parent_status=parents.get(row.parent_id),
                                  input_statuses=[d.status for d in inputs], fresh_ready_files=fresh[row.id],
                                  output_events=first_output,
                                  input_events=sum(d.n_events for d in inputs if d.master_id is None))
            with self.store.begin() as conn:  # checked now: not again before wait_for_achieved_minutes
                checked = store.set_task(conn, row.id, row.status, self.now, {"assessed_at": self.now})
            if checked and action is not None:
                self._command(action)

    def settle(self) -> None:
        """`finishing` tasks (a soft finish, an exhausted task kicked above, a goal reached) whose jobs
        have all ended become `passed`, for finalize to end (JEDI's commando revisits such tasks)."""

        for outcome in settle_pass(self.store, self.settings, self.now, BY, limit=self.limit):
            if outcome.outcome == "applied":
                self.report.add("settle", task_id=outcome.task_id, status=outcome.status, reason=outcome.message)

    # ------------------------------------------------------------------------------------ helpers

    def _running(self, conn: Any, counted: Callable[[WatchedTask, TaskProgress], bool] | None = None,
                 ) -> tuple[list[Any], dict[int, TaskProgress], dict[int, str]]:
        """Running tasks with their progress (master counters and job counts) and parents' statuses.

        Counting a task's jobs reads every job it has, so with `counted` only the tasks it accepts (on
        their counters alone) are counted and given a progress; the others are left out of it."""
        rows = store.free_tasks(conn, [S.RUNNING], self.now, self.limit)
        by_task = store.datasets_by_task(conn, [row.id for row in rows])
        totals = {row.id: TaskProgress.from_datasets([from_row(DatasetRecord, d) for d in by_task.get(row.id, [])]) for row in rows}
        if counted is not None:
            totals = {row.id: totals[row.id] for row in rows if counted(WatchedTask.from_row(row), totals[row.id])}
        counts = store.job_counts(conn, list(totals))
        progress = {task_id: replace(total, **dict(zip(("n_jobs", "n_jobs_finished", "n_jobs_failed"), counts.get(task_id, (0, 0, 0)))))
                    for task_id, total in totals.items()}
        return rows, progress, store.parent_statuses(conn, rows)

    def _share_available(self, conn: Any) -> bool:
        name = self.watch.boost_share
        defined = store.share_defined(conn, name)
        if defined is not None:
            return defined
        try:
            return any(leaf.name == name for leaf in load_shares(self.settings.global_shares).leaves())
        except BadInput:
            return False

    def _apply(self, action: WatchAction | None, expected: list[str], *, after: Callable[[Any], Any] | None = None) -> None:
        """Write one action: take the task's lease, move its status (with history) or set its columns,
        put picked files back, give the lease up -- one transaction, or nothing if the task moved."""
        if action is None:
            return
        try:
            with self.store.begin() as conn:
                if not task_leases.claim_one(conn, action.task_id, self.owner, self.now, self.settings.lease.seconds):
                    raise _Guarded("another process holds its lease")
                rescued = sum(store.unpick_files(conn, action.task_id, dataset_id, self.now) for dataset_id in action.dataset_deltas)
                values = {**action.values, "lease_owner": None, "lease_expires_at": None}
                if action.status is not None:
                    moved = task_store.change_status(conn, action.task_id, action.status, expected, action.reason, BY, self.now,
                                                     owner=self.owner, **values)
                else:
                    moved = task_store.update_leased(conn, action.task_id, self.owner, expected, **values, modified_at=self.now)
                if not moved:
                    raise _Guarded("its status changed")
                if after is not None:
                    after(conn)
        except _Guarded as exc:
            self.report.add("skipped", task_id=action.task_id, reason=f"{action.kind}: {exc}")
            return
        item = action.as_dict()
        if action.dataset_deltas:
            item["files"] = rescued
        self.report.add(item.pop("action"), **item)

    def _command(self, action: WatchAction) -> None:
        """An action carried out as an operator command (pause, soft finish), applied at once through
        the command path -- the same status check, the same effect on jobs, the same audit row."""

        request = Request(action.command or "", action.task_id, BY, action.reason, soft=action.qualifier == "soft")
        try:
            outcome = run_command(self.store, request, self.settings, self.now)
        except JedictlError as exc:  # refused (the task moved meanwhile) or a job changed under it
            self.report.add("skipped", task_id=action.task_id, reason=f"{action.kind}: {exc}")
            return
        item = action.as_dict()
        item["status"] = outcome.status
        self.report.add(item.pop("action"), **item)
