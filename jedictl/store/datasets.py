"""Named operations on a task's datasets and templates: reads, and the rows a container expands into."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Row, insert, select

from jedictl.model import DATASET_OUTPUT_TYPES, TaskStatus
from jedictl.store.schema import datasets, job_param_templates, output_templates, task_params, tasks


def datasets_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(datasets).where(datasets.c.task_id == task_id).order_by(datasets.c.id)))


def get_dataset(conn: Connection, dataset_id: int) -> Row:
    return conn.execute(select(datasets).where(datasets.c.id == dataset_id)).one()


def container_members(conn: Connection, task_id: int, container_name: str) -> list[Row]:
    """The task's dataset rows that stand for constituents of the container `container_name`."""
    return list(conn.execute(select(datasets).where(datasets.c.task_id == task_id, datasets.c.container_name == container_name)))


def insert_dataset(conn: Connection, values: dict[str, Any]) -> Row:
    """Insert one dataset row (every column but the id, as given); the row written."""
    new_id = conn.execute(insert(datasets).values(**values).returning(datasets.c.id)).scalar_one()
    return get_dataset(conn, new_id)


def templates_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(output_templates).where(output_templates.c.task_id == task_id).order_by(output_templates.c.id)))


def job_templates_of(conn: Connection, task_id: int) -> dict[str, str]:
    rows = conn.execute(select(job_param_templates.c.kind, job_param_templates.c.template).where(job_param_templates.c.task_id == task_id))
    return {row.kind: row.template for row in rows}


def output_owners(conn: Connection, names: Iterable[str]) -> list[Row]:
    """(name, task_id, status) of the refined tasks that write an output, log or unmerged dataset of
    one of these names."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    return list(conn.execute(select(datasets.c.name, datasets.c.task_id, tasks.c.status).join(tasks, tasks.c.id == datasets.c.task_id)
                             .where(datasets.c.name.in_(wanted), datasets.c.type.in_([t.value for t in DATASET_OUTPUT_TYPES]))
                             .order_by(datasets.c.task_id)))


def unrefined_documents(conn: Connection) -> list[Row]:
    """(task_id, status, user_name, document) of the tasks not refined yet: their datasets exist only in
    the submitted document (registered, or pending on their parent before refinement)."""
    waiting = (tasks.c.status == TaskStatus.PENDING.value) & (tasks.c.old_status == TaskStatus.REGISTERED.value)
    return list(conn.execute(select(tasks.c.id.label("task_id"), tasks.c.status, tasks.c.user_name, task_params.c.document)
                             .join(task_params, task_params.c.task_id == tasks.c.id)
                             .where((tasks.c.status == TaskStatus.REGISTERED.value) | waiting).order_by(tasks.c.id)))
