"""`jedictl run`: one pass of every agent in pipeline order -- the single cron line."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from jedictl.commands._common import SeedOpt, context


def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="One pass of each agent, then exit (the default).")] = False,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Run the pipeline every SECONDS until interrupted.")] = None,
    agents: Annotated[Optional[str], typer.Option("--agents", metavar="LIST", help="Comma list of agents to run (periodic,refine,feed,broker,generate,harvest,finalize,watch); always in pipeline order.")] = None,
    metrics_file: Annotated[Optional[str], typer.Option("--metrics-file", metavar="PATH", help="Write Prometheus text-format metrics here after each run, atomically. (env: JEDICTL_METRICS_FILE)")] = None,
    log_format: Annotated[Optional[str], typer.Option("--log-format", metavar="FORMAT", help="text, or json for one JSON object per pass on stderr. (env: JEDICTL_LOG_FORMAT)")] = None,
    seed: SeedOpt = None,
) -> None:
    """Run periodic, refine, feed, broker, generate, harvest, finalize and watch once each, in that order.

    periodic submits the periodic templates that are due (`jedictl periodic`), so their new tasks are
    refined and given jobs in the same run.

    harvest runs only when some site names a batch system (sites.batch): it submits pilots for the
    jobs generate just made (`jedictl harvest`).

    This is the one line for cron (`*/5 * * * * jedictl run --once -q`). Every agent takes its work
    with leases, so runs that overlap -- a slow run still busy when cron fires again, or several hosts
    on one PostgreSQL store -- share the work and never do it twice. Exit 1 when any pass met errors.
    """
    import dataclasses

    from jedictl.errors import BadInput

    if once and loop:
        raise BadInput("give --once or --loop, not both", "--loop")
    app = context(ctx)
    from jedictl.commands._agent import progress, publish_events, record_passes, stoppable
    from jedictl.engine.pipeline import parse_agents, run_pipeline

    chosen = parse_agents(agents)
    changes = {key: value for key, value in (("metrics_file", metrics_file), ("log_format", log_format)) if value is not None}
    if log_format is not None and log_format not in ("text", "json"):
        raise BadInput("must be text or json", "--log-format")
    if changes:
        app.loaded = dataclasses.replace(app.loaded, settings=dataclasses.replace(app.settings, **changes),
                                         sources={**app.loaded.sources, **{key: "flag" for key in changes}})
    from jedictl.commands._agent import check_metrics_file

    check_metrics_file(app, flag=metrics_file is not None)  # before any pass commits
    store = app.store()
    errors = 0
    with stoppable(app):  # SIGINT/SIGTERM: the leases of the pass are released before exiting
        while True:
            with progress(app):
                errors += record_passes(app, run_pipeline(store, app.settings, app.owner, app.clock.now, chosen, seed), several=True)
            publish_events(app)
            if not loop:
                break
            time.sleep(loop)
    if errors:
        raise typer.Exit(1)
