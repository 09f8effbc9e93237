"""Named operations behind lost-file recovery (docs/recovery.md; seed 000 "Lost file recovery"): files
declared lost in the data catalog, the jobs that produced them and their inputs, the recovery tasks
`jedictl recover-lost` writes (a copy of the producing task's datasets, templates and job parameters,
with one file record per input of each job to re-run) and the replacements their jobs registered.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Connection, Row, and_, func, insert, select, update

from jedictl.model import TASK_FINAL, FileStatus, TaskStatus
from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.schema import (
    catalog_container_members, catalog_datasets, catalog_files, datasets, files, job_files, job_param_templates, jobs, output_templates,
    recovered_files, recoveries, task_params, tasks,
)
from jedictl.store.tasks import record_status

LOST = "lost"
AVAILABLE = "available"
#: Output datasets whose files a task registers in the data catalog.
OUTPUT_TYPES = ("output", "log")
INPUT_TYPES = ("input", "pseudo_input")
_FINAL = [status.value for status in TASK_FINAL]
#: The split rule GB value of recovery tasks: only a change of boundary (the job they re-run) ends a job.
GROUP_BOUNDARY = 3


# ------------------------------------------------------------------------------------ data catalog

def catalog_dataset(conn: Connection, name: str, *, lock: bool = False) -> Row | None:
    """The catalog dataset of this name; `lock`: its row held until the transaction ends (PostgreSQL;
    SQLite's write transaction already serialises), so two recoveries of one dataset run one after
    the other."""
    query = select(catalog_datasets.c.id, catalog_datasets.c.name, catalog_datasets.c.kind).where(catalog_datasets.c.name == name)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).first()


def availability(conn: Connection, dataset_id: int, lfns: Sequence[str]) -> dict[str, str]:
    """lfn -> availability, for those of `lfns` that the catalog dataset holds."""
    found: dict[str, str] = {}
    for part in slices(sorted(set(lfns))):
        found.update(conn.execute(select(catalog_files.c.lfn, catalog_files.c.availability).where(
            catalog_files.c.dataset_id == dataset_id, catalog_files.c.lfn.in_(list(part)))).all())
    return found


def lost_files(conn: Connection, dataset_id: int) -> list[str]:
    return list(conn.execute(select(catalog_files.c.lfn).where(
        catalog_files.c.dataset_id == dataset_id, catalog_files.c.availability == LOST).order_by(catalog_files.c.lfn)).scalars())


def mark_lost(conn: Connection, dataset_id: int, lfns: Sequence[str]) -> int:
    """Declare files lost (only those still available); returns how many changed."""
    changed = 0
    for part in slices(sorted(set(lfns))):
        changed += conn.execute(update(catalog_files).where(
            catalog_files.c.dataset_id == dataset_id, catalog_files.c.lfn.in_(list(part)), catalog_files.c.availability == AVAILABLE)
            .values(availability=LOST)).rowcount
    return changed


def lost_among(conn: Connection, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Of (dataset or container name, lfn) pairs, those lost in the catalog -> the name of the catalog
    dataset that holds the lost file (a container's member)."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for name, lfn in pairs:
        by_name[name].add(lfn)
    found: dict[tuple[str, str], str] = {}
    member = catalog_datasets.alias("member")
    for name, lfns in sorted(by_name.items()):
        row = conn.execute(select(catalog_datasets.c.id, catalog_datasets.c.kind).where(catalog_datasets.c.name == name)).first()
        if row is None:
            continue
        if row.kind == "container":
            holders = dict(conn.execute(select(member.c.id, member.c.name).join(
                catalog_container_members, catalog_container_members.c.dataset_id == member.c.id)
                .where(catalog_container_members.c.container_id == row.id)).all())
        else:
            holders = {row.id: name}
        if not holders:
            continue
        for part in slices(sorted(lfns)):
            for dataset_id, lfn in conn.execute(select(catalog_files.c.dataset_id, catalog_files.c.lfn).where(
                    catalog_files.c.dataset_id.in_(list(holders)), catalog_files.c.lfn.in_(list(part)),
                    catalog_files.c.availability == LOST)):
                found[(name, lfn)] = holders[dataset_id]
    return found


# --------------------------------------------------------------------------------- who made them

def producers(conn: Connection, dataset_name: str, lfns: Sequence[str]) -> dict[str, Row]:
    """lfn -> the newest finished output record of that name in a task dataset called `dataset_name`,
    with the job that wrote it and its task: what a recovery re-runs."""
    found: dict[str, Row] = {}
    query_columns = (files.c.id.label("record_id"), files.c.lfn, files.c.task_id, files.c.dataset_id, files.c.out_job_id.label("job_id"),
                     datasets.c.stream_name, datasets.c.type.label("dataset_type"), datasets.c.template_id, datasets.c.attributes,
                     jobs.c.kind.label("job_kind"), tasks.c.status.label("task_status"))
    for part in slices(sorted(set(lfns))):
        rows = conn.execute(
            select(*query_columns).join(datasets, datasets.c.id == files.c.dataset_id).join(jobs, jobs.c.id == files.c.out_job_id)
            .join(tasks, tasks.c.id == files.c.task_id)
            .where(datasets.c.name == dataset_name, datasets.c.type.in_(OUTPUT_TYPES), files.c.lfn.in_(list(part)),
                   files.c.status == FileStatus.FINISHED.value)
            .order_by(files.c.id))
        for row in rows:
            found[row.lfn] = row  # the newest wins
    return found


def job_outputs(conn: Connection, job_ids: Sequence[int]) -> list[Row]:
    """The finished output and log records the jobs registered: (job id, dataset name, stream, lfn, record id)."""
    found: list[Row] = []
    for part in slices(sorted(set(job_ids))):
        found += conn.execute(
            select(files.c.out_job_id.label("job_id"), datasets.c.name.label("dataset_name"), datasets.c.stream_name, files.c.lfn,
                   files.c.id.label("record_id"))
            .join(datasets, datasets.c.id == files.c.dataset_id)
            .where(files.c.out_job_id.in_(list(part)), datasets.c.type.in_(OUTPUT_TYPES), files.c.status == FileStatus.FINISHED.value)
            .order_by(files.c.id)).all()
    return found


def job_inputs(conn: Connection, job_ids: Sequence[int]) -> list[Row]:
    """Every input record the jobs read, with the job id and its dataset's name, type and master."""
    found: list[Row] = []
    for part in slices(sorted(set(job_ids))):
        found += conn.execute(
            select(job_files.c.job_id, files, datasets.c.name.label("dataset_name"), datasets.c.type.label("dataset_type"),
                   datasets.c.master_id)
            .join(files, files.c.id == job_files.c.file_id).join(datasets, datasets.c.id == files.c.dataset_id)
            .where(job_files.c.job_id.in_(list(part)), job_files.c.type.in_(INPUT_TYPES))
            .order_by(job_files.c.job_id, files.c.id)).all()
    return found


def live_writers(conn: Connection, names: Sequence[str]) -> list[Row]:
    """Tasks not ended that write an output or log dataset of one of these names: (task id, status, name)."""
    found: list[Row] = []
    for part in slices(sorted(set(names))):
        found += conn.execute(
            select(tasks.c.id, tasks.c.status, datasets.c.name).join(datasets, datasets.c.task_id == tasks.c.id)
            .where(datasets.c.name.in_(list(part)), datasets.c.type.in_(OUTPUT_TYPES), tasks.c.status.notin_(_FINAL))
            .distinct().order_by(tasks.c.id)).all()
    return found


# ------------------------------------------------------------------------------------ recoveries

def covering(conn: Connection, dataset_name: str, lfns: Sequence[str]) -> dict[str, dict[str, Any]]:
    """lfn -> the recovery that already takes care of it: a recovery task not ended, or one whose job
    registered a replacement (`replacement` set). Failed, broken or aborted recoveries cover nothing."""
    found: dict[str, dict[str, Any]] = {}
    for part in slices(sorted(set(lfns))):
        rows = conn.execute(
            select(recovered_files.c.id, recovered_files.c.task_id, recovered_files.c.lfn, recovered_files.c.stream_name,
                   recovered_files.c.original_job_id, tasks.c.status)
            .join(tasks, tasks.c.id == recovered_files.c.task_id)
            .where(recovered_files.c.dataset_name == dataset_name, recovered_files.c.lfn.in_(list(part)))
            .order_by(recovered_files.c.id)).all()
        replaced = replacements(conn, rows_as_keys(rows, dataset_name))
        for row in rows:
            replacement = replaced.get(row.id)
            if row.status not in _FINAL or replacement is not None:
                found[row.lfn] = {"task_id": row.task_id, "status": row.status, "replacement": replacement}
    return found


def rows_as_keys(rows: Iterable[Any], dataset_name: str | None = None) -> list[tuple[int, int, str, str, int]]:
    """(recovered_files id, task id, dataset name, stream, original job id) of recovered_files rows."""
    return [(row.id, row.task_id, dataset_name or row.dataset_name, row.stream_name, row.original_job_id) for row in rows]


def replacements(conn: Connection, keys: Sequence[tuple[int, int, str, str, int]]) -> dict[int, str]:
    """recovered_files id -> the lfn of its replacement: the finished output of the recovery task, in the
    dataset of that name and that stream, written by the job that re-ran the original job (its input
    records carry the original job's id as their boundary)."""
    if not keys:
        return {}
    by_task: dict[int, list[tuple[int, str, str, int]]] = defaultdict(list)
    for key_id, task_id, name, stream, job_id in keys:
        by_task[task_id].append((key_id, name, stream, job_id))
    out, read = files.alias("out"), files.alias("read")
    found: dict[int, str] = {}
    for task_id, wanted in by_task.items():
        rows = conn.execute(
            select(datasets.c.name, datasets.c.stream_name, read.c.boundary_id, out.c.lfn)
            .select_from(out.join(datasets, datasets.c.id == out.c.dataset_id)
                         .join(job_files, and_(job_files.c.job_id == out.c.out_job_id, job_files.c.type.in_(INPUT_TYPES)))
                         .join(read, read.c.id == job_files.c.file_id))
            .where(out.c.task_id == task_id, out.c.status == FileStatus.FINISHED.value, datasets.c.type.in_(OUTPUT_TYPES),
                   read.c.boundary_id.is_not(None))
            .distinct()).all()
        made = {(row.name, row.stream_name, row.boundary_id): row.lfn for row in rows}
        for key_id, name, stream, job_id in wanted:
            if (name, stream, job_id) in made:
                found[key_id] = made[(name, stream, job_id)]
    return found


def recovered_by_task(conn: Connection, task_ids: Sequence[int]) -> dict[int, list[Row]]:
    found: dict[int, list[Row]] = defaultdict(list)
    for part in slices(sorted(set(task_ids))):
        for row in conn.execute(select(recovered_files).where(recovered_files.c.task_id.in_(list(part))).order_by(recovered_files.c.id)):
            found[row.task_id].append(row)
    return found


def recovery_of(conn: Connection, task_id: int) -> Row | None:
    return conn.execute(select(recoveries).where(recoveries.c.task_id == task_id)).first()


def recoveries_of(conn: Connection, original_task_id: int) -> list[Row]:
    """The recovery tasks made for an original task: (task id, status, dataset name, created at)."""
    return conn.execute(select(recoveries.c.task_id, tasks.c.status, recoveries.c.dataset_name, recoveries.c.created_at)
                        .join(tasks, tasks.c.id == recoveries.c.task_id)
                        .where(recoveries.c.original_task_id == original_task_id).order_by(recoveries.c.task_id)).all()


def serial_starts(conn: Connection, names: Sequence[str]) -> dict[tuple[str, str], int]:
    """(dataset name, stream) -> the next serial number no task has handed out for it yet."""
    found: dict[tuple[str, str], int] = {}
    for part in slices(sorted(set(names))):
        for name, stream, serial in conn.execute(
                select(datasets.c.name, output_templates.c.stream_name, func.max(output_templates.c.serial_nr))
                .join(datasets, datasets.c.id == output_templates.c.dataset_id)
                .where(datasets.c.name.in_(list(part))).group_by(datasets.c.name, output_templates.c.stream_name)):
            found[(name, stream)] = int(serial)
    return found


# ----------------------------------------------------------------------------------------- writes

#: Task columns a recovery task does not copy from the task it recovers.
_NOT_COPIED = {"id", "name", "unique_name_key", "status", "old_status", "error_dialog", "parent_id", "attempt_nr", "num_throttled",
               "throttle_reason", "lease_owner", "lease_expires_at", "created_at", "modified_at", "state_changed_at", "started_at",
               "ended_at", "frozen_at", "wait_until", "assessed_at", "scouts_done", "notified_for", "notify_attempts", "notify_channels",
               "notify_error", "notify_claimed_until", "options"}
_DATASET_NOT_COPIED = {"id", "task_id", "master_id", "provenance_id", "template_id", "status", "state_checked_at", "created_at",
                       "modified_at", "n_files", "n_files_to_be_used", "n_files_used", "n_files_finished", "n_files_failed",
                       "n_files_on_hold", "n_files_missing", "n_events", "n_events_to_be_used", "n_events_used"}
_RECORD_COLUMNS = ("task_id", "dataset_id", "lfn", "guid", "scope", "size", "checksum", "type", "status", "attempt_nr", "max_attempt",
                   "failed_attempt", "max_failure", "keep_track", "n_events", "start_event", "end_event", "first_event", "boundary_id",
                   "lumi_block_nr", "created_at")


def insert_recovery_task(
    conn: Connection, original_task_id: int, *, name: str, options: Mapping[str, Any], document: Mapping[str, Any], status: str,
    parent_id: int | None, reason: str, by: str, now: datetime, dataset_name: str, params_format: str,
) -> int:
    """The recovery task's row, parameters, recovery relation and history, copied from the original task."""
    original = conn.execute(select(tasks).where(tasks.c.id == original_task_id)).one()._mapping
    values = {key: value for key, value in original.items() if key not in _NOT_COPIED}
    values.update(name=name, options=dict(options), status=TaskStatus.REGISTERED.value, parent_id=parent_id, attempt_nr=0,
                  scouts_done=True, notify_attempts=0, created_at=now, modified_at=now, state_changed_at=now)
    task_id = conn.execute(insert(tasks).values(**values).returning(tasks.c.id)).scalar_one()
    conn.execute(insert(task_params).values(task_id=task_id, format=params_format, document=dict(document), unknown_keys=[]))
    conn.execute(insert(recoveries).values(task_id=task_id, original_task_id=original_task_id, dataset_name=dataset_name,
                                           requested_by=by, created_at=now))
    record_status(conn, task_id, TaskStatus.REGISTERED, None, reason, by, now)
    if status != TaskStatus.REGISTERED.value:
        conn.execute(update(tasks).where(tasks.c.id == task_id).values(status=status))
        record_status(conn, task_id, status, TaskStatus.REGISTERED.value, reason, by, now)
    return task_id


def copy_datasets(conn: Connection, original_task_id: int, task_id: int, serials: Mapping[tuple[str, str], int], now: datetime,
                  ) -> dict[int, int]:
    """The original task's datasets (counters zero), output templates (serial numbers after every one
    handed out for that dataset and stream) and job-parameter templates; returns old -> new dataset id."""
    rows = conn.execute(select(datasets).where(datasets.c.task_id == original_task_id).order_by(datasets.c.id)).all()
    ids: dict[int, int] = {}
    ready = ("input", "pseudo_input", "random_seed")
    for row in rows:
        values = {key: value for key, value in row._mapping.items() if key not in _DATASET_NOT_COPIED}
        values.update(task_id=task_id, status="ready" if row.type in ready else "defined", created_at=now, modified_at=now,
                      master_id=ids.get(row.master_id) if row.master_id else None,
                      template_id=ids.get(row.template_id) if row.template_id else None)
        ids[row.id] = conn.execute(insert(datasets).values(**values).returning(datasets.c.id)).scalar_one()
    for row in rows:
        if row.provenance_id and row.provenance_id in ids:
            conn.execute(update(datasets).where(datasets.c.id == ids[row.id]).values(provenance_id=ids[row.provenance_id]))
    names = {row.id: row.name for row in rows}
    templates = conn.execute(select(output_templates).where(output_templates.c.task_id == original_task_id).order_by(output_templates.c.id)).all()
    for t in templates:
        start = max(t.serial_nr, serials.get((names[t.dataset_id], t.stream_name), t.serial_nr))
        conn.execute(insert(output_templates).values(
            task_id=task_id, dataset_id=ids[t.dataset_id], filename_template=t.filename_template, serial_nr=start,
            max_serial_nr=t.max_serial_nr, stream_name=t.stream_name, out_type=t.out_type, source_name=t.source_name))
    for kind, template in conn.execute(select(job_param_templates.c.kind, job_param_templates.c.template).where(
            job_param_templates.c.task_id == original_task_id)):
        conn.execute(insert(job_param_templates).values(task_id=task_id, kind=kind, template=template))
    return ids


def insert_records(conn: Connection, task_id: int, records: Sequence[Mapping[str, Any]], ids: Mapping[int, int], now: datetime) -> None:
    """One `ready` record per input the re-run jobs read (in job order, so each job's records are
    consecutive), its boundary the original job; the datasets' counters follow."""
    rows = [(task_id, ids[r["dataset_id"]], r["lfn"], r["guid"], r["scope"], r["size"], r["checksum"], r["type"], FileStatus.READY.value,
             0, r["max_attempt"], 0, r["max_failure"], r["keep_track"], r["n_events"], r["start_event"], r["end_event"], r["first_event"],
             r["job_id"], r["lumi_block_nr"], now) for r in records]
    insert_tuples(conn, files, _RECORD_COLUMNS, rows)
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        if r["keep_track"]:
            events = (r["end_event"] - r["start_event"] + 1) if r["start_event"] is not None else (r["n_events"] or 0)
            counts[ids[r["dataset_id"]]][0] += 1
            counts[ids[r["dataset_id"]]][1] += events
    for dataset_id, (n, events) in sorted(counts.items()):
        conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(
            n_files=n, n_files_to_be_used=n, n_events=events, n_events_to_be_used=events, modified_at=now))


def insert_recovered(conn: Connection, task_id: int, rows: Sequence[tuple[str, str, str, int, int]]) -> None:
    """(dataset name, lfn, stream, original job id, original record id) of each lost file the task makes again."""
    insert_tuples(conn, recovered_files, ("task_id", "dataset_name", "lfn", "stream_name", "original_job_id", "original_record_id"),
                  [(task_id, *row) for row in rows])


def waiting_inputs(conn: Connection, task_id: int) -> list[Row]:
    """A recovery task's input records with their dataset's name (what the gate checks against the catalog)."""
    return conn.execute(select(files.c.id, files.c.lfn, datasets.c.name.label("dataset_name"))
                        .join(datasets, datasets.c.id == files.c.dataset_id)
                        .where(files.c.task_id == task_id, datasets.c.type.in_(INPUT_TYPES)).order_by(files.c.id)).all()


def replace_records(conn: Connection, changes: Sequence[tuple[int, str, str]]) -> int:
    """Input records (id, dataset name, old lfn) that read a lost file read its replacement (new lfn,
    with the catalog's guid, size, checksum and events) instead. Returns the records changed."""
    changed = 0
    for record_id, catalog_name, new_lfn in changes:
        holder = conn.execute(select(catalog_files.c.guid, catalog_files.c.scope, catalog_files.c.size, catalog_files.c.checksum).join(catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id)
                              .where(catalog_datasets.c.name == catalog_name, catalog_files.c.lfn == new_lfn)).first()
        values = {"lfn": new_lfn}
        if holder is not None:
            values.update(guid=holder.guid, scope=holder.scope, size=holder.size, checksum=holder.checksum)
        changed += conn.execute(update(files).where(files.c.id == record_id, files.c.status == FileStatus.READY.value).values(**values)).rowcount
    return changed
