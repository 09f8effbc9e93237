"""`jedictl watch`: one pass of the Watch Dog (leases, pending, exhausted, job timeouts, throttling, boosts)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def watch(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Each action looks at most at this many tasks (default: watchdog.limit).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
) -> None:
    """Keep the system healthy: the watchdog's housekeeping, one item per action in the report.

    Expired leases are released and files a dead process left picked go back to ready; pending tasks
    are retried after their wait and exhausted after 7 days; exhausted tasks move to finishing after
    48 h; jobs past their timeouts are closed; queued jobs of a site whose queue is long and took no job
    for 3 h move to sites with room (docs/reassignment.md); tasks whose input keeps failing are throttled
    (120 min x n squared) and released; running tasks at 95 % with at most 100 jobs left get priority 900 and
    the Express share; tasks failing too often are paused (watchdog.pause_failure_rate); tasks that
    reached their goal are finished softly.
    """
    app = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.watch.watchdog import watch_pass

    store = app.store()
    run_passes(app, lambda: watch_pass(store, app.settings, app.owner, app.clock.now(), limit), loop)
