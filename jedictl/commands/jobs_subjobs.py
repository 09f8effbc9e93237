"""`jedictl jobs resubmit|copy`: Ganga's subjob operations on a task's jobs (docs/subjobs.md)."""

from __future__ import annotations

import time
from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import AppContext, context

KeepGoingOpt = Annotated[bool, typer.Option(
    "--keep-going/--no-keep-going",
    help="Ganga's keep_going: try every job and list the failures (default), or stop at the first failure, name it and "
         "leave the jobs after it alone.")]
SubjobOpt = Annotated[Optional[List[int]], typer.Option(
    "--subjob", min=0, metavar="K",
    help="Ganga's 0-based subjob id of the task named by --task (repeatable): subjob K is job TASK.(K+1).", show_default=False)]


def resubmit(
    ctx: typer.Context,
    job_ids: Annotated[Optional[List[str]], typer.Argument(metavar="[JOB]...", help="Jobs to resubmit: ids (4711) or TASK.INDEX (12.3).",
                                                           show_default=False)] = None,
    task_id: Annotated[Optional[int], typer.Option("--task", help="Every failed subjob of this task (with --subjob: those subjobs).")] = None,
    subjobs: SubjobOpt = None,
    keep_going: KeepGoingOpt = True,
    user: Annotated[Optional[str], typer.Option("--user", help="Who resubmits, for the record (default: your login name).")] = None,
) -> None:
    """Resubmit failed or killed jobs: their input gets one more attempt, and the next generate makes the new jobs.

    A job is resubmitted once, from failed, cancelled or closed, when the automatic retry gave up on its
    input (every input record failed with it as the last job) and no no_retry rule matches its error. A job
    of a finished or failed task reopens the task (to ready) in the same transaction; when none of the jobs
    is resubmitted the task keeps its status. --task alone takes the task's failed subjobs in TASK.INDEX
    order. Exit 1 when a job was refused.
    """
    app = context(ctx)
    from jedictl.commands._agent import emit_report, publish_events
    from jedictl.commands.submit import _login_name
    from jedictl.engine.agent import PassReport
    from jedictl.engine.commando.subjobs import resubmit_jobs, task_resubmittable

    ids = subjob_ids(app, job_ids, task_id, subjobs)
    if task_id is not None and not subjobs:
        ids += task_resubmittable(app.store(), task_id)
    started = time.monotonic()
    results = resubmit_jobs(app.store(), list(dict.fromkeys(ids)), app.settings, app.clock.now(), by=user or _login_name(),
                            keep_going=keep_going)
    summary = PassReport("resubmit")
    for result in results:
        item = result.as_item()
        summary.add(item.pop("outcome"), **item)
    emit_report(app, summary, time.monotonic() - started, every_item=True)
    if any(result.outcome == "resubmitted" for result in results):
        publish_events(app)
    if summary.errors:
        raise typer.Exit(1)


def subjob_ids(app: AppContext, job_ids: Optional[List[str]], task_id: Optional[int], subjobs: Optional[List[int]]) -> list[int]:
    """The ids of JOB arguments and of --task T --subjob K (Ganga's subjob K of T is T.(K+1)), checked
    before anything is written: a malformed reference, or a TASK.INDEX naming no job, exits 2."""
    from jedictl.commands.jobs_report import _job_ids
    from jedictl.engine.commando.subjob_rules import subjob_index
    from jedictl.engine.views.jobs import JobRef, resolve_job_ids
    from jedictl.errors import BadInput

    if subjobs and task_id is None:
        raise BadInput("--subjob K is Ganga's subjob id within a task: name the task with --task", "--subjob")
    if not job_ids and task_id is None:
        raise BadInput("name the jobs (JOB... or --task ID)", "JOB")
    ids = _job_ids(app, job_ids or [])
    if subjobs:
        with app.store().read() as conn:
            ids += resolve_job_ids(conn, [JobRef(task_id=task_id, index=subjob_index(k)) for k in subjobs])
    return ids


def copy(
    ctx: typer.Context,
    job: Annotated[Optional[str], typer.Argument(metavar="[JOB]", help="The job to copy: an id (4711) or TASK.INDEX (12.3).",
                                                 show_default=False)] = None,
    task_id: Annotated[Optional[int], typer.Option("--task", help="With --subjob: the task of Ganga's subjob id.")] = None,
    subjob: Annotated[Optional[int], typer.Option("--subjob", min=0, metavar="K",
                                                  help="Ganga's 0-based subjob id within --task: job TASK.(K+1).")] = None,
) -> None:
    """Print a new task that runs this job's input files alone, to edit and submit (Ganga's subjob copy).

    The document is the task's own as it was submitted (jedictl spec or PanDA task parameters), with the
    master input restricted to the job's files (`files`), no parent, and the task name and the output
    and log datasets suffixed with .copy<TASK>_<INDEX>. It is printed as JSON (-o yaml: YAML); nothing
    is written: `jedictl jobs copy 12.3 | jedictl submit -` submits it as it is.
    """
    app = context(ctx)
    from jedictl.engine.commando.subjobs import copy_job
    from jedictl.errors import BadInput

    if job is not None and (task_id is not None or subjob is not None):
        raise BadInput("name the job once: JOB, or --task ID --subjob K", "JOB")
    if job is None and (task_id is None or subjob is None):
        raise BadInput("name the job to copy: JOB, or --task ID --subjob K", "JOB")
    (job_id,) = subjob_ids(app, [job] if job is not None else None, task_id, [subjob] if subjob is not None else None)
    document = copy_job(app.store(), job_id)
    from jedictl.output import render

    # A document to submit, not rows to read: JSON unless YAML is asked for (a table would not submit).
    render(document, "yaml" if app.output == "yaml" else "json")
