"""Named read operations on a task's datasets and templates."""

from __future__ import annotations

from sqlalchemy import Connection, Row, select

from jedictl.store.schema import datasets, job_param_templates, output_templates


def datasets_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(datasets).where(datasets.c.task_id == task_id).order_by(datasets.c.id)))


def templates_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(output_templates).where(output_templates.c.task_id == task_id).order_by(output_templates.c.id)))


def job_templates_of(conn: Connection, task_id: int) -> dict[str, str]:
    rows = conn.execute(select(job_param_templates.c.kind, job_param_templates.c.template).where(job_param_templates.c.task_id == task_id))
    return {row.kind: row.template for row in rows}
