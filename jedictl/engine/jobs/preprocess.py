"""What a preprocess job's end does to its task (docs/preprocessing.md; engine.task.preprocess).

A task waits `preprocessing` while its one preprocess job runs. Once the job's report has been applied
its pp_input record is `finished`, back in the pool (a failure with attempts left: the generator makes
the job again), or `failed` (its three attempts used). This step then moves the task on: `defined`
when the record finished -- the feeder takes it from there, as any refined task -- or `tobroken` when it
failed for good (finalize ends it `broken`). It runs right after every batch of reports and in every
watch pass; each move is guarded by `preprocessing`, so it happens once however often it is looked at.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jedictl.engine.task.preprocess import DONE_STATUS, preprocess_verdict
from jedictl.model import TaskStatus
from jedictl.store import preprocess as preprocess_store
from jedictl.store import tasks as task_store

BY = "jedictl preprocessing"
LIMIT = 10_000
_OUTCOME = {TaskStatus.DEFINED.value: "preprocessed", TaskStatus.TOBROKEN.value: "broken_by_preprocess"}


def settle_preprocessing(store: Any, now: datetime, limit: int = LIMIT) -> list[dict[str, Any]]:
    """Move the tasks whose preprocess job decided; one item per task: {"action", "task_id", "status", "reason"}."""
    with store.read() as conn:
        rows = preprocess_store.waiting_tasks(conn, [TaskStatus.PREPROCESSING.value], limit)
    items = []
    for row in rows:
        verdict = preprocess_verdict(row.status, row.n_files, row.n_files_finished, row.n_files_failed)
        if verdict is None:
            continue
        new, reason = verdict
        extra = {"error_dialog": reason} if new == TaskStatus.TOBROKEN.value else {"error_dialog": None}
        with store.begin() as conn:
            if task_store.change_status(conn, row.id, new, [row.status], reason, BY, now, **extra):
                preprocess_store.set_dataset_status(conn, row.dataset_id, DONE_STATUS[new], now)
                items.append({"action": _OUTCOME[new], "task_id": row.id, "status": new, "reason": reason})
    return items
