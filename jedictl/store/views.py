"""Named reads for the read models (engine.views: explain, metrics): counts and small lists an operator
looks at. They never write."""

from __future__ import annotations

from sqlalchemy import Connection, Row, func, select

from jedictl.store.schema import datasets, files, jobs, tasks


def files_by_status(conn: Connection, task_id: int) -> list[Row]:
    """(dataset name, dataset type, file status, count) of a task's files, by dataset name and status."""
    return list(conn.execute(
        select(datasets.c.name, datasets.c.type, files.c.status, func.count())
        .join(datasets, datasets.c.id == files.c.dataset_id).where(datasets.c.task_id == task_id)
        .group_by(datasets.c.name, datasets.c.type, files.c.status).order_by(datasets.c.name, files.c.status)
    ))


def output_storage_tokens(conn: Connection, task_id: int) -> list[str]:
    """The distinct storage tokens of a task's output and log datasets ('' for none), sorted."""
    return sorted({row[0] or "" for row in conn.execute(select(datasets.c.storage_token).where(
        datasets.c.task_id == task_id, datasets.c.type.in_(["output", "log"])))})


def task_status_counts(conn: Connection) -> dict[str, int]:
    return dict(conn.execute(select(tasks.c.status, func.count()).group_by(tasks.c.status)).all())


def job_status_counts(conn: Connection) -> dict[str, int]:
    return dict(conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status)).all())
