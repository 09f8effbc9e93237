"""The output check in the final step's transaction (docs/post-processing.md): the facts read from the
store (store.post_checks), the verdict of the pure policy (engine.finalize.post_check), and the
removals written -- the catalog files removed and recorded in `removed_outputs` -- before the task's
final status, or its pause, is written in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from jedictl.engine.finalize.post_check import Disagreement, PostCheck, Unaccounted, kept_output, post_check
from jedictl.store import post_checks


def tasks_to_check(conn: Any, task_ids: Iterable[int]) -> set[int]:
    """Of a batch's tasks about to end, those whose outputs need the one-task check (one statement)."""
    return post_checks.tasks_to_check(conn, task_ids)


def lock_catalog_datasets(conn: Any, names: Iterable[str]) -> None:
    post_checks.lock_catalog_datasets(conn, names)


def check_outputs(conn: Any, task_id: int, now: datetime, by: str) -> PostCheck:
    """Check one task's output and log datasets against the data catalog and remove what must go."""
    type_of = dict(post_checks.output_names(conn, task_id))
    if not type_of:
        return PostCheck()
    names = sorted(type_of)
    post_checks.lock_catalog_datasets(conn, names)
    count, rows = post_checks.disagreements(conn, task_id)
    entries = post_checks.unaccounted(conn, names, post_checks.writers_of(conn, task_id, names))
    attempts = post_checks.attempts_of(conn, task_id, [(entry.dataset, entry.lfn) for entry in entries])
    job_ids = {row.out_job_id for row in attempts.values() if row.out_job_id is not None}
    inputs = post_checks.inputs_of_jobs(conn, job_ids)
    outputs = post_checks.finished_outputs_of_inputs(conn, {file_id for listed in inputs.values() for file_id, _ in listed})
    name_of = post_checks.dataset_names(conn, {dataset_id for listed in outputs.values() for _, _, dataset_id in listed})
    unaccounted = []
    for entry in entries:
        attempt = attempts.get((entry.dataset, entry.lfn))
        job_id = attempt.out_job_id if attempt is not None else None
        read = inputs.get(job_id, []) if job_id is not None else []
        kept, input_lfn = None, read[0][1] if read else None
        for file_id, lfn in read:
            kept = kept_output([(other, out, name_of.get(dataset_id, "")) for other, out, dataset_id in outputs.get(file_id, [])],
                               entry.dataset, job_id or 0)
            if kept is not None:
                input_lfn = lfn
                break
        unaccounted.append(Unaccounted(
            entry.dataset, type_of[entry.dataset], entry.entry_id, entry.lfn, entry.guid, entry.size, entry.checksum, bool(entry.has_replica),
            attempt.status if attempt is not None else None, job_id, input_lfn, kept[1] if kept else None, kept[0] if kept else None))
    result = post_check((Disagreement(*row) for row in rows), count, unaccounted)
    if result.removals:
        post_checks.remove_entries(conn, [removal.entry_id for removal in result.removals])
        post_checks.record_removals(conn, task_id, result.removals, now, by)
    return result
