"""`jedictl queue-shares [show]|import|export|set`: work queues and global shares (docs/queue-shares.md)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import context, read_source

app = App(help="Work queues and global shares: the fair-share tree and its state now (`show`, also without a "
               "subcommand), import, export and set.",
          invoke_without_command=True)

SHARE_COLUMNS = ["share", "configured_pct", "effective_pct", "actual_pct", "state", "rank", "running_jobs", "queued_jobs",
                 "running_cores", "queued_cores", "running_hs06"]
QUEUE_COLUMNS = ["queue", "vo", "queue_type", "kind", "stretchable", "configured_pct", "effective_pct", "actual_pct", "state", "rank",
                 "running_jobs", "queued_jobs", "running_cores", "queued_cores"]
GROUP_COLUMNS = ["group", "share", "configured_pct", "actual_pct", "state", "rank", "running_hs06"]
TSV_COLUMNS = ["section", "path", "vo", "queue_type", "kind", "stretchable", "configured_pct", "effective_pct", "actual_pct", "state",
               "rank", "running_jobs", "queued_jobs", "running_cores", "queued_cores", "running_hs06"]


class Kind(str, Enum):
    queue = "queue"
    share = "share"


ToleranceOpt = Annotated[float, typer.Option("--tolerance", metavar="PERCENT", min=0.0,
                                             help="Within this many percent of its target a queue is on target.")]


@app.callback()
def main(
    ctx: typer.Context,
    tolerance: ToleranceOpt = 5.0,
) -> None:
    """Without a subcommand: the same as `queue-shares show`."""
    if ctx.invoked_subcommand is None:
        _show(ctx, tolerance)


@app.command("show")
def show(
    ctx: typer.Context,
    tolerance: ToleranceOpt = 5.0,
) -> None:
    """The share tree and the work queues: configured and effective share (after redistribution to the
    active ones), running and queued jobs and cores, actual against target, under- or over-served, and
    the order generation and dispatch give them (rank 0 first)."""
    _show(ctx, tolerance)


def _show(ctx: typer.Context, tolerance: float) -> None:
    app_ctx = context(ctx)
    from jedictl.engine.shares.usage import group_share_status, load_usage, status_report
    from jedictl.engine.shares.definitions import current_definitions
    from jedictl.engine.task.privileges import Privileges
    from jedictl.store.queue_shares import executing_by_group

    shares_of_groups = Privileges.from_settings(app_ctx.settings.privileges).group_shares
    with app_ctx.store().read() as conn:
        groups = group_share_status(shares_of_groups, executing_by_group(conn, sorted(shares_of_groups)), tolerance / 100.0)
        report = status_report(current_definitions(conn, app_ctx.settings), load_usage(conn), tolerance / 100.0, groups)
    if app_ctx.output in ("json", "yaml"):
        app_ctx.emit(report)
        return
    shares = [{"section": "global_shares", "share": row["path"], **row} for row in report["global_shares"]]
    queues = [{"section": "work_queues", "queue": row["path"], **row} for row in report["work_queues"]]
    groups = [{"section": "group_shares", "path": row["group"], **row} for row in report["group_shares"]]
    if app_ctx.output == "tsv":
        app_ctx.emit(shares + queues + groups, columns=TSV_COLUMNS)
        return
    app_ctx.emit(shares, columns=SHARE_COLUMNS, title=f"global shares (from the {report['global_shares_from']}; "
                                                      f"actual = share of executing HS06; rank = dispatch order)")
    typer.echo()
    app_ctx.emit(queues, columns=QUEUE_COLUMNS, title=f"work queues (from the {report['work_queues_from']}; "
                                                      f"percent of their vo x type pool; rank = generation order)")
    if groups:
        typer.echo()
        app_ctx.emit(groups, columns=GROUP_COLUMNS, title="group shares (from `privileges`; percent of what the groups with a share "
                                                          "execute; rank = generation order within their share)")


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Definitions (YAML or JSON, docs/queue-shares.md); - reads stdin.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and report, write nothing.")] = False,
) -> None:
    """Replace the work queues and/or the global shares with the file's; a section the file leaves out
    is kept. The whole file is validated first (cycles, unknown parents or attributes, bad patterns,
    names defined twice are refused with exit 2); then one transaction. Tasks keep the queue and share
    they were given; new tasks are matched against the new definitions."""
    app_ctx = context(ctx)
    from jedictl.engine.input.documents import load_document
    from jedictl.engine.shares.definitions import current_definitions, plan_import
    from jedictl.store import queue_shares as share_store

    text, name = read_source(source)
    document = load_document(text, name)
    with app_ctx.store().begin() as conn:
        plan = plan_import(document, current_definitions(conn, app_ctx.settings).definitions)
        counts = _write(conn, plan.rows, share_store, dry_run)
    app_ctx.note("queue-shares import: " + ", ".join(f"{section} {n}" for section, n in counts.items())
                 + (" (dry run: nothing written)" if dry_run else ""))
    # Both sections always: null for one the file leaves as it is.
    app_ctx.emit({"work_queues": counts.get("work_queues"), "global_shares": counts.get("global_shares"), "dry_run": dry_run})


def _write(conn: Any, rows: dict[str, list[dict[str, Any]]], share_store: Any, dry_run: bool) -> dict[str, int]:
    counts = {}
    if "work_queues" in rows:
        counts["work_queues"] = len(rows["work_queues"]) if dry_run else share_store.replace_queues(conn, rows["work_queues"])
    if "global_shares" in rows:
        counts["global_shares"] = len(rows["global_shares"]) if dry_run else share_store.replace_shares(conn, rows["global_shares"])
    return counts


@app.command("export")
def export(
    ctx: typer.Context,
    target: Annotated[Optional[str], typer.Argument(metavar="FILE", help="Write here (.json: JSON, else YAML); default stdout.")] = None,
) -> None:
    """The definitions in force (the store's, or the settings' until an import) in the import format;
    `queue-shares import` of the result changes nothing."""
    app_ctx = context(ctx)
    from jedictl.engine.shares.definitions import current_definitions, export_document
    from jedictl.errors import BadInput
    from jedictl.output import render

    with app_ctx.store().read() as conn:
        current = current_definitions(conn, app_ctx.settings)
    document = export_document(current.definitions)
    if target is None:
        render(document, "json" if app_ctx.output == "json" else "yaml")
        return
    try:
        with open(target, "w", encoding="utf-8") as handle:
            render(document, "json" if target.endswith(".json") else "yaml", stream=handle)
    except OSError as exc:
        raise BadInput(f"cannot write the file ({exc.strerror or exc})", target) from exc
    app_ctx.note(f"queue-shares export: {len(document['work_queues'])} work queues, {len(document['global_shares'])} "
                 f"global shares -> {target}")


@app.command("set")
def set_(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A work queue or a global share.")],
    share: Annotated[Optional[float], typer.Option("--share", metavar="N", help="The queue's share, or the global share's value (relative to its siblings).")] = None,
    stretchable: Annotated[Optional[bool], typer.Option("--stretchable/--no-stretchable", help="Work queues: take unused share before the others.", show_default=False)] = None,
    kind: Annotated[Optional[Kind], typer.Option("--kind", help="When NAME is both a work queue and a global share.")] = None,
    vo: Annotated[Optional[str], typer.Option("--vo", help="Work queues: the queue of this VO.")] = None,
    queue_type: Annotated[Optional[str], typer.Option("--queue-type", metavar="TYPE", help="Work queues: the queue of this type (prodSourceLabel).")] = None,
) -> None:
    """Change one share. Until the first import this copies the settings' definitions of that section
    into the store, which holds them from then on."""
    app_ctx = context(ctx)
    from jedictl.engine.shares.definitions import current_definitions, plan_set
    from jedictl.store import queue_shares as share_store

    with app_ctx.store().begin() as conn:
        plan = plan_set(current_definitions(conn, app_ctx.settings).definitions, name, share, stretchable,
                        kind.value if kind else None, vo, queue_type)
        _write(conn, dict(plan.rows), share_store, dry_run=False)
    app_ctx.emit(plan.change)
