"""`jedictl periodic instantiate` (and the first pass of `jedictl run`): each template whose due time has
passed becomes a `registered` task, unless its cap of active instances is reached (docs/periodic-tasks.md).

Per template, one transaction: claim the due time (one guarded UPDATE, store.periodic.claim_due),
count the active instances, then submit the instance under a savepoint as `jedictl submit` would
(the user's caps, outputs of one task, priorities). A submission refused is recorded as the due
time's outcome (`refused`, with the reason) and the schedule goes on; any other error rolls the
whole transaction back, claim included, and the next pass tries the due time again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.periodic.schedule import decide_cap, due, render, stored_schedule
from jedictl.engine.periodic.templates import instance_definition
from jedictl.engine.task.submission import register_task
from jedictl.errors import BadInput, NotFound, StoreUnavailable
from jedictl.model import TASK_FINAL
from jedictl.store import periodic as periodic_store

DEFAULT_LIMIT = 1000


def periodic_pass(store: Any, settings: Settings, owner: str, now: datetime, limit: int | None = None) -> PassReport:
    """One pass over the templates due at `now`, at most `limit` of them."""
    report = PassReport("periodic")
    with store.read() as conn:
        rows = periodic_store.due_templates(conn, now, limit or DEFAULT_LIMIT)
    for row in rows:
        try:
            item = instantiate(store, settings, owner, now, row)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - one template's failure must not stop the pass; its due time waits for the next
            report.add_failure(exc, template=row.name, template_id=row.id, due_at=row.next_due_at, task_id=None, missed=0)
            continue
        report.add(**item)
        if item["missed"]:
            report.counts["missed"] = report.counts.get("missed", 0) + item["missed"]
    return report


def instantiate(store: Any, settings: Settings, owner: str, now: datetime, row: Any) -> dict[str, Any]:
    """Act on the due time of one template as read in `row`: the report's item for it."""
    when = due(stored_schedule(row.start_at, row.every_minutes, row.cron), row.next_due_at, now)
    base = {"template": row.name, "template_id": row.id, "due_at": when.at if when else row.next_due_at, "task_id": None, "missed": 0}
    if when is None:
        return {"outcome": "skipped", **base, "reason": "not due"}
    with store.begin() as conn:
        if not periodic_store.claim_due(conn, row.id, row.next_due_at, when.at, when.following, when.missed, now):
            return {"outcome": "skipped", **base, "reason": "another pass took this due time, or the template was paused or removed"}
        base["missed"] = when.missed
        active = periodic_store.active_instances(conn, [row.id], TASK_FINAL).get(row.id, 0)
        cap = decide_cap(active, row.max_active)
        if not cap.instantiate:
            periodic_store.record_outcome(conn, row.id, "capped", cap.reason, None)
            return {"outcome": "capped", **base, "reason": cap.reason}
        try:
            definition = instance_definition(row.document, when.at, row.user_name, settings)
            with conn.begin_nested():
                task_id = register_task(conn, definition, render(row.document, when.at), now, owner,
                                        max_active_tasks=settings.user_caps.max_active_tasks,
                                        links={"periodic_id": row.id, "periodic_due_at": when.at})
        except (BadInput, NotFound) as exc:
            reason = str(exc)
            periodic_store.record_outcome(conn, row.id, "refused", reason, None)
            return {"outcome": "refused", **base, "reason": reason}
        periodic_store.record_outcome(conn, row.id, "instantiated", None, task_id)
        return {"outcome": "instantiated", **base, "task_id": task_id, "reason": None}

