"""`jedictl generate`: one pass of the Job Generator (released input -> jobs)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import SeedOpt, context


def generate(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Visit at most this many tasks (default: generate.n_tasks).")] = None,
    no_throttle: Annotated[bool, typer.Option("--no-throttle", help="Ignore the job throttler for this pass.")] = False,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
    seed: SeedOpt = None,
) -> None:
    """Make jobs from the released input of ready, scouting and running tasks.

    Tasks of the most under-served global share come first, then of the most under-served work queue
    (`jedictl queue-shares`), round-robin across users within (express lane at priority 1500); each
    share and resource type is throttled as JEDI does, files are claimed, sites chosen by job brokerage, the
    input split by the task's rules and the jobs written with rendered parameters, output names,
    seeds and resources. While a task scouts only its released chunks are used (one file per job, two
    jobs per site). A task whose jobs cannot be made waits in `pending` with the reason.
    """
    import dataclasses

    app = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.generate.generator import generate_pass

    settings = app.settings
    if no_throttle:
        settings = dataclasses.replace(settings, generate=dataclasses.replace(settings.generate, throttle=False))
    store = app.store()
    run_passes(app, lambda: generate_pass(store, settings, app.owner, app.clock.now(), limit, seed), loop)
