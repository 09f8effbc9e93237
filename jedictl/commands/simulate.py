"""`jedictl simulate`: play pilots -- dispatch, run and report jobs -- for demos and end-to-end tests."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import SeedOpt, context


def simulate(
    ctx: typer.Context,
    sites: Annotated[Optional[List[str]], typer.Option("--site", help="Only this site (repeatable; default: every site with activated jobs).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Jobs to run per site in this pass.")] = 100,
    failure_rate: Annotated[Optional[float], typer.Option("--failure-rate", min=0.0, max=1.0, help="Share of jobs that fail (default: simulate.failure_rate).")] = None,
    errors: Annotated[Optional[List[str]], typer.Option("--error", metavar="SOURCE:CODE[:DIAG]", help="Failed jobs report this error (repeatable; default: simulate.failure_mix).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
    seed: SeedOpt = None,
) -> None:
    """Play pilots: dispatch activated jobs, run them on paper and report realistic results.

    Each site's jobs are taken with the same `jobs dispatch`, heartbeat and `jobs report` paths a real
    executor uses. A share of them fails (--failure-rate) with errors drawn from the failure mix, so
    retries, the retry rules and the memory ladder can be watched; --seed replays a run exactly.
    A job that would run past its own max_walltime is killed at that limit with pilot error 1213.
    """
    app = context(ctx)
    import random

    from jedictl.commands._agent import run_passes
    from jedictl.engine.sim.simulator import parse_error_option, simulate_pass

    chosen = [parse_error_option(text) for text in errors or []]
    rng = random.Random(seed)
    store = app.store()
    run_passes(app, lambda: simulate_pass(store, app.settings, app.clock.now(), rng, sites=sites or (), jobs_per_site=jobs,
                                          failure_rate=failure_rate, errors=chosen), loop)
