"""Moving queued jobs off sites whose queue is long and does not move (docs/reassignment.md; seed 001
"reassign jobs if workload distribution becomes unbalanced among computing resources"): a step of the
watch pass, and `jedictl jobs reassign` for an operator (PanDA's reassignJobs).

The step reads the queues per site and share, finds the overloaded ones (engine.watch.reassign_policy),
takes their oldest movable jobs, runs each task's own Job Brokerage over those jobs' input (the same
filters, weights and caps `generate` applies: engine.brokerage.job_brokerage) and moves each job to the
best kept site that holds its input and has room. The moves are written in batches, each one
statement guarded by every job's status, site and attempt; when a guard fails (a job was dispatched
or moved meanwhile) the batch is rolled back and replayed one job per transaction, so the others
still move and no job moves twice. Sites with caps are locked and counted again before jobs are
moved there, as the generator does (decision 24).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import Settings
from jedictl.engine.brokerage import site_slots
from jedictl.engine.brokerage.job_brokerage import BrokerageResult, broker_job_sites
from jedictl.engine.brokerage.loading import chunk_of, load_catalog, load_site_loads, locked_slot_loads
from jedictl.engine.brokerage.model import BrokerageCatalog, ChunkInput, Site, task_requirements_from_row
from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.watch.reassign_policy import (
    MOVABLE_STATUSES,
    QUEUED_STATUSES,
    RUNNING_STATUSES,
    Overload,
    Placements,
    QueuedJob,
    QueueStat,
    Target,
    choose_target,
    find_overloads,
    move_reason,
    stalled,
    why_not_movable,
)
from jedictl.errors import NotFound
from jedictl.store import reassignments as store
from jedictl.store.data_catalog import StoreDataCatalog
from jedictl.store.reassignments import Move

BY_WATCH = "jedictl watch"
_BATCH = 500


class _GuardFailed(Exception):
    """A batch's guards did not all hold: roll it back and move its jobs one at a time."""


@dataclass(frozen=True)
class Outcome:
    """What became of one decided move."""

    job_id: int
    moved: bool
    move: Move
    reason: str  # the record's reason when moved, else why not

    def as_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "task_id": self.move.task_id, "from_site": self.move.from_site, "to_site": self.move.to_site,
                "status": self.move.to_status if self.moved else self.move.from_status, "reason": self.reason}


# ---------------------------------------------------------------------------------- the watch step

def rebalance(db: Any, settings: Settings, owner: str, now: datetime, *,
              catalog_factory: Callable[[Any], DataCatalog] | None = None) -> list[dict[str, Any]]:
    """One reassignment step: report items, `overloaded` per site x share relieved (or not), `reassign`
    per job moved, `skipped` per job whose guard failed."""
    config = settings.reassign
    factory = catalog_factory or StoreDataCatalog
    items: list[dict[str, Any]] = []
    with db.read() as conn:
        stats, last = _queues(conn, now, settings)
        overloads = find_overloads(stats, last, now, config)
        if not overloads:
            return items
        placed = Placements(excluded=frozenset(_stalled_sites(stats, last, now, settings)))
        catalog, loads = load_catalog(conn), load_site_loads(conn)
        waiting_before = now - timedelta(minutes=config.min_queued_minutes)
        budget = config.limit
        chosen: list[tuple[Overload, list[QueuedJob], dict[int, Any]]] = []
        for overload in overloads:
            if budget <= 0:
                break
            rows = store.queued_jobs(conn, overload.site, overload.gshare, MOVABLE_STATUSES, waiting_before,
                                     min(budget, overload.excess) * 2 + 50)
            jobs = _queued(conn, rows)
            movable = [job for job in jobs if why_not_movable(job, now, config) is None][: min(budget, overload.excess)]
            budget -= len(movable)
            chosen.append((overload, movable, {row.id: row for row in rows}))
        planned: dict[tuple[str, str | None], list[Move]] = {}
        data = factory(conn)
        for overload, movable, rows in chosen:
            planned[(overload.site, overload.gshare)] = _plan(conn, overload, movable, rows, catalog, loads, data, settings, placed, owner,
                                                              BY_WATCH)
    site_by_name = {site.name: site for site in catalog.sites}
    for overload, movable, rows in chosen:
        moves = planned[(overload.site, overload.gshare)]
        outcomes = apply_moves(db, moves, settings, now, site_by_name, rows) if config.enabled else []
        moved = sum(1 for o in outcomes if o.moved)
        items.append({"outcome": "overloaded", **overload.as_dict(), "movable": len(movable), "targets_found": len(moves), "moved": moved,
                      **({} if config.enabled else {"note": "reassign.enabled is false: nothing moved"})})
        for outcome in outcomes:
            items.append({"outcome": "reassign" if outcome.moved else "skipped", **outcome.as_dict()})
    return items


def _queues(conn: Any, now: datetime, settings: Settings) -> tuple[list[QueueStat], dict[str, datetime | None]]:
    """The queues per site x share, and when each site that may be stalled -- its oldest queued job waited
    `stall_minutes` -- last took a job (the other sites are not looked up: they cannot be stalled)."""
    grouped: dict[tuple[str, str | None], dict[str, Any]] = {}
    for row in store.queue_rows(conn, QUEUED_STATUSES + RUNNING_STATUSES):
        entry = grouped.setdefault((row.site, row.gshare), {"queued": 0, "running": 0, "oldest": None})
        if row.status in QUEUED_STATUSES:
            entry["queued"] += int(row.n)
            if row.oldest is not None and (entry["oldest"] is None or row.oldest < entry["oldest"]):
                entry["oldest"] = row.oldest
        else:
            entry["running"] += int(row.n)
    stats = [QueueStat(site, gshare, e["queued"], e["running"], e["oldest"]) for (site, gshare), e in sorted(
        grouped.items(), key=lambda item: (item[0][0], item[0][1] or ""))]
    waited = now - timedelta(minutes=settings.reassign.stall_minutes)
    return stats, store.last_dispatches(conn, {stat.site for stat in stats if stat.queued and stat.oldest_queued_at is not None
                                               and stat.oldest_queued_at <= waited})


def _stalled_sites(stats: Sequence[QueueStat], last: Mapping[str, datetime | None], now: datetime, settings: Settings) -> set[str]:
    """Sites whose own queue makes no progress: no job is moved there."""
    oldest: dict[str, datetime] = {}
    for stat in stats:
        if stat.queued and stat.oldest_queued_at is not None:
            oldest[stat.site] = min(oldest.get(stat.site, stat.oldest_queued_at), stat.oldest_queued_at)
    return {site for site, at in oldest.items() if stalled(last.get(site), at, now, settings.reassign) is not None}


def _queued(conn: Any, rows: Sequence[Any]) -> list[QueuedJob]:
    task_ids = {row.task_id for row in rows}
    tasks = store.task_rows(conn, task_ids)
    containers = store.tasks_with_output_containers(conn, task_ids)
    found = []
    for row in rows:
        options = options_from_dict(tasks[row.task_id].options)
        bound = ("its outputs stay at its site (stayOutputOnSite)" if options.stay_output_on_site
                 else "it writes its site's dataset of an output container" if row.task_id in containers else None)
        found.append(QueuedJob(row.id, row.task_id, row.status, row.site, row.kind, row.state_changed_at,
                               disable_reassign=bool(options.disable_reassign), outputs_bound=bound))
    return found


# --------------------------------------------------------------------------------------- planning

def _plan(conn: Any, overload: Overload, movable: Sequence[QueuedJob], rows: Mapping[int, Any], catalog: BrokerageCatalog,
          loads: Mapping[str, Any], data: DataCatalog, settings: Settings, placed: Placements, owner: str, by: str) -> list[Move]:
    """A target for each movable job (the jobs nowhere fits stay), task by task."""
    moves: list[Move] = []
    by_task: dict[int, list[QueuedJob]] = {}
    for job in movable:
        by_task.setdefault(job.task_id, []).append(job)
    tasks = store.task_rows(conn, by_task)
    clouds = {site.name: site.cloud for site in catalog.sites}
    for task_id, jobs in by_task.items():
        targets, needs, _ = task_targets(conn, tasks[task_id], [job.job_id for job in jobs], catalog, loads, data, settings)
        for job in jobs:
            target = choose_target(needs[job.job_id], targets, job.site, placed)
            if target is None:
                continue
            placed.add(target.site)
            row = rows[job.job_id]
            moves.append(Move(job.job_id, task_id, row.attempt_nr, job.site, target.site, job.status, "activated", clouds.get(target.site),
                              move_reason(overload.reason, target), by, owner))
    return moves


def task_targets(conn: Any, task: Any, job_ids: Sequence[int], catalog: BrokerageCatalog, loads: Mapping[str, Any], data: DataCatalog,
                 settings: Settings) -> tuple[list[Target], dict[int, frozenset[int]], BrokerageResult]:
    """The sites the task's Job Brokerage keeps for these jobs' input, as targets with their room, and
    the input file indexes each job needs at its site."""
    options = options_from_dict(task.options)
    records: list[tuple[str, int, None, str]] = []
    index: dict[str, int] = {}
    needs: dict[int, set[int]] = {job_id: set() for job_id in job_ids}
    for row in store.job_inputs(conn, job_ids):
        if row.lfn not in index:
            index[row.lfn] = len(records)
            records.append((row.lfn, int(row.size or 0), None, row.dataset))
        needs[row.job_id].add(index[row.lfn])
    chunk = chunk_of(records, data, files_per_job=options.n_files_per_job, events_per_job=options.n_events_per_job)
    result = broker_job_sites(task_requirements_from_row(task._mapping, options), chunk, catalog, loads, settings.brokerage,
                              throttle=settings.throttle)
    site_by_name = {site.name: site for site in catalog.sites}
    notes = {fate.name: fate.message for fate in result.trail}
    targets = [_target(candidate, site_by_name[candidate.site], chunk, settings, notes.get(candidate.site, ""))
               for candidate in result.candidates]
    return targets, {job_id: frozenset(found) for job_id, found in needs.items()}, result


def _target(candidate: Any, site: Site, chunk: ChunkInput, settings: Settings, note: str) -> Target:
    cap = candidate.n_running_cap if candidate.n_running_cap is not None else max(settings.brokerage.queue_limit_site,
                                                                                  2 * candidate.n_running)
    room = int(cap - candidate.n_queued)
    if candidate.n_free is not None:
        room = min(room, candidate.n_free)
    local = candidate.local_disk_files | (chunk.cvmfs_files if site.cvmfs else frozenset())
    return Target(candidate.site, candidate.weight, candidate.n_queued, max(room, 0), frozenset(local), note)


# ---------------------------------------------------------------------------------------- writing

def apply_moves(db: Any, moves: Sequence[Move], settings: Settings, now: datetime, site_by_name: Mapping[str, Site],
                rows: Mapping[int, Any]) -> list[Outcome]:
    """Write the moves in batches; a batch whose guards do not all hold is replayed one move per transaction."""
    outcomes: list[Outcome] = []
    for start in range(0, len(moves), _BATCH):
        batch = list(moves[start:start + _BATCH])
        try:
            with db.begin() as conn:
                room = _room_at_capped(conn, batch, settings, site_by_name, rows)
                if any(n < sum(1 for m in batch if m.to_site == site) for site, n in room.items()):
                    raise _GuardFailed("a capped site has less room than planned")
                if store.move_jobs(conn, batch, now) != len(batch):
                    raise _GuardFailed("a job changed")
            outcomes += [Outcome(m.job_id, True, m, m.reason) for m in batch]
        except _GuardFailed:
            outcomes += [_move_one(db, m, settings, now, site_by_name, rows) for m in batch]
    return outcomes


def _move_one(db: Any, move: Move, settings: Settings, now: datetime, site_by_name: Mapping[str, Site], rows: Mapping[int, Any]) -> Outcome:
    try:
        with db.begin() as conn:
            room = _room_at_capped(conn, [move], settings, site_by_name, rows)
            if room.get(move.to_site, 1) < 1:
                raise _GuardFailed(f"site {move.to_site} has no room left under its caps")
            if not store.move_job(conn, move, now):
                raise _GuardFailed(f"the job is no longer {move.from_status} at {move.from_site} "
                                   f"(dispatched, moved or retried meanwhile)")
    except _GuardFailed as exc:
        return Outcome(move.job_id, False, move, str(exc))
    return Outcome(move.job_id, True, move, move.reason)


def _room_at_capped(conn: Any, moves: Sequence[Move], settings: Settings, site_by_name: Mapping[str, Site],
                    rows: Mapping[int, Any]) -> dict[str, int]:
    """For the target sites with caps: their rows locked, how many more jobs each takes now."""
    capped = sorted({m.to_site for m in moves if m.to_site in site_by_name and site_slots.has_caps(site_by_name[m.to_site])})
    if not capped:
        return {}
    loads = locked_slot_loads(conn, capped)
    room = {}
    for name in capped:
        first = next(m for m in moves if m.to_site == name)
        row = rows[first.job_id]
        decision = site_slots.slot_decision(site_by_name[name], row.prod_source_label or "", row.current_priority or 0, merge=False,
                                            settings=settings.throttle, now=loads[name])
        room[name] = decision.free
    return room


# ------------------------------------------------------------------------------ the operator command

def reassign_jobs(db: Any, settings: Settings, job_ids: Sequence[int], site: str | None, by: str, owner: str, now: datetime, *,
                  catalog_factory: Callable[[Any], DataCatalog] | None = None) -> list[dict[str, Any]]:
    """`jedictl jobs reassign`: move each queued job to `site` -- which the task's brokerage must keep and
    which must hold the job's input -- or, without a site, to the best site that does and has room.
    One item per job: `moved`, or `refused` with the reason (the job stays where it is)."""
    factory = catalog_factory or StoreDataCatalog
    with db.read() as conn:
        catalog, loads = load_catalog(conn), load_site_loads(conn)
        site_by_name = {s.name: s for s in catalog.sites}
        if site is not None and site not in site_by_name:
            raise NotFound(f"site {site} is not in the resource catalog")
        rows = store.jobs_by_id(conn, job_ids)
        data = factory(conn)
        decided: list[Move] = []
        items: dict[int, dict[str, Any]] = {}
        stats, last = _queues(conn, now, settings)  # a site whose own queue does not move is never chosen (an operator may name it)
        placed = Placements(excluded=frozenset(_stalled_sites(stats, last, now, settings)))
        tasks = store.task_rows(conn, {row.task_id for row in rows.values()})
        containers = store.tasks_with_output_containers(conn, set(tasks))
        for job_id in job_ids:
            row = rows.get(job_id)
            if row is None:
                items[job_id] = {"job_id": job_id, "outcome": "refused", "reason": "no such job"}
                continue
            refusal = _manual_refusal(row, tasks[row.task_id], row.task_id in containers, site)
            if refusal is None:
                targets, needs, result = task_targets(conn, tasks[row.task_id], [job_id], catalog, loads, data, settings)
                if site is not None:
                    kept = next((t for t in targets if t.site == site), None)
                    fate = next((f for f in result.trail if f.name == site), None)
                    if kept is None:
                        refusal = f"the task's brokerage does not keep {site}: {fate.message if fate else 'not a candidate'}"
                    elif not needs[job_id] <= kept.local_files:
                        refusal = f"{site} does not hold the job's input on a disk it reads"
                    else:  # the site an operator names is not held to its queue cap (its site caps still hold)
                        targets = [Target(kept.site, kept.weight, kept.queued, max(kept.room, len(job_ids)), kept.local_files, kept.note)]
                # `placed` shares its counts of jobs sent with the named site's view, which excludes nothing
                view = placed if site is None else Placements(moved=placed.moved)
                target = choose_target(needs[job_id], targets, row.site, view) if refusal is None else None
                if refusal is None and target is None:
                    refusal = "no other site the task's brokerage keeps holds the job's input and has room"
            if refusal is not None:
                items[job_id] = {"job_id": job_id, "outcome": "refused", "from_site": row.site, "reason": refusal}
                continue
            placed.add(target.site)
            reason = (f"by {by}: to {target.site}" + (" (asked for)" if site else f" (chosen: {target.note or 'best weight'})"))
            decided.append(Move(job_id, row.task_id, row.attempt_nr, row.site, target.site, row.status, "activated",
                                site_by_name[target.site].cloud, reason, by, owner))
    for outcome in apply_moves(db, decided, settings, now, site_by_name, rows):
        items[outcome.job_id] = {"outcome": "moved" if outcome.moved else "refused", **outcome.as_dict()}
    return [items[job_id] for job_id in dict.fromkeys(job_ids)]


def _manual_refusal(row: Any, task: Any, container: bool, site: str | None) -> str | None:
    if row.status not in MOVABLE_STATUSES:
        return f"the job is {row.status}: only queued jobs (activated, assigned) move"
    if site is not None and row.site == site:
        return f"the job is at {site} already"
    options = options_from_dict(task.options)
    probe = QueuedJob(row.id, row.task_id, row.status, row.site or "", row.kind, row.state_changed_at,
                      disable_reassign=bool(options.disable_reassign),
                      outputs_bound=("its outputs stay at its site (stayOutputOnSite)" if options.stay_output_on_site
                                     else "it writes its site's dataset of an output container" if container else None))
    if probe.kind == "merge":
        return "a merge job reads the unmerged files where they were written"
    if probe.disable_reassign:
        return "its task says disableReassign"
    return probe.outputs_bound

