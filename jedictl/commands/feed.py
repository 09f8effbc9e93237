"""`jedictl feed`: one pass of the Contents Feeder (defined -> ready | assigning)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def feed(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Feed at most this many tasks (default: feed.limit).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
) -> None:
    """Turn the input datasets of defined tasks into file records, then release the tasks.

    Containers are expanded, files filtered (include/exclude, offset, nFiles, nEvents) and, with
    events per job, cut into event ranges. While a task scouts only 10 chunks are released. Open
    inputs are re-scanned on later passes; files that vanished become `lost`. A task whose input is
    missing waits in `pending`; a task ready to run goes to `ready`, or to `assigning` when its output
    destination (nucleus) must still be chosen by `jedictl broker`.
    """
    app = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.feed.feeder import feed_pass

    store = app.store()
    run_passes(app, lambda: feed_pass(store, app.settings, app.owner, app.clock.now(), limit), loop)
