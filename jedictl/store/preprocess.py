"""Named operations behind preprocessing (engine.task.preprocess, engine.jobs.preprocess;
docs/preprocessing.md): the one pseudo record of a task's pp_input master, the tasks waiting for their
preprocess job with that record's counters, and the end of the wait.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from jedictl.model import DatasetType, FileStatus
from jedictl.store.schema import datasets, files, tasks


def add_record(conn: Connection, task_id: int, lfn: str, max_attempt: int, now: datetime) -> None:
    """The pp_input master's one pseudo record, released (`ready`, counted in n_files and
    n_files_to_be_used) in the refiner's transaction."""
    dataset_id = conn.execute(select(datasets.c.id).where(datasets.c.task_id == task_id,
                                                          datasets.c.type == DatasetType.PP_INPUT.value)).scalar_one()
    conn.execute(insert(files).values(task_id=task_id, dataset_id=dataset_id, lfn=lfn, type=DatasetType.PP_INPUT.value,
                                      status=FileStatus.READY.value, attempt_nr=0, max_attempt=max_attempt, failed_attempt=0,
                                      keep_track=True, created_at=now))
    conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(
        status="ready", n_files=1, n_files_to_be_used=1, modified_at=now))


def waiting_tasks(conn: Connection, statuses: Collection[str], limit: int) -> list[Any]:
    """Tasks in `statuses` with their pp_input master's counters: (id, status, dataset_id, n_files,
    n_files_finished, n_files_failed)."""
    return list(conn.execute(
        select(tasks.c.id, tasks.c.status, datasets.c.id.label("dataset_id"), datasets.c.n_files, datasets.c.n_files_finished,
               datasets.c.n_files_failed)
        .join(datasets, (datasets.c.task_id == tasks.c.id) & (datasets.c.type == DatasetType.PP_INPUT.value))
        .where(tasks.c.status.in_(list(statuses))).order_by(tasks.c.id).limit(limit)))


def set_dataset_status(conn: Connection, dataset_id: int, status: str, now: datetime) -> None:
    conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(status=status, modified_at=now))
