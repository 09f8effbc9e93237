"""`jedictl jobs reassign`: move queued jobs to another site (PanDA's reassignJobs; docs/reassignment.md)."""

from __future__ import annotations

import time
from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import context


def reassign(
    ctx: typer.Context,
    job_ids: Annotated[List[str], typer.Argument(metavar="JOB...", help="Queued jobs to move: ids (4711) or TASK.INDEX (12.3).",
                                                 show_default=False)],
    site: Annotated[Optional[str], typer.Option("--site", help="Move them here (default: the best site the task's brokerage keeps "
                                                               "that holds each job's input and has room).")] = None,
    user: Annotated[Optional[str], typer.Option("--user", help="Who moves them, for the record (default: your login name).")] = None,
) -> None:
    """Move queued jobs to another site, within their task's brokerage rules.

    Only queued jobs move (activated, or assigned and waiting for input); a job an executor took
    meanwhile stays. The new site must pass every filter of the task's Job Brokerage and hold the job's
    input on a disk it reads; an assigned job becomes activated there. Each move is recorded with its
    reason (`jobs show` lists it); a job that cannot move is refused with the reason, and the command
    exits 1.
    """
    app = context(ctx)
    from jedictl.commands._agent import emit_report
    from jedictl.commands.jobs_report import _job_ids
    from jedictl.commands.submit import _login_name
    from jedictl.errors import BadInput

    if site is not None and not site.strip():
        raise BadInput("is empty (leave it out to let the brokerage choose)", "--site")
    if user is not None and not user.strip():
        raise BadInput("is empty (leave it out to use your login name)", "--user")
    ids = _job_ids(app, job_ids)
    from jedictl.engine.agent import PassReport
    from jedictl.engine.watch.reassignment import reassign_jobs

    started = time.monotonic()
    by = f"jedictl jobs reassign ({user or _login_name()})"
    items = reassign_jobs(app.store(), app.settings, list(dict.fromkeys(ids)), site.strip() if site else None, by, app.owner,
                          app.clock.now())
    summary = PassReport("reassign")
    for item in items:
        summary.add(item.pop("outcome"), **item)
    emit_report(app, summary, time.monotonic() - started, every_item=True)
    if summary.errors:
        raise typer.Exit(1)
