"""`jedictl refine`: one pass of the Task Refiner (registered -> defined)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def refine(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Refine at most this many tasks (default: refine.limit).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
) -> None:
    """Turn registered tasks into typed tasks with datasets, templates, work queue, share and resource type.

    A task whose parent is still running waits in `pending` and is re-checked on every pass; a task
    that cannot be refined goes to `broken` with the reason.
    """
    app = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.refine.refiner import refine_pass

    store = app.store()
    run_passes(app, lambda: refine_pass(store, app.settings, app.owner, app.clock.now(), limit), loop)
