"""`jedictl periodic add|list|show|pause|resume|remove|instantiate`: task templates with a schedule
(docs/periodic-tasks.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context, read_source
from jedictl.output import View

app = App(help="Periodic tasks: task templates that `jedictl run` submits on a schedule, a cap on the instances still active.",
          no_args_is_help=True)

LIST_VIEW = View(("name", "schedule", "status", "active", "max_active", "next_due_at", "last_outcome", "instances", "capped", "missed",
                  "refused", "user", "template_id", "last_due_at"), keep=4)
SHOW_VIEW = View(tables={"tasks": View(("task_id", "name", "status", "due_at", "created_at"), keep=3)})
NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The template (names from `periodic list`).")]


@app.command("add")
def add(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="SPEC|-", help="Task spec or PanDA task parameters (YAML or JSON), with ${DUE} in its name and output datasets; - reads stdin.")],
    every: Annotated[Optional[str], typer.Option("--every", metavar="INTERVAL", help="Due every INTERVAL from --start: 30m, 2h, 1d, 1h30m (whole minutes).")] = None,
    cron: Annotated[Optional[str], typer.Option("--cron", metavar="EXPR", help="Due at the minutes of a cron expression, UTC: \"*/15 * * * *\" (five numeric fields).")] = None,
    start: Annotated[Optional[str], typer.Option("--start", metavar="TIME", help="No due time before TIME (ISO-8601, UTC; default: now, so the first instance is due at once).")] = None,
    max_active: Annotated[int, typer.Option("--max-active", metavar="N", min=1, max=1000, help="At most N instances active at once; a due time that finds N active is skipped.")] = 1,
    name: Annotated[Optional[str], typer.Option("--name", help="The template's name (default: the task name without ${DUE}).")] = None,
    user: Annotated[Optional[str], typer.Option("--user", help="Owner of every instance (default: the spec's, else your login name).")] = None,
) -> None:
    """Store a task template with a schedule; `jedictl run` (or `periodic instantiate`) submits it when due.

    Every instance is the document with ${DUE} replaced by its due time (20261127T2300), checked
    now as `jedictl submit` will check it then: the task name and every output dataset must contain
    ${DUE}, so that each instance is a task of its own writing datasets of its own.
    """
    app_ctx = context(ctx)
    from jedictl.clock import EARLIEST, LATEST, in_range, parse_time
    from jedictl.commands.submit import _login_name
    from jedictl.engine.input.documents import load_document
    from jedictl.engine.periodic.templates import add_template
    from jedictl.errors import BadInput

    moment = None
    if start is not None:
        try:
            moment = parse_time(start)
        except ValueError as exc:
            raise BadInput(f"{start!r} is not an ISO-8601 time", "--start") from exc
        if not in_range(moment):
            raise BadInput(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}", "--start")
    text, source_name = read_source(source)
    document = load_document(text, source_name)
    details = add_template(app_ctx.store(), app_ctx.settings, document, name=name, user=user, default_user=_login_name(), every=every,
                           cron=cron, start=moment, max_active=max_active, now=app_ctx.clock.now(), by=app_ctx.owner)
    app_ctx.emit(details, SHOW_VIEW)


@app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[Optional[str], typer.Option("--status", help="Only templates in this status (active or paused).")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List the templates by name: schedule, instances active, next due time, what became of the due times."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import PERIODIC_STATUSES

    app_ctx = context(ctx)
    check_choice(status, PERIODIC_STATUSES, "--status", "a template status")
    from jedictl.engine.periodic.templates import list_templates

    with app_ctx.store().read() as conn:
        rows = list_templates(conn, status)
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(ctx: typer.Context, name: NameArg, wide: WideOpt = False) -> None:
    """Show one template: schedule, next due times, the last due time's outcome, its document and newest instances."""
    app_ctx = context(ctx)
    from jedictl.engine.periodic.templates import template_details

    with app_ctx.store().read() as conn:
        details = template_details(conn, name, app_ctx.clock.now())
    app_ctx.emit(details, SHOW_VIEW, wide=wide)


@app.command("pause")
def pause(ctx: typer.Context, name: NameArg) -> None:
    """Make no more instances until resumed; the instances already made go on."""
    app_ctx = context(ctx)
    from jedictl.engine.periodic.templates import pause_template

    details = pause_template(app_ctx.store(), name, app_ctx.clock.now())
    if not details["changed"]:
        app_ctx.note(f"periodic: {name} was already paused")
    app_ctx.emit(details, SHOW_VIEW)


@app.command("resume")
def resume(ctx: typer.Context, name: NameArg) -> None:
    """Instantiate again from the first due time at or after now (the times passed while paused are skipped)."""
    app_ctx = context(ctx)
    from jedictl.engine.periodic.templates import resume_template

    details = resume_template(app_ctx.store(), name, app_ctx.clock.now())
    if not details["changed"]:
        app_ctx.note(f"periodic: {name} was not paused")
    app_ctx.emit(details, SHOW_VIEW)


@app.command("remove")
def remove(ctx: typer.Context, name: NameArg) -> None:
    """Remove a template. Its instances stay, as tasks of their own (kill them with `jedictl kill`)."""
    app_ctx = context(ctx)
    from jedictl.engine.periodic.templates import remove_template

    app_ctx.emit(remove_template(app_ctx.store(), name))


@app.command("instantiate")
def instantiate(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Act on at most this many due templates (default 1000).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
) -> None:
    """One pass: submit an instance of each template whose due time has passed (the first pass of `jedictl run`).

    A template acts on its latest due time (earlier ones no pass acted on are counted as missed, not
    made up for); at its cap of active instances the due time is skipped (capped). A submission
    refused -- a user cap, an output dataset taken -- is the due time's outcome, with the reason.
    Overlapping passes never make two instances for one due time.
    """
    app_ctx = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.periodic.instances import periodic_pass

    store = app_ctx.store()
    run_passes(app_ctx, lambda: periodic_pass(store, app_ctx.settings, app_ctx.owner, app_ctx.clock.now(), limit), loop)
