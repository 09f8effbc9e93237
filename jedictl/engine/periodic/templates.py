"""The operator's side of periodic templates: add (validated as every instance will be), list, show,
pause, resume, remove (docs/periodic-tasks.md)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping

from jedictl.config import Settings
from jedictl.engine.input import fields
from jedictl.engine.periodic.schedule import (
    DUE, Schedule, build_schedule, ceil_minute, floor_minute, format_every, render, stored_schedule, template_name,
)
from jedictl.engine.task.definition import TaskDefinition, check_name
from jedictl.engine.task.privileges import Privileges
from jedictl.engine.task.submission import PriorityPolicy, parse_definition
from jedictl.errors import BadInput, NotFound
from jedictl.model import TASK_FINAL
from jedictl.store import periodic as periodic_store

MAX_ACTIVE_RANGE = (1, 1000)


def priority_policy(settings: Settings) -> PriorityPolicy:
    """The priority rules of `jedictl submit`, which every instance is submitted under."""
    return PriorityPolicy(settings.refine.analysis_priority, Privileges.from_settings(settings.privileges), settings.generate.express_priority)


def instance_definition(document: Mapping[str, Any], due_at: datetime, user: str, settings: Settings) -> TaskDefinition:
    """The task a template makes for `due_at`, checked as `jedictl submit` checks a task (BadInput)."""
    return parse_definition(render(dict(document), due_at), user=user, default_user=user, analysis_priority=settings.refine.analysis_priority,
                            policy=priority_policy(settings))


def add_template(store: Any, settings: Settings, document: dict[str, Any], *, name: str | None, user: str | None, default_user: str,
                 every: str | None, cron: str | None, start: datetime | None, max_active: int, now: datetime, by: str) -> dict[str, Any]:
    """Check the template as its instances will be submitted, and store it; its details."""
    fields.integer(max_active, "--max-active", *MAX_ACTIVE_RANGE)
    schedule = build_schedule(every, cron, ceil_minute(start) if start is not None else floor_minute(now))
    first = schedule.at_or_after(max(schedule.start, floor_minute(now)))
    if first is None:
        raise BadInput("the schedule has no due time left before the year 9000", "--start")
    # Two instances a day apart, both parsed as `submit` would: each must be a task of its own, with
    # output datasets of its own (an output dataset belongs to one task), so ${DUE} must make them so.
    one = parse_definition(render(document, first), user=user, default_user=default_user, policy=priority_policy(settings),
                           analysis_priority=settings.refine.analysis_priority)
    owner = one.user_name
    other = instance_definition(document, first + timedelta(days=1), owner, settings)
    where = "taskName" if one.format == "panda" else "name"
    if one.name == other.name:
        raise BadInput(f"the task name must contain {DUE} (the due time, e.g. {one.name}.{DUE}): each instance is a task of its own", where)
    shared = sorted({d.name for d in one.outputs()} & {d.name for d in other.outputs()})
    if shared:
        raise BadInput(f"output dataset {shared[0]} would be written by every instance: put {DUE} in its name "
                       "(an output dataset belongs to one task)", "jobParameters" if one.format == "panda" else "outputs")
    chosen = check_name(name if name is not None else template_name(str(document.get(where) or "")), "--name", "a template name")
    values = {
        "name": chosen, "user_name": owner, "format": one.format, "document": document,
        "every_minutes": int(schedule.every.total_seconds()) // 60 if schedule.every is not None else None,
        "cron": schedule.cron.text if schedule.cron is not None else None, "start_at": schedule.start, "max_active": max_active,
        "status": "active", "next_due_at": first, "created_at": now, "created_by": by, "modified_at": now,
    }
    with store.begin() as conn:
        periodic_store.insert_template(conn, values)
        return template_details(conn, chosen, now)


def _schedule_of(row: Any) -> Schedule:
    return stored_schedule(row.start_at, row.every_minutes, row.cron)


def _found(conn: Any, name: str) -> Any:
    row = periodic_store.get_template(conn, name)
    if row is None:
        raise NotFound(f"no periodic template named {name}", "NAME")
    return row


def pause_template(store: Any, name: str, now: datetime) -> dict[str, Any]:
    """Stop instantiating; the instances already made go on. Pausing a paused template changes nothing."""
    with store.begin() as conn:
        row = _found(conn, name)
        changed = periodic_store.set_status(conn, name, "paused", "active", row.next_due_at, now)
        return {**template_details(conn, name, now), "changed": changed}


def resume_template(store: Any, name: str, now: datetime) -> dict[str, Any]:
    """Instantiate again from the first due time at or after now: the times passed while paused are
    neither made up for nor counted as missed."""
    with store.begin() as conn:
        row = _found(conn, name)
        following = _schedule_of(row).at_or_after(floor_minute(now))
        changed = periodic_store.set_status(conn, name, "active", "paused", following, now)
        return {**template_details(conn, name, now), "changed": changed}


def remove_template(store: Any, name: str) -> dict[str, Any]:
    """Remove the template; its instances stay, as tasks of their own (task show still names the id)."""
    with store.begin() as conn:
        template_id = periodic_store.delete_template(conn, name)
    if template_id is None:
        raise NotFound(f"no periodic template named {name}", "NAME")
    return {"removed": name, "template_id": template_id}


def template_summary(row: Any, active: int) -> dict[str, Any]:
    return {
        "template_id": row.id, "name": row.name, "user": row.user_name, "schedule": _schedule_of(row).text, "status": row.status,
        "max_active": row.max_active, "active": active, "next_due_at": row.next_due_at if row.status == "active" else None,
        "last_due_at": row.last_due_at, "last_outcome": row.last_outcome, "instances": row.n_instances, "capped": row.n_capped,
        "missed": row.n_missed, "refused": row.n_refused,
    }


def list_templates(conn: Any, status: str | None = None) -> list[dict[str, Any]]:
    rows = periodic_store.list_templates(conn, status)
    active = periodic_store.active_instances(conn, [r.id for r in rows], TASK_FINAL)
    return [template_summary(row, active.get(row.id, 0)) for row in rows]


def template_details(conn: Any, name: str, now: datetime, instances: int = 20) -> dict[str, Any]:
    """Everything about one template: its summary, schedule, last outcome, the next due times and its newest instances."""
    row = _found(conn, name)
    schedule = _schedule_of(row)
    active = periodic_store.active_instances(conn, [row.id], TASK_FINAL).get(row.id, 0)
    upcoming = schedule.upcoming(row.next_due_at, 3) if row.status == "active" and row.next_due_at is not None else []
    return {
        **template_summary(row, active),
        "every": format_every(schedule.every) if schedule.every is not None else None, "cron": row.cron, "start_at": row.start_at,
        "last_reason": row.last_reason, "last_task_id": row.last_task_id, "upcoming": upcoming, "format": row.format,
        "created_at": row.created_at, "created_by": row.created_by, "modified_at": row.modified_at, "document": row.document,
        "tasks": [{"task_id": t.id, "name": t.name, "status": t.status, "due_at": t.periodic_due_at, "created_at": t.created_at}
                  for t in periodic_store.instances_of(conn, row.id, instances)],
    }
