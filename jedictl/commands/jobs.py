"""`jedictl jobs`: list and show jobs; dispatch, heartbeat and report them (executors); kill and resubmit them; move queued ones (reassign)."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context
from jedictl.commands.jobs_dispatch import dispatch
from jedictl.commands.jobs_events import app as events_app
from jedictl.commands.jobs_reassign import reassign
from jedictl.commands.jobs_report import heartbeat, kill, report
from jedictl.commands.jobs_subjobs import copy, resubmit
from jedictl.output import View

app = App(help="Jobs: inspect them; executors pull and report them.", no_args_is_help=True)

LIST_VIEW = View(("job_id", "task_job", "status", "site", "priority", "attempt_nr", "cores", "ram_mb", "modified_at"), keep=3)
SHOW_VIEW = View(tables={"files": View(("type", "lfn", "status", "attempt_nr", "size", "checksum", "dataset"), keep=3),
                         "moves": View(("moved_at", "from_site", "to_site", "moved_by", "reason"), keep=3)})


@app.command("list")
def list_(
    ctx: typer.Context,
    task_id: Annotated[Optional[int], typer.Option("--task", help="Only jobs of this task.")] = None,
    status: Annotated[Optional[List[str]], typer.Option("--status", help="Only jobs in this status (repeatable).")] = None,
    site: Annotated[Optional[str], typer.Option("--site", help="Only jobs at this site.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many jobs, newest first.")] = 100,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List jobs, newest first."""
    from jedictl.commands._choices import check_choices
    from jedictl.model.choices import JOB_STATUSES

    app_ctx = context(ctx)
    statuses = check_choices(status, JOB_STATUSES, "--status", "a job status")
    from jedictl.engine.views.jobs import job_summary
    from jedictl.store import jobs as job_store

    with app_ctx.store().read() as conn:
        rows = [job_summary(row) for row in job_store.list_jobs(conn, task_id, statuses, site, limit)]
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(metavar="JOB", help="A job id (4711) or TASK.INDEX (12.3: job 3 of task 12).")],
    wide: WideOpt = False,
) -> None:
    """Show one job: status, site, resources, rendered parameters and its files."""
    app_ctx = context(ctx)
    from jedictl.engine.views.jobs import job_details, parse_job_ref

    reference = parse_job_ref(job)
    with app_ctx.store().read() as conn:
        details = job_details(conn, reference)
    app_ctx.emit(details, SHOW_VIEW, wide=wide)


app.command("dispatch")(dispatch)
app.command("heartbeat")(heartbeat)
app.command("report")(report)
app.command("kill")(kill)
app.command("reassign")(reassign)
app.add_typer(events_app, name="events")
app.command("resubmit")(resubmit)
app.command("copy")(copy)
