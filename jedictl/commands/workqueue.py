"""`jedictl workqueue create|list|show|acquire|update-locations`: WMCore's WorkQueue on jedictl's tasks --
elements per input block in a global queue, taken by agents for their sites by their free slots and
released to `generate` (docs/queue-layers.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, SeedOpt, WideOpt, context
from jedictl.output import View

app = App(help="The work queue: elements per input block that agents take for their sites by their free slots (WMCore's global and local queues).",
          no_args_is_help=True)

LIST_VIEW = View(("element", "task_id", "block", "status", "priority", "n_jobs", "agent", "site", "possible_sites", "job_type", "owner",
                  "n_files", "reason", "created_at", "modified_at", "locations_at"), keep=4)
SHOW_VIEW = View(tables={"history": View(("from_status", "to_status", "agent", "changed_at", "owner"), keep=3)})
LoopOpt = Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")]


def _row(row) -> dict:  # noqa: ANN001 - a store row
    return {"element": row.id, "task_id": row.task_id, "block": row.block, "status": row.status, "priority": row.priority, "n_jobs": row.n_jobs,
            "agent": row.agent, "site": row.site, "possible_sites": list(row.possible_sites or ()), "job_type": row.job_type,
            "owner": row.owner, "n_files": row.n_files, "reason": row.reason, "created_at": row.created_at, "modified_at": row.modified_at,
            "locations_at": row.locations_at}


@app.command("create")
def create(
    ctx: typer.Context,
    task_id: Annotated[int, typer.Argument(metavar="TASK_ID", help="A refined task: one element per input block (dataset) it has.")],
) -> None:
    """Put a task's input blocks in the global queue, one element per block.

    One Available element per block with no element yet, its jobs estimated (files / nFilesPerJob) and its possible sites from the catalog's replicas (of the
    block and of any pile-up), within the task's site lists. From then on `generate` makes the task's
    jobs only from the blocks an agent released, at that agent's sites."""
    app_ctx = context(ctx)
    from jedictl.engine.workqueue.queue import create_elements

    with app_ctx.store().begin() as conn:
        lines = create_elements(conn, task_id, app_ctx.owner, app_ctx.clock.now())
    app_ctx.emit(lines, ["task_id", "element", "block", "action"])


@app.command("list")
def list_(
    ctx: typer.Context,
    task: Annotated[Optional[int], typer.Option("--task", metavar="ID", help="Only this task's elements.")] = None,
    status: Annotated[Optional[str], typer.Option("--status", help="Only elements in this status (Available, Negotiating, Acquired, Running, Done, Failed, Canceled).")] = None,
    agent: Annotated[Optional[str], typer.Option("--agent", metavar="NAME", help="Only elements this agent holds or held.")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="At most this many, lowest id first.")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List work-queue elements: block, status, the task's priority, estimated jobs, agent and site."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import ELEMENT_STATUSES

    app_ctx = context(ctx)
    check_choice(status, ELEMENT_STATUSES, "--status", "an element status")
    from jedictl.store import workqueue as wq

    with app_ctx.store().read() as conn:
        rows = [_row(r) for r in wq.list_elements(conn, task_id=task, status=status, agent=agent, limit=limit)]
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    element: Annotated[int, typer.Argument(metavar="ELEMENT", help="The element's id (from `workqueue list`).")],
    wide: WideOpt = False,
) -> None:
    """One element with its status history (which agent took it, when it was released and ended)."""
    app_ctx = context(ctx)
    from jedictl.store import workqueue as wq

    with app_ctx.store().read() as conn:
        details = _row(wq.get_element(conn, element))
        details["history"] = [dict(r._mapping) for r in wq.element_history(conn, element)]
    app_ctx.emit(details, SHOW_VIEW, wide=wide)


@app.command("acquire")
def acquire(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", metavar="NAME", help="The agent this process is (`jedictl agents add`).")],
    limit: Annotated[int, typer.Option("--limit", min=1, help="Take at most this many elements from the global queue per pass (WMCore's WorkPerCycle).")] = 100,
    loop: LoopOpt = None,
    seed: SeedOpt = None,
) -> None:
    """One pass of an agent: take elements for its sites from the global queue, release them to generate.

    First its elements whose block or task ended end. Then it takes elements from the global
    queue by its global slots (pending + running thresholds, drained sites left out, running jobs not
    subtracted; only work of equal or higher priority counted), one guarded claim each, so two agents
    never take the same element; then release its elements to `generate` by its local slots (running
    jobs subtracted, drained sites included)."""
    app_ctx = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.workqueue.queue import acquire_pass

    store = app_ctx.store()
    with store.read() as conn:
        from jedictl.store import workqueue as wq

        wq.get_agent(conn, agent)  # an unknown agent is bad input: nothing runs
    run_passes(app_ctx, lambda: acquire_pass(store, agent, app_ctx.owner, app_ctx.clock.now(), limit, seed), loop)


@app.command("update-locations")
def update_locations(
    ctx: typer.Context,
    task: Annotated[Optional[int], typer.Option("--task", metavar="ID", help="Only this task's elements.")] = None,
    loop: LoopOpt = None,
) -> None:
    """The periodic location update: Available elements' possible sites from the catalog again.

    Every Available element's possible sites are computed again from the catalog's replicas, so data
    copied since an element was made counts; elements of ended tasks end first."""
    app_ctx = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.workqueue.queue import update_locations as update

    store = app_ctx.store()
    run_passes(app_ctx, lambda: update(store, app_ctx.owner, app_ctx.clock.now(), task), loop)
