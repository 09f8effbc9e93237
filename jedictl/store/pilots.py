"""Named operations on `pilots`: PanDA Harvester's worker table.

`jedictl harvest` inserts a row per pilot it submits and follows it through the batch system;
the pilot process itself (given its row's id in `JEDICTL_PILOT_ID`) says when it started, beats
while it runs and says how it ended. Each write is guarded by the row's state so that a late word
from one side never undoes the other's: a pilot the batch system reported `lost` that turns out to
be alive comes back to `running`, but nothing leaves a final state except by the pilot's own end.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, update

from jedictl.store.schema import pilots

#: States a pilot never leaves.
FINAL_STATES = ("finished", "failed", "cancelled")
#: The batch system has it and it has not ended.
LIVE_STATES = ("submitted", "running")


def pilot_started(conn: Connection, pilot_id: int, executor: str, now: datetime) -> bool:
    """The pilot process runs (as `executor`, host:pid); False when the row is unknown or final."""
    result = conn.execute(update(pilots).where(pilots.c.id == pilot_id, pilots.c.state.not_in(FINAL_STATES))
                          .values(state="running", started_at=now, heartbeat_at=now, executor=executor, modified_at=now))
    return result.rowcount == 1


def pilot_beat(conn: Connection, pilot_id: int, now: datetime, *, n_jobs: int, n_finished: int, n_failed: int) -> bool:
    """The pilot is alive and has taken `n_jobs` jobs so far (totals, not increments: a beat may be resent)."""
    result = conn.execute(update(pilots).where(pilots.c.id == pilot_id, pilots.c.state.not_in(FINAL_STATES))
                          .values(state="running", heartbeat_at=now, n_jobs=n_jobs, n_finished=n_finished,
                                  n_failed=n_failed, modified_at=now))
    return result.rowcount == 1


def pilot_ended(conn: Connection, pilot_id: int, now: datetime, *, state: str, exit_code: int | None,
                error: str | None, n_jobs: int, n_finished: int, n_failed: int) -> bool:
    """The pilot process ends: `finished` (it exits normally, whether or not it found work) or `failed`."""
    if state not in FINAL_STATES:
        raise ValueError(f"{state!r} is not a final pilot state")
    values: dict[str, Any] = dict(state=state, ended_at=now, heartbeat_at=now, exit_code=exit_code, error=error,
                                  n_jobs=n_jobs, n_finished=n_finished, n_failed=n_failed, modified_at=now)
    result = conn.execute(update(pilots).where(pilots.c.id == pilot_id, pilots.c.state.not_in(FINAL_STATES)).values(**values))
    return result.rowcount == 1
