"""Read models for `jobs list` and `jobs show`, and the job reference syntax (4711 or 12.3)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jedictl.engine.input.fields import INT32_MAX, INT64_MAX
from jedictl.errors import BadInput, NotFound
from jedictl.model import USER_CAP, JobStatus
from jedictl.store import jobs as job_store
from jedictl.store import reassignments as reassignment_store
from jedictl.store import subjobs as subjob_store

_REFERENCE = re.compile(r"^(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True)
class JobRef:
    job_id: int | None = None
    task_id: int | None = None
    index: int | None = None

    def __str__(self) -> str:
        return str(self.job_id) if self.job_id is not None else f"{self.task_id}.{self.index}"


def parse_job_ref(text: str) -> JobRef:
    match = _REFERENCE.match(text.strip())
    if not match:
        raise BadInput("must be a job id (4711) or TASK.INDEX (12.3)", "JOB")
    first = int(match.group(1))
    # Ids are BIGINT, the task's job index an INTEGER column: a number beyond them names no job, and
    # the drivers would fail on it (OverflowError on SQLite, NumericValueOutOfRange on PostgreSQL).
    if match.group(2) is None:
        return JobRef(job_id=_bounded(first, INT64_MAX, "job id"))
    task_id = _bounded(first, INT64_MAX, "task id")
    if int(match.group(2)) == 0:
        # Ganga's dotted form "12.0" (subjob 0 of job 12): its ids count from 0, TASK.INDEX from 1, so every
        # other "12.k" would name another job in each system -- refused, not guessed (docs/subjobs.md).
        raise BadInput(f"job index must be at least 1: TASK.INDEX counts from 1, and Ganga's subjob 0 of task {task_id} is job "
                       f"{task_id}.1 (resubmit, kill and copy also take Ganga's ids as --task {task_id} --subjob 0)", "JOB")
    return JobRef(task_id=task_id, index=_bounded(int(match.group(2)), INT32_MAX, "job index"))


def _bounded(value: int, highest: int, what: str) -> int:
    if value < 1:
        raise BadInput(f"{what} must be at least 1", "JOB")
    if value > highest:
        raise BadInput(f"{what} must be at most {highest}", "JOB")
    return value


def parse_job_refs(texts: Any) -> list[JobRef]:
    """Every JOB argument of a command (ids or TASK.INDEX), checked before the store is opened."""
    return [parse_job_ref(text) for text in texts]


def resolve_job_ids(conn: Any, references: Any) -> list[int]:
    """The job ids of `references`, in order: ids as given, TASK.INDEX looked up (NotFound when no job
    has that index, so a typo never acts on nothing in silence). An unknown plain id is kept: the
    command reports it per job, as it always has."""
    ids = []
    for reference in references:
        if reference.job_id is not None:
            ids.append(reference.job_id)
            continue
        job_id = job_store.job_id_at(conn, reference.task_id, reference.index)
        if job_id is None:
            raise NotFound(f"job {reference} does not exist")
        ids.append(job_id)
    return ids


def job_summary(row: Any) -> dict[str, Any]:
    return {"job_id": row.id, "task_job": f"{row.task_id}.{row.task_job_index}", "task_id": row.task_id, "status": row.status,
            "site": row.site, "priority": row.current_priority, "attempt_nr": row.attempt_nr, "cores": row.core_count,
            "ram_mb": row.min_ram_count, "scout": row.is_scout, "kind": row.kind, "modified_at": row.modified_at}


def job_details(conn: Any, reference: JobRef) -> dict[str, Any]:
    row = job_store.get_job(conn, reference.job_id, reference.task_id, reference.index)
    if row is None:
        raise NotFound(f"job {reference} does not exist")
    details = {**job_summary(row), **{key: getattr(row, key) for key in (
        "sub_status", "max_attempt", "assigned_priority", "cloud", "nucleus", "work_queue", "gshare", "resource_type",
        "prod_source_label", "processing_type", "transformation", "job_parameters", "architecture", "container_name", "max_walltime",
        "max_disk_count", "executor", "command_to_pilot", "trans_exit_code", "error_source", "error_code", "error_diag", "wall_time",
        "cpu_time", "max_pss", "max_rss", "n_events", "output_bytes", "created_at", "state_changed_at", "dispatched_at", "started_at",
        "ended_at", "heartbeat_at")}}
    details["throttled_because"] = throttled_because(row.status, row.sub_status)
    details["resubmitted_at"] = subjob_store.resubmitted_at(conn, row.id)  # `jobs resubmit` (docs/subjobs.md), else null
    details["files"] = [job_file(f, row.id) for f in job_store.files_of_job(conn, row.id)]
    # Why the job is where it is: every move to another site, with its reason (docs/reassignment.md).
    details["moves"] = [dict(move._mapping) for move in reassignment_store.moves_of(conn, row.id)]
    return details


def throttled_because(status: str, sub_status: str | None) -> str | None:
    """Why a throttled job is not handed out, and what lets it go (None for a job not throttled)."""
    if status != JobStatus.THROTTLED.value:
        return None
    if sub_status == USER_CAP:
        return ("its user (or working group) reached the running-jobs cap (user_caps); `jedictl watch` activates it again below "
                "user_caps.release_fraction of the cap (`jedictl explain task` gives the figures)")
    return "its task is paused; `jedictl task resume` activates it"


def job_file(f: Any, job_id: int) -> dict[str, Any]:
    """One file of a job as it is now (status, attempt, size, checksum of its record), with the attempt
    the job was given (`job_attempt_nr`) and, for an input the job no longer holds (it was retried),
    the job that holds it now (`now_in_job`)."""
    moved_on = f.type in ("input", "pseudo_input") and f.record_job_id is not None and f.record_job_id != job_id
    return {"type": f.type, "lfn": f.lfn, "status": f.status, "attempt_nr": f.attempt_nr, "job_attempt_nr": f.job_attempt_nr,
            "size": f.size, "checksum": f.checksum, "guid": f.guid, "scope": f.scope, "dataset": f.dataset, "dataset_id": f.dataset_id,
            "file_id": f.file_id, "destination": f.destination, "now_in_job": f.record_job_id if moved_on else None}
