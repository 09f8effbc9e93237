"""What a build job's end does to the run jobs waiting for it (docs/build-jobs.md).

Run jobs at a site wait `defined` for the site's lib file. Once their build job's report has been
applied, the lib file is `finished` (built) or `failed`/`cancelled`; this step then
- releases the run jobs waiting for a built lib file: `defined -> activated` (or `assigned` when they
  also wait for input to be transferred), guarded by `defined`;
- closes the run jobs waiting for a lib file that will never be built, through the one path that
  ends jobs (engine.jobs.outcomes): their input goes back to the pool with an attempt used, and the
  next generate pass makes a new build job at the site;
- breaks a task still scouting whose build jobs failed three times (engine.task.build.build_verdict):
  `tobroken`, which the finalize pass ends as `broken`.

It runs right after every batch of reports (`ingest_reports`: `jobs report`, `simulate`, `pilot`)
and again in every watch pass. Each action is guarded and idempotent, so a process killed between a
build job's report and this step leaves nothing the next report or watch pass does not finish.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.jobs.outcomes import Ending, end_jobs_safely, kill_jobs
from jedictl.engine.task.build import UPSTREAM_FAILED, build_verdict
from jedictl.model import FileStatus, JobStatus, TaskStatus
from jedictl.store import builds as build_store
from jedictl.store import tasks as task_store

BY = "jedictl build jobs"
#: The kill code of jobs of a task broken by its build jobs (PanDA's "killed by JEDI": cancelled).
KILLED_BY_JEDI = 50
#: Lib files looked at per call.
LIMIT = 10_000


def settle_builds(store: Any, settings: Settings, now: datetime, limit: int = LIMIT) -> list[dict[str, Any]]:
    """Release or close the run jobs whose build job ended; break the tasks the seed's rule breaks.
    One item per action: {"action": "activate" | "build_failed" | "broken_by_build" | "killed_by_build", ...}."""
    items: list[dict[str, Any]] = []
    with store.read() as conn:
        libs = {row.file_id: row for row in build_store.waiting_libs(conn, limit)}
        waiting = build_store.jobs_waiting_for(conn, list(libs)) if libs else []
    built = [w for w in waiting if libs[w.file_id].status == FileStatus.FINISHED.value]
    lost = [w for w in waiting if libs[w.file_id].status != FileStatus.FINISHED.value]
    if built:
        with store.begin() as conn:
            moved = set(build_store.release_jobs(conn, [w.job_id for w in built if not w.transfer], JobStatus.ACTIVATED.value, now))
            moved |= set(build_store.release_jobs(conn, [w.job_id for w in built if w.transfer], JobStatus.ASSIGNED.value, now))
        items.extend({"action": "activate", "job_id": w.job_id, "site": libs[w.file_id].site,
                      "reason": f"its site's lib file (record {w.file_id}) is built"} for w in built if w.job_id in moved)
    if lost:
        source, code, diag = UPSTREAM_FAILED
        endings = [Ending(w.job_id, JobStatus.CLOSED.value, expected_status=JobStatus.DEFINED.value,
                          error=(source, code, f"{diag} (lib file record {w.file_id} at {libs[w.file_id].site})")) for w in lost]
        for result in end_jobs_safely(store, endings, settings, now):
            if result.outcome == "applied":
                items.append({"action": "build_failed", "job_id": result.job_id, "site": libs[_lib_of(lost, result.job_id)].site,
                              "reason": "closed: its site's build job failed; its input goes back to the pool"})
    items.extend(_break_tasks(store, settings, now))
    return items


def _lib_of(waiting: list[Any], job_id: int) -> int:
    return next(w.file_id for w in waiting if w.job_id == job_id)


def _break_tasks(store: Any, settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """Scouting tasks whose build jobs failed three times -> tobroken (seed 000, "Broken tasks"), and the
    live jobs of a task broken so are killed (queued ones end now, those on workers at their next
    heartbeat); finalize ends the task `broken` once none is live. Both steps are looked at again on
    every call, so a process stopped between them leaves nothing undone."""
    items = []
    with store.read() as conn:
        candidates = build_store.tasks_with_failed_builds(conn, [TaskStatus.SCOUTING.value, TaskStatus.TOBROKEN.value])
        counts = build_store.failed_builds(conn, candidates)
    broken = []
    for task_id, (n_failed, status) in sorted(counts.items()):
        if status == TaskStatus.TOBROKEN.value:
            broken.append(task_id)
            continue
        verdict = build_verdict(status, n_failed)
        if verdict is None:
            continue
        new, reason = verdict
        with store.begin() as conn:
            if task_store.change_status(conn, task_id, new, [status], reason, BY, now, error_dialog=reason):
                items.append({"action": "broken_by_build", "task_id": task_id, "reason": reason})
                broken.append(task_id)
    if broken:
        with store.read() as conn:
            live = build_store.live_job_ids(conn, broken)
        for task_id, job_ids in sorted(live.items()):
            for result in kill_jobs(store, job_ids, settings, now, code=KILLED_BY_JEDI, killed_by="JEDI"):
                if result.outcome in ("killed", "tobekilled"):
                    items.append({"action": "killed_by_build", "task_id": task_id, "job_id": result.job_id, "reason": result.reason})
    return items
