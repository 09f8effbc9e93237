"""What a task event says (docs/messages.md, "Task events"): one message per task status change, in the
shape of PanDA's task_status messages (msg_type, taskid, status, timestamp) with what else the change
recorded. Pure: the publisher hands in an outbox row.
"""

from __future__ import annotations

import calendar
import json
from datetime import datetime
from typing import Any, NamedTuple

MSG_TYPE = "task_status"


class Event(NamedTuple):
    """One message to publish: its routing key, its id (stable: a republished event has the same one,
    so consumers can deduplicate), and its JSON body."""

    routing_key: str
    message_id: str
    body: bytes


def task_status_event(row: Any) -> Event:
    """The event of one outbox row (id, task_id, status, previous_status, reason, changed_at, changed_by,
    task_name, user_name)."""
    changed_at: datetime = row.changed_at
    body = {
        "msg_type": MSG_TYPE,
        "taskid": row.task_id,
        "status": row.status,
        "previous_status": row.previous_status,
        "reason": row.reason,
        "timestamp": calendar.timegm(changed_at.utctimetuple()),  # PanDA's: seconds since the epoch
        "changed_at": changed_at.isoformat(),
        "changed_by": row.changed_by,
        "task_name": row.task_name,
        "user": row.user_name,
        "event_id": row.id,
    }
    return Event(routing_key=f"task.{row.status}", message_id=f"task-status-{row.id}",
                 body=json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
