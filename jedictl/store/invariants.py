"""Consistency checks over the whole store: every counter equals the rows it counts.

Used by the tests after every agent pass, by the chaos test, and by `jedictl check` for operators.
Each check returns human-readable violations; an empty list means the store is consistent.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import Connection, and_, case, exists, func, literal, or_, select

from jedictl.model import JOB_FINAL, LIB_JOB_FILE_TYPE, TASK_FINAL, USER_CAP, FileStatus, JobStatus, TaskStatus
from jedictl.model.files import is_many_time
from jedictl.store.bulk import slices
from jedictl.store.files import record_events
from jedictl.store.reassignments import broken_chains
from jedictl.store.schema import (
    catalog_container_members, catalog_datasets, catalog_files, datasets, events, files, job_files, job_retry_history, jobs, message_outbox,
    job_masks, recovered_files, task_outputs, task_splitting, task_status_history, tasks,
)
from jedictl.store import recovery as recovery_store

INPUT_TYPES = ("input", "pseudo_input", "pp_input")  # pp_input: a preprocess job's pseudo record
#: Datasets whose records jobs are split over: normal jobs' master inputs, merge jobs' unmerged logs.
MASTER_TYPES = (*INPUT_TYPES, "trn_log")
#: Jobs that take master records (merge jobs take unmerged ones).
SPLIT_KINDS = ("normal", "merge", "preprocess", "es")
#: Datasets whose records are claimed by jobs: their counters follow the records' statuses.
CLAIMED_TYPES = ("input", "pseudo_input", "random_seed", "pp_input")
#: Datasets of the files a task registers in the data catalog (lib: a build job's lib files).
CATALOG_TYPES = ("output", "log", "lib")
#: Unmerged outputs: written by jobs, then (once their producer finished) the input of merge jobs.
UNMERGED_TYPES = ("trn_output", "trn_log")
#: Records a job has taken (or that reached a final state): what n_files_used counts.
USED = (FileStatus.PICKED.value, FileStatus.RUNNING.value, FileStatus.FINISHED.value, FileStatus.FAILED.value, FileStatus.PARTIAL.value)
#: Records counted as finished: an event-service record that ended partly processed counts as one (docs/event-service.md).
FINISHED = (FileStatus.FINISHED.value, FileStatus.PARTIAL.value)
#: Unmerged records a merge job has taken, or that ended as merge inputs.
MERGE_USED = (FileStatus.PICKED.value, FileStatus.RUNNING.value, FileStatus.FINISHED.value, FileStatus.NOTMERGED.value)


def _count(condition: Any) -> Any:
    return func.sum(case((condition, 1), else_=0))


def dataset_counters(conn: Connection) -> list[str]:
    """Every dataset's counters equal the records they count, by the dataset's kind:

    - inputs (and pseudo inputs, random seeds): n_files, n_files_missing and n_events agree with the
      tracked records; used, finished and failed with their statuses; the release watermark lies
      between what was used and what exists;
    - outputs and logs: a file counts once it is registered -- n_files and n_files_finished are the
      finished records, n_files_failed the failed or cancelled ones, n_events the finished ones' events;
    - unmerged outputs: a file counts once its producer finished and released it to merge jobs
      (n_files = n_files_to_be_used); used, finished and failed follow the merge jobs' outcomes."""
    status = files.c.status
    tracked, lost = files.c.keep_track.is_(True), status == FileStatus.LOST.value
    released = files.c.boundary_id.is_not(None)
    counted = (
        select(
            files.c.dataset_id,
            _count(tracked & ~lost).label("records"),
            _count(~tracked).label("untracked"),
            _count(tracked & lost).label("lost"),
            func.sum(case((tracked & ~lost, record_events()), else_=0)).label("events"),
            _count(tracked & status.in_(USED)).label("used"),
            _count(tracked & status.in_(FINISHED)).label("finished"),
            _count(tracked & (status == FileStatus.FAILED.value)).label("failed"),
            _count(status == FileStatus.FINISHED.value).label("out_finished"),
            _count(status.in_((FileStatus.FAILED.value, FileStatus.CANCELLED.value))).label("out_failed"),
            func.sum(case((status == FileStatus.FINISHED.value, func.coalesce(files.c.n_events, 0)), else_=0)).label("out_events"),
            _count(released).label("released"),
            _count(released & status.in_(MERGE_USED)).label("merge_used"),
            _count(released & (status == FileStatus.NOTMERGED.value)).label("notmerged"),
        ).group_by(files.c.dataset_id).subquery()
    )
    names = ("records", "untracked", "lost", "events", "used", "finished", "failed", "out_finished", "out_failed", "out_events", "released",
             "merge_used", "notmerged")
    d = datasets.c
    rows = conn.execute(
        select(d.id, d.task_id, d.type, d.name, d.n_files, d.n_files_missing, d.n_events, d.n_files_to_be_used, d.n_files_used,
               d.n_files_finished, d.n_files_failed, *[func.coalesce(counted.c[name], 0).label(name) for name in names])
        .outerjoin(counted, counted.c.dataset_id == d.id).order_by(d.id))
    problems = []
    for row in rows:
        where = f"task {row.task_id} {row.type} dataset {row.id}"
        if row.type in CLAIMED_TYPES:
            if row.records == 0 and row.untracked:
                continue  # an untracked (many-time) secondary: its records are shared, not counted
            expected = {"n_files": row.records, "n_files_missing": row.lost, "n_events": row.events, "n_files_used": row.used,
                        "n_files_finished": row.finished, "n_files_failed": row.failed}
            used, to_use, n_files = row.n_files_used, row.n_files_to_be_used, row.n_files
            if not (used <= to_use <= n_files or (to_use == used and used <= n_files)):
                problems.append(f"{where}: n_files_to_be_used {to_use} outside [n_files_used {used}, n_files {n_files}]")
        elif row.type in CATALOG_TYPES:
            expected = {"n_files": row.out_finished, "n_files_finished": row.out_finished, "n_files_failed": row.out_failed,
                        "n_events": row.out_events, "n_files_used": 0, "n_files_to_be_used": 0}
        elif row.type in UNMERGED_TYPES:
            expected = {"n_files": row.released, "n_files_to_be_used": row.released, "n_files_used": row.merge_used,
                        "n_files_finished": row.finished, "n_files_failed": row.notmerged}
        else:
            problems.append(f"{where}: unknown dataset type")
            continue
        problems += [f"{where}: {name} {getattr(row, name)} but {actual} records" for name, actual in expected.items()
                     if getattr(row, name) != actual]
    return problems


def leases_of_final_tasks(conn: Connection) -> list[str]:
    rows = conn.execute(select(tasks.c.id, tasks.c.status, tasks.c.lease_owner).where(
        tasks.c.status.in_([s.value for s in TASK_FINAL]), tasks.c.lease_owner.is_not(None)))
    return [f"task {r.id} is {r.status} but leased by {r.lease_owner}" for r in rows]


def files_in_one_live_job(conn: Connection) -> list[str]:
    """No master input record is in two jobs that are not final (secondaries may be shared by design; a job
    file without a record references a file another job of a WMCore-split task holds)."""
    rows = conn.execute(
        select(job_files.c.file_id, func.count(func.distinct(job_files.c.job_id)))
        .join(jobs, jobs.c.id == job_files.c.job_id)
        .where(job_files.c.type.in_(INPUT_TYPES), job_files.c.file_id.is_not(None), jobs.c.status.notin_([s.value for s in JOB_FINAL]), jobs.c.kind.in_(SPLIT_KINDS),
               job_files.c.dataset_id.in_(select(datasets.c.id).where(datasets.c.master_id.is_(None))))
        .group_by(job_files.c.file_id).having(func.count(func.distinct(job_files.c.job_id)) > 1)
    )
    return [f"file {file_id} is in {n} live jobs" for file_id, n in rows]


def retry_history(conn: Connection) -> list[str]:
    """Every `job_retry_history` row links two jobs of its task: the old one final and older (a lower
    id: ids are drawn in creation order) than the new one, the relation `retry` or `merge`. A retry's
    new job took one of the old job's input records; a merge job reads an unmerged file the old job
    produced."""
    history = job_retry_history.c
    old, new = jobs.alias("old_job"), jobs.alias("new_job")
    taken, earlier = job_files.alias("taken"), job_files.alias("earlier")
    took_its_record = exists(select(literal(1)).select_from(taken.join(earlier, earlier.c.file_id == taken.c.file_id)).where(
        taken.c.job_id == history.new_job_id, taken.c.type.in_(INPUT_TYPES),
        earlier.c.job_id == history.old_job_id, earlier.c.type.in_(INPUT_TYPES)))
    reads_its_output = exists(select(literal(1)).select_from(taken.join(files, files.c.id == taken.c.file_id)).where(
        taken.c.job_id == history.new_job_id, taken.c.type == "input",
        or_(files.c.boundary_id == history.old_job_id, files.c.out_job_id == history.old_job_id)))
    rows = conn.execute(
        select(history.id, history.task_id, history.old_job_id, history.new_job_id, history.relation_type,
               old.c.id.label("old_found"), old.c.task_id.label("old_task"), old.c.status.label("old_status"),
               new.c.id.label("new_found"), new.c.task_id.label("new_task"), new.c.kind.label("new_kind"),
               case((history.relation_type == "retry", took_its_record), (history.relation_type == "merge", reads_its_output),
                    else_=literal(False)).label("linked"))
        .outerjoin(old, old.c.id == history.old_job_id).outerjoin(new, new.c.id == history.new_job_id)
        .where(or_(history.relation_type.notin_(("retry", "merge")), old.c.id.is_(None), new.c.id.is_(None),
                   old.c.task_id != history.task_id, new.c.task_id != history.task_id,
                   old.c.status.notin_([s.value for s in JOB_FINAL]), history.old_job_id >= history.new_job_id,
                   and_(history.relation_type == "retry", new.c.kind.notin_(("normal", "es"))),
                   and_(history.relation_type == "merge", new.c.kind != "merge"),
                   and_(history.relation_type == "retry", ~took_its_record),
                   and_(history.relation_type == "merge", ~reads_its_output)))
        .order_by(history.id)
    )
    problems = []
    for row in rows:
        where = f"retry history {row.id} ({row.relation_type} {row.old_job_id} -> {row.new_job_id}, task {row.task_id})"
        if row.relation_type not in ("retry", "merge"):
            problems.append(f"{where}: unknown relation {row.relation_type!r}")
        if row.old_found is None or row.new_found is None:
            problems.append(f"{where}: job {row.old_job_id if row.old_found is None else row.new_job_id} does not exist")
            continue
        if row.task_id not in (row.old_task, row.new_task) or row.old_task != row.new_task:
            problems.append(f"{where}: jobs of tasks {row.old_task} and {row.new_task}")
        if row.old_status not in {s.value for s in JOB_FINAL}:
            problems.append(f"{where}: old job is still {row.old_status}")
        if row.old_job_id >= row.new_job_id:
            problems.append(f"{where}: old job is not older than the new one")
        if (row.relation_type, row.new_kind) in (("retry", "merge"), ("merge", "normal")):
            problems.append(f"{where}: new job is a {row.new_kind} job")
        if row.relation_type in ("retry", "merge") and not row.linked:
            problems.append(f"{where}: " + ("new job took none of the old job's input records" if row.relation_type == "retry"
                                            else "merge job reads no file the old job produced"))
    return problems


def _master_records() -> Any:
    """Tracked records of master input datasets: what jobs are split over -- the task's master inputs,
    and the unmerged logs merge jobs are split over (each pre-merge job's log leads its outputs)."""
    return select(files.c.id).join(datasets, datasets.c.id == files.c.dataset_id).where(
        datasets.c.type.in_(MASTER_TYPES), datasets.c.master_id.is_(None), files.c.keep_track.is_(True))


def records_of_live_jobs(conn: Connection) -> list[str]:
    """Nothing is lost: a master input record that is `running` belongs to a live job that reads it, and
    every master input record a live job reads is `running` for that job. (A record left running by a
    job that ended would never be processed; a record back in the pool while its job lives would be
    processed twice.)"""
    final = [s.value for s in JOB_FINAL]
    masters = _master_records().subquery()
    reads = exists(select(literal(1)).select_from(job_files).where(job_files.c.job_id == files.c.job_id, job_files.c.file_id == files.c.id))
    orphans = conn.execute(
        select(files.c.id, files.c.task_id, files.c.job_id, jobs.c.status)
        .join(masters, masters.c.id == files.c.id).outerjoin(jobs, jobs.c.id == files.c.job_id)
        .where(files.c.status == FileStatus.RUNNING.value, (jobs.c.id.is_(None)) | jobs.c.status.in_(final) | ~reads)
        .order_by(files.c.id))
    problems = [f"task {r.task_id} record {r.id} is running but job {r.job_id} " + (
        "does not exist" if r.status is None else f"is {r.status}" if r.status in final else "does not read it") for r in orphans]
    strays = conn.execute(
        select(job_files.c.job_id, jobs.c.status.label("job_status"), files.c.id, files.c.task_id, files.c.status, files.c.job_id.label("holder"))
        .join(jobs, jobs.c.id == job_files.c.job_id).join(masters, masters.c.id == job_files.c.file_id).join(files, files.c.id == job_files.c.file_id)
        .where(jobs.c.kind.in_(SPLIT_KINDS), jobs.c.status.notin_(final), job_files.c.type.in_(INPUT_TYPES),
               ~and_(files.c.status == FileStatus.RUNNING.value, files.c.job_id == job_files.c.job_id))
        .order_by(job_files.c.job_id, files.c.id))
    problems += [f"task {r.task_id} record {r.id} is {r.status} for job {r.holder} but live job {r.job_id} ({r.job_status}) reads it"
                 for r in strays]
    return problems


def work_done_once(conn: Connection) -> list[str]:
    """Nothing is done twice: no master input record is in two finished jobs, and a finished record
    is in exactly one."""
    masters = _master_records().subquery()
    finished_jobs = (select(job_files.c.file_id, func.count(func.distinct(job_files.c.job_id)).label("n"))
                     .join(jobs, jobs.c.id == job_files.c.job_id).join(masters, masters.c.id == job_files.c.file_id)
                     .where(jobs.c.status == JobStatus.FINISHED.value, jobs.c.kind.in_(SPLIT_KINDS), job_files.c.type.in_(INPUT_TYPES))
                     .group_by(job_files.c.file_id).subquery())
    rows = conn.execute(
        select(files.c.id, files.c.task_id, files.c.status, func.coalesce(finished_jobs.c.n, 0).label("n"))
        .join(masters, masters.c.id == files.c.id).outerjoin(finished_jobs, finished_jobs.c.file_id == files.c.id)
        .where((func.coalesce(finished_jobs.c.n, 0) > 1) | (files.c.status.in_(FINISHED) & (func.coalesce(finished_jobs.c.n, 0) != 1)))
        .order_by(files.c.id))
    return [f"task {r.task_id} record {r.id} ({r.status}) is in {r.n} finished jobs" for r in rows]


#: Task statuses in which no job of the task may be live: before its first generation, and once it ended.
NO_LIVE_JOBS = (TaskStatus.REGISTERED.value, *(status.value for status in TASK_FINAL))


def live_jobs_of_ended_tasks(conn: Connection) -> list[str]:
    """No live job belongs to a task that cannot have any: one just registered, or one that ended
    (done, finished, failed, broken, aborted -- a kill with jobs still on workers waits in `toabort`).
    A status written over a task another process was generating for breaks this."""
    rows = conn.execute(
        select(tasks.c.id, tasks.c.status, func.count(jobs.c.id).label("n"), func.min(jobs.c.id).label("first"))
        .join(jobs, jobs.c.task_id == tasks.c.id)
        .where(tasks.c.status.in_(NO_LIVE_JOBS), jobs.c.status.notin_([s.value for s in JOB_FINAL]))
        .group_by(tasks.c.id, tasks.c.status).order_by(tasks.c.id))
    return [f"task {r.id} is {r.status} but {r.n} of its jobs are live (job {r.first} first)" for r in rows]


def outputs_registered_once(conn: Connection) -> list[str]:
    """No output file name is registered by two jobs, and none is silently dropped: a finished output
    or log record is the only finished record of its name in its dataset (tasks with
    allowTaskDuplication write one dataset from several tasks), and the data catalog holds it with the
    guid its job reported -- not another job's file, and not nothing."""
    out = files.alias("out")
    named = (select(datasets.c.name.label("dataset"), out.c.lfn, func.count().label("n"), func.min(out.c.out_job_id).label("first"),
                    func.max(out.c.out_job_id).label("last"))
             .join(datasets, datasets.c.id == out.c.dataset_id)
             .where(datasets.c.type.in_(CATALOG_TYPES), out.c.status == FileStatus.FINISHED.value)
             .group_by(datasets.c.name, out.c.lfn).having(func.count() > 1).order_by(datasets.c.name, out.c.lfn))
    problems = [f"output {r.lfn} of {r.dataset} was registered by {r.n} jobs ({r.first} and {r.last})" for r in conn.execute(named)]
    registered = (select(out.c.id, out.c.task_id, out.c.lfn, out.c.guid, out.c.out_job_id.label("job_id"), datasets.c.name, catalog_files.c.guid.label("catalog_guid"),
                         catalog_files.c.id.label("catalog_id"))
                  .join(datasets, datasets.c.id == out.c.dataset_id)
                  .outerjoin(catalog_datasets, catalog_datasets.c.name == datasets.c.name)
                  .outerjoin(catalog_files, (catalog_files.c.dataset_id == catalog_datasets.c.id) & (catalog_files.c.lfn == out.c.lfn))
                  .where(datasets.c.type.in_(CATALOG_TYPES), out.c.status == FileStatus.FINISHED.value,
                         catalog_files.c.id.is_(None) | (out.c.guid.is_not(None) & (catalog_files.c.guid != out.c.guid)))
                  .order_by(out.c.id))
    for r in conn.execute(registered):
        where = f"task {r.task_id} output {r.lfn} of {r.name} (job {r.job_id})"
        problems.append(f"{where} is not in the data catalog" if r.catalog_id is None
                        else f"{where}: the data catalog holds guid {r.catalog_guid}, the job reported {r.guid}")
    return problems


def inputs_of_ended_tasks(conn: Connection) -> list[str]:
    """Every input file of a task that ended `done` or `finished` is accounted for: processed, or
    failed for good (no attempt or failure left). A file still waiting to be released or retried means
    the task ended with work it never did (issue 14: `finished` at 20/40). Tasks forced to finish
    (`passed`: the finish command, the goal reached, exhausted) and tasks that failed, broke or were
    aborted say by their status why files were left."""
    last_change = (select(task_status_history.c.task_id, func.max(task_status_history.c.id).label("id"))
                   .group_by(task_status_history.c.task_id).subquery())
    ended_from = (select(task_status_history.c.task_id, task_status_history.c.previous_status)
                  .join(last_change, last_change.c.id == task_status_history.c.id).subquery())
    attempts_left = (files.c.max_attempt.is_(None) | (files.c.attempt_nr < files.c.max_attempt)) & (
        files.c.max_failure.is_(None) | (files.c.failed_attempt < files.c.max_failure))
    waiting = files.c.status.in_((FileStatus.PENDING.value, FileStatus.PICKED.value, FileStatus.RUNNING.value, FileStatus.MERGING.value)) | (
        (files.c.status == FileStatus.READY.value) & attempts_left)
    masters = _master_records().subquery()
    rows = conn.execute(
        select(tasks.c.id, tasks.c.status, func.count(files.c.id).label("n"), func.min(files.c.lfn).label("lfn"),
               func.min(files.c.status).label("file_status"))
        .join(files, files.c.task_id == tasks.c.id).join(masters, masters.c.id == files.c.id)
        .outerjoin(ended_from, ended_from.c.task_id == tasks.c.id)
        .where(tasks.c.status.in_((TaskStatus.DONE.value, TaskStatus.FINISHED.value)), waiting,
               func.coalesce(ended_from.c.previous_status, "") != TaskStatus.PASSED.value)
        .group_by(tasks.c.id, tasks.c.status).order_by(tasks.c.id))
    return [f"task {r.id} is {r.status} but {r.n} input files were never processed nor failed for good (e.g. {r.lfn}, {r.file_status})"
            for r in rows]


def assigned_jobs_await_input(conn: Connection) -> list[str]:
    """An `assigned` job waits for input on its way to its site: at least one of its input files names the
    endpoint it is transferred to (job_files.destination). One that waits for nothing would wait for
    a transfer no one asked for (watch activates it, but the generator should never write it)."""
    awaited = exists().where(job_files.c.job_id == jobs.c.id, job_files.c.type.in_(INPUT_TYPES), job_files.c.destination.is_not(None))
    rows = conn.execute(select(jobs.c.id, jobs.c.task_id).where(jobs.c.status == JobStatus.ASSIGNED.value, ~awaited).order_by(jobs.c.id))
    return [f"task {r.task_id} job {r.id} is assigned but waits for no input transfer" for r in rows]


def outputs_of_one_task(conn: Connection) -> list[str]:
    """An output dataset belongs to one task: of the tasks registered to write it that did not break,
    each but the first was submitted with allowTaskDuplication. A submission of the same outDS continues
    the task instead (docs/analysis.md, "Resubmitting with the same outDS"); only the explicit opt-out
    makes a second writer, whose jobs would otherwise be told to write the first one's file names."""
    live = tasks.c.status != TaskStatus.BROKEN.value
    shared = (select(task_outputs.c.name).join(tasks, tasks.c.id == task_outputs.c.task_id).where(live)
              .group_by(task_outputs.c.name).having(func.count() > 1))
    rows = conn.execute(select(task_outputs.c.name, tasks.c.id, tasks.c.options).join(tasks, tasks.c.id == task_outputs.c.task_id)
                        .where(live, task_outputs.c.name.in_(shared)).order_by(task_outputs.c.name, tasks.c.id))
    first: dict[str, int] = {}
    problems = []
    for row in rows:
        owner = first.setdefault(row.name, row.id)
        if owner != row.id and not (row.options or {}).get("allow_task_duplication"):
            problems.append(f"task {row.id} writes output dataset {row.name} of task {owner} without allowTaskDuplication")
    return problems


def site_datasets_in_their_container(conn: Connection) -> list[str]:
    """Output containers (docs/analysis.md): a site's dataset in a container holds only the outputs of jobs
    that ran at that site, and the data catalog has it inside the container its template names."""
    container = datasets.alias("container")
    misplaced = conn.execute(
        select(files.c.id, files.c.task_id, datasets.c.name, datasets.c.site, jobs.c.id.label("job_id"), jobs.c.site.label("job_site"))
        .join(datasets, datasets.c.id == files.c.dataset_id).join(jobs, jobs.c.id == files.c.out_job_id)
        .where(datasets.c.template_id.is_not(None), func.coalesce(jobs.c.site, "") != func.coalesce(datasets.c.site, ""))
        .order_by(files.c.id))
    problems = [f"task {r.task_id} record {r.id}: an output in {r.name}, the dataset of site {r.site}, written by job {r.job_id} at "
                f"{r.job_site}" for r in misplaced]
    catalog_container, member = catalog_datasets.alias("catalog_container"), catalog_datasets.alias("member")
    inside = exists().where(catalog_container_members.c.container_id == catalog_container.c.id,
                            catalog_container_members.c.dataset_id == member.c.id)
    outside = conn.execute(
        select(datasets.c.task_id, datasets.c.id, datasets.c.name, container.c.name.label("container"))
        .join(container, container.c.id == datasets.c.template_id)
        .outerjoin(member, member.c.name == datasets.c.name)
        .outerjoin(catalog_container, (catalog_container.c.name == container.c.name) & (catalog_container.c.kind == "container"))
        .where(or_(member.c.id.is_(None), catalog_container.c.id.is_(None), ~inside))
        .order_by(datasets.c.id))
    problems += [f"task {r.task_id} output dataset {r.id} ({r.name}) is not inside the catalog container {r.container}" for r in outside]
    return problems


def throttled_jobs_are_released(conn: Connection) -> list[str]:
    """A `throttled` job waits for someone to activate it: `task resume` for the jobs of a paused task,
    `jedictl watch` for those a user cap holds (sub_status user_cap). One of a task that is not paused
    and not held by a cap would wait for nobody -- and no timeout closes it (docs/analysis.md)."""
    rows = conn.execute(
        select(jobs.c.id, jobs.c.task_id, tasks.c.status, jobs.c.sub_status).join(tasks, tasks.c.id == jobs.c.task_id)
        .where(jobs.c.status == JobStatus.THROTTLED.value, tasks.c.status != TaskStatus.PAUSED.value,
               func.coalesce(jobs.c.sub_status, "") != USER_CAP,
               # a co-jumbo job waits while a jumbo job holds ranges of its record (docs/event-service.md)
               ~((jobs.c.sub_status == "jumbo") & _held_by_a_jumbo())).order_by(jobs.c.id))
    return [f"task {r.task_id} job {r.id} is throttled but nothing releases it (the task is {r.status}, not paused, and no user cap holds "
            f"the job)" for r in rows]


def _held_by_a_jumbo() -> Any:
    other, record = events.alias("jumbo_range"), files.alias("jumbo_record")
    return (select(other.c.id).join(record, record.c.id == other.c.file_id)
            .where(record.c.job_id == jobs.c.id, other.c.status.in_(("sent", "running", "finished", "failed")), other.c.job_id != jobs.c.id)
            .exists())


def many_time_not_consumed(conn: Connection) -> list[str]:
    """A many-time secondary is read by many jobs and consumed by none (docs/task-spec.md, "Many-time and
    one-time inputs"): none of its records is ever picked, running, finished or failed, and its dataset
    counts no file used, finished or failed. A record one job claimed would be taken from every other
    job, and counters that grow would say the input is being used up while it is not. Which datasets
    are many-time is read from their attributes (`model.files.is_many_time`), not from how their
    records are tracked: a store fed before the rule tracked some (a `repeat` or `nosplit` alone)."""
    d = datasets.c
    secondaries = conn.execute(select(d.id, d.task_id, d.attributes, d.n_files_used, d.n_files_finished, d.n_files_failed)
                               .where(d.master_id.is_not(None), d.type == "input").order_by(d.id)).all()
    many_time = {row.id: row for row in secondaries if is_many_time(row.attributes)}
    consumed = files.c.status.in_(USED)
    counted: dict[int, Any] = {}
    for part in slices(sorted(many_time)):
        for row in conn.execute(select(files.c.dataset_id, _count(consumed).label("consumed"), func.min(case((consumed, files.c.id))).label("first"))
                                .where(files.c.dataset_id.in_(part)).group_by(files.c.dataset_id)):
            counted[row.dataset_id] = row
    problems = []
    for dataset_id, row in many_time.items():
        where = f"task {row.task_id} input dataset {dataset_id}: a many-time input"
        records = counted.get(dataset_id)
        if records is not None and records.consumed:
            problems.append(f"{where} has {records.consumed} records taken by jobs as if consumed (record {records.first} first)")
        counters = {"n_files_used": row.n_files_used, "n_files_finished": row.n_files_finished, "n_files_failed": row.n_files_failed}
        problems += [f"{where} counts {name} {value}, not 0" for name, value in counters.items() if value]
    return problems


def events_of_changes(conn: Connection) -> list[str]:
    """A task event waiting to be published is the event of a status change that committed: its task has
    the history line it describes (docs/messages.md, "Task events": the event is written in the change's
    own transaction, so a change rolled back leaves no event behind)."""
    o, h = message_outbox.c, task_status_history.c
    recorded = exists(select(h.id).where(h.task_id == o.task_id, h.status == o.status, h.changed_at == o.changed_at))
    rows = conn.execute(select(o.id, o.task_id, o.status).where(~recorded).order_by(o.id).limit(100))
    return [f"task {r.task_id} event {r.id} ({r.status}) waits to be published for a status change the task's history does not hold"
            for r in rows]


def periodic_instances_once(conn: Connection) -> list[str]:
    """Never two instances of one periodic template for the same due time (docs/periodic-tasks.md: a pass
    takes a due time by moving the template's next_due_at on with one guarded UPDATE, so overlapping
    passes cannot both submit it)."""
    t = tasks.c
    twice = (select(t.periodic_id, t.periodic_due_at, func.min(t.id).label("first"), func.count().label("n"))
             .where(t.periodic_id.is_not(None)).group_by(t.periodic_id, t.periodic_due_at).having(func.count() > 1)
             .order_by(t.periodic_id, t.periodic_due_at).limit(100))
    problems = []
    for row in conn.execute(twice).all():
        others = conn.execute(select(t.id).where(t.periodic_id == row.periodic_id, t.periodic_due_at == row.periodic_due_at,
                                                 t.id != row.first).order_by(t.id)).scalars().all()
        problems += [f"task {other} is a second instance of periodic template {row.periodic_id} for its due time "
                     f"{row.periodic_due_at:%Y-%m-%dT%H:%MZ} (task {row.first} is the first)" for other in others]
    return problems


def lost_files_recovered_once(conn: Connection) -> list[str]:
    """A lost file is recovered once (docs/recovery.md): of the recovery tasks that list it, at most one
    is still to run or has registered its replacement. A second one would re-run the same job and give
    the dataset a second copy of the file -- `recover-lost` run twice, or two at once, must not."""
    rf = recovered_files.c
    twice = (select(rf.dataset_name, rf.lfn).group_by(rf.dataset_name, rf.lfn).having(func.count(func.distinct(rf.task_id)) > 1)
             .subquery())
    rows = conn.execute(select(rf.id, rf.task_id, rf.dataset_name, rf.lfn, rf.stream_name, rf.original_job_id, tasks.c.status)
                        .join(tasks, tasks.c.id == rf.task_id)
                        .join(twice, (twice.c.dataset_name == rf.dataset_name) & (twice.c.lfn == rf.lfn))
                        .order_by(rf.dataset_name, rf.lfn, rf.task_id)).all()
    replaced = recovery_store.replacements(conn, recovery_store.rows_as_keys(rows))
    final = {status.value for status in TASK_FINAL}
    takers: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        if row.status not in final or row.id in replaced:
            takers.setdefault((row.dataset_name, row.lfn), []).append(row.task_id)
    return [f"output {lfn} of {name} is recovered by tasks {', '.join(str(t) for t in ids)} at once"
            for (name, lfn), ids in takers.items() if len(ids) > 1]


def duplicate_outputs_of_ended_tasks(conn: Connection) -> list[str]:
    """No task that ended done or finished has two files for one input in an output dataset
    (docs/post-processing.md): the output check at its end removed what an earlier attempt of a retried
    job left in the catalog. Files are tied to inputs through the task's records of their names and the
    master input records of the jobs that wrote them."""
    out, entry, master = datasets.alias("out"), catalog_files.alias("entry"), datasets.alias("master")
    record, read = files.alias("record"), job_files.alias("read")
    rows = conn.execute(
        select(tasks.c.id, tasks.c.status, out.c.name, read.c.file_id, func.min(read.c.lfn).label("input_lfn"),
               func.count(func.distinct(entry.c.id)).label("n"), func.min(entry.c.lfn).label("first"), func.max(entry.c.lfn).label("last"))
        .select_from(tasks).join(out, out.c.task_id == tasks.c.id)
        .join(catalog_datasets, catalog_datasets.c.name == out.c.name)
        .join(entry, entry.c.dataset_id == catalog_datasets.c.id)
        .join(record, and_(record.c.dataset_id == out.c.id, record.c.lfn == entry.c.lfn))
        .join(read, read.c.job_id == record.c.out_job_id)
        .join(master, and_(master.c.id == read.c.dataset_id, master.c.master_id.is_(None), master.c.type.in_(MASTER_TYPES)))
        # A job file without a record is another job's record referenced (WMCore jobs sharing a file): not an input of its own.
        .where(tasks.c.status.in_((TaskStatus.DONE.value, TaskStatus.FINISHED.value)), out.c.type == "output", read.c.file_id.is_not(None))
        .group_by(tasks.c.id, tasks.c.status, out.c.name, read.c.file_id).having(func.count(func.distinct(entry.c.id)) > 1)
        .order_by(tasks.c.id, out.c.name, read.c.file_id))
    return [f"task {r.id} output dataset {r.name} holds {r.n} files for input {r.input_lfn} ({r.first} and {r.last}) "
            f"though the task is {r.status}" for r in rows]


def reassignments_chain(conn: Connection) -> list[str]:
    """A queued job moves only from where it is and never once an executor took it (docs/reassignment.md):
    each move of a job starts at the site the previous one put it, the job is at the site of its last
    move, and no executor took it before that move. Two passes moving one job at once would leave two
    moves from the same site; a move of a dispatched job, one after its dispatch."""
    problems = []
    for r in broken_chains(conn):
        where = f"task {r.task_id} job {r.job_id}: move {r.id} ({r.from_site} -> {r.to_site})"
        if r.previous_to is not None and r.previous_to != r.from_site:
            problems.append(f"{where} starts at {r.from_site}, but its previous move put the job at {r.previous_to}")
        if r.from_last == 1 and (r.job_site or "") != r.to_site:
            problems.append(f"{where} is its last, but the job is at {r.job_site}")
        if r.from_last == 1 and r.dispatched_at is not None and r.dispatched_at < r.moved_at:
            problems.append(f"{where} came after an executor took the job ({r.dispatched_at:%Y-%m-%d %H:%M:%S})")
    return problems


def event_ranges_follow_their_jobs(conn: Connection) -> list[str]:
    """Event ranges are neither lost nor processed twice (docs/event-service.md): a range an executor holds
    or has reported (sent, running, finished, failed) belongs to a dispatched live job; a range still to
    do (ready) or waiting for its merge (done) belongs to a record that has not ended; a record that
    ended finished or partial has a merged range; and an event-service job waits in `merging` only
    while an ES merge job for its record lives."""
    e = events.c
    holder = jobs.alias("holder")
    live = ("sent", "starting", "running", "holding", "transferring")
    rows = conn.execute(
        select(e.id, e.task_id, e.status, e.job_id, holder.c.status.label("job_status"))
        .outerjoin(holder, holder.c.id == e.job_id)
        .where(e.status.in_(("sent", "running", "finished", "failed")), holder.c.id.is_(None) | holder.c.status.notin_(live))
        .order_by(e.id).limit(100))
    problems = [f"task {r.task_id} event range {r.id} is {r.status} but its job {r.job_id} is {r.job_status or 'missing'}" for r in rows]
    ended = (FileStatus.FINISHED.value, FileStatus.FAILED.value, FileStatus.PARTIAL.value)
    rows = conn.execute(select(e.id, e.task_id, e.status, files.c.id.label("file_id"), files.c.status.label("file_status"))
                        .join(files, files.c.id == e.file_id)
                        .where(e.status.in_(("ready", "done")), files.c.status.in_(ended)).order_by(e.id).limit(100))
    problems += [f"task {r.task_id} record {r.file_id} is {r.file_status} but its event range {r.id} is {r.status}" for r in rows]
    merged = exists(select(literal(1)).where(e.file_id == files.c.id, e.status == "merged"))
    ranged = exists(select(literal(1)).where(e.file_id == files.c.id))
    rows = conn.execute(select(files.c.id, files.c.task_id, files.c.status)
                        .where(files.c.status.in_(FINISHED), ranged, ~merged).order_by(files.c.id).limit(100))
    problems += [f"task {r.task_id} record {r.id} is {r.status} but none of its event ranges was merged" for r in rows]
    merge_job, merge_input = jobs.alias("merge_job"), job_files.alias("merge_input")
    waiting = exists(select(literal(1)).select_from(merge_input.join(merge_job, merge_job.c.id == merge_input.c.job_id)).where(
        merge_input.c.file_id == files.c.id, merge_job.c.kind == "esmerge", merge_job.c.status.notin_([s.value for s in JOB_FINAL])))
    rows = conn.execute(select(jobs.c.id, jobs.c.task_id).join(files, files.c.job_id == jobs.c.id)
                        .where(jobs.c.kind == "es", jobs.c.status == JobStatus.MERGING.value, ~waiting).order_by(jobs.c.id).limit(100))
    problems += [f"task {r.task_id} job {r.id} is merging but no ES merge job reads its record" for r in rows]
    return problems


def resubmitted_jobs_gave_their_input_back(conn: Connection) -> list[str]:
    """A job is resubmitted at most once (`job_resubmissions` is keyed by the job), from an end that allows
    it, and its resubmission gave its input back (docs/subjobs.md): the row names a job of its task that
    is failed, cancelled or closed -- the status it records -- and none of the job's tracked input records
    is still `failed` with the job as its last (the work the resubmission promised to run again)."""
    from jedictl.store.schema import job_resubmissions

    r = job_resubmissions.c
    rows = conn.execute(
        select(r.job_id, r.task_id, r.job_status, jobs.c.id.label("found"), jobs.c.task_id.label("job_task"), jobs.c.status)
        .outerjoin(jobs, jobs.c.id == r.job_id)
        .where(or_(jobs.c.id.is_(None), jobs.c.task_id != r.task_id, jobs.c.status != r.job_status,
                   jobs.c.status.notin_(("failed", "cancelled", "closed"))))
        .order_by(r.job_id).limit(100))
    problems = []
    for row in rows:
        where = f"job {row.job_id} (task {row.task_id}) was resubmitted"
        if row.found is None:
            problems.append(f"{where} but does not exist")
        elif row.job_task != row.task_id:
            problems.append(f"{where} but belongs to task {row.job_task}")
        elif row.status not in ("failed", "cancelled", "closed"):
            problems.append(f"{where} but is {row.status}: only a failed or killed job is resubmitted")
        else:
            problems.append(f"{where} as {row.job_status} but is {row.status}")
    kept = conn.execute(
        select(r.job_id, r.task_id, func.count(files.c.id), func.min(files.c.id))
        .join(files, and_(files.c.job_id == r.job_id, files.c.task_id == r.task_id))
        .where(files.c.status == FileStatus.FAILED.value, files.c.keep_track.is_(True), files.c.type.in_(INPUT_TYPES))
        .group_by(r.job_id, r.task_id).order_by(r.job_id).limit(100))
    problems += [f"job {job_id} (task {task_id}) was resubmitted but {n} of its input records (record {first} first) are still failed "
                 "with it as their last job" for job_id, task_id, n, first in kept]
    return problems


CHECKS = (dataset_counters, leases_of_final_tasks, files_in_one_live_job, retry_history, records_of_live_jobs, work_done_once,
          live_jobs_of_ended_tasks, outputs_registered_once, inputs_of_ended_tasks, assigned_jobs_await_input, outputs_of_one_task,
          site_datasets_in_their_container, throttled_jobs_are_released, many_time_not_consumed, events_of_changes,
          periodic_instances_once, lost_files_recovered_once, duplicate_outputs_of_ended_tasks)


def run_jobs_wait_for_their_build(conn: Connection) -> list[str]:
    """A run job of a task that ships sources reads its site's lib file (job file type `lib`) and is not
    dispatched before that file is built (docs/build-jobs.md): a run job past `defined` -- activated,
    handed out, running or ended -- references a lib file its build job finished, of its own site, and
    its build job is of the same task. Only a run job closed or cancelled while waiting may reference a
    lib file that was never built."""
    lib = files.alias("lib")
    built_at = datasets.alias("lib_dataset")
    waited = (JobStatus.DEFINED.value, JobStatus.CLOSED.value, JobStatus.CANCELLED.value)
    rows = conn.execute(
        select(jobs.c.id, jobs.c.task_id, jobs.c.status, jobs.c.site, job_files.c.file_id, lib.c.status.label("lib_status"),
               lib.c.task_id.label("lib_task"), built_at.c.site.label("lib_site"))
        .join(job_files, and_(job_files.c.job_id == jobs.c.id, job_files.c.type == LIB_JOB_FILE_TYPE))
        .outerjoin(lib, lib.c.id == job_files.c.file_id)
        .outerjoin(built_at, built_at.c.id == lib.c.dataset_id)
        .order_by(jobs.c.id))
    problems = []
    for row in rows:
        if row.lib_status is None:
            problems.append(f"task {row.task_id} job {row.id} reads lib file record {row.file_id}, which does not exist")
        elif row.lib_task != row.task_id or row.lib_site != row.site:
            problems.append(f"task {row.task_id} job {row.id} at {row.site} reads the lib file of task {row.lib_task} at {row.lib_site}")
        elif row.status not in waited and row.lib_status != FileStatus.FINISHED.value:
            problems.append(f"task {row.task_id} job {row.id} is {row.status} but its site's lib file (record {row.file_id}) is "
                            f"{row.lib_status}: a run job went ahead of its build job")
    return problems


def preprocess_job_first(conn: Connection) -> list[str]:
    """A task that asks for a preprocess job (a `pp_input` master) gets no other job before that job
    finished (docs/preprocessing.md): a job of another kind means its pp_input record is `finished`;
    and while the task waits (`topreprocess`, `preprocessing`) it has no other job at all."""
    pp = files.alias("pp")
    other = exists().where(jobs.c.task_id == tasks.c.id, jobs.c.kind != "preprocess")
    rows = conn.execute(
        select(tasks.c.id, tasks.c.status, pp.c.status.label("pp_status"))
        .join(pp, and_(pp.c.task_id == tasks.c.id, pp.c.type == "pp_input"))
        .where(other).order_by(tasks.c.id))
    problems = []
    for row in rows:
        if row.status in (TaskStatus.TOPREPROCESS.value, TaskStatus.PREPROCESSING.value) or row.pp_status != FileStatus.FINISHED.value:
            problems.append(f"task {row.id} is {row.status} with its preprocess record {row.pp_status}, yet it has jobs "
                            "other than its preprocess job")
    return problems


def workqueue_elements_follow_their_agents(conn: Connection) -> list[str]:
    """The queue layers (docs/queue-layers.md): each time an element is in the global queue it is taken by
    one agent only, the one it names; an element held (Negotiating, Acquired, Running) names an agent that
    exists, an Available one none; and its status agrees with its jobs -- no record of a block not
    released yet (Available, Negotiating, Acquired) is in a job, the jobs of a block run at sites its agent
    serves, and no record of a Done block is still waiting or running. An element re-queued after it ended
    (a retried task's) had jobs in its earlier rounds: for it, the rules on jobs hold for its live records'
    jobs (picked or running), which are all of this round's."""
    from jedictl.model import ELEMENT_HELD, ELEMENT_UNRELEASED, ElementStatus
    from jedictl.store.schema import agent_sites, agents, workqueue_elements, workqueue_history

    e, h = workqueue_elements.c, workqueue_history.c
    available = ElementStatus.AVAILABLE.value
    problems = []
    # Rounds: an element's history split at each move to Available (its creation, then each re-queue).
    history = conn.execute(select(h.element_id, h.to_status, h.agent)
                           .where(h.to_status.in_((available, ElementStatus.NEGOTIATING.value))).order_by(h.element_id, h.id))
    rounds: dict[int, list[list[str]]] = {}
    for element_id, to_status, agent in history:
        taken = rounds.setdefault(element_id, [[]])
        if to_status == available:
            if taken[-1]:
                taken.append([])
        elif agent not in taken[-1]:
            taken[-1].append(agent)
    by_element = {element_id: taken[-1] for element_id, taken in rounds.items()}  # the current round's takers
    problems += [f"work-queue element {element_id} was taken from the global queue by agents {', '.join(sorted(names))}: one agent only"
                 for element_id, taken in rounds.items() for names in taken if len(names) > 1]
    requeued = exists().where(h.element_id == e.id, h.to_status == available, h.from_status.is_not(None))
    this_round = or_(~requeued, files.c.status.in_((FileStatus.PICKED.value, FileStatus.RUNNING.value)))
    rows = conn.execute(select(e.id, e.status, e.agent, agents.c.name.label("found")).outerjoin(agents, agents.c.name == e.agent)
                        .where(or_(and_(e.status.in_(ELEMENT_HELD), agents.c.name.is_(None)),
                                   and_(e.status == ElementStatus.AVAILABLE.value, e.agent.is_not(None)))).order_by(e.id).limit(100))
    for row in rows:
        if row.status == ElementStatus.AVAILABLE.value:
            problems.append(f"work-queue element {row.id} is Available but names agent {row.agent}")
        else:
            problems.append(f"work-queue element {row.id} is {row.status} for agent {row.agent}, which does not exist")
    problems += [f"work-queue element {element_id} is held by agent {agent} but was taken by {names[0]}"
                 for element_id, agent in conn.execute(select(e.id, e.agent).where(e.status.in_(ELEMENT_HELD)).order_by(e.id))
                 if (names := by_element.get(element_id)) and len(names) == 1 and names[0] != agent]
    in_jobs = conn.execute(select(e.id, e.status, func.count(files.c.id), func.min(files.c.job_id))
                           .join(files, files.c.dataset_id == e.dataset_id)
                           .where(e.status.in_(ELEMENT_UNRELEASED), files.c.job_id.is_not(None), this_round)
                           .group_by(e.id, e.status).order_by(e.id).limit(100))
    problems += [f"work-queue element {element_id} is {status} yet {n} records of its block are in jobs (job {job} first): "
                 "only a released (Running) block gets jobs" for element_id, status, n, job in in_jobs]
    served = exists().where(agent_sites.c.agent == e.agent, agent_sites.c.site == jobs.c.site)
    elsewhere = conn.execute(select(e.id, e.agent, jobs.c.id.label("job_id"), jobs.c.site)
                             .join(files, files.c.dataset_id == e.dataset_id).join(jobs, jobs.c.id == files.c.job_id)
                             .where(e.status.in_(ELEMENT_HELD), ~served, this_round).order_by(e.id, jobs.c.id).limit(100))
    problems += [f"work-queue element {r.id}: job {r.job_id} of its block runs at {r.site}, which its agent {r.agent} does not serve"
                 for r in elsewhere]
    waiting = conn.execute(select(e.id, func.count(files.c.id)).join(files, files.c.dataset_id == e.dataset_id)
                           .where(e.status == ElementStatus.DONE.value, files.c.keep_track.is_(True),
                                  files.c.status.in_((FileStatus.READY.value, FileStatus.PICKED.value, FileStatus.RUNNING.value)))
                           .group_by(e.id).order_by(e.id).limit(100))
    problems += [f"work-queue element {element_id} is Done but {n} records of its block are still to process" for element_id, n in waiting]
    return problems


CHECKS = CHECKS + (run_jobs_wait_for_their_build, preprocess_job_first, reassignments_chain,
                    event_ranges_follow_their_jobs, resubmitted_jobs_gave_their_input_back,
                    workqueue_elements_follow_their_agents)


def wmcore_masks_within_their_files(conn: Connection) -> list[str]:
    """A WMCore job's mask lies within its files (docs/splitting.md, "WMCore splitting for real tasks"):
    its event range inside the events of one of its input records, each (run, lumi) of it among the
    runs and lumis the data catalog lists for its input files; and a job with a mask belongs to a task
    split by a WMCore algorithm."""
    masks = conn.execute(select(job_masks, task_splitting.c.algorithm)
                         .outerjoin(task_splitting, task_splitting.c.task_id == job_masks.c.task_id).order_by(job_masks.c.job_id)).all()
    if not masks:
        return []
    inputs: dict[int, list[Any]] = {}
    for chunk in slices([m.job_id for m in masks]):
        rows = conn.execute(
            select(job_files.c.job_id, job_files.c.lfn, files.c.start_event, files.c.end_event, files.c.n_events,
                   catalog_files.c.run, catalog_files.c.lumi_blocks)
            .select_from(job_files)
            .join(datasets, datasets.c.id == job_files.c.dataset_id)
            .outerjoin(files, files.c.id == job_files.c.file_id)
            .outerjoin(catalog_datasets, catalog_datasets.c.name == datasets.c.name)
            .outerjoin(catalog_files, and_(catalog_files.c.dataset_id == catalog_datasets.c.id, catalog_files.c.lfn == job_files.c.lfn))
            .where(job_files.c.job_id.in_(chunk), job_files.c.type == "input"))
        for row in rows:
            inputs.setdefault(row.job_id, []).append(row)
    problems = []
    for mask in masks:
        where = f"task {mask.task_id} job {mask.job_id}"
        if mask.algorithm is None:
            problems.append(f"{where} has a WMCore mask, but its task is not split by a WMCore algorithm")
            continue
        listed = inputs.get(mask.job_id, [])
        if mask.first_event is not None:
            last = mask.last_event if mask.last_event is not None else mask.first_event
            spans = [(r.start_event, r.end_event) if r.start_event is not None and r.end_event is not None
                     else (0, r.n_events - 1) if r.n_events else None for r in listed]
            if spans and None not in spans and not any(lo <= mask.first_event and last <= hi for lo, hi in spans):
                problems.append(f"{where}: its events {mask.first_event}-{last} lie outside its input files' events")
        if mask.lumis:
            held = {(r.run, lumi) for r in listed if r.run is not None for lumi in (r.lumi_blocks or ())}
            outside = [(int(run), lumi) for run, ranges in mask.lumis.items() for first, last in ranges for lumi in range(first, last + 1)
                       if (int(run), lumi) not in held]
            if outside:
                run, lumi = outside[0]
                problems.append(f"{where}: its mask has run {run} lumi {lumi}, which none of its input files holds")
    return problems


CHECKS = CHECKS + (wmcore_masks_within_their_files,)


def check_all(conn: Connection, *, dead_owners: Sequence[str] = (), no_live_passes: bool = False) -> list[str]:
    """Every check; with `dead_owners` or `no_live_passes` also that no task is leased by a process
    that is gone (`leases_of_dead_owners`) -- which only the caller can know."""
    return [violation["message"] for violation in check_violations(conn, dead_owners=dead_owners, no_live_passes=no_live_passes)]


#: The object a violation names, from the start of its message ("task 5 output x.root of ds (job 9)").
_OBJECT = re.compile(r"^(work-queue element \d+|retry history \d+|task \d+ \w+ dataset \d+|task \d+ record \d+|task \d+ output \S+|task \d+|file \d+|"
                     r"output \S+ of \S+)")


def check_violations(conn: Connection, *, dead_owners: Sequence[str] = (), no_live_passes: bool = False) -> list[dict[str, str]]:
    """`check_all` as objects for `jedictl check`: the check that failed, the object at fault and the message."""
    checks = list(CHECKS)
    if dead_owners or no_live_passes:
        checks.append(lambda conn: leases_of_dead_owners(conn, dead_owners, every_owner=no_live_passes))
        checks[-1].__name__ = leases_of_dead_owners.__name__
    violations = []
    for check in checks:
        for message in check(conn):
            found = _OBJECT.match(message)
            violations.append({"check": check.__name__, "object": found.group(1) if found else message.split(":")[0], "message": message})
    return violations


def leases_of_dead_owners(conn: Connection, dead_owners: Sequence[str] = (), *, every_owner: bool = False) -> list[str]:
    """No task leased by a process that is no longer alive once its passes have ended.

    A pass gives back every lease it holds when it ends, also when SIGINT or SIGTERM stops it; only a
    SIGKILLed process (or a bug) leaves one, to expire after `lease.seconds`. The store cannot tell a
    live holder from a dead one, so the caller says: `dead_owners` are lease owners (`host:pid:tag`,
    or `host:pid` for every owner of that process) known to be gone; `every_owner` means no pass is
    running anywhere, so every lease is a violation."""
    held = select(tasks.c.id, tasks.c.status, tasks.c.lease_owner, tasks.c.lease_expires_at).where(tasks.c.lease_owner.is_not(None))
    if not every_owner:
        if not dead_owners:
            return []
        held = held.where(or_(*[(tasks.c.lease_owner == owner) | tasks.c.lease_owner.startswith(owner + ":", autoescape=True)
                               for owner in dead_owners]))
    return [f"task {r.id} ({r.status}) is leased by {r.lease_owner} until {r.lease_expires_at}, a process that is no longer alive"
            for r in conn.execute(held.order_by(tasks.c.id))]


def status_history_chains(conn: Connection) -> list[str]:
    """Every task's status history is a chain: each change starts from the status the previous one
    ended in, and the last is the task's status. A status written by a process that did not hold the
    task's lease breaks it (issue 14: a history that skipped `scouting`). Not part of `check_all`
    (tests that plant statuses directly would trip it); the chaos and the overlap tests use it."""
    problems, last = [], {}
    history = select(task_status_history.c.task_id, task_status_history.c.status, task_status_history.c.previous_status,
                     task_status_history.c.changed_by).order_by(task_status_history.c.task_id, task_status_history.c.id)
    for row in conn.execute(history):
        if row.task_id in last and row.previous_status != last[row.task_id]:
            problems.append(f"task {row.task_id}: history goes {last[row.task_id]}, then {row.previous_status} -> {row.status} "
                            f"(by {row.changed_by})")
        last[row.task_id] = row.status
    for task_id, status in conn.execute(select(tasks.c.id, tasks.c.status).order_by(tasks.c.id)):
        if task_id in last and last[task_id] != status:
            problems.append(f"task {task_id} is {status} but its history ends {last[task_id]}")
    return problems


def leases_after_watch(conn: Connection, watched_at: datetime) -> list[str]:
    """After a watch pass at `watched_at`, no task holds a lease that had expired by then: the holder
    is dead (or hung) and the watchdog releases such leases. With `watched_at` past every lease's
    expiry, this says no task holds a lease at all. Not part of `check_all`: between watch passes an
    expired lease is normal."""
    rows = conn.execute(select(tasks.c.id, tasks.c.status, tasks.c.lease_owner, tasks.c.lease_expires_at)
                        .where(tasks.c.lease_owner.is_not(None),
                               (tasks.c.lease_expires_at.is_(None)) | (tasks.c.lease_expires_at <= watched_at))
                        .order_by(tasks.c.id))
    return [f"task {r.id} ({r.status}) still leased by {r.lease_owner}, expired {r.lease_expires_at}, after a watch pass at {watched_at}"
            for r in rows]
