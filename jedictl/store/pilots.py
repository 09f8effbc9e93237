"""Named operations on `pilots`: PanDA Harvester's worker table.

`jedictl harvest` inserts a row per pilot it submits and follows it through the batch system;
the pilot process itself (given its row's id in `JEDICTL_PILOT_ID`) says when it started, beats
while it runs and says how it ended. Each write is guarded by the row's state so that a late word
from one side never undoes the other's: a pilot the batch system reported `lost` that turns out to
be alive comes back to `running`, but nothing leaves a final state except by the pilot's own end.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Sequence

from sqlalchemy import Connection, Row, func, insert, select, update

from jedictl.store.schema import jobs, pilots, sites

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


# ------------------------------------------------------------------------------------ harvest side
# `jedictl harvest` (engine/harvest): rows inserted before submitting (so a pilot that starts before
# its batch id is written still finds its row), batch ids written after, and the batch system's word
# on pilots that ended without saying so. Every write is guarded by the row's state, as above.


def harvest_sites(conn: Connection, name: str | None = None) -> list[dict[str, Any]]:
    """Sites that name a batch system (or the one named, whatever it has): what harvest serves."""
    query = select(sites.c.name, sites.c.status, sites.c.batch, sites.c.max_running, sites.c.pilots_active,
                   sites.c.pilots_reason).order_by(sites.c.name)
    query = query.where(sites.c.name == name) if name is not None else query.where(sites.c.batch.is_not(None))
    return [dict(row._mapping) for row in conn.execute(query) if name is not None or row.batch]


def any_batch_site(conn: Connection) -> bool:
    """Whether any site names a batch system (then `jedictl run` harvests)."""
    return any(row.batch for row in conn.execute(select(sites.c.batch).where(sites.c.batch.is_not(None))))


def activated_jobs(conn: Connection, site_names: Sequence[str]) -> dict[str, int]:
    """Jobs waiting for a pilot (status activated) per site."""
    if not site_names:
        return {}
    rows = conn.execute(select(jobs.c.site, func.count()).where(jobs.c.site.in_(list(site_names)), jobs.c.status == "activated")
                        .group_by(jobs.c.site))
    return {site: int(n) for site, n in rows}


def insert_pilots(conn: Connection, site: str, batch_system: str, count: int, now: datetime) -> list[int]:
    """`count` new pilots rows (state submitted, no batch id yet); their ids."""
    ids = []
    for _ in range(count):  # one INSERT each for its id on both backends; count is a handful per pass
        result = conn.execute(insert(pilots).values(site=site, batch_system=batch_system, state="submitted", submitted_at=now,
                                                    n_jobs=0, n_finished=0, n_failed=0, modified_at=now))
        ids.append(int(result.inserted_primary_key[0]))
    return ids


def set_batch_ids(conn: Connection, batch_ids: Mapping[int, str], now: datetime) -> int:
    """Record the batch system's id of each pilot (whatever state the pilot reached meanwhile)."""
    done = 0
    for pilot_id, batch_id in batch_ids.items():
        done += conn.execute(update(pilots).where(pilots.c.id == pilot_id, pilots.c.batch_id.is_(None))
                             .values(batch_id=batch_id, modified_at=now)).rowcount
    return done


def submission_failed(conn: Connection, pilot_ids: Sequence[int], error: str, now: datetime) -> int:
    """The batch system refused these pilots: they end `failed` before ever running."""
    if not pilot_ids:
        return 0
    return conn.execute(update(pilots).where(pilots.c.id.in_(list(pilot_ids)), pilots.c.state == "submitted")
                        .values(state="failed", ended_at=now, error=error[:2000], modified_at=now)).rowcount


def live_pilots(conn: Connection, site: str) -> list[Row]:
    """The site's pilots that have not ended (submitted or running), oldest first."""
    return list(conn.execute(select(pilots).where(pilots.c.site == site, pilots.c.state.in_(LIVE_STATES)).order_by(pilots.c.id)))


def pilot_ended_by_batch(conn: Connection, pilot_id: int, now: datetime, *, state: str, exit_code: int | None, error: str) -> bool:
    """The batch system says the pilot is gone and it never said how it ended: lost, failed or cancelled.
    `lost` only for a pilot that never said it started (the guard re-checks it)."""
    if state not in ("lost", "failed", "cancelled"):
        raise ValueError(f"{state!r} is not a state the batch system decides")
    guard = pilots.c.state == "submitted" if state == "lost" else pilots.c.state.in_(LIVE_STATES)
    result = conn.execute(update(pilots).where(pilots.c.id == pilot_id, guard)
                          .values(state=state, ended_at=now, exit_code=exit_code, error=error[:2000], modified_at=now))
    return result.rowcount == 1


def recent_ended(conn: Connection, site: str, count: int) -> list[Row]:
    """The site's last `count` pilots that ended (any final state or lost), newest first."""
    return list(conn.execute(select(pilots.c.id, pilots.c.state, pilots.c.n_jobs, pilots.c.error)
                             .where(pilots.c.site == site, pilots.c.state.not_in(LIVE_STATES))
                             .order_by(pilots.c.ended_at.desc(), pilots.c.id.desc()).limit(count)))


def set_pilots_off(conn: Connection, site: str, reason: str, now: datetime) -> bool:
    """Harvest turns the site's pilots off (brokerage then sends it nothing); False if already off."""
    result = conn.execute(update(sites).where(sites.c.name == site, sites.c.pilots_active.is_(True))
                          .values(pilots_active=False, pilots_reason=reason[:255], modified_at=now))
    return result.rowcount == 1


def set_pilots_on(conn: Connection, site: str, now: datetime) -> bool:
    """Harvest turns back on what it turned off -- never a site an operator set off (no reason recorded)."""
    result = conn.execute(update(sites).where(sites.c.name == site, sites.c.pilots_active.is_(False), sites.c.pilots_reason.is_not(None))
                          .values(pilots_active=True, pilots_reason=None, modified_at=now))
    return result.rowcount == 1


def list_pilots(conn: Connection, site: str | None = None, state: str | None = None, limit: int = 1000) -> list[Row]:
    """Pilots newest first, optionally of one site and one state."""
    query = select(pilots).order_by(pilots.c.id.desc()).limit(limit)
    if site is not None:
        query = query.where(pilots.c.site == site)
    if state is not None:
        query = query.where(pilots.c.state == state)
    return list(conn.execute(query))
