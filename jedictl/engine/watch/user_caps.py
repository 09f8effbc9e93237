"""The per-user caps' part of the watch pass (seed 000 "Throttled jobs and tasks"; AtlasAnalWatchDog's
user caps and doForPreStaging): thin loops around engine.shares.user_caps.

- `apply_job_caps`: each account's running jobs and cores against its caps; its activated jobs become
  `throttled` (one guarded UPDATE per account) or its throttled ones `activated` again.
- `transfer_throttles`: each account's backlog of input its assigned jobs still wait for, per kind
  (staging from tape, transfer from disk), against the limits; the decisions on tasks (throttle or
  release) come back as WatchActions for the watchdog to write like its others -- the task's lease,
  a guarded status change with history.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Callable

from jedictl.config import Settings
from jedictl.engine.brokerage.loading import load_catalog
from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.shares.user_caps import ANALYSIS_LABELS, AwaitedInput, account_of, backlogs, job_cap_action, transfer_actions
from jedictl.engine.shares.user_usage import load_accounts
from jedictl.engine.watch.policy import WatchAction
from jedictl.model import TASK_FOR_JOB_GENERATOR, TaskStatus
from jedictl.store import user_caps as store


def apply_job_caps(store_: Any, settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """One look at every account: throttle or release its jobs. One report item per task whose jobs
    moved (action, task_id, jobs, reason), as PanDA logs the user cap per task."""
    with store_.read() as conn:
        loads = load_accounts(conn)
    items: list[dict[str, Any]] = []
    for account in sorted(loads):
        action = job_cap_action(account, loads[account], settings.user_caps)
        if action is None:
            continue
        move = store.throttle_jobs if action.action == "throttle_jobs" else store.release_jobs
        with store_.begin() as conn:
            moved = move(conn, (account.kind, account.name), ANALYSIS_LABELS, now)
        per_task: dict[int, int] = defaultdict(int)
        for row in moved:
            per_task[row.task_id] += 1
        items.extend({"action": action.action, "task_id": task_id, "jobs": count, "reason": action.reason}
                     for task_id, count in sorted(per_task.items()))
    return items


def transfer_throttles(store_: Any, settings: Settings, now: datetime, catalog_factory: Callable[[Any], DataCatalog]) -> list[WatchAction]:
    """The tasks to throttle for their account's backlog of input to stage or transfer, and those to
    release, as WatchActions (not written here)."""
    with store_.read() as conn:
        rows = store.awaited_inputs(conn, ANALYSIS_LABELS)
        throttled_rows = store.transfer_throttled(conn)
        endpoints = load_catalog(conn).endpoints if rows else {}
        on_disk = _disk_held(rows, catalog_factory(conn), endpoints) if rows else {}
        runnable_rows = store.free_tasks_among(conn, {row.task_id for row in rows}, sorted(TASK_FOR_JOB_GENERATOR), now)
    awaited = [AwaitedInput(account_of(row.user_name, row.working_group), row.task_id, row.dataset, row.lfn, int(row.size or 0),
                            on_disk.get((row.dataset, row.lfn), True)) for row in rows]
    totals = backlogs(awaited)
    throttled = {row.id: (account_of(row.user_name, row.working_group), row.throttle_reason) for row in throttled_rows}
    old_statuses = {row.id: row.old_status for row in throttled_rows}
    statuses = {row.id: row.status for row in runnable_rows}
    runnable = {row.id: account_of(row.user_name, row.working_group) for row in runnable_rows}
    actions = []
    for decision in transfer_actions(totals, throttled, runnable, settings.user_caps):
        if decision.action == "throttle_transfers":
            actions.append(WatchAction(decision.action, decision.task_id, decision.reason, TaskStatus.THROTTLED,
                                       {"old_status": statuses[decision.task_id], "throttle_reason": decision.kind, "wait_until": None,
                                        "error_dialog": decision.reason}))
        else:
            actions.append(WatchAction(decision.action, decision.task_id, decision.reason,
                                       old_statuses[decision.task_id] or TaskStatus.READY,
                                       {"old_status": None, "throttle_reason": None, "error_dialog": None}))
    return actions


def _disk_held(rows: Any, catalog: DataCatalog, endpoints: Any) -> dict[tuple[str, str], bool]:
    """(dataset, lfn) -> whether a disk endpoint holds the file (False: only tape replicas are known,
    so it is staged from tape). A file the catalog knows no replica of counts as a transfer."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        wanted[row.dataset].add(row.lfn)
    held: dict[tuple[str, str], bool] = {}
    for dataset, lfns in wanted.items():
        tape_only: dict[str, bool] = {}
        for endpoint, files in catalog.replica_map(dataset, sorted(lfns)).items():
            known = endpoints.get(endpoint)
            disk = known is None or not known.is_tape
            for lfn in files:
                tape_only[lfn] = tape_only.get(lfn, True) and not disk
        for lfn in lfns:
            held[(dataset, lfn)] = not tape_only.get(lfn, False)
    return held
