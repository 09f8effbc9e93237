"""The jumbo watchdog, a step of the watch pass (seed 000 "Jumbo jobs and co-jumbo jobs", "Jumbo job
switcher"; docs/event-service.md): jumbo jobs switched on and off per task (engine.watch.jumbo_policy),
the jumbo jobs of the tasks that have them made at the jumbo sites, and co-jumbo jobs whose ranges are
all done (by jumbo jobs) ended without waiting for an executor -- they go `merging` with their ES merge
job, or fail when every range failed for good. One transaction per task switched, per jumbo job made;
the co-jumbo jobs end through the report path (engine.jobs.outcomes), guarded by the status they were
found in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterator

from jedictl.config import Settings
from jedictl.engine.jobs.outcomes import Ending, end_jobs_safely, kill_jobs
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.watch.jumbo_policy import JumboTask, jumbo_sites_for, switch
from jedictl.model import TASK_FOR_JOB_GENERATOR
from jedictl.store import events as event_store


def jumbo_step(store: Any, settings: Settings, now: datetime) -> Iterator[dict[str, Any]]:
    jumbo = settings.jumbo
    with store.read() as conn:
        remaining = event_store.remaining_events(conn)
        rows = event_store.jumbo_tasks(conn, list(remaining))
    live_tasks = [row for row in rows if row.status in TASK_FOR_JOB_GENERATOR]
    tasks = [JumboTask(row.id, remaining.get(row.id, 0), row.current_priority or 0, row.use_jumbo,
                       options_from_dict(row.options or {}).n_jumbo_jobs, bool(row.site)) for row in live_tasks]
    enabled = {task.id for task in tasks if task.use_jumbo}
    for decision in switch(tasks, jumbo):
        with store.begin() as conn:
            event_store.set_use_jumbo(conn, decision.task_id, decision.enable, now)
        (enabled.add if decision.enable else enabled.discard)(decision.task_id)
        yield {"action": "jumbo_on" if decision.enable else "jumbo_off", "task_id": decision.task_id, "reason": decision.reason}
    if enabled:
        with store.read() as conn:
            sites = event_store.jumbo_sites(conn)
            live = event_store.live_jumbo_jobs(conn, sorted(enabled))
        by_id = {row.id: row for row in live_tasks}
        for task_id in sorted(enabled):
            options = options_from_dict(by_id[task_id].options or {})
            wanted = options.n_jumbo_jobs if options.n_jumbo_jobs is not None else jumbo.per_task
            for site in jumbo_sites_for(wanted, options.max_jumbo_per_site or jumbo.per_site, live.get(task_id, {}), sites):
                with store.begin() as conn:
                    job_id = event_store.make_jumbo_job(conn, task_id, site, now)
                if job_id is not None:
                    yield {"action": "jumbo_job", "task_id": task_id, "job_id": job_id, "reason": f"jumbo job at {site}"}
    # Queued jumbo jobs with nothing left to take (jumbo jobs off, or every range taken or done): closed,
    # as JEDI closes a task's jobs when it is almost done (kill code 55), so the task can end.
    with store.read() as conn:
        idle_jumbos = event_store.idle_jumbo_jobs(conn)
    if idle_jumbos:
        for result in kill_jobs(store, [job_id for job_id, _ in idle_jumbos], settings, now, code=55, killed_by="the jumbo watchdog"):
            if result.outcome == "killed":
                yield {"action": "jumbo_closed", "job_id": result.job_id, "reason": "no event range left for it to take"}
    # Co-jumbo jobs whose every range was done by jumbo jobs (or failed for good): ended now.
    with store.read() as conn:
        idle = event_store.cojumbos_with_nothing_to_do(conn, [row.id for row in live_tasks])
    endings = [Ending(job_id, "finished", expected_status=status) for job_id, status in idle]
    for result in end_jobs_safely(store, endings, settings, now):
        if result.outcome == "applied":
            yield {"action": "cojumbo_end", "job_id": result.job_id, "reason": f"no range left to do: {result.status} ({result.reason})"}
