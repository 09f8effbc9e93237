"""When a site's queue is long and does not move, and where its queued jobs go (docs/reassignment.md).

Seed 001 gives JEDI the duty "to reassign jobs if workload distribution becomes unbalanced among
computing resources"; PanDA does it in its fast rebrokerage (copyArchive: "PQs where Nq/Nr overshoots")
and its rebrokerage of jobs that got no CPU. jedictl joins the two: per site and global share, the
queue is *long* when its queued jobs exceed `queue_ratio` x its running ones, `min_queue`, and
`queue_fraction` of the share's queued jobs at every site (PanDA's three checks, with its excess: the
least of the three overshoots), and it makes *no progress* when the site took no job for
`stall_minutes` while its oldest queued job waited as long. Then the excess moves, oldest job first, each
to the best site the task's own brokerage keeps that holds the job's input and has room under its
queue cap -- weighed as the Job Brokerage weighs it, and scaled down by what this pass already sent
there, as the splitter's pick is (engine.brokerage.job_brokerage.pick_site).

Pure: plain values in, decisions out; the pass (engine.watch.reassignment) loads and writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import ReassignSettings

#: Jobs waiting at a site and not handed to an executor yet: what a move may take.
MOVABLE_STATUSES = ("activated", "assigned")
#: Jobs that count as queued at a site (PanDA's nQueue: defined, assigned, activated).
QUEUED_STATUSES = ("defined", "assigned", "activated")
#: Jobs that count as running at a site: handed to an executor (PanDA's nRunning, with sent and starting).
RUNNING_STATUSES = ("sent", "starting", "running")


@dataclass(frozen=True)
class QueueStat:
    """One site's jobs of one global share."""

    site: str
    gshare: str | None
    queued: int
    running: int
    oldest_queued_at: datetime | None = None  # when the longest-waiting queued job got there


@dataclass(frozen=True)
class Overload:
    """A site x share whose queue is long and does not move, and how many of its jobs should leave."""

    site: str
    gshare: str | None
    queued: int
    running: int
    excess: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"site": self.site, "gshare": self.gshare, "queued": self.queued, "running": self.running, "excess": self.excess,
                "reason": self.reason}


def _duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def stalled(last_dispatch: datetime | None, oldest_queued_at: datetime | None, now: datetime, settings: ReassignSettings) -> str | None:
    """Why the site's queue makes no progress (None: it does): it took no job for `stall_minutes` and its
    oldest queued job has waited as long."""
    limit = timedelta(minutes=settings.stall_minutes)
    if oldest_queued_at is None or now - oldest_queued_at < limit:
        return None
    if last_dispatch is not None and now - last_dispatch < limit:
        return None
    since = "never took a job" if last_dispatch is None else f"took no job for {_duration(now - last_dispatch)}"
    return f"{since}; its oldest queued job waited {_duration(now - oldest_queued_at)} (limit {_duration(limit)})"


def find_overloads(stats: Sequence[QueueStat], last_dispatch: Mapping[str, datetime | None], now: datetime,
                   settings: ReassignSettings) -> list[Overload]:
    """The site x share queues to relieve, most excess first (then by name, so runs repeat)."""
    share_queued: dict[str | None, int] = {}
    for stat in stats:
        share_queued[stat.gshare] = share_queued.get(stat.gshare, 0) + stat.queued
    oldest: dict[str, datetime] = {}
    for stat in stats:
        if stat.queued and stat.oldest_queued_at is not None:
            oldest[stat.site] = min(oldest.get(stat.site, stat.oldest_queued_at), stat.oldest_queued_at)
    found = []
    for stat in stats:
        total = share_queued[stat.gshare]
        ratio_room = stat.queued - stat.running * settings.queue_ratio
        queue_room = stat.queued - settings.min_queue
        share_room = stat.queued - total * settings.queue_fraction
        if min(ratio_room, queue_room, share_room) <= 0:
            continue
        why_stalled = stalled(last_dispatch.get(stat.site), oldest.get(stat.site), now, settings)
        if why_stalled is None:
            continue
        excess = int(math.ceil(min(ratio_room, queue_room, share_room)))
        reason = (f"site {stat.site} ({stat.gshare or 'no share'}): {stat.queued} queued > {settings.queue_ratio:g} x {stat.running} running, "
                  f"> {settings.min_queue} and > {settings.queue_fraction:g} x {total} queued in the share; {why_stalled}")
        found.append(Overload(stat.site, stat.gshare, stat.queued, stat.running, excess, reason))
    found.sort(key=lambda o: (-o.excess, o.site, o.gshare or ""))
    return found


@dataclass(frozen=True)
class QueuedJob:
    """A job waiting at an overloaded site, with what decides whether it may move."""

    job_id: int
    task_id: int
    status: str
    site: str
    kind: str
    waiting_since: datetime
    disable_reassign: bool = False
    outputs_bound: str | None = None  # why its outputs belong to its site (stayOutputOnSite, an output container)


def why_not_movable(job: QueuedJob, now: datetime, settings: ReassignSettings) -> str | None:
    """Why this job stays where it is (None: it may move)."""
    if job.status not in MOVABLE_STATUSES:
        return f"job is {job.status}, not queued (activated or assigned)"
    if job.kind == "merge":
        return "a merge job reads the unmerged files where they were written"
    if job.disable_reassign:
        return "its task says disableReassign"
    if job.outputs_bound:
        return job.outputs_bound
    waited = now - job.waiting_since
    if waited < timedelta(minutes=settings.min_queued_minutes):
        return f"queued for {_duration(waited)} only (reassign.min_queued_minutes {settings.min_queued_minutes:g})"
    return None


@dataclass(frozen=True)
class Target:
    """A site the task's brokerage keeps for the jobs, with room for more."""

    site: str
    weight: float
    queued: int
    room: int  # jobs it may still take (its queue cap, its site caps)
    local_files: frozenset[int] = frozenset()  # input file indexes on a disk endpoint the site reads (or on cvmfs it mounts)
    note: str = ""  # the brokerage's line for it (weight formula)


@dataclass
class Placements:
    """What this pass has already sent where (shared by every task of the pass)."""

    moved: dict[str, int] = field(default_factory=dict)
    excluded: frozenset[str] = frozenset()  # sites whose own queue is stalled: no job goes there

    def add(self, site: str) -> None:
        self.moved[site] = self.moved.get(site, 0) + 1


def choose_target(needs: frozenset[int], targets: Sequence[Target], source: str, placed: Placements) -> Target | None:
    """The site a job moves to: one that holds every input file it needs on disk, has room left after
    what this pass sent there, and is not stalled itself; the highest weight scaled by
    (queued+1)/(queued+moved+1), the name breaking ties. None: nowhere fits."""
    best: tuple[float, str] | None = None
    chosen = None
    for target in targets:
        if target.site == source or target.site in placed.excluded:
            continue
        moved = placed.moved.get(target.site, 0)
        if target.room - moved <= 0 or not needs <= target.local_files:
            continue
        score = target.weight * (target.queued + 1) / (target.queued + moved + 1)
        key = (-score, target.site)
        if best is None or key < best:
            best, chosen = key, target
    return chosen


def move_reason(overload_reason: str, target: Target) -> str:
    """What the record of an automatic move says."""
    return f"{overload_reason}; moved to {target.site} (room {target.room}, {target.note or f'weight {target.weight:.4g}'})"
