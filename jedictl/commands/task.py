"""`jedictl task list|show`: inspect tasks."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from jedictl.commands._app import App

from jedictl.commands import task_commands
from jedictl.commands._common import ColumnsOpt, WideOpt, context
from jedictl.output import View

app = App(help="Inspect tasks and steer them: kill, retry, finish, incexec, pause, resume, avalanche, reassign.",
          no_args_is_help=True)

LIST_VIEW = View(("task_id", "name", "user", "status", "priority", "work_queue", "gshare", "modified_at", "template"), keep=4)
SHOW_VIEW = View(tables={
    "datasets": View(("dataset_id", "name", "type", "status", "input", "n_files", "n_files_finished", "n_files_failed", "reads",
                      "state", "n_events", "site", "destination"), keep=4),
    "status_history": View(("status", "previous", "reason", "at", "by"), keep=3),
    "commands": View(("command", "qualifier", "status", "at", "by", "outcome", "comment"), keep=3),
    "removed_outputs": View(("dataset", "lfn", "kind", "job_id", "kept_lfn", "reason", "at"), keep=3),
})


@app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[Optional[List[str]], typer.Option("--status", help="Only tasks in this status (repeatable).")] = None,
    user: Annotated[Optional[str], typer.Option("--user", help="Only tasks of this user.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many tasks, newest first.")] = 100,
    template: Annotated[Optional[str], typer.Option("--template", metavar="NAME", help="Only the instances of this periodic template.")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List tasks, newest first."""
    from jedictl.commands._choices import check_choices
    from jedictl.model.choices import TASK_STATUSES

    app_ctx = context(ctx)
    statuses = check_choices(status, TASK_STATUSES, "--status", "a task status")
    from jedictl.engine.views.tasks import list_tasks

    with app_ctx.store().read() as conn:
        rows = list_tasks(conn, statuses, user, limit, template)
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    task_id: Annotated[int, typer.Argument(metavar="TASK_ID", help="The task.")],
    split_rule: Annotated[bool, typer.Option("--split-rule", help="Print only the equivalent PanDA splitRule string.")] = False,
    wide: WideOpt = False,
) -> None:
    """Show one task: options, resources, datasets with counters, templates and status history."""
    app_ctx = context(ctx)
    from jedictl.engine.views.tasks import task_details

    with app_ctx.store().read() as conn:
        details = task_details(conn, task_id)
    if split_rule:
        if app_ctx.output == "table":
            typer.echo(details["split_rule"])
        else:
            app_ctx.emit({"task_id": task_id, "split_rule": details["split_rule"]})
        return
    app_ctx.emit(details, SHOW_VIEW, wide=wide)


# Operator commands (docs/task-commands.md); kill and retry are also top-level commands.
for _name in ("kill", "retry", "finish", "incexec", "pause", "resume", "avalanche", "reassign", "settle"):
    app.command(_name)(getattr(task_commands, _name))
