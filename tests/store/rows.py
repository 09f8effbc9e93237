"""Rows for the store-layer tests: the fewest columns a task, dataset or job needs, written straight into
a connection (no engine pass, no CLI), so each test states exactly what it starts from."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select

from jedictl.store.schema import datasets, jobs, task_status_history, tasks

#: The frozen moment the tests act at (naive UTC, as the store keeps times: clock.utcnow).
T0 = datetime(2030, 1, 1, 12, 0, 0)


def add_task(conn: Connection, name: str, status: str = "registered", **values: Any) -> int:
    row = {"name": name, "user_name": "alice", "vo": "atlas", "prod_source_label": "managed", "task_type": "prod", "status": status,
           "options": {}, "created_at": T0, "modified_at": T0, "state_changed_at": T0, **values}
    return conn.execute(insert(tasks).values(**row).returning(tasks.c.id)).scalar_one()


def add_dataset(conn: Connection, task_id: int, name: str, type: str = "input") -> int:
    return conn.execute(insert(datasets).values(task_id=task_id, name=name, type=type, status="defined", attributes={},
                                                created_at=T0, modified_at=T0).returning(datasets.c.id)).scalar_one()


def add_job(conn: Connection, task_id: int, index: int, site: str = "CERN", status: str = "activated", **values: Any) -> int:
    row = {"task_id": task_id, "task_job_index": index, "status": status, "site": site, "created_at": T0, "modified_at": T0,
           "state_changed_at": T0, **values}
    return conn.execute(insert(jobs).values(**row).returning(jobs.c.id)).scalar_one()


def task_row(conn: Connection, task_id: int) -> Any:
    return conn.execute(select(tasks).where(tasks.c.id == task_id)).one()


def job_row(conn: Connection, job_id: int) -> Any:
    return conn.execute(select(jobs).where(jobs.c.id == job_id)).one()


def history(conn: Connection, task_id: int) -> list[tuple]:
    return [tuple(row) for row in conn.execute(
        select(task_status_history.c.previous_status, task_status_history.c.status, task_status_history.c.reason,
               task_status_history.c.changed_by).where(task_status_history.c.task_id == task_id).order_by(task_status_history.c.id))]
