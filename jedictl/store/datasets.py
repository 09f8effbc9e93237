"""Named operations on a task's datasets and templates: reads, and the rows a container expands into."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Row, func, insert, select, update

from jedictl.model import DATASET_OUTPUT_TYPES
from jedictl.store.schema import datasets, job_param_templates, output_templates, task_outputs, tasks


def datasets_of(conn: Connection, task_id: int, *, lock: bool = False) -> list[Row]:
    """The task's datasets in id order; `lock`: held until the transaction ends (PostgreSQL row locks,
    taken in id order like every counter writer; SQLite's write transaction already excludes them)."""
    query = select(datasets).where(datasets.c.task_id == task_id).order_by(datasets.c.id)
    return list(conn.execute(query.with_for_update() if lock and conn.dialect.name == "postgresql" else query))


def get_dataset(conn: Connection, dataset_id: int) -> Row:
    return conn.execute(select(datasets).where(datasets.c.id == dataset_id)).one()


def container_members(conn: Connection, task_id: int, container_name: str) -> list[Row]:
    """The task's dataset rows that stand for constituents of the container `container_name`."""
    return list(conn.execute(select(datasets).where(datasets.c.task_id == task_id, datasets.c.container_name == container_name)))


def insert_dataset(conn: Connection, values: dict[str, Any]) -> Row:
    """Insert one dataset row (every column but the id, as given); the row written."""
    new_id = conn.execute(insert(datasets).values(**values).returning(datasets.c.id)).scalar_one()
    return get_dataset(conn, new_id)


def set_job_templates(conn: Connection, task_id: int, templates: dict[str, str]) -> None:
    """Replace the task's job-parameter templates of these kinds ("job", "merge"): a resubmission's new code."""
    for kind, template in sorted(templates.items()):
        updated = conn.execute(update(job_param_templates).where(job_param_templates.c.task_id == task_id, job_param_templates.c.kind == kind)
                               .values(template=template))
        if updated.rowcount != 1:
            raise LookupError(f"task {task_id} has no {kind} template")


#: A dataset's counters: a new dataset starts with each at 0.
COUNTERS = ("n_files", "n_files_to_be_used", "n_files_used", "n_files_finished", "n_files_failed", "n_files_on_hold", "n_files_missing",
            "n_events", "n_events_to_be_used", "n_events_used")


def add_input_like(conn: Connection, like: int, name: str, now: Any, container_name: str | None = None) -> int:
    """A new input dataset `name` of the task of dataset `like`, of its stream, kind, master and attributes,
    not fed yet (JEDI's appendDatasets: a resubmission's new input, a container's new member). Returns its id."""
    row = get_dataset(conn, like)
    values = {key: value for key, value in row._mapping.items() if key != "id"}
    values.update({counter: 0 for counter in COUNTERS}, name=name, container_name=container_name, status="defined", state=None,
                  state_checked_at=None, site=None, created_at=now, modified_at=now)
    return conn.execute(insert(datasets).values(**values).returning(datasets.c.id)).scalar_one()


def templates_of(conn: Connection, task_id: int) -> list[Row]:
    return list(conn.execute(select(output_templates).where(output_templates.c.task_id == task_id).order_by(output_templates.c.id)))


def job_templates_of(conn: Connection, task_id: int) -> dict[str, str]:
    rows = conn.execute(select(job_param_templates.c.kind, job_param_templates.c.template).where(job_param_templates.c.task_id == task_id))
    return {row.kind: row.template for row in rows}


def output_owners(conn: Connection, names: Iterable[str]) -> list[Row]:
    """(name, task_id, status, user_name, task_name) of the refined tasks that write an output, log or
    unmerged dataset of one of these names."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    return list(conn.execute(select(datasets.c.name, datasets.c.task_id, tasks.c.status, tasks.c.user_name, tasks.c.name.label("task_name"))
                             .join(tasks, tasks.c.id == datasets.c.task_id)
                             .where(datasets.c.name.in_(wanted), datasets.c.type.in_([t.value for t in DATASET_OUTPUT_TYPES]))
                             .order_by(datasets.c.task_id)))


def lock_output_names(conn: Connection, names: Iterable[str]) -> None:
    """Serialise the transactions that check and claim these output dataset names until they end: one
    transaction-level advisory lock per name on PostgreSQL, in name order (so two never deadlock);
    SQLite's BEGIN IMMEDIATE already makes writers take turns. Without it two submissions (or two
    refiners) of one name could each see no owner under READ COMMITTED and both be accepted."""
    if conn.dialect.name != "postgresql":
        return
    for name in sorted(set(names)):
        conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(name, 0))))


def output_writers(conn: Connection, names: Iterable[str]) -> list[Row]:
    """(name, task_id, status, user_name, task_name) of every task registered to write an output or log
    dataset of one of these names (`task_outputs`, written at registration: refined or not)."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    return list(conn.execute(select(task_outputs.c.name, task_outputs.c.task_id, tasks.c.status, tasks.c.user_name, tasks.c.name.label("task_name"))
                             .join(tasks, tasks.c.id == task_outputs.c.task_id)
                             .where(task_outputs.c.name.in_(wanted)).order_by(task_outputs.c.task_id)))
