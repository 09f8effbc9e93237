"""How many pilots a site gets, what a pilot's batch state means for its row, and when a site's
pilots count as failing: pure functions of plain values (no store, no batch system).

The submission rule is PanDA Harvester's for pull-mode queues (WorkerAdjuster, mapType NoJob):
queued pilots are topped up to cover the activated jobs -- never beyond the queue limit, and never so
that queued + running pilots exceed the worker maximum. A pilot takes up to `jobs_per_pilot` jobs, so
the activated jobs ask for ceil(activated / jobs_per_pilot) queued pilots. Unlike Harvester's default
there is no "one pilot anyway" for an idle site: a jedictl pilot that finds nothing exits at once, so
an idle site costs nothing and gets nothing -- except a site whose pilots kept failing, which gets a
single probe at a time so that it can prove it works again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

#: What a batch system says about one of its jobs (engine.harvest.batch.BatchState.state).
QUEUED, RUNNING, ENDED = "queued", "running", "ended"


@dataclass(frozen=True)
class SiteDemand:
    """One site at the start of a harvest pass."""

    activated: int  # jobs waiting at the site for a pilot
    queued: int  # pilots submitted, not yet running
    running: int  # pilots running
    jobs_per_pilot: int = 1
    slots: int = 1  # payloads a pilot runs at once
    max_pilots: int | None = None  # queued + running, the batch's worker maximum (None: no limit)
    max_queued: int | None = None  # waiting in the batch queue (None: no limit)
    site_max_running: int | None = None  # the site's own cap on running jobs (sites.max_running)
    probe: bool = False  # the site's pilots are off after failures: keep one probe pilot going


@dataclass(frozen=True)
class Decision:
    count: int
    reason: str


def pilots_to_submit(demand: SiteDemand, limit: int | None = None) -> Decision:
    """How many pilots to submit to a site now, and why that many (for the pass report)."""
    d = demand
    live = d.queued + d.running
    max_pilots = d.max_pilots
    if d.site_max_running:
        # A running pilot holds up to `slots` running jobs: more pilots than the site may run jobs
        # for would only sit waiting for the dispatch caps.
        by_site = math.ceil(d.site_max_running / d.slots)
        max_pilots = by_site if max_pilots is None else min(max_pilots, by_site)
    if d.probe:
        if live:
            return Decision(0, f"pilots off after failures: probe pilot already live ({live})")
        wanted = 1
        why = "pilots off after failures: one probe pilot"
    else:
        if d.activated <= 0:
            return Decision(0, "no activated jobs")
        wanted = math.ceil(d.activated / d.jobs_per_pilot)
        why = f"{d.activated} activated jobs / {d.jobs_per_pilot} per pilot = {wanted} queued pilots wanted"
    if d.max_queued is not None:
        if d.queued >= d.max_queued:
            return Decision(0, f"{d.queued} queued pilots >= max_queued {d.max_queued}")
        if wanted > d.max_queued:
            wanted, why = d.max_queued, f"{why}, capped by max_queued {d.max_queued}"
    if max_pilots is not None and live >= max_pilots:
        return Decision(0, f"{live} queued + running pilots >= max_pilots {max_pilots}")
    count = max(wanted - d.queued, 0)
    if count == 0:
        return Decision(0, f"{why}; {d.queued} already queued")
    if max_pilots is not None and count > max_pilots - live:
        count, why = max_pilots - live, f"{why}, capped by max_pilots {max_pilots} ({live} live)"
    if limit is not None and count > limit:
        count, why = limit, f"{why}, capped by --limit {limit}"
    return Decision(count, f"{why}; {d.queued} queued")


@dataclass(frozen=True)
class PilotView:
    """What reconciliation needs of a live pilots row."""

    id: int
    state: str  # submitted | running
    batch_id: str | None
    age_s: float  # since it was submitted
    silent_s: float | None  # since its last heartbeat (None: never beat)


@dataclass(frozen=True)
class BatchView:
    """The batch system's word on a pilot; None (no view) when the batch system does not know it."""

    state: str  # QUEUED | RUNNING | ENDED
    exit_code: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Verdict:
    state: str  # lost | failed | cancelled
    exit_code: int | None
    error: str


def reconcile(pilot: PilotView, batch: BatchView | None, *, grace_s: float, quiet_s: float) -> Verdict | None:
    """The final state the batch system's word implies for a live pilot, or None to leave it be.

    The pilot's own word wins: it says `pilot_ended` before its process exits, so a pilot still live
    here when the batch says it ended never said so -- it was killed (scancel, time limit, kill -9) or
    crashed. A pilot the batch system does not know is `lost` if it never said it started; one that
    did start and went quiet is `failed`. `grace_s` covers a pilot whose batch id is not written yet
    (another pass is submitting it); `quiet_s` keeps a pilot that still beats from being buried by a
    batch system that lost track of a job that is in fact running."""
    if batch is not None and batch.state != ENDED:
        return None
    if pilot.silent_s is not None and pilot.silent_s < quiet_s:
        return None  # it beat recently: the pilot will say how it ended
    if batch is None:
        if pilot.batch_id is None:
            if pilot.age_s < grace_s:
                return None
            return Verdict("lost", None, "never reached the batch system (its submission did not complete)")
        if pilot.age_s < grace_s:
            return None  # just submitted: a batch system may take a moment to list it
        if pilot.state == "submitted":
            return Verdict("lost", None, f"batch job {pilot.batch_id} vanished before the pilot started")
        return Verdict("failed", None, f"batch job {pilot.batch_id} vanished without the pilot saying it ended")
    why = f"batch job {pilot.batch_id} ended" + (f" ({batch.reason})" if batch.reason else "") + " without the pilot saying it ended"
    if batch.reason and batch.reason.upper().startswith("CANCELLED") and pilot.state == "submitted":
        return Verdict("cancelled", batch.exit_code, why)
    return Verdict("failed", batch.exit_code, why)


@dataclass(frozen=True)
class EndedPilot:
    state: str  # finished | failed | cancelled | lost
    n_jobs: int
    error: str | None = None


def failed_before_work(pilot: EndedPilot) -> bool:
    """It died or vanished without taking a job: the site's batch system or environment is the suspect."""
    return pilot.state in ("failed", "lost") and pilot.n_jobs == 0


def failing_streak(recent: Sequence[EndedPilot], k: int) -> str | None:
    """Why the site's pilots count as failing -- its last `k` ended pilots (newest first) all failed
    before taking work -- or None. k <= 0 turns the check off."""
    if k <= 0 or len(recent) < k or not all(failed_before_work(p) for p in recent[:k]):
        return None
    last = next((p.error for p in recent if p.error), None)
    return f"harvest: the last {k} pilots failed before taking work" + (f"; last: {last}" if last else "")

