"""`jedictl pilots list`: the pilots `jedictl harvest` submitted, and what became of them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context
from jedictl.output import View

app = App(help="Pilots harvest submitted to batch systems.", no_args_is_help=True)

LIST_VIEW = View(("id", "site", "batch_system", "batch_id", "state", "submitted_at", "started_at", "ended_at", "n_jobs", "n_finished",
                  "n_failed", "exit_code", "error"), keep=5)


@app.command("list")
def list_(
    ctx: typer.Context,
    site: Annotated[Optional[str], typer.Option("--site", help="Only pilots of this site.")] = None,
    state: Annotated[Optional[str], typer.Option("--state", help="Only pilots in this state: submitted, running, finished, failed, cancelled or lost.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many pilots, newest first.")] = 100,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List pilots, newest first: batch id, state, the jobs each took, and how it ended."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import PILOT_STATES

    app_ctx = context(ctx)
    check_choice(state, PILOT_STATES, "--state", "a pilot state")
    from jedictl.output import iter_rows
    from jedictl.store import pilots as pilot_store

    with app_ctx.store().read() as conn:
        rows = iter_rows(pilot_store.list_pilots(conn, site, state, limit))
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)
