"""Named queries of the owner notifications (engine/finalize/notify.py): the tasks due, the claim that
keeps two passes from sending one notification together, the facts a summary is made of, and the
outcome of a send.

A task is due when it is final, ended within the window, its `ended_at` is not the end `notified_for`
holds, and no pass holds its claim. Every write is guarded by the end it is about, so a task that ends
again while a notification of its previous end is on the way is left due for its new end.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, case, func, or_, select, update

from jedictl.model import TASK_FINAL
from jedictl.store.schema import datasets, jobs, task_params, task_status_history, tasks

_FINAL = sorted(str(status) for status in TASK_FINAL)


def _due(now: datetime, since: datetime) -> list[Any]:
    t = tasks.c
    return [t.ended_at >= since, t.status.in_(_FINAL), or_(t.notified_for.is_(None), t.notified_for != t.ended_at),
            or_(t.notify_claimed_until.is_(None), t.notify_claimed_until < now)]


def due(conn: Connection, now: datetime, since: datetime, limit: int) -> list[Row]:
    """Tasks to notify, oldest end first (the `ended_at` index bounds the look to the window)."""
    t = tasks.c
    return list(conn.execute(select(t.id, t.ended_at).where(*_due(now, since)).order_by(t.ended_at, t.id).limit(limit)))


def claim(conn: Connection, task_id: int, ended_at: datetime, now: datetime, since: datetime, until: datetime) -> Row | None:
    """Take the task's notification until `until` if it is still due for the end `ended_at`; the task
    row (with the channels already done for this end) when taken, else None."""
    t = tasks.c
    # No failed attempt for this end yet: the channels recorded are an earlier end's, forget them.
    channels = case((t.notify_attempts == 0, None), else_=t.notify_channels)
    taken = conn.execute(update(tasks).where(t.id == task_id, t.ended_at == ended_at, *_due(now, since))
                         .values(notify_claimed_until=until, notify_channels=channels))
    if taken.rowcount != 1:
        return None
    return conn.execute(select(tasks).where(t.id == task_id)).one()


def facts(conn: Connection, task_id: int) -> dict[str, Any]:
    """What a summary says beyond the task row: its datasets, its jobs by status, the reason of its
    last status change, and its stored parameters (for PanDA's `noEmail`)."""
    d = datasets.c
    rows = conn.execute(select(d.name, d.type, d.status, d.n_files, d.n_files_finished, d.n_files_failed)
                        .where(d.task_id == task_id).order_by(d.id)).all()
    by_status = dict(conn.execute(select(jobs.c.status, func.count()).where(jobs.c.task_id == task_id).group_by(jobs.c.status)).all())
    h = task_status_history.c
    reason = conn.execute(select(h.reason).where(h.task_id == task_id).order_by(h.id.desc()).limit(1)).scalar_one_or_none()
    params = conn.execute(select(task_params.c.document).where(task_params.c.task_id == task_id)).scalar_one_or_none()
    return {"datasets": [dict(row._mapping) for row in rows], "jobs": {str(k): int(v) for k, v in sorted(by_status.items())},
            "reason": reason, "params": params if isinstance(params, dict) else {}}


def record(conn: Connection, task_id: int, ended_at: datetime, *, channels: str, error: str | None, attempts: int, settled: bool) -> bool:
    """The outcome of one attempt for the end `ended_at`: `settled` (sent, or given up) marks that end
    notified and resets the attempts; otherwise the failure is counted and the task stays due. The
    claim is released either way. False when the task has ended again meanwhile (left due)."""
    t = tasks.c
    values: dict[str, Any] = {"notify_claimed_until": None, "notify_channels": channels or None, "notify_error": error}
    values.update({"notified_for": ended_at, "notify_attempts": 0} if settled else {"notify_attempts": attempts})
    return conn.execute(update(tasks).where(t.id == task_id, t.ended_at == ended_at).values(**values)).rowcount == 1
