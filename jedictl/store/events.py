"""Named operations on `events`: the event ranges of event-service tasks (docs/event-service.md).

Bulk paths are set-based: ranges are inserted as tuples (`bulk.insert_tuples`: COPY on PostgreSQL,
executemany on SQLite), handed out by one guarded UPDATE per dispatch, and executors' reports are
applied by one `update_from_rows` per batch, each row guarded by the range's id, the job that holds
it, the status and the attempt the decision was made on -- the rowcount says how many held.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Connection, case, func, select, update

from jedictl.model import EVENTS_HELD, EventStatus, FileStatus, JobStatus
from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.jobs import reserve_ids
from jedictl.store.set_based import ids_in, update_from_rows
from jedictl.store.schema import events, files, job_files, jobs, sites, tasks

NEW_RANGE_COLUMNS = ("task_id", "dataset_id", "file_id", "job_id", "start_event", "end_event", "status", "attempt_nr", "max_attempt",
                     "is_jumbo", "created_at", "modified_at")
#: What a report writes to a range, then its guard (the decision's id, holder job, status and attempt).
REPORT_SET = ("status", "attempt_nr", "processed_by", "output_lfn", "output_size", "error_code", "error_diag", "modified_at")
REPORT_KEYS = ("id", "job_id", "status", "attempt_nr")


def insert_ranges(conn: Connection, rows: Iterable[Sequence[Any]]) -> int:
    """New ranges, each a tuple in NEW_RANGE_COLUMNS order."""
    return insert_tuples(conn, events, NEW_RANGE_COLUMNS, rows)


def records_with_ranges(conn: Connection, file_ids: Sequence[int]) -> set[int]:
    """Which of these records have ranges already (a retried record keeps its ranges)."""
    return {row[0] for row in ids_in(conn, "SELECT DISTINCT file_id FROM events WHERE file_id IN ({ids})", sorted(set(file_ids)))}


def reattach(conn: Connection, holders: Sequence[tuple[int, int]], now: datetime) -> int:
    """A retried record's ready ranges go to its new job: `holders` is [(job id, file id)]."""
    return update_from_rows(conn, events, ("job_id", "modified_at"), ("file_id",),
                            [(job_id, now, file_id) for job_id, file_id in holders], guard="events.status = 'ready'")


def hand_out(conn: Connection, job_ids: Sequence[int], now: datetime) -> dict[int, list[tuple]]:
    """The ready ranges of these (just dispatched) jobs become `sent`; per job, its ranges as
    (event id, lfn, start, end, attempt_nr) in event order."""
    if not job_ids:
        return {}
    for part in slices(sorted(job_ids)):
        conn.execute(update(events).where(events.c.job_id.in_(list(part)), events.c.status == EventStatus.READY.value)
                     .values(status=EventStatus.SENT.value, modified_at=now))
    return ranges_of_jobs(conn, job_ids, (EventStatus.SENT.value,))


def ranges_of_jobs(conn: Connection, job_ids: Sequence[int], statuses: Sequence[str]) -> dict[int, list[tuple]]:
    """Per job, its ranges in `statuses` as (event id, lfn, start, end, attempt_nr, output_lfn, output_size)."""
    marks = ", ".join(repr(str(status)) for status in statuses)
    statement = ("SELECT e.job_id, e.id, f.lfn, e.start_event, e.end_event, e.attempt_nr, e.output_lfn, e.output_size FROM events e "
                 f"JOIN files f ON f.id = e.file_id WHERE e.job_id IN ({{ids}}) AND e.status IN ({marks}) ORDER BY e.job_id, e.id")
    found: dict[int, list[tuple]] = defaultdict(list)
    for row in ids_in(conn, statement, sorted(set(job_ids))):
        found[row[0]].append(tuple(row[1:]))
    return dict(found)


def done_ranges_of_record(conn: Connection, file_id: int) -> list[tuple]:
    """The processed ranges of a record waiting for their merge: (event id, start, end, output_lfn, output_size)."""
    return [tuple(row) for row in conn.execute(
        select(events.c.id, events.c.start_event, events.c.end_event, events.c.output_lfn, events.c.output_size)
        .where(events.c.file_id == file_id, events.c.status == EventStatus.DONE.value).order_by(events.c.id))]


def lock_ranges(conn: Connection, event_ids: Sequence[int]) -> dict[int, tuple]:
    """Ranges by id as (job_id, status, attempt_nr, max_attempt), locked on PostgreSQL."""
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    statement = f"SELECT id, job_id, status, attempt_nr, max_attempt FROM events WHERE id IN ({{ids}}) ORDER BY id{lock}"
    return {row[0]: tuple(row[1:]) for row in ids_in(conn, statement, sorted(set(event_ids)))}


def job_states(conn: Connection, job_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
    """(status, kind, attempt_nr) of these jobs."""
    return {row[0]: (row[1], row[2], row[3]) for row in
            ids_in(conn, "SELECT id, status, kind, attempt_nr FROM jobs WHERE id IN ({ids})", sorted(set(job_ids)))}


def apply_reports(conn: Connection, rows: Sequence[Sequence[Any]]) -> int:
    """Executors' outcomes: each row holds REPORT_SET values then REPORT_KEYS; returns the rows whose guard held."""
    return update_from_rows(conn, events, REPORT_SET, REPORT_KEYS, rows)


# ------------------------------------------------------------------------------ a job's end

_SETTLE = case(
    (events.c.status == EventStatus.FINISHED.value, EventStatus.DONE.value),
    else_=EventStatus.READY.value,
)


def settle(conn: Connection, job_id: int, now: datetime) -> None:
    """An event-service job ended: its finished ranges are done, the failed ones and those never
    processed (sent, running) ready again (engine.jobs.event_ranges.AT_JOB_END)."""
    conn.execute(update(events).where(events.c.job_id == job_id, events.c.status.in_(
        (EventStatus.FINISHED.value, EventStatus.FAILED.value, *EVENTS_HELD))).values(status=_SETTLE, modified_at=now))


def counts_of_record(conn: Connection, file_id: int) -> dict[str, int]:
    return {status: int(n) for status, n in conn.execute(
        select(events.c.status, func.count()).where(events.c.file_id == file_id).group_by(events.c.status))}


def processed_events(conn: Connection, file_id: int) -> int:
    """Events of a record's done and merged ranges (what its dataset's n_events_used counts)."""
    return int(conn.execute(select(func.coalesce(func.sum(events.c.end_event - events.c.start_event + 1), 0)).where(
        events.c.file_id == file_id, events.c.status.in_((EventStatus.DONE.value, EventStatus.MERGED.value)))).scalar_one())


def move(conn: Connection, file_id: int, old: str, new: str, now: datetime) -> int:
    """Every range of a record in `old` becomes `new` (ready -> fatal when it gives up, done -> merged ...)."""
    return conn.execute(update(events).where(events.c.file_id == file_id, events.c.status == old)
                        .values(status=new, modified_at=now)).rowcount


# ------------------------------------------------------------------------------ ES merge jobs

_COPIED = ("task_id", "is_scout", "max_attempt", "assigned_priority", "current_priority", "site", "cloud", "nucleus", "work_queue",
           "gshare", "resource_type", "prod_source_label", "vo", "working_group", "transformation", "job_parameters", "architecture",
           "trans_uses", "trans_home", "container_name", "core_count", "min_ram_count", "max_walltime", "max_disk_count", "max_cpu_count")


def make_merge_job(conn: Connection, es_job_id: int, attempt_nr: int, now: datetime, *, record: Mapping[str, Any]) -> int:
    """An ES merge job for `es_job_id`, activated at its site: it reads the job's input record and writes
    the job's outputs (the output records the event-service job was made with); `record` is the input
    record (id, dataset_id, lfn, attempt_nr)."""
    source = conn.execute(select(*(jobs.c[name] for name in _COPIED)).where(jobs.c.id == es_job_id)).one()
    job_id = reserve_ids(conn, "jobs", 1)[0]
    index = conn.execute(select(func.coalesce(func.max(jobs.c.task_job_index), 0)).where(jobs.c.task_id == source.task_id)).scalar_one() + 1
    values = dict(source._mapping)
    values.update(id=job_id, task_job_index=index, status=JobStatus.ACTIVATED.value, kind="esmerge", attempt_nr=attempt_nr,
                  processing_type="esmerge", assigned_priority=5000, current_priority=5000, created_at=now, modified_at=now,
                  state_changed_at=now, is_scout=False)
    conn.execute(jobs.insert().values(**values))
    outputs = conn.execute(select(job_files).where(job_files.c.job_id == es_job_id, job_files.c.type.in_(("output", "log")))).all()
    rows = [{"job_id": job_id, "task_id": source.task_id, "dataset_id": record["dataset_id"], "file_id": record["id"], "lfn": record["lfn"],
             "type": "input", "attempt_nr": record["attempt_nr"], "status": "ready"}]
    for out in outputs:
        rows.append({"job_id": job_id, "task_id": out.task_id, "dataset_id": out.dataset_id, "file_id": out.file_id, "lfn": out.lfn,
                     "type": out.type, "attempt_nr": out.attempt_nr, "status": out.status, "destination": out.destination})
    conn.execute(job_files.insert(), rows)
    return job_id


def live_merge_jobs(conn: Connection, file_id: int) -> list[tuple[int, str, int]]:
    """The live ES merge jobs reading a record: (id, status, attempt_nr)."""
    return [tuple(row) for row in conn.execute(
        select(jobs.c.id, jobs.c.status, jobs.c.attempt_nr).join(job_files, job_files.c.job_id == jobs.c.id)
        .where(job_files.c.file_id == file_id, jobs.c.kind == "esmerge",
               jobs.c.status.notin_([JobStatus.FINISHED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value, JobStatus.CLOSED.value])))]


def record_of(conn: Connection, file_id: int) -> dict[str, Any]:
    row = conn.execute(select(files.c.id, files.c.dataset_id, files.c.lfn, files.c.attempt_nr, files.c.job_id, files.c.status)
                       .where(files.c.id == file_id)).one()
    return dict(row._mapping)


def es_job_of_record(conn: Connection, file_id: int) -> tuple[int, str, int] | None:
    """The event-service job holding a running record: (id, status, attempt_nr)."""
    row = conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.attempt_nr).join(files, files.c.job_id == jobs.c.id)
                       .where(files.c.id == file_id, files.c.status == FileStatus.RUNNING.value)).first()
    return tuple(row) if row is not None else None


def merge_inputs(conn: Connection, job_ids: Sequence[int]) -> dict[int, list[tuple]]:
    """Per ES merge job, the done ranges of the record it merges, shaped as `ranges_of_jobs`."""
    statement = ("SELECT jf.job_id, e.id, f.lfn, e.start_event, e.end_event, e.attempt_nr, e.output_lfn, e.output_size FROM job_files jf "
                 "JOIN events e ON e.file_id = jf.file_id JOIN files f ON f.id = e.file_id "
                 "WHERE jf.job_id IN ({ids}) AND jf.type = 'input' AND e.status = 'done' ORDER BY jf.job_id, e.id")
    found: dict[int, list[tuple]] = defaultdict(list)
    for row in ids_in(conn, statement, sorted(set(job_ids))):
        found[row[0]].append(tuple(row[1:]))
    return dict(found)


def end_es_job(conn: Connection, job_id: int, status: str, sub_status: str | None, now: datetime) -> int:
    """An event-service job waiting for its merge ends with it: `merging -> status`, guarded."""
    return conn.execute(update(jobs).where(jobs.c.id == job_id, jobs.c.status == JobStatus.MERGING.value).values(
        status=status, sub_status=sub_status, modified_at=now, state_changed_at=now)).rowcount


# ------------------------------------------------------------------------------ jumbo jobs

#: sub_status of a co-jumbo job parked while a jumbo job processes some of its ranges (PanDA's waiting co-jumbo).
WAITING_FOR_JUMBO = "jumbo"
_HELD = ("sent", "running", "finished", "failed")


def hand_to_jumbo(conn: Connection, jumbo_id: int, task_id: int, count: int, now: datetime) -> int:
    """Up to `count` ready ranges of the task whose event-service (co-jumbo) job is still queued
    (activated) go to the jumbo job, `sent`; those co-jumbo jobs wait (throttled, sub_status jumbo)
    until the jumbo job gives the ranges back. Returns how many ranges it took."""
    holder = jobs.alias("holder")
    query = (select(events.c.id, events.c.job_id).join(holder, holder.c.id == events.c.job_id)
             .where(events.c.task_id == task_id, events.c.status == EventStatus.READY.value, holder.c.status == JobStatus.ACTIVATED.value,
                    holder.c.kind == "es")
             .order_by(events.c.id).limit(count).with_for_update(skip_locked=True, of=events))
    taken = conn.execute(query).all()
    if not taken:
        return 0
    ids, holders = [row.id for row in taken], sorted({row.job_id for row in taken})
    moved = 0
    for part in slices(ids):
        moved += conn.execute(update(events).where(events.c.id.in_(list(part)), events.c.status == EventStatus.READY.value).values(
            job_id=jumbo_id, status=EventStatus.SENT.value, is_jumbo=True, modified_at=now)).rowcount
    for part in slices(holders):
        conn.execute(update(jobs).where(jobs.c.id.in_(list(part)), jobs.c.status == JobStatus.ACTIVATED.value).values(
            status=JobStatus.THROTTLED.value, sub_status=WAITING_FOR_JUMBO, modified_at=now, state_changed_at=now))
    return moved


def return_from_jumbo(conn: Connection, jumbo_id: int, now: datetime) -> int:
    """A jumbo job ended: its processed ranges are done, the rest ready again, each back with the job
    holding its record (a record that ended meanwhile takes them as fatal); co-jumbo jobs no other jumbo
    job holds ranges of are activated again. Returns how many ranges went back."""
    record = files.alias("record")
    holder_of = select(record.c.job_id).where(record.c.id == events.c.file_id).scalar_subquery()
    record_live = select(record.c.status).where(record.c.id == events.c.file_id).scalar_subquery().in_(
        (FileStatus.RUNNING.value, FileStatus.READY.value))
    status = case((~record_live, EventStatus.FATAL.value), (events.c.status == EventStatus.FINISHED.value, EventStatus.DONE.value),
                  else_=EventStatus.READY.value)
    holders = sorted({row[0] for row in conn.execute(
        select(func.distinct(holder_of)).where(events.c.job_id == jumbo_id, events.c.status.in_(_HELD)))} - {None})
    moved = conn.execute(update(events).where(events.c.job_id == jumbo_id, events.c.status.in_(_HELD)).values(
        status=status, job_id=holder_of, modified_at=now)).rowcount
    if holders:
        still = exists_held_by_other()
        for part in slices(holders):
            conn.execute(update(jobs).where(jobs.c.id.in_(list(part)), jobs.c.status == JobStatus.THROTTLED.value,
                                            jobs.c.sub_status == WAITING_FOR_JUMBO, ~still)
                         .values(status=JobStatus.ACTIVATED.value, sub_status=None, modified_at=now, state_changed_at=now))
    return moved


def exists_held_by_other() -> Any:
    """SQL: a range of the record this `jobs` row holds is held by another job (a jumbo job)."""
    other, record = events.alias("other"), files.alias("held_record")
    return (select(other.c.id).join(record, record.c.id == other.c.file_id)
            .where(record.c.job_id == jobs.c.id, other.c.status.in_(_HELD), other.c.job_id != jobs.c.id).exists())


def remaining_events(conn: Connection) -> dict[int, int]:
    """Per task, the events of its ranges still to do or in flight (ready, sent, running, failed)."""
    return {task_id: int(n) for task_id, n in conn.execute(
        select(events.c.task_id, func.sum(events.c.end_event - events.c.start_event + 1))
        .where(events.c.status.in_(("ready", "sent", "running", "failed"))).group_by(events.c.task_id))}


def live_jumbo_jobs(conn: Connection, task_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    found: dict[int, dict[str, int]] = defaultdict(dict)
    for part in slices(sorted(task_ids)):
        for task_id, site, n in conn.execute(select(jobs.c.task_id, jobs.c.site, func.count()).where(
                jobs.c.task_id.in_(list(part)), jobs.c.kind == "jumbo",
                jobs.c.status.notin_(("finished", "failed", "cancelled", "closed"))).group_by(jobs.c.task_id, jobs.c.site)):
            found[task_id][site] = int(n)
    return dict(found)


def make_jumbo_job(conn: Connection, task_id: int, site: str, now: datetime) -> int | None:
    """A jumbo job of the task at `site`, activated, reading no file (its ranges come at dispatch),
    modelled on the task's newest event-service job; None when the task has none."""
    source_id = conn.execute(select(func.max(jobs.c.id)).where(jobs.c.task_id == task_id, jobs.c.kind == "es")).scalar_one()
    if source_id is None:
        return None
    source = conn.execute(select(*(jobs.c[name] for name in _COPIED)).where(jobs.c.id == source_id)).one()
    job_id = reserve_ids(conn, "jobs", 1)[0]
    index = conn.execute(select(func.coalesce(func.max(jobs.c.task_job_index), 0)).where(jobs.c.task_id == task_id)).scalar_one() + 1
    values = dict(source._mapping)
    values.update(id=job_id, task_job_index=index, status=JobStatus.ACTIVATED.value, kind="jumbo", attempt_nr=1, site=site,
                  created_at=now, modified_at=now, state_changed_at=now, is_scout=False)
    conn.execute(jobs.insert().values(**values))
    return job_id


def cojumbos_with_nothing_to_do(conn: Connection, task_ids: Sequence[int]) -> list[tuple[int, str]]:
    """Queued event-service jobs (activated, or waiting for a jumbo job) of these tasks whose record has
    no range left to do or in flight: (job id, status). The jumbo watchdog ends them (seed 000: "a cron
    checks co-jumbo jobs ... and finishes them if all events ... are done")."""
    pending = events.alias("pending")
    left = (select(pending.c.id).where(pending.c.file_id == files.c.id, pending.c.status.in_(("ready", *_HELD))).exists())
    found: list[tuple[int, str]] = []
    for part in slices(sorted(task_ids)):
        found += [(row.id, row.status) for row in conn.execute(
            select(jobs.c.id, jobs.c.status).join(files, files.c.job_id == jobs.c.id)
            .where(jobs.c.task_id.in_(list(part)), jobs.c.kind == "es", jobs.c.status.in_((JobStatus.ACTIVATED.value, JobStatus.THROTTLED.value)),
                   files.c.status == FileStatus.RUNNING.value, ~left).order_by(jobs.c.id))]
    return found


def set_use_jumbo(conn: Connection, task_id: int, value: bool, now: datetime) -> int:
    return conn.execute(update(tasks).where(tasks.c.id == task_id).values(use_jumbo=value, modified_at=now)).rowcount


def jumbo_tasks(conn: Connection, task_ids: Sequence[int]) -> list[Any]:
    """The tasks the jumbo watchdog weighs: id, status, current priority, site, options, use_jumbo."""
    found = []
    for part in slices(sorted(task_ids)):
        found += list(conn.execute(select(tasks.c.id, tasks.c.status, tasks.c.current_priority, tasks.c.site, tasks.c.options,
                                          tasks.c.use_jumbo).where(tasks.c.id.in_(list(part)))))
    return found


def jumbo_sites(conn: Connection) -> list[str]:
    """Online sites that take jumbo jobs (`attributes: {use_jumbo: true}`, PanDA's catchall useJumbo)."""
    return sorted(row.name for row in conn.execute(select(sites.c.name, sites.c.status, sites.c.attributes))
                  if row.status == "online" and (row.attributes or {}).get("use_jumbo") is True)


def idle_jumbo_jobs(conn: Connection) -> list[tuple[int, int]]:
    """Queued (activated) jumbo jobs with nothing to take: their task has jumbo jobs off, or no ready
    range of a queued co-jumbo job left. (job id, task id)."""
    holder = jobs.alias("queued_holder")
    takeable = (select(events.c.id).join(holder, holder.c.id == events.c.job_id)
                .where(events.c.task_id == jobs.c.task_id, events.c.status == EventStatus.READY.value,
                       holder.c.status == JobStatus.ACTIVATED.value, holder.c.kind == "es").exists())
    return [(row.id, row.task_id) for row in conn.execute(
        select(jobs.c.id, jobs.c.task_id).join(tasks, tasks.c.id == jobs.c.task_id)
        .where(jobs.c.kind == "jumbo", jobs.c.status == JobStatus.ACTIVATED.value,
               (func.coalesce(tasks.c.use_jumbo, False).is_(False)) | ~takeable).order_by(jobs.c.id))]
