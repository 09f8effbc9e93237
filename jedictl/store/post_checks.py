"""Named queries of the output check at the end of a task (docs/post-processing.md; JEDI's post
processor: "remove wrong files", checkDuplication_JEDI; seed 000 "Validation in post-processing phase"
and "Tasks with incomplete log datasets"): a task's output and log datasets compared with the data
catalog, the catalog files no finished record accounts for, their removal and its record.

A dataset name may be written by several tasks (allowTaskDuplication): a catalog file is accounted for
by a finished record of *any* task writing that name (`writers`). Each comparison is one statement, so
on PostgreSQL it reads one snapshot: a job report that commits meanwhile adds a finished record and its
catalog file together, and is seen with both or neither. Everything runs in the caller's transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, exists, func, literal, or_, select, union

from jedictl.model import FileStatus, JobStatus
from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.schema import (
    catalog_datasets,
    catalog_file_replicas,
    catalog_files,
    catalog_replicas,
    datasets,
    files,
    job_files,
    jobs,
    removed_outputs,
    task_outputs,
)

#: Datasets whose files a task registers in the data catalog.
CHECKED_TYPES = ("output", "log")
INPUT_TYPES = ("input", "pseudo_input")
_FINISHED = FileStatus.FINISHED.value
#: At most this many disagreements are read back for the error dialog (the count is exact).
MAX_PROBLEM_ROWS = 200


def _disagrees(record: Any, entry: Any) -> Any:
    """The catalog has no such file, or its size or checksum is not the record's."""
    return or_(entry.c.id.is_(None), entry.c.size.is_distinct_from(record.c.size),
               entry.c.checksum.is_distinct_from(record.c.checksum))


def tasks_to_check(conn: Connection, task_ids: Iterable[int]) -> set[int]:
    """Of these tasks, those whose outputs need the one-task check: a finished output or log record that
    the catalog does not hold as it was reported, or a catalog dataset of theirs whose file count is
    not the finished records of its name (a file no finished job produced, or one gone). One statement
    for the batch (the finalize batch's common path: tasks that need nothing pass in it)."""
    ids = sorted(set(task_ids))
    if not ids:
        return set()
    return set(conn.execute(_tasks_to_check_statement(), {"ids": ids}).scalars())


@lru_cache(maxsize=1)
def _tasks_to_check_statement() -> Any:
    """`tasks_to_check`'s statement, built once (its aliases' column collections cost more to build than
    the statement takes to run) with the task ids as one expanding parameter."""
    ids = bindparam("ids", expanding=True)
    d, cd = datasets.alias("d"), catalog_datasets.alias("cd")
    names = (select(d.c.task_id, d.c.name).where(d.c.task_id.in_(ids), d.c.type.in_(CHECKED_TYPES)).distinct().cte("names"))
    writers = union(select(names.c.name, names.c.task_id),
                    select(task_outputs.c.name, task_outputs.c.task_id).where(task_outputs.c.name.in_(select(names.c.name)))).cte("writers")
    w = datasets.alias("w")
    finished = (select(w.c.name, func.sum(w.c.n_files_finished).label("n"))
                .join(writers, and_(writers.c.task_id == w.c.task_id, writers.c.name == w.c.name))
                .where(w.c.type.in_(CHECKED_TYPES)).group_by(w.c.name).cte("finished"))
    catalogued = (select(cd.c.name, func.count(catalog_files.c.id).label("n"))
                  .join(catalog_files, catalog_files.c.dataset_id == cd.c.id)
                  .where(cd.c.name.in_(select(names.c.name))).group_by(cd.c.name).cte("catalogued"))
    counts = (select(names.c.task_id).join(catalogued, catalogued.c.name == names.c.name)
              .outerjoin(finished, finished.c.name == names.c.name)
              .where(catalogued.c.n != func.coalesce(finished.c.n, 0)))
    o = files.alias("o")
    entry = catalog_files.alias("entry")
    records = (select(d.c.task_id).select_from(o).join(d, d.c.id == o.c.dataset_id)
               .outerjoin(cd, cd.c.name == d.c.name)
               .outerjoin(entry, and_(entry.c.dataset_id == cd.c.id, entry.c.lfn == o.c.lfn))
               .where(d.c.task_id.in_(ids), d.c.type.in_(CHECKED_TYPES), o.c.status == _FINISHED, _disagrees(o, entry)))
    return union(counts, records)


def lock_catalog_datasets(conn: Connection, names: Iterable[str]) -> None:
    """Lock the catalog rows of these datasets until the transaction ends (PostgreSQL; SQLite's BEGIN
    IMMEDIATE holds the one write lock already), so a file added to one meanwhile waits for the check.
    FOR NO KEY UPDATE, as the final step's closing UPDATE takes anyway: `data add-files` (FOR UPDATE)
    waits, a job report registering its output (a foreign key's KEY SHARE) does not -- its record and
    its file commit together, which each single-statement comparison sees whole."""
    if conn.dialect.name != "postgresql":
        return
    for part in slices(sorted(set(names))):
        conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name.in_(list(part))).order_by(catalog_datasets.c.id)
                     .with_for_update(key_share=True)).all()


def output_names(conn: Connection, task_id: int) -> list[tuple[str, str]]:
    """(name, type) of the task's output and log datasets."""
    return [tuple(row) for row in conn.execute(
        select(datasets.c.name, datasets.c.type).where(datasets.c.task_id == task_id, datasets.c.type.in_(CHECKED_TYPES))
        .distinct().order_by(datasets.c.name))]


def writers_of(conn: Connection, task_id: int, names: Sequence[str]) -> list[int]:
    """The tasks writing any of these dataset names: this one and those registered for them."""
    found = {task_id}
    for part in slices(sorted(set(names))):
        found.update(conn.execute(select(task_outputs.c.task_id).where(task_outputs.c.name.in_(list(part)))).scalars())
    return sorted(found)


def disagreements(conn: Connection, task_id: int, limit: int = MAX_PROBLEM_ROWS) -> tuple[int, list[Any]]:
    """The task's finished output and log records the catalog does not hold as reported: their count and
    the first `limit` (dataset, lfn, size, checksum, job_id, entry_id, entry_size, entry_checksum)."""
    d, cd, o, entry = datasets.alias("d"), catalog_datasets.alias("cd"), files.alias("o"), catalog_files.alias("entry")
    base = (select(d.c.name.label("dataset"), o.c.lfn, o.c.size, o.c.checksum, o.c.out_job_id.label("job_id"),
                   entry.c.id.label("entry_id"), entry.c.size.label("entry_size"), entry.c.checksum.label("entry_checksum"))
            .select_from(o).join(d, d.c.id == o.c.dataset_id)
            .outerjoin(cd, cd.c.name == d.c.name)
            .outerjoin(entry, and_(entry.c.dataset_id == cd.c.id, entry.c.lfn == o.c.lfn))
            .where(d.c.task_id == task_id, d.c.type.in_(CHECKED_TYPES), o.c.status == _FINISHED, _disagrees(o, entry)))
    rows = list(conn.execute(base.order_by(o.c.id).limit(limit)))
    if len(rows) < limit:
        return len(rows), rows
    return conn.execute(select(func.count()).select_from(base.subquery())).scalar_one(), rows


def unaccounted(conn: Connection, names: Sequence[str], writers: Sequence[int]) -> list[Any]:
    """Files of these catalog datasets that no finished output or log record of their name accounts for
    (of the writing tasks): (dataset, entry_id, lfn, guid, size, checksum, has_replica), one statement."""
    if not names:
        return []
    cd, entry, w, o = catalog_datasets.alias("cd"), catalog_files.alias("entry"), datasets.alias("w"), files.alias("o")
    accounted = exists(select(literal(1)).select_from(w).join(o, and_(o.c.dataset_id == w.c.id, o.c.lfn == entry.c.lfn))
                       .where(w.c.name == cd.c.name, w.c.task_id.in_(list(writers)), w.c.type.in_(CHECKED_TYPES), o.c.status == _FINISHED))
    replica = or_(exists(select(literal(1)).where(catalog_file_replicas.c.file_id == entry.c.id)),
                  exists(select(literal(1)).where(catalog_replicas.c.dataset_id == cd.c.id, catalog_replicas.c.complete.is_(True))))
    query = (select(cd.c.name.label("dataset"), entry.c.id.label("entry_id"), entry.c.lfn, entry.c.guid, entry.c.size, entry.c.checksum,
                    replica.label("has_replica"))
             .join(entry, entry.c.dataset_id == cd.c.id)
             .where(cd.c.name.in_(list(names)), ~accounted).order_by(cd.c.name, entry.c.lfn))
    return list(conn.execute(query))


def attempts_of(conn: Connection, task_id: int, dataset_lfns: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Any]:
    """For (dataset, lfn) pairs: the task's record of that name, if any -- (status, job_id)."""
    found: dict[tuple[str, str], Any] = {}
    by_name: dict[str, list[str]] = defaultdict(list)
    for name, lfn in dataset_lfns:
        by_name[name].append(lfn)
    for name, lfns in by_name.items():
        ids = list(conn.execute(select(datasets.c.id).where(datasets.c.task_id == task_id, datasets.c.name == name,
                                                            datasets.c.type.in_(CHECKED_TYPES))).scalars())
        for part in slices(sorted(set(lfns))):
            for row in conn.execute(select(files.c.lfn, files.c.status, files.c.out_job_id).where(
                    files.c.dataset_id.in_(ids), files.c.lfn.in_(list(part))).order_by(files.c.id)):
                found[(name, row.lfn)] = row
    return found


def inputs_of_jobs(conn: Connection, job_ids: Iterable[int]) -> dict[int, list[tuple[int, str]]]:
    """Each job's input records: job id -> [(file id, lfn)] (inputs and pseudo inputs)."""
    found: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for part in slices(sorted(set(job_ids))):
        for row in conn.execute(select(job_files.c.job_id, job_files.c.file_id, job_files.c.lfn).where(
                job_files.c.job_id.in_(list(part)), job_files.c.type.in_(INPUT_TYPES), job_files.c.file_id.is_not(None))
                .order_by(job_files.c.id)):
            found[row.job_id].append((row.file_id, row.lfn))
    return found


def finished_outputs_of_inputs(conn: Connection, file_ids: Iterable[int]) -> dict[int, list[tuple[int, str, int]]]:
    """For input records: the outputs the finished jobs that read them produced -- file id ->
    [(job id, output lfn, output dataset id)] -- through the jobs' own file lists."""
    found: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    jf_in, jf_out = job_files.alias("jf_in"), job_files.alias("jf_out")
    for part in slices(sorted(set(file_ids))):
        query = (select(jf_in.c.file_id, jobs.c.id, jf_out.c.lfn, jf_out.c.dataset_id)
                 .select_from(jf_in).join(jobs, jobs.c.id == jf_in.c.job_id)
                 .join(jf_out, jf_out.c.job_id == jobs.c.id)
                 .where(jf_in.c.file_id.in_(list(part)), jf_in.c.type.in_(INPUT_TYPES), jobs.c.status == JobStatus.FINISHED.value,
                        jf_out.c.type.in_(CHECKED_TYPES))
                 .order_by(jobs.c.id, jf_out.c.id))
        for file_id, job_id, lfn, dataset_id in conn.execute(query):
            found[file_id].append((job_id, lfn, dataset_id))
    return found


def dataset_names(conn: Connection, dataset_ids: Iterable[int]) -> dict[int, str]:
    ids = sorted(set(dataset_ids))
    return {row.id: row.name for part in slices(ids)
            for row in conn.execute(select(datasets.c.id, datasets.c.name).where(datasets.c.id.in_(list(part))))}


# ------------------------------------------------------------------------------------------ writes

REMOVED_COLUMNS = ("task_id", "dataset_name", "lfn", "kind", "guid", "size", "checksum", "job_id", "kept_lfn", "reason", "removed_at",
                   "removed_by")


def remove_entries(conn: Connection, entry_ids: Sequence[int]) -> int:
    """Remove these files from the data catalog (their replicas go with them); returns how many went."""
    removed = 0
    for part in slices(sorted(set(entry_ids))):
        conn.execute(delete(catalog_file_replicas).where(catalog_file_replicas.c.file_id.in_(list(part))))
        removed += conn.execute(delete(catalog_files).where(catalog_files.c.id.in_(list(part)))).rowcount
    return removed


def record_removals(conn: Connection, task_id: int, rows: Sequence[Any], now: datetime, by: str) -> None:
    """One removed_outputs row per file removed: rows carry (dataset, lfn, kind, guid, size, checksum,
    job_id, kept_lfn, reason)."""
    insert_tuples(conn, removed_outputs, REMOVED_COLUMNS,
                  [(task_id, r.dataset, r.lfn, r.kind, r.guid, r.size, r.checksum, r.job_id, r.kept_lfn, r.reason, now, by) for r in rows])


def removed_of(conn: Connection, task_id: int, limit: int = 1000) -> tuple[int, list[Any]]:
    """What the output check removed from the task's datasets: the count and the first `limit` rows."""
    r = removed_outputs.c
    rows = list(conn.execute(select(removed_outputs).where(r.task_id == task_id).order_by(r.id).limit(limit)))
    if len(rows) < limit:
        return len(rows), rows
    return conn.execute(select(func.count()).where(r.task_id == task_id)).scalar_one(), rows
