"""Named operations behind Ganga's subjob operations on jedictl's jobs (docs/subjobs.md): the jobs a
task's bulk resubmission looks at, one job's row and input records as a resubmission judges them, the
record that makes a job resubmitted at most once, and the guarded reset of its inputs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, exists, select
from sqlalchemy.exc import IntegrityError

from jedictl.store.bulk import insert_tuples, slices, update_tuples
from jedictl.store.schema import datasets, files, job_files, job_resubmissions, jobs

#: Job statuses a job is resubmitted from: it failed, or it was killed (by a person or by the system).
RESUBMITTABLE = ("failed", "cancelled", "closed")
INPUT_TYPES = ("input", "pseudo_input")

JOB_COLUMNS = (jobs.c.id, jobs.c.task_id, jobs.c.task_job_index, jobs.c.status, jobs.c.kind, jobs.c.attempt_nr, jobs.c.vo,
               jobs.c.prod_source_label, jobs.c.architecture, jobs.c.trans_uses, jobs.c.work_queue, jobs.c.core_count,
               jobs.c.min_ram_count, jobs.c.max_pss, jobs.c.n_events, jobs.c.error_source, jobs.c.error_code, jobs.c.error_diag,
               jobs.c.trans_exit_code)


def read_job(conn: Connection, job_id: int) -> Any:
    """The job as a resubmission judges it, with `resubmitted_at` when it already was (else None)."""
    return read_jobs(conn, [job_id]).get(job_id)


def read_jobs(conn: Connection, job_ids: Sequence[int]) -> dict[int, Any]:
    """`read_job` for many jobs, by id (ids of no job are absent)."""
    found: dict[int, Any] = {}
    for part in slices(sorted(set(job_ids))):
        for row in conn.execute(select(*JOB_COLUMNS, job_resubmissions.c.resubmitted_at)
                                .outerjoin(job_resubmissions, job_resubmissions.c.job_id == jobs.c.id)
                                .where(jobs.c.id.in_(list(part)))):
            found[row.id] = row
    return found


def job_inputs(conn: Connection, job_id: int) -> list[Any]:
    """The job's input records as they are now: the attempt the job used (`job_attempt_nr`), the record's
    status, attempts and the job that holds it last (`last_job_id`), in record-id order."""
    return inputs_of_jobs(conn, [job_id]).get(job_id, [])


def inputs_of_jobs(conn: Connection, job_ids: Sequence[int]) -> dict[int, list[Any]]:
    """`job_inputs` of many jobs, by job id."""
    found: dict[int, list[Any]] = {}
    for part in slices(sorted(set(job_ids))):
        query = (select(job_files.c.job_id, files.c.id, files.c.dataset_id, files.c.type, files.c.status, files.c.attempt_nr,
                        files.c.max_attempt, files.c.failed_attempt, files.c.max_failure, files.c.keep_track, files.c.lfn,
                        files.c.job_id.label("last_job_id"), job_files.c.attempt_nr.label("job_attempt_nr"), datasets.c.master_id)
                 .select_from(job_files.join(files, files.c.id == job_files.c.file_id).join(datasets, datasets.c.id == files.c.dataset_id))
                 .where(job_files.c.job_id.in_(list(part)), job_files.c.type.in_(INPUT_TYPES))
                 .order_by(files.c.id))
        for row in conn.execute(query):
            found.setdefault(row.job_id, []).append(row)
    return found


def resubmittable_jobs(conn: Connection, task_id: int) -> list[int]:
    """A task's failed subjobs, Ganga's `j.resubmit()` set, in TASK.INDEX order: normal jobs that failed or
    were killed, not resubmitted yet, holding at least one input record whose attempts ran out with
    them (`failed`, with the job as its last). The resubmission checks each job whole."""
    lost_input = exists(select(files.c.id).where(files.c.job_id == jobs.c.id, files.c.status == "failed",
                                                 files.c.type.in_(INPUT_TYPES), files.c.task_id == task_id))
    done = exists(select(job_resubmissions.c.job_id).where(job_resubmissions.c.job_id == jobs.c.id))
    return list(conn.execute(
        select(jobs.c.id).where(jobs.c.task_id == task_id, jobs.c.kind == "normal", jobs.c.status.in_(RESUBMITTABLE), lost_input, ~done)
        .order_by(jobs.c.task_job_index)
    ).scalars())


RESUBMISSION_COLUMNS = ("job_id", "task_id", "job_status", "task_status", "n_files", "resubmitted_by", "resubmitted_at")


def record_resubmissions(conn: Connection, rows: Sequence[Sequence[Any]]) -> bool:
    """The jobs' resubmission rows (tuples in RESUBMISSION_COLUMNS order), in one bulk insert; False when
    one of the jobs already has one (another command resubmitted it, maybe at this very moment: the
    primary key decides, on both backends) -- nothing is written then. A savepoint keeps the caller's
    transaction usable after the refused INSERT."""
    try:
        with conn.begin_nested():
            insert_tuples(conn, job_resubmissions, RESUBMISSION_COLUMNS, rows)
    except IntegrityError:
        return False
    return True


def reset_inputs(conn: Connection, changes: Sequence[tuple[int, int, int, dict[str, Any]]]) -> int:
    """(job id, file id, attempt number the record is at, new values): each record goes back to the pool
    only if it is still `failed` at that attempt with that job as its last -- the guard that keeps a record
    from being given back twice. Changes with the same columns share one executemany. Returns how many
    records changed (the caller refuses the whole batch on fewer)."""
    groups: dict[tuple[str, ...], list[tuple]] = defaultdict(list)
    for job_id, file_id, attempt_nr, values in changes:
        names = tuple(sorted(values))
        groups[names].append(tuple(values[name] for name in names) + (file_id, attempt_nr, job_id))
    return sum(update_tuples(conn, files, names, ("id", "attempt_nr", "job_id"), rows, guard="status = 'failed'")
               for names, rows in groups.items())


def resubmitted_at(conn: Connection, job_id: int) -> Any:
    """When the job was resubmitted (`jobs show`), else None."""
    return conn.execute(select(job_resubmissions.c.resubmitted_at).where(job_resubmissions.c.job_id == job_id)).scalar()

