"""Named queries behind job reassignment (docs/reassignment.md): the queues per site and share, the jobs
waiting at a site, what their tasks and inputs say, and the guarded move of a queued job to another
site with its record in `job_reassignments`.

A move is guarded by the job's id, status, site and attempt as the decision saw them: a job handed to
an executor meanwhile (`sent`), moved by another pass (its site changed) or retried is not moved, and
the statement's rowcount says so. The dispatcher's claim is guarded by the site as well
(store.dispatch), so a job moved after a dispatcher chose it is not handed to the old site's executor.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Row, and_, func, select, update

from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.schema import datasets, job_files, job_reassignments, jobs, tasks
from jedictl.store.set_based import update_from_rows

INPUT_TYPES = ("input", "pseudo_input")
OUTPUT_TYPES = ("output", "log")


class Move(NamedTuple):
    """One move as decided: the guard (job, attempt, site and status it was seen at) and what is written."""

    job_id: int
    task_id: int
    attempt_nr: int
    from_site: str
    to_site: str
    from_status: str
    to_status: str
    cloud: str | None
    reason: str
    moved_by: str
    owner: str


_RECORD_COLUMNS = ("job_id", "task_id", "attempt_nr", "from_site", "to_site", "from_status", "to_status", "reason", "moved_by", "owner",
                   "moved_at")


def queue_rows(conn: Connection, statuses: Collection[str]) -> list[Row]:
    """Jobs per site, global share and status (`n`), with the oldest state change (`oldest`) of each group."""
    return list(conn.execute(
        select(jobs.c.site, jobs.c.gshare, jobs.c.status, func.count().label("n"), func.min(jobs.c.state_changed_at).label("oldest"))
        .where(jobs.c.site.is_not(None), jobs.c.status.in_(sorted(statuses)))
        .group_by(jobs.c.site, jobs.c.gshare, jobs.c.status)))


def last_dispatches(conn: Connection, site_names: Collection[str]) -> dict[str, datetime | None]:
    """When each site last handed a job to an executor (None: never)."""
    found: dict[str, datetime | None] = {name: None for name in site_names}
    for part in slices(sorted(site_names)):
        for name, at in conn.execute(select(jobs.c.site, func.max(jobs.c.dispatched_at)).where(jobs.c.site.in_(list(part)))
                                     .group_by(jobs.c.site)):
            found[name] = at
    return found


def queued_jobs(conn: Connection, site: str, gshare: str | None, statuses: Collection[str], waiting_before: datetime, limit: int) -> list[Row]:
    """The jobs of a site and share in `statuses` that have waited since before `waiting_before`, oldest first."""
    share = jobs.c.gshare.is_(None) if gshare is None else jobs.c.gshare == gshare
    return list(conn.execute(
        select(jobs.c.id, jobs.c.task_id, jobs.c.status, jobs.c.site, jobs.c.kind, jobs.c.attempt_nr, jobs.c.state_changed_at,
               jobs.c.prod_source_label, jobs.c.current_priority)
        .where(jobs.c.site == site, share, jobs.c.status.in_(sorted(statuses)), jobs.c.state_changed_at <= waiting_before)
        .order_by(jobs.c.id).limit(limit)))


def jobs_by_id(conn: Connection, job_ids: Sequence[int]) -> dict[int, Row]:
    found = {}
    for part in slices(sorted(set(job_ids))):
        for row in conn.execute(select(jobs.c.id, jobs.c.task_id, jobs.c.status, jobs.c.site, jobs.c.kind, jobs.c.attempt_nr,
                                       jobs.c.state_changed_at, jobs.c.prod_source_label, jobs.c.current_priority)
                                .where(jobs.c.id.in_(list(part)))):
            found[row.id] = row
    return found


def task_rows(conn: Connection, task_ids: Collection[int]) -> dict[int, Row]:
    found = {}
    for part in slices(sorted(task_ids)):
        for row in conn.execute(select(tasks).where(tasks.c.id.in_(list(part)))):
            found[row.id] = row
    return found


def tasks_with_output_containers(conn: Connection, task_ids: Collection[int]) -> set[int]:
    """Tasks whose jobs write a dataset per site inside an output container (their outputs belong to their site)."""
    found: set[int] = set()
    for part in slices(sorted(task_ids)):
        found.update(conn.execute(select(datasets.c.task_id).where(datasets.c.task_id.in_(list(part)), datasets.c.template_id.is_not(None),
                                                                    datasets.c.type.in_(OUTPUT_TYPES)).distinct()).scalars())
    return found


def job_inputs(conn: Connection, job_ids: Sequence[int]) -> list[Row]:
    """(job_id, lfn, size, dataset) of every input file of these jobs that lives on storage (pseudo inputs
    -- the event ranges of a task without input -- need no replica anywhere)."""
    rows: list[Row] = []
    for part in slices(sorted(set(job_ids))):
        rows += conn.execute(
            select(job_files.c.job_id, job_files.c.lfn, job_files.c.size, datasets.c.name.label("dataset"))
            .join(datasets, datasets.c.id == job_files.c.dataset_id)
            .where(job_files.c.job_id.in_(list(part)), job_files.c.type == "input")
            .order_by(job_files.c.job_id, job_files.c.id)).all()
    return rows


def _set_rows(moves: Sequence[Move], now: datetime) -> list[tuple[Any, ...]]:
    return [(m.to_site, m.cloud, m.to_status, now, now, m.job_id, m.from_status, m.from_site, m.attempt_nr) for m in moves]


_SET = ("site", "cloud", "status", "state_changed_at", "modified_at")
_KEYS = ("id", "status", "site", "attempt_nr")


def move_jobs(conn: Connection, moves: Sequence[Move], now: datetime) -> int:
    """Move these jobs, each only if it still has the status, site and attempt it was decided on; the jobs
    moved, with their records and (for an `assigned` job) its input no longer awaited. Returns how
    many guards held: the caller rolls back when that is not all of them and moves one at a time."""
    if not moves:
        return 0
    moved = update_from_rows(conn, jobs, _SET, _KEYS, _set_rows(moves, now), guard="jobs.executor IS NULL")
    if moved != len(moves):
        return moved
    _after_move(conn, moves, now)
    return moved


def move_job(conn: Connection, move: Move, now: datetime) -> bool:
    """One move, guarded as in `move_jobs`; False when the job was not where (or as) the decision saw it."""
    moved = conn.execute(
        update(jobs)
        .where(jobs.c.id == move.job_id, jobs.c.status == move.from_status, jobs.c.site == move.from_site,
               jobs.c.attempt_nr == move.attempt_nr, jobs.c.executor.is_(None))
        .values(site=move.to_site, cloud=move.cloud, status=move.to_status, state_changed_at=now, modified_at=now)).rowcount
    if moved != 1:
        return False
    _after_move(conn, [move], now)
    return True


def _after_move(conn: Connection, moves: Sequence[Move], now: datetime) -> None:
    arrived = [m.job_id for m in moves if m.from_status != m.to_status]
    for part in slices(arrived):
        # An assigned job moved to a site holding its input waits for no transfer any more.
        conn.execute(update(job_files).where(job_files.c.job_id.in_(list(part)), job_files.c.type.in_(INPUT_TYPES))
                     .values(destination=None))
    insert_tuples(conn, job_reassignments, _RECORD_COLUMNS,
                  [(m.job_id, m.task_id, m.attempt_nr, m.from_site, m.to_site, m.from_status, m.to_status, m.reason, m.moved_by, m.owner, now)
                   for m in moves])


def moves_of(conn: Connection, job_id: int) -> list[Row]:
    """A job's moves, first first."""
    r = job_reassignments.c
    return list(conn.execute(select(r.moved_at, r.from_site, r.to_site, r.from_status, r.to_status, r.attempt_nr, r.moved_by, r.reason)
                             .where(r.job_id == job_id).order_by(r.id)))


def broken_chains(conn: Connection) -> list[Row]:
    """Moves that do not follow the job's previous move (from_site is not where that one put it), the
    last move of a job that is not where it put it, and moves of a job after an executor had taken it."""
    r = job_reassignments.c
    ordered = select(r.id, r.job_id, r.task_id, r.from_site, r.to_site, r.moved_at,
                     func.lag(r.to_site).over(partition_by=r.job_id, order_by=r.id).label("previous_to"),
                     func.row_number().over(partition_by=r.job_id, order_by=r.id.desc()).label("from_last")).subquery("ordered")
    rows = conn.execute(
        select(ordered.c.id, ordered.c.job_id, ordered.c.task_id, ordered.c.from_site, ordered.c.to_site, ordered.c.previous_to,
               ordered.c.from_last, ordered.c.moved_at, jobs.c.site.label("job_site"), jobs.c.dispatched_at)
        .join(jobs, jobs.c.id == ordered.c.job_id)
        .where(and_(ordered.c.previous_to.is_not(None), ordered.c.previous_to != ordered.c.from_site)
               | and_(ordered.c.from_last == 1, func.coalesce(jobs.c.site, "") != ordered.c.to_site)
               | and_(ordered.c.from_last == 1, jobs.c.dispatched_at.is_not(None), jobs.c.dispatched_at < ordered.c.moved_at))
        .order_by(ordered.c.job_id, ordered.c.id))
    return list(rows)
