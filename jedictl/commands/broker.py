"""`jedictl broker`: one pass of the Task Broker (assigning -> ready, with a nucleus)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import SeedOpt, context


def broker(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Broker at most this many tasks (default: task_broker.limit).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
    seed: SeedOpt = None,
) -> None:
    """Choose a nucleus (output destination) for every task in `assigning`.

    Nuclei that are not active, lack free space, hold too little of the input, have too long an output
    transfer queue or have no site that can run the work are dropped; one of the rest is drawn at
    random in proportion to its weight (remaining work, available input, tape, free space). A task no
    nucleus fits stays `assigning` with the reasons (see `jedictl explain task ID`).
    """
    app = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.brokerage.broker import broker_pass

    store = app.store()
    run_passes(app, lambda: broker_pass(store, app.settings, app.owner, app.clock.now(), limit, seed), loop)
