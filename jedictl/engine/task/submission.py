"""Turning a submitted document into a TaskDefinition, whichever format it is in, and registering it."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.panda_params import is_panda_params, parse_panda_params
from jedictl.engine.task.spec import parse_task_spec
from jedictl.engine.task.definition import PRIORITY_RANGE, USER_RE, TaskDefinition
from jedictl.errors import BadInput, NotFound

def parse_definition(
    document: dict[str, Any],
    *,
    user: str | None,
    default_user: str,
    priority: int | None = None,
    parent_id: int | None = None,
    analysis_priority: int = 1000,
) -> TaskDefinition:
    """Detect the format and parse. The owner is `user` (--user), else the document's, else `default_user`."""
    if user and not USER_RE.match(user):
        raise BadInput("must be letters, digits and . _ @ -", "--user")
    fields.integer(priority, "--priority", *PRIORITY_RANGE)
    fields.check_storable(document, "")  # the document is stored as submitted, unknown keys and all
    parse = parse_panda_params if is_panda_params(document) else parse_task_spec
    definition = parse(document, user=user or "", priority=priority, parent_id=parent_id, analysis_priority=analysis_priority)
    if not definition.user_name:
        definition = dataclasses.replace(definition, user_name=default_user)
    if not USER_RE.match(definition.user_name):
        raise BadInput("the task's user must be letters, digits and . _ @ -", "user")
    return definition


def task_row(definition: TaskDefinition) -> dict[str, Any]:
    """Column values of a newly submitted task (resource model and queues are the refiner's job)."""
    from jedictl.store.tasks import unique_key

    return {
        "name": definition.name, "user_name": definition.user_name,
        "unique_name_key": unique_key(definition.user_name, definition.name) if definition.unique_name else None,
        "vo": definition.vo, "prod_source_label": definition.prod_source_label, "task_type": definition.task_type,
        "processing_type": definition.processing_type, "working_group": definition.working_group,
        "country_group": definition.country_group, "campaign": definition.campaign, "req_id": definition.req_id,
        "task_priority": definition.task_priority, "current_priority": definition.task_priority,
        "parent_id": definition.parent_id, "cloud": definition.cloud, "site": definition.site, "nucleus": definition.nucleus,
        "trans_path": definition.trans_path, "trans_home": definition.trans_home, "trans_uses": definition.trans_uses,
        "architecture": definition.architecture, "container_name": definition.container_name,
        "source_url": definition.source_url, "options": definition.options.as_dict(), "attempt_nr": 0,
    }


def register_task(conn, definition: TaskDefinition, document: dict[str, Any], now: datetime, by: str) -> int:  # noqa: ANN001
    """Store a validated definition as a `registered` task (JEDI's task-parameter insertion)."""
    from jedictl.store import tasks as task_store

    if definition.parent_id is not None and task_store.parent_status(conn, definition.parent_id) is None:
        raise NotFound(f"parent task {definition.parent_id} does not exist", "parent")
    if definition.unique_name:
        existing = task_store.find_same_name(conn, definition.user_name, definition.name)
        if existing is not None:
            raise BadInput(f"task {existing.id} ({existing.status}) already has this name for user {definition.user_name}", "name")
    return task_store.insert_task(conn, task_row(definition), document, definition.format, definition.unknown_keys, now, by)
