"""Named queries for ending jobs (reports, kills, timeouts) and for heartbeats, set-based per batch.

A batch locks its jobs and then their file records, both in id order (`FOR UPDATE` on PostgreSQL;
SQLite's BEGIN IMMEDIATE already holds the one write lock), reads everything it needs in a handful of
queries and writes with `executemany`: per-row statements are what made report ingestion slow in the
ORM era (performance.md). Every UPDATE keeps its guard (expected status and attempt number), and the
caller checks that each guarded statement hit exactly the rows it meant to.
"""

from __future__ import annotations

from collections import defaultdict, namedtuple
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, exists, func, insert, select, update

from jedictl.model import JobStatus
from jedictl.model.files import COUNTERS, DatasetDelta, FileRecord, FileUpdate, JobFileRecord
from jedictl.store.bulk import insert_new_returning, insert_tuples, slices, update_tuples
from jedictl.store.set_based import ids_in, update_from_rows
from jedictl.store.schema import (
    catalog_datasets,
    catalog_file_replicas,
    catalog_files,
    catalog_replicas,
    datasets,
    files,
    job_files,
    jobs,
    site_storage,
    sites,
    tasks,
)

JOB_STATE_COLUMNS = (jobs.c.id, jobs.c.task_id, jobs.c.status, jobs.c.attempt_nr, jobs.c.site, jobs.c.command_to_pilot,
                     jobs.c.core_count, jobs.c.min_ram_count, jobs.c.vo, jobs.c.prod_source_label, jobs.c.architecture,
                     jobs.c.trans_uses, jobs.c.work_queue, jobs.c.kind, jobs.c.started_at, jobs.c.ended_at, jobs.c.state_changed_at)
FILE_STATE_COLUMNS = (files.c.id, files.c.dataset_id, files.c.type, files.c.status, files.c.attempt_nr, files.c.max_attempt,
                      files.c.failed_attempt, files.c.max_failure, files.c.keep_track, files.c.n_events, files.c.start_event,
                      files.c.end_event, files.c.ram_count)
TASK_STATE_COLUMNS = (tasks.c.id, tasks.c.status, tasks.c.ram_count, tasks.c.ram_unit, tasks.c.base_ram_count, tasks.c.cpu_time,
                      tasks.c.cpu_time_unit, tasks.c.core_count, tasks.c.resource_type, tasks.c.options)
#: Job columns a final outcome writes (besides the guards).
_JOB_COLUMNS_SQL = ", ".join(column.name for column in JOB_STATE_COLUMNS)
_FILE_COLUMNS_SQL = ", ".join(column.name for column in FILE_STATE_COLUMNS)
END_COLUMNS = ("status", "sub_status", "error_source", "error_code", "error_diag", "trans_exit_code", "wall_time", "cpu_time",
               "max_pss", "max_rss", "n_events", "output_bytes", "started_at", "ended_at", "modified_at", "state_changed_at")


def _locked(conn: Connection, query: Any) -> Any:
    return query.with_for_update() if conn.dialect.name == "postgresql" else query


def lock_jobs(conn: Connection, job_ids: Iterable[int]) -> dict[int, Any]:
    return read_jobs(conn, job_ids, lock=True)


def read_jobs(conn: Connection, job_ids: Iterable[int], lock: bool = False) -> dict[int, Any]:
    found: dict[int, Any] = {}
    for part in slices(sorted(set(job_ids))):
        query = select(*JOB_STATE_COLUMNS).where(jobs.c.id.in_(list(part))).order_by(jobs.c.id)
        for row in conn.execute(_locked(conn, query) if lock else query):
            found[row.id] = row
    return found


#: A job row on the ending path as a named tuple: its fields are read a dozen times per report, and a
#: SQLAlchemy Row's attribute access costs ten times a named tuple's.
JobState = namedtuple("JobState", [column.name for column in JOB_STATE_COLUMNS])  # type: ignore[misc]
TaskState = namedtuple("TaskState", [column.name for column in TASK_STATE_COLUMNS])  # type: ignore[misc]


def lock_jobs_to_end(conn: Connection, job_ids: Iterable[int]) -> dict[int, Any]:
    """`lock_jobs` for the ending path: the same columns (times as the driver returns them -- they are
    only written back), read with the driver's own placeholders in slices, locked in id order on
    PostgreSQL (SQLite's BEGIN IMMEDIATE already holds the write lock); each row a `JobState`."""
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    make = JobState._make
    return {row[0]: make(row) for row in ids_in(conn, f"SELECT {_JOB_COLUMNS_SQL} FROM jobs WHERE id IN ({{ids}}) ORDER BY id{lock}",
                                                sorted(set(job_ids)))}


def job_files_of(conn: Connection, job_ids: Iterable[int]) -> dict[int, list[JobFileRecord]]:
    found: dict[int, list[JobFileRecord]] = defaultdict(list)
    statement = "SELECT job_id, file_id, dataset_id, lfn, type, attempt_nr FROM job_files WHERE job_id IN ({ids}) ORDER BY id"
    for job_id, file_id, dataset_id, lfn, kind, attempt in ids_in(conn, statement, sorted(set(job_ids))):
        found[job_id].append(JobFileRecord(file_id, dataset_id, lfn, kind, attempt))
    return found


def lock_files(conn: Connection, file_ids: Iterable[int]) -> dict[int, FileRecord]:
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    statement = f"SELECT {_FILE_COLUMNS_SQL} FROM files WHERE id IN ({{ids}}) ORDER BY id{lock}"
    return {file_id: FileRecord(file_id, dataset_id, kind, status, attempt_nr, max_attempt, failed_attempt, max_failure, bool(keep_track),
                                n_events, start_event, end_event, ram_count)
            for (file_id, dataset_id, kind, status, attempt_nr, max_attempt, failed_attempt, max_failure, keep_track, n_events, start_event,
                 end_event, ram_count) in ids_in(conn, statement, sorted(set(file_ids)))}


def task_states(conn: Connection, task_ids: Iterable[int]) -> dict[int, Any]:
    """Each task's `TaskState` (options decoded)."""
    ids = sorted(set(task_ids))
    return {row.id: TaskState._make(row) for part in slices(ids)
            for row in conn.execute(select(*TASK_STATE_COLUMNS).where(tasks.c.id.in_(list(part))))}


def dataset_targets(conn: Connection, dataset_ids: Iterable[int]) -> dict[int, tuple[str, str | None]]:
    """Dataset id -> (name, destination endpoint) for the outputs a batch registers."""
    ids = sorted(set(dataset_ids))
    return {row.id: (row.name, row.destination) for part in slices(ids)
            for row in conn.execute(select(datasets.c.id, datasets.c.name, datasets.c.destination).where(datasets.c.id.in_(list(part))))}


#: What a final job's row recorded of the report that ended it (compared with a second report).
RECORDED_END_COLUMNS = ("status", "error_source", "error_code", "error_diag", "trans_exit_code", "wall_time", "cpu_time",
                        "max_pss", "max_rss", "n_events", "output_bytes", "started_at", "ended_at")
_OUTPUT_TYPES = ("output", "log", "trn_output", "trn_log")


def recorded_ends(conn: Connection, job_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """For final jobs: the outcome columns of each, and under `outputs` its output files as recorded
    (lfn -> size, checksum, guid, n_events), read when a second report arrives for a job."""
    ids = sorted(set(job_ids))
    found: dict[int, dict[str, Any]] = {}
    for part in slices(ids):
        for row in conn.execute(select(jobs.c.id, *(jobs.c[name] for name in RECORDED_END_COLUMNS)).where(jobs.c.id.in_(list(part)))):
            found[row.id] = {name: row._mapping[name] for name in RECORDED_END_COLUMNS} | {"outputs": {}}
        query = (select(job_files.c.job_id, job_files.c.lfn, files.c.size, files.c.checksum, files.c.guid, files.c.n_events)
                 .join(files, files.c.id == job_files.c.file_id)
                 .where(job_files.c.job_id.in_(list(part)), job_files.c.type.in_(_OUTPUT_TYPES)))
        for row in conn.execute(query):
            if row.job_id in found:
                found[row.job_id]["outputs"][row.lfn] = {"size": row.size, "checksum": row.checksum, "guid": row.guid,
                                                         "n_events": row.n_events}
    return found


def registered_outputs(conn: Connection, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (dataset name, lfn) pairs already registered in the data catalog, of those given (read with
    the driver's placeholders: a Core IN list coerced each of a batch's thousand names)."""
    wanted = set(pairs)
    if not wanted:
        return set()
    names = sorted({name for name, _ in wanted})
    lfns = sorted({lfn for _, lfn in wanted})
    mark = "%s" if conn.dialect.name == "postgresql" else "?"
    found: set[tuple[str, str]] = set()
    for part in slices(lfns):
        statement = (f"SELECT d.name, f.lfn FROM {catalog_files.name} f JOIN {catalog_datasets.name} d ON d.id = f.dataset_id "
                     f"WHERE d.name IN ({', '.join([mark] * len(names))}) AND f.lfn IN ({', '.join([mark] * len(part))})")
        found.update((name, lfn) for name, lfn in conn.exec_driver_sql(statement, (*names, *part)).fetchall())
    return found & wanted


def write_endpoints(conn: Connection, site_names: Iterable[str]) -> dict[str, str]:
    """Each site's first write endpoint (site_storage role 'write'), where its jobs' outputs land."""
    names = sorted({name for name in site_names if name})
    found: dict[str, str] = {}
    for part in slices(names):
        for site, endpoint in conn.execute(select(site_storage.c.site, site_storage.c.endpoint).where(
                site_storage.c.site.in_(list(part)), site_storage.c.role == "write").order_by(site_storage.c.site, site_storage.c.endpoint)):
            found.setdefault(site, endpoint)
    return found


def site_row(conn: Connection, name: str | None) -> Any:
    return conn.execute(select(sites).where(sites.c.name == name)).first() if name else None


# ------------------------------------------------------------------------------------------ writes

def end_jobs(conn: Connection, rows: Sequence[Sequence[Any]]) -> int:
    """Final status and metrics, guarded by the status and attempt the decision was made on: each row
    holds the END_COLUMNS values, then the job's id, the status and the attempt it was decided on.
    One set-based UPDATE per batch; returns the jobs whose guard held."""
    return update_from_rows(conn, jobs, END_COLUMNS, ("id", "status", "attempt_nr"), rows)


def update_files(conn: Connection, updates: Sequence[FileUpdate]) -> int:
    """Apply FileUpdates with their guards; updates with the same guard and columns share one executemany."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple]] = defaultdict(list)
    columns_of: dict[tuple[str, ...], tuple[str, ...]] = {}  # the values' keys as given -> sorted (one sort per kind of update)
    for change in updates:
        values, expected = change.values, change.expected_statuses
        if type(expected) is not tuple:
            expected = tuple(expected)
        if values:
            given = tuple(values)
            extra = columns_of.get(given)
            if extra is None:
                extra = columns_of[given] = tuple(sorted(given))
            groups[(extra, expected)].append((change.status, change.attempt_nr, change.failed_attempt, *[values[key] for key in extra],
                                              change.file_id, change.expected_attempt_nr))
        else:
            groups[((), expected)].append((change.status, change.attempt_nr, change.failed_attempt, change.file_id,
                                           change.expected_attempt_nr))
    touched = 0
    for (extra, expected), rows in groups.items():
        touched += update_from_rows(conn, files, ("status", "attempt_nr", "failed_attempt", *extra), ("id", "attempt_nr"), rows,
                                    guard=_one_of("files.status", expected))
    return touched


def _one_of(column: str, values: Sequence[str]) -> str:
    """`column IN ('a', 'b')` as text: the values are the engine's own status constants, never input."""
    return f"{column} IN ({', '.join(repr(str(value)) for value in values)})"


def set_file_limits(conn: Connection, records: Sequence[FileRecord]) -> None:
    """The retry module's per-file changes (maxAttempt, ramCount), written before propagation."""
    if records:
        conn.execute(update(files).where(files.c.id == bindparam("b_id")).values(max_attempt=bindparam("max_attempt"), ram_count=bindparam("ram_count")),
                     [{"b_id": r.id, "max_attempt": r.max_attempt, "ram_count": r.ram_count} for r in records])


#: Built once: a report batch adds to a few datasets' counters, and building the expression per batch
#: cost more than running it.
_ADD_COUNTERS = update(datasets).where(datasets.c.id == bindparam("d_id")).values(
    {name: datasets.c[name] + bindparam(f"d_{name}") for name in COUNTERS} | {"modified_at": bindparam("d_now")})


def add_counters(conn: Connection, deltas: Sequence[DatasetDelta], now: datetime) -> None:
    """Relative counter changes, one row per dataset in id order (the lock order of every writer), in
    one executemany."""
    if deltas:
        conn.execute(_ADD_COUNTERS, [{"d_id": delta.dataset_id, "d_now": now, **{f"d_{name}": getattr(delta, name) for name in COUNTERS}}
                                     for delta in sorted(deltas, key=lambda d: d.dataset_id)])


def update_task(conn: Connection, task_id: int, values: Mapping[str, Any]) -> None:
    if values:
        conn.execute(update(tasks).where(tasks.c.id == task_id).values(**values))


def task_input_ram_counts(conn: Connection, task_id: int, task_ram: int | None) -> tuple[int, int]:
    """(master input files, of those with a per-file RAM above the task's) -- the 30 % rule's inputs."""
    masters = select(datasets.c.id).where(datasets.c.task_id == task_id, datasets.c.type == "input", datasets.c.master_id.is_(None))
    total = conn.execute(select(func.count()).select_from(files).where(files.c.dataset_id.in_(masters))).scalar_one()
    above = conn.execute(select(func.count()).select_from(files).where(
        files.c.dataset_id.in_(masters), files.c.ram_count > (task_ram or 0))).scalar_one()
    return total, above


def task_has_finished_jobs(conn: Connection, task_id: int) -> bool:
    return bool(conn.execute(select(exists().where(jobs.c.task_id == task_id, jobs.c.status == JobStatus.FINISHED.value))).scalar())


# --------------------------------------------------------------------------- outputs -> data catalog

def register_outputs(conn: Connection, outputs: Sequence[tuple[str, str, str | None, str | None, int | None, str | None, int | None]],
                     now: datetime) -> int:
    """Record finished outputs in the data catalog: (dataset, endpoint, lfn, guid, size, checksum, events).

    A task's output dataset becomes an open catalog dataset of the same name; each file is recorded
    with a replica at the endpoint it was written to (the dataset replica there is incomplete: other
    jobs write elsewhere), so a child task can find and feed it. Files already known are not written
    again; the count of new files tells the caller (which checked beforehand that none was known) when
    another process registered one meanwhile.
    """
    if not outputs:
        return 0
    by_dataset: dict[str, list[tuple]] = defaultdict(list)
    for row in outputs:
        by_dataset[row[0]].append(row)
    written = 0
    for name in sorted(by_dataset):
        rows = by_dataset[name]
        dataset_id = _catalog_dataset(conn, name, now)
        scope = scope_of(name)
        # INSERT ... ON CONFLICT DO NOTHING RETURNING: the new files and their ids in one round trip
        # per slice, no lookup of the known ones (those lookups were the slow part on PostgreSQL).
        ids: dict[str, int] = dict(insert_new_returning(
            conn, catalog_files, ("dataset_id", "scope", "lfn", "guid", "size", "checksum", "n_events", "created_at"),
            [(dataset_id, scope, lfn, guid, size, checksum, events, now) for _, _, lfn, guid, size, checksum, events in rows],
            ("dataset_id", "lfn"), ("lfn", "id")))
        written += len(ids)
        endpoint_of = {row[2]: row[1] for row in rows if row[1] and row[2] in ids}
        if not endpoint_of:
            continue
        for endpoint in sorted(set(endpoint_of.values())):
            present = conn.execute(select(catalog_replicas.c.complete).where(
                catalog_replicas.c.dataset_id == dataset_id, catalog_replicas.c.endpoint == endpoint)).first()
            if present is None:
                conn.execute(insert(catalog_replicas).values(dataset_id=dataset_id, endpoint=endpoint, complete=False))
        insert_tuples(conn, catalog_file_replicas, ("file_id", "endpoint"), [(ids[lfn], endpoint) for lfn, endpoint in endpoint_of.items()])
    return written


def _catalog_dataset(conn: Connection, name: str, now: datetime) -> int:
    found = conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == name)).scalar_one_or_none()
    if found is not None:
        return found
    return conn.execute(insert(catalog_datasets).values(name=name, scope=scope_of(name), kind="dataset", state="open",
                                                        attributes={"produced_by": "jedictl"}, created_at=now, modified_at=now)
                        .returning(catalog_datasets.c.id)).scalar_one()


def scope_of(dataset_name: str) -> str:
    """Rucio's convention: `user.alice.x` and `group.phys.x` -> `user.alice`/`group.phys`; else the first field."""
    parts = dataset_name.split(".")
    if parts[0] in ("user", "group") and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0]


# ---------------------------------------------------------------------------------------- heartbeats

BEAT_COLUMNS = ("status", "heartbeat_at", "modified_at", "state_changed_at", "started_at", "ended_at")


def beat_jobs(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
    """Heartbeats: new status (maybe unchanged), times; guarded by the status the decision saw."""
    return update_tuples(conn, jobs, BEAT_COLUMNS, ("id", "status"),
                         [tuple(row[name] for name in BEAT_COLUMNS) + (row["b_id"], row["b_status"]) for row in rows])


def mark_to_be_killed(conn: Connection, job_ids: Sequence[int], sub_status: str | None, now: datetime) -> int:
    """A job on a worker is stopped by its executor: the next heartbeat reply says `tobekilled`."""
    touched = 0
    for part in slices(sorted(job_ids)):
        touched += conn.execute(update(jobs).where(jobs.c.id.in_(list(part))).values(
            command_to_pilot="tobekilled", sub_status=sub_status, modified_at=now)).rowcount
    return touched
