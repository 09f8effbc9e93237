"""Named operations for making and reading jobs: claiming input, reserving ids, writing jobs in bulk.

The generator works one chunk per transaction: the next ready records are read under lock (PostgreSQL:
`FOR UPDATE SKIP LOCKED`; SQLite: the transaction's BEGIN IMMEDIATE write lock), jobs and their files
are inserted as tuples, and each record that went into a job is written once -- `ready -> running`
with its job, in set-based UPDATEs guarded by `status = 'ready'` whose rowcount must be every record
meant (`start_files`). Records read but put in no job are never written: they stay `ready`. All of it
before the commit, so a running record without its job is never visible outside the transaction and
a crash leaves nothing half-made. (One write per record instead of claim-to-running, set the job,
return the rest: each write of a record rewrites its status index entry, the hottest path of a big
task -- issue 18.)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import Connection, Row, and_, bindparam, func, or_, select, update

from jedictl.errors import LeaseLost
from jedictl.model import JOB_FINAL, FileStatus, JobStatus
from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.set_based import update_from_rows
from jedictl.store.schema import datasets, files, job_files, job_retry_history, jobs, output_templates, sites

# A claimed record: the first ten columns are the splitter's InputFile fields, in order (see ClaimedIndex).
CLAIM_COLUMNS = (files.c.id, files.c.lfn, files.c.size, files.c.n_events, files.c.start_event, files.c.end_event, files.c.first_event,
                 files.c.boundary_id, files.c.lumi_block_nr, files.c.dataset_id, files.c.attempt_nr, files.c.job_id, files.c.ram_count,
                 files.c.guid, files.c.scope, files.c.checksum)

# What varies per job first, then what every job of a task shares (built once per chunk).
JOB_COLUMNS = (
    "id", "task_job_index", "status", "is_scout", "attempt_nr", "max_attempt", "assigned_priority", "current_priority", "site",
    "cloud", "resource_type", "job_parameters", "core_count", "min_ram_count", "max_walltime", "max_disk_count", "max_cpu_count",
    "task_id", "kind", "nucleus", "work_queue", "gshare", "prod_source_label", "processing_type", "vo", "working_group",
    "transformation", "architecture", "trans_uses", "trans_home", "container_name", "created_at", "modified_at", "state_changed_at",
)
JOB_FILE_COLUMNS = ("job_id", "task_id", "dataset_id", "file_id", "lfn", "type", "attempt_nr", "status", "scope", "guid", "size",
                    "checksum", "destination")
OUTPUT_COLUMNS = ("id", "task_id", "dataset_id", "lfn", "type", "status", "attempt_nr", "failed_attempt", "keep_track", "out_job_id",
                  "job_id", "created_at")
SEED_COLUMNS = ("id", "task_id", "dataset_id", "lfn", "type", "status", "attempt_nr", "failed_attempt", "keep_track", "first_event",
                "job_id", "created_at", "last_attempt_at")


def attemptable() -> Any:
    """Records a job may still take: attempts and failures left."""
    return and_(or_(files.c.max_attempt.is_(None), files.c.attempt_nr < files.c.max_attempt),
                or_(files.c.max_failure.is_(None), files.c.failed_attempt < files.c.max_failure))


def claim_files(conn: Connection, dataset_id: int, limit: int, after_id: int = 0) -> list[Row]:
    """Up to `limit` ready, attemptable records of a dataset with ids above `after_id`, lowest first,
    held for this transaction.

    `after_id` lets a generator start where its previous chunk left off: on PostgreSQL the claim index
    still holds an entry for every record an earlier chunk moved to running until vacuum removes it,
    and a scan from the dataset's first id walked all of them again at every chunk (the last chunks of
    a 1M-file task took 1.6-2.2x the first).

    PostgreSQL locks them and skips rows another transaction holds (SKIP LOCKED), so two generators never
    read the same record; SQLite's BEGIN IMMEDIATE makes the transaction the only writer. They are
    written only when they go into a job (`start_files`, guarded by `status = 'ready'`).
    """
    if limit <= 0:
        return []
    query = (select(*CLAIM_COLUMNS).where(files.c.dataset_id == dataset_id, files.c.status == FileStatus.READY.value, attemptable(),
                                          files.c.id > after_id)
             .order_by(files.c.id).limit(limit).with_for_update(skip_locked=True))
    return conn.execute(query).all()


def read_files(conn: Connection, dataset_id: int, limit: int) -> list[Row]:
    """Records of a many-time secondary (nosplit, repeat, reusable, many_time): read, never claimed."""
    return list(conn.execute(select(*CLAIM_COLUMNS).where(files.c.dataset_id == dataset_id, files.c.status != FileStatus.LOST.value)
                             .order_by(files.c.id).limit(limit)))


#: The tables whose ids `reserve_ids` hands out ahead of a bulk insert, by name: jobs and file records.
ID_TABLES = {"jobs": jobs, "files": files}


def reserve_ids(conn: Connection, table_name: str, count: int) -> list[int]:
    """Ids for `count` new rows of `table_name` (one of ID_TABLES), known before the insert (no INSERT ...
    RETURNING on the bulk path).

    PostgreSQL draws them from the table's sequence; on SQLite the transaction holds the write lock
    (BEGIN IMMEDIATE), so max(id) + 1 ... cannot collide.
    """
    table = ID_TABLES[table_name]
    if count <= 0:
        return []
    if conn.dialect.name == "postgresql":
        return list(conn.exec_driver_sql(f"SELECT nextval('{table.name}_id_seq') FROM generate_series(1, %s)", (count,)).scalars())
    start = conn.execute(select(func.coalesce(func.max(table.c.id), 0))).scalar_one() + 1
    return list(range(start, start + count))


def next_task_job_index(conn: Connection, task_id: int) -> int:
    return conn.execute(select(func.coalesce(func.max(jobs.c.task_job_index), 0)).where(jobs.c.task_id == task_id)).scalar_one() + 1


def write_jobs(conn: Connection, job_rows: Sequence[tuple], job_file_rows: Sequence[tuple], output_rows: Sequence[tuple],
               seed_rows: Sequence[tuple], retry_rows: Sequence[dict[str, Any]]) -> None:
    insert_tuples(conn, jobs, JOB_COLUMNS, job_rows)
    insert_tuples(conn, job_files, JOB_FILE_COLUMNS, job_file_rows)
    insert_tuples(conn, files, OUTPUT_COLUMNS, output_rows)
    insert_tuples(conn, files, SEED_COLUMNS, seed_rows)
    if retry_rows:
        conn.execute(job_retry_history.insert(), list(retry_rows))


def start_used_files(conn: Connection, first_job_id: int, last_job_id: int, now: datetime) -> int:
    """Every claimed record that went into one of the new jobs gets that job -- one UPDATE.

    The job-file rows in the id range were written by this transaction, so the join names exactly
    the records just claimed (and the tracked secondaries); no indexed column changes here.
    """
    return conn.execute(
        update(files)
        .where(files.c.id == job_files.c.file_id, job_files.c.job_id.between(first_job_id, last_job_id),
               files.c.status == FileStatus.RUNNING.value)
        .values(job_id=job_files.c.job_id, last_attempt_at=now)
    ).rowcount


def start_files(conn: Connection, rows: Sequence[tuple[int, datetime, str, int]]) -> None:
    """The records that went into new jobs become `running` with their job -- the one write of each
    record, set-based (store.set_based), guarded by `status = 'ready'`. Each row is (job id, now,
    'running', file id). A record that is not ready any more means another writer took it: the lease
    was lost, and the chunk rolls back."""
    moved = update_from_rows(conn, files, ("job_id", "last_attempt_at", "status"), ("id",), rows,
                             guard=f"files.status = '{FileStatus.READY.value}'")
    if moved != len(rows):
        raise LeaseLost(f"{len(rows) - moved} of the chunk's input records were taken by another writer meanwhile")


def start_seeds(conn: Connection, assignments: Sequence[tuple[int, int]]) -> None:
    """Released seeds reused by new jobs: (file id, job id)."""
    if assignments:
        moved = conn.execute(update(files).where(files.c.id == _bind("file_id"), files.c.status == FileStatus.READY.value)
                             .values(status=FileStatus.RUNNING.value, job_id=_bind("job")),
                             [{"file_id": file_id, "job": job_id} for file_id, job_id in assignments]).rowcount
        if moved != len(assignments):
            # only the holder of the task's lease generates its jobs: another writer means the lease was lost
            raise LeaseLost("a released random seed was taken by another job meanwhile")


def count_new_seeds(conn: Connection, dataset_id: int, n_new: int, now: datetime) -> None:
    """New seed records are files of the random-seed dataset, released at once (their use is counted
    with the other records the jobs took, `add_used`)."""
    if n_new:
        conn.execute(update(datasets).where(datasets.c.id == dataset_id)
                     .values(n_files=datasets.c.n_files + n_new, n_files_to_be_used=datasets.c.n_files_to_be_used + n_new, modified_at=now))


def add_used(conn: Connection, deltas: dict[int, int], now: datetime) -> None:
    for dataset_id, delta in deltas.items():
        if delta:
            conn.execute(update(datasets).where(datasets.c.id == dataset_id)
                         .values(n_files_used=datasets.c.n_files_used + delta, modified_at=now))


def advance_serials(conn: Connection, next_serials: Sequence[tuple[int, int]]) -> None:
    for template_id, serial in next_serials:
        conn.execute(update(output_templates).where(output_templates.c.id == template_id).values(serial_nr=serial))


def released_seeds(conn: Connection, dataset_id: int, limit: int) -> tuple[list[Row], int | None]:
    """Ready seeds (released by failed jobs), lowest first, and the largest seed ever issued."""
    ready = list(conn.execute(select(files.c.id, files.c.first_event, files.c.attempt_nr).where(
        files.c.dataset_id == dataset_id, files.c.status == FileStatus.READY.value).order_by(files.c.first_event).limit(limit)))
    largest = conn.execute(select(func.max(files.c.first_event)).where(files.c.dataset_id == dataset_id)).scalar()
    return ready, largest


def _bind(name: str) -> Any:
    return bindparam(name)


# --------------------------------------------------------------------------------------- reading

def get_job(conn: Connection, job_id: int | None = None, task_id: int | None = None, index: int | None = None) -> Row | None:
    if job_id is not None:
        return conn.execute(select(jobs).where(jobs.c.id == job_id)).first()
    return conn.execute(select(jobs).where(jobs.c.task_id == task_id, jobs.c.task_job_index == index)).first()


def job_id_at(conn: Connection, task_id: int, index: int) -> int | None:
    """The id of job INDEX of a task (`12.3`), or None."""
    return conn.execute(select(jobs.c.id).where(jobs.c.task_id == task_id, jobs.c.task_job_index == index)).scalar()


def files_of_job(conn: Connection, job_id: int) -> list[Row]:
    """A job's files as they are now: the job-file row (what the job was given) joined to its file
    record, whose status, attempt, size and checksum move on after generation (a report, a retry);
    the job-file's own values stand in where no record exists."""
    jf, record = job_files.c, files.c
    return list(conn.execute(
        select(jf.type, jf.lfn, datasets.c.name.label("dataset"), jf.dataset_id, jf.file_id,
               func.coalesce(record.status, jf.status).label("status"),
               func.coalesce(record.attempt_nr, jf.attempt_nr).label("attempt_nr"),
               jf.attempt_nr.label("job_attempt_nr"),
               func.coalesce(record.size, jf.size).label("size"),
               func.coalesce(record.checksum, jf.checksum).label("checksum"),
               func.coalesce(record.guid, jf.guid).label("guid"), jf.scope, jf.destination,
               record.job_id.label("record_job_id"))
        .select_from(job_files.outerjoin(files, files.c.id == jf.file_id).outerjoin(datasets, datasets.c.id == jf.dataset_id))
        .where(jf.job_id == job_id).order_by(jf.id)))


def list_jobs(conn: Connection, task_id: int | None = None, status: Sequence[str] = (), site: str | None = None, limit: int = 100) -> list[Row]:
    query = select(jobs).order_by(jobs.c.id.desc()).limit(limit)
    if task_id is not None:
        query = query.where(jobs.c.task_id == task_id)
    if status:
        query = query.where(jobs.c.status.in_(list(status)))
    if site:
        query = query.where(jobs.c.site == site)
    return list(conn.execute(query))


def unfinished_job_ids(conn: Connection, task_id: int) -> list[int]:
    return list(conn.execute(select(jobs.c.id).where(jobs.c.task_id == task_id, jobs.c.status.notin_([s.value for s in JOB_FINAL]))
                             .order_by(jobs.c.id)).scalars())


def sites_with_activated_jobs(conn: Connection) -> list[str]:
    return list(conn.execute(select(jobs.c.site).where(jobs.c.status == JobStatus.ACTIVATED.value, jobs.c.site.is_not(None))
                             .distinct().order_by(jobs.c.site)).scalars())


def input_events(conn: Connection, job_ids: Sequence[int]) -> dict[int, int]:
    """Events each job processes: those of its master input (the event range of a range record, else
    the file's events). Secondary inputs (pile-up, minbias) add none. A merge job's master is the
    unmerged log, which has no events: it counts the events of one stream it merges (every stream
    carries the same events, so summing them would count each event once per stream)."""
    events = func.coalesce(files.c.end_event - files.c.start_event + 1, files.c.n_events, 0)
    is_master = datasets.c.master_id.is_(None)
    per_stream: dict[int, tuple[int, int]] = {}  # job -> (master events, most events of one other stream)
    for part in slices(sorted(job_ids)):
        rows = conn.execute(
            select(job_files.c.job_id, job_files.c.dataset_id, is_master.label("master"), func.sum(events))
            .join(files, files.c.id == job_files.c.file_id).join(datasets, datasets.c.id == job_files.c.dataset_id)
            .where(job_files.c.job_id.in_(list(part)), job_files.c.type == "input")
            .group_by(job_files.c.job_id, job_files.c.dataset_id, datasets.c.master_id))
        for job_id, _dataset_id, master, total in rows:
            master_events, stream_events = per_stream.get(job_id, (0, 0))
            if master:
                master_events += int(total or 0)
            else:
                stream_events = max(stream_events, int(total or 0))
            per_stream[job_id] = (master_events, stream_events)
    return {job_id: master_events or stream_events for job_id, (master_events, stream_events) in per_stream.items()}


EXPIRY_COLUMNS = (jobs.c.id, jobs.c.status, jobs.c.current_priority, jobs.c.site, jobs.c.created_at, jobs.c.modified_at,
                  jobs.c.state_changed_at, jobs.c.started_at, jobs.c.heartbeat_at, jobs.c.prod_source_label, jobs.c.sub_status)


def expiry_candidates(conn: Connection, state_cutoffs: dict[str, datetime], *, heartbeat_cutoff: datetime, started_cutoff: datetime,
                      limit: int) -> list[Row]:
    """Live jobs that may have expired: in a state since before its cutoff, silent since before the
    heartbeat cutoff (starting, running), or running since before the started cutoff."""
    silent = func.coalesce(jobs.c.heartbeat_at, jobs.c.state_changed_at) < heartbeat_cutoff
    clauses = [and_(jobs.c.status == status, jobs.c.state_changed_at < cutoff) for status, cutoff in state_cutoffs.items()]
    clauses.append(and_(jobs.c.status == JobStatus.STARTING.value, silent))
    clauses.append(and_(jobs.c.status == JobStatus.RUNNING.value, or_(silent, jobs.c.started_at < started_cutoff)))
    return list(conn.execute(select(*EXPIRY_COLUMNS).where(or_(*clauses)).order_by(jobs.c.id).limit(limit)))


def site_timeout_facts(conn: Connection, names: set[str | None]) -> dict[str, dict[str, Any]]:
    """Per site: its attributes (transtimehi/transtimelo) and when a job last started there."""
    wanted = sorted(name for name in names if name)
    found: dict[str, dict[str, Any]] = {}
    for part in slices(wanted):
        for name, attributes in conn.execute(select(sites.c.name, sites.c.attributes).where(sites.c.name.in_(list(part)))):
            found[name] = {"attributes": attributes or {}, "last_job_start": None}
        for name, started in conn.execute(select(jobs.c.site, func.max(jobs.c.started_at)).where(jobs.c.site.in_(list(part)))
                                          .group_by(jobs.c.site)):
            if name in found:
                found[name]["last_job_start"] = started
    return found


def count_by_status(conn: Connection, task_id: int) -> dict[str, int]:
    return dict(conn.execute(select(jobs.c.status, func.count()).where(jobs.c.task_id == task_id).group_by(jobs.c.status)).all())
