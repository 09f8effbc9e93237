"""Named queries of the finalize pass (JEDI's Post Processor): which tasks it takes, the scout jobs it
measures, the file counts of the avalanche, and the writes of the end of a task -- dataset statuses,
catalog datasets closed, child tasks kicked.

Everything runs in the caller's transaction; the engine (engine.finalize.postprocessor) decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, and_, exists, func, insert, literal, or_, select, update

from jedictl.model import JOB_FINAL, DatasetStatus, FileStatus, JobStatus, TaskStatus
from jedictl.store import messages
from jedictl.store.bulk import slices
from jedictl.store.schema import catalog_datasets, datasets, files, job_files, jobs, sites, task_status_history, tasks
from jedictl.store.set_based import update_from_rows

#: Datasets whose released files generate jobs: a task's phase is complete when none of them (as a
#: master) has a released file that is not terminal (final_status.phase_complete).
PROCESS_TYPES = ("input", "pseudo_input", "random_seed", "trn_log")
CLOSED_DATASET = (DatasetStatus.FINISHED.value, DatasetStatus.DONE.value, DatasetStatus.FAILED.value, DatasetStatus.REMOVED.value)
#: Statuses whose phase may be complete (running, ready, throttled) or whose scouts may be evaluated.
PHASE_STATUSES = (TaskStatus.RUNNING.value, TaskStatus.READY.value, TaskStatus.THROTTLED.value, TaskStatus.SCOUTING.value)
TOABORT = "toabort"
#: Statuses the post processor ends (JEDI getTasksToBeFinished), `scouted` included (the avalanche);
#: `toabort` once none of its killed jobs is still on a worker.
TO_BE_FINISHED = (TaskStatus.PREPARED.value, TaskStatus.SCOUTED.value, TaskStatus.TOBROKEN.value, TOABORT, TaskStatus.PASSED.value)
FEEDABLE = ("input", "pseudo_input")
#: Scout jobs that do not count in the early-avalanche ratio: killed or timed out, not a verdict.
_NOT_A_SCOUT_VERDICT = (JobStatus.CANCELLED.value, JobStatus.CLOSED.value)


def unprocessed_master() -> ColumnElement[bool]:
    """A master of the task still has a released file that is not finished or failed."""
    d = datasets.c
    return exists(select(d.id).where(d.task_id == tasks.c.id, d.master_id.is_(None), d.type.in_(PROCESS_TYPES),
                                     d.status.notin_(CLOSED_DATASET), d.n_files_to_be_used > d.n_files_finished + d.n_files_failed))


def _scout_count(*conditions: Any) -> Any:
    return (select(func.count()).select_from(jobs)
            .where(jobs.c.task_id == tasks.c.id, jobs.c.is_scout.is_(True), jobs.c.kind == "normal", *conditions).scalar_subquery())


def candidates(now: datetime, min_success_fraction: float, assessment_minutes: float) -> ColumnElement[bool]:
    """Tasks the finalize pass takes:

    - running, ready, throttled or scouting with every released master file terminal (phase complete);
    - scouting with at least `min_success_fraction` of its scout jobs finished, not assessed within
      `assessment_minutes` (the early avalanche);
    - running with no scout statistics yet (walltime_unit NULL) and a finished job (scout data only);
    - prepared, scouted, tobroken and passed (the end of the task, or the avalanche), and toabort
      once no job of the task is live.
    """
    finished = _scout_count(jobs.c.status == JobStatus.FINISHED.value)
    counted = _scout_count(jobs.c.status.notin_(_NOT_A_SCOUT_VERDICT))
    early = and_(tasks.c.status == TaskStatus.SCOUTING.value,
                 or_(tasks.c.assessed_at.is_(None), tasks.c.assessed_at <= now - timedelta(minutes=assessment_minutes)),
                 finished > 0, finished >= counted * literal(float(min_success_fraction)))
    scout_data = and_(tasks.c.status == TaskStatus.RUNNING.value, tasks.c.walltime_unit.is_(None),
                      exists(select(jobs.c.id).where(jobs.c.task_id == tasks.c.id, jobs.c.status == JobStatus.FINISHED.value,
                                                     jobs.c.kind == "normal")))
    live = exists(select(jobs.c.id).where(jobs.c.task_id == tasks.c.id, jobs.c.status.notin_([s.value for s in JOB_FINAL])))
    aborted = and_(tasks.c.status == TOABORT, ~live)
    # The status list first, on its own: the index on (status, priority) then skips the tasks that
    # can never be candidates -- every ended task, most of a big store -- without looking at them.
    return tasks.c.status.in_(CANDIDATE_STATUSES) & or_(
        and_(tasks.c.status.in_(PHASE_STATUSES), ~unprocessed_master(), ~_live_jumbo_job()), early, scout_data,
        tasks.c.status.in_([s for s in TO_BE_FINISHED if s != TOABORT]), aborted)


def _live_jumbo_job() -> ColumnElement[bool]:
    """A jumbo job of the task is live: it holds no record, so the master counters do not see it; the task
    waits until the jumbo watchdog has closed it (docs/event-service.md)."""
    return exists(select(jobs.c.id).where(jobs.c.task_id == tasks.c.id, jobs.c.kind == "jumbo",
                                          jobs.c.status.notin_([s.value for s in JOB_FINAL])))


#: Every status `candidates` may take.
CANDIDATE_STATUSES = tuple(dict.fromkeys(PHASE_STATUSES + TO_BE_FINISHED))


# ------------------------------------------------------------------------------------------ scouts

def scout_job_counts(conn: Connection, task_id: int) -> tuple[int, int]:
    """(scout jobs that count, of them finished) for the early-avalanche rule."""
    rows = dict(conn.execute(select(jobs.c.status, func.count()).where(
        jobs.c.task_id == task_id, jobs.c.is_scout.is_(True), jobs.c.kind == "normal").group_by(jobs.c.status)).all())
    counted = sum(n for status, n in rows.items() if status not in _NOT_A_SCOUT_VERDICT)
    return counted, rows.get(JobStatus.FINISHED.value, 0)


def finished_jobs(conn: Connection, task_id: int, *, scouts_only: bool, limit: int) -> list[Row]:
    """Finished (normal) jobs of a task with what the scout statistics need: the reported metrics, the
    bytes of input they read (their `input` job files), whether they read only pseudo input, and the
    core power of their site."""
    query = _finished_jobs_query().where(jobs.c.task_id == task_id).order_by(jobs.c.id).limit(limit)
    if scouts_only:
        query = query.where(jobs.c.is_scout.is_(True))
    return list(conn.execute(query))


def finished_jobs_of_tasks(conn: Connection, task_ids: Iterable[int], *, limit: int) -> dict[int, list[Row]]:
    """`finished_jobs` (scouts or not) of many tasks in one query per slice: each task's first `limit`."""
    numbered = _finished_jobs_query().add_columns(
        func.row_number().over(partition_by=jobs.c.task_id, order_by=jobs.c.id).label("position"), jobs.c.task_id.label("of_task"))
    found: dict[int, list[Row]] = {}
    for part in slices(sorted(set(task_ids)), 200):
        ranked = numbered.where(jobs.c.task_id.in_(list(part))).subquery()
        for row in conn.execute(select(ranked).where(ranked.c.position <= limit).order_by(ranked.c.of_task, ranked.c.id)):
            found.setdefault(row.of_task, []).append(row)
    return found


def _finished_jobs_query() -> Any:
    input_bytes = (select(func.coalesce(func.sum(job_files.c.size), 0))
                   .where(job_files.c.job_id == jobs.c.id, job_files.c.type == "input").scalar_subquery())
    reads_files = exists(select(job_files.c.id).where(job_files.c.job_id == jobs.c.id, job_files.c.type == "input"))
    return (select(jobs.c.id, jobs.c.n_events, jobs.c.output_bytes, jobs.c.wall_time, jobs.c.cpu_time, jobs.c.core_count,
                   jobs.c.max_pss, jobs.c.started_at, jobs.c.ended_at, sites.c.core_power,
                   input_bytes.label("input_bytes"), (~reads_files).label("pseudo_input"))
            .select_from(jobs.outerjoin(sites, sites.c.name == jobs.c.site))
            .where(jobs.c.status == JobStatus.FINISHED.value, jobs.c.kind == "normal"))


def output_sizes(conn: Connection, job_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """Per job: (bytes of its output files, bytes of its largest output dataset) -- outputs and unmerged
    outputs, not logs: what tgtMaxOutputForNG scales (engine.finalize.scouts.target_n_gb_per_job)."""
    per_dataset: dict[int, list[int]] = {}
    for part in slices(sorted(set(job_ids))):
        rows = conn.execute(
            select(job_files.c.job_id, func.coalesce(func.sum(files.c.size), 0))
            .join(files, files.c.id == job_files.c.file_id)
            .where(job_files.c.job_id.in_(list(part)), job_files.c.type.in_(("output", "trn_output")))
            .group_by(job_files.c.job_id, job_files.c.dataset_id))
        for job_id, size in rows:
            per_dataset.setdefault(job_id, []).append(int(size))
    return {job_id: (sum(sizes), max(sizes)) for job_id, sizes in per_dataset.items()}


def scout_outcomes(conn: Connection, task_id: int) -> tuple[int, int]:
    """(distinct scout jobs that finished, distinct scout jobs that failed an input for good)."""
    ok = conn.execute(select(func.count()).select_from(jobs).where(
        jobs.c.task_id == task_id, jobs.c.is_scout.is_(True), jobs.c.kind == "normal", jobs.c.status == JobStatus.FINISHED.value)).scalar_one()
    failed = conn.execute(
        select(func.count(func.distinct(jobs.c.id)))
        .select_from(jobs.join(job_files, job_files.c.job_id == jobs.c.id).join(files, files.c.id == job_files.c.file_id))
        .where(jobs.c.task_id == task_id, jobs.c.is_scout.is_(True), jobs.c.kind == "normal", jobs.c.status == JobStatus.FAILED.value,
               job_files.c.type == "input", files.c.status == FileStatus.FAILED.value)).scalar_one()
    return int(ok), int(failed)


def file_status_counts(conn: Connection, dataset_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Per dataset, its file records per status (what the avalanche releases)."""
    found: dict[int, dict[str, int]] = {}
    for part in slices(sorted(set(dataset_ids))):
        for dataset_id, status, count in conn.execute(
                select(files.c.dataset_id, files.c.status, func.count()).where(files.c.dataset_id.in_(list(part)))
                .group_by(files.c.dataset_id, files.c.status)):
            found.setdefault(dataset_id, {})[status] = count
    return found


# ------------------------------------------------------------------------------------------ writes

def update_datasets(conn: Connection, task_id: int, updates: Sequence[Any], now: datetime) -> int:
    """Apply final_status.DatasetUpdate values (None: unchanged), in dataset-id order."""
    touched = 0
    for change in sorted(updates, key=lambda u: u.dataset_id):
        values = {name: getattr(change, name) for name in ("status", "n_files", "n_files_to_be_used") if getattr(change, name) is not None}
        if not values:
            continue
        if "status" in values:
            values["status"] = str(values["status"])
        touched += conn.execute(update(datasets).where(datasets.c.id == change.dataset_id, datasets.c.task_id == task_id)
                                .values(**values, modified_at=now)).rowcount
    return touched


def close_catalog_datasets(conn: Connection, names: Iterable[str], now: datetime) -> list[str]:
    """Close (freeze) the data-catalog datasets of these names that are still open -- the output containers
    a task wrote its sites' datasets into too; returns those closed."""
    closed: list[str] = []
    for part in slices(sorted(set(names))):
        ids = dict(conn.execute(select(catalog_datasets.c.id, catalog_datasets.c.name).where(
            catalog_datasets.c.name.in_(list(part)), catalog_datasets.c.state != "closed")).all())
        if ids:
            conn.execute(update(catalog_datasets).where(catalog_datasets.c.id.in_(list(ids))).values(state="closed", modified_at=now))
            closed.extend(ids.values())
    return sorted(closed)


def descendants(conn: Connection, task_id: int, depth: int | None = None) -> list[Row]:
    """(id, parent_id, status) of every task below `task_id` in the parent tree (`depth` levels)."""
    found: list[Row] = []
    seen = {task_id}
    frontier = [task_id]
    level = 0
    while frontier and (depth is None or level < depth):
        level += 1
        rows = [row for part in slices(frontier) for row in conn.execute(
            select(tasks.c.id, tasks.c.parent_id, tasks.c.status).where(tasks.c.parent_id.in_(list(part))).order_by(tasks.c.id))]
        rows = [row for row in rows if row.id not in seen]
        seen.update(row.id for row in rows)
        found.extend(rows)
        frontier = [row.id for row in rows]
    return found


def kick_task(conn: Connection, task_id: int, now: datetime) -> None:
    """Make the agents look at a child again now: a pending wait is over, open inputs are due for a
    re-scan (the parent's outputs may just have been closed)."""
    conn.execute(update(tasks).where(tasks.c.id == task_id, tasks.c.status == TaskStatus.PENDING.value, tasks.c.wait_until.is_not(None))
                 .values(wait_until=None))
    conn.execute(update(datasets).where(datasets.c.task_id == task_id, datasets.c.type.in_(FEEDABLE), datasets.c.state.in_(("open", "mutable")))
                 .values(state_checked_at=None))


def live_jobs(conn: Connection, task_id: int) -> int:
    """Jobs of the task not final yet (killed ones still on a worker included)."""
    return conn.execute(select(func.count()).select_from(jobs).where(
        jobs.c.task_id == task_id, jobs.c.status.notin_([s.value for s in JOB_FINAL]))).scalar_one()


# ---------------------------------------------------------------------------- many tasks at once
# The batched finalize (engine.finalize.batch): a claimed batch of tasks is read and ended in one
# write transaction, every write guarded as the one-task path guards it.

def tasks_by_id(conn: Connection, task_ids: Iterable[int]) -> dict[int, Row]:
    return {row.id: row for part in slices(sorted(set(task_ids))) for row in conn.execute(select(tasks).where(tasks.c.id.in_(list(part))))}


def datasets_of_tasks(conn: Connection, task_ids: Iterable[int], *, lock: bool = False) -> dict[int, list[Row]]:
    """Each task's datasets in id order; `lock`: held until the transaction ends, taken in id order
    (PostgreSQL row locks, like every counter writer; SQLite's write transaction already excludes them)."""
    found: dict[int, list[Row]] = {}
    for part in slices(sorted(set(task_ids))):
        query = select(datasets).where(datasets.c.task_id.in_(list(part))).order_by(datasets.c.id)
        for row in conn.execute(query.with_for_update() if lock and conn.dialect.name == "postgresql" else query):
            found.setdefault(row.task_id, []).append(row)
    return found


def statuses_of(conn: Connection, task_ids: Iterable[int]) -> dict[int, str]:
    return dict(row for part in slices(sorted(set(task_ids))) for row in conn.execute(
        select(tasks.c.id, tasks.c.status).where(tasks.c.id.in_(list(part)))))


def children_of(conn: Connection, task_ids: Iterable[int]) -> list[Row]:
    """(id, parent_id, status) of the direct children of these tasks."""
    return [row for part in slices(sorted(set(task_ids))) for row in conn.execute(
        select(tasks.c.id, tasks.c.parent_id, tasks.c.status).where(tasks.c.parent_id.in_(list(part))).order_by(tasks.c.id))]


def end_leased_tasks(conn: Connection, owner: str, changes: Sequence[tuple[int, str, dict[str, Any]]]) -> int:
    """Write (task id, status it was decided on, new column values) for many tasks: one set-based
    UPDATE per set of columns, each row guarded by its status and `owner`'s lease. Returns the tasks
    changed; the caller compares it with len(changes)."""
    groups: dict[tuple[str, ...], list[tuple]] = {}
    for task_id, expected, values in changes:
        names = tuple(sorted(values))
        groups.setdefault(names, []).append((*(values[name] for name in names), task_id, str(expected), owner))
    return sum(update_from_rows(conn, tasks, names, ("id", "status", "lease_owner"), rows) for names, rows in groups.items())


def record_statuses(conn: Connection, rows: Sequence[tuple[int, str, str | None, str | None, datetime, str]]) -> None:
    """Status history lines (task id, status, previous status, reason, changed at, changed by), and their
    events in the outbox when this store publishes task events."""
    if rows:
        conn.execute(insert(task_status_history), [
            {"task_id": task_id, "status": str(status), "previous_status": str(previous) if previous else None, "reason": reason,
             "changed_at": changed_at, "changed_by": by} for task_id, status, previous, reason, changed_at, by in rows])
        messages.queue_status_events(conn, rows)


def update_many_datasets(conn: Connection, changes: Sequence[tuple[int, int, dict[str, Any]]], now: datetime) -> int:
    """(dataset id, task id, values) for many datasets, one set-based UPDATE per set of columns, in
    dataset-id order; returns the rows changed."""
    groups: dict[tuple[str, ...], list[tuple]] = {}
    for dataset_id, task_id, values in sorted(changes, key=lambda change: change[0]):
        names = tuple(sorted(values)) + ("modified_at",)
        groups.setdefault(names, []).append((*(str(values[n]) if n == "status" else values[n] for n in names[:-1]), now, dataset_id, task_id))
    return sum(update_from_rows(conn, datasets, names, ("id", "task_id"), rows) for names, rows in groups.items())
