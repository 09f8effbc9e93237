"""`jedictl finalize`: one pass of the Post Processor (scouts, avalanche, phase complete, final status)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def finalize(
    ctx: typer.Context,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Take at most this many tasks (default: finalize.limit).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
) -> None:
    """Evaluate scouts, release the avalanche and bring tasks to their final status.

    A scouting task whose scouts ended (or half of them finished) gets its resource model measured
    on them (walltime, cpuTime, ramCount, outDiskCount, ioIntensity) and goes `scouted -> running`
    with all its input released, or `exhausted` / `broken` when the scouts say so. A task whose
    released input is all processed becomes `prepared`, then `done`, `finished` or `failed` by its
    goal and its parent (`tobroken`, `toabort` end `broken`, `aborted`); its output datasets are
    closed in the data catalog and its child tasks kicked, or killed when it failed.
    """
    app = context(ctx)
    from jedictl.commands._agent import run_passes
    from jedictl.engine.finalize.postprocessor import finalize_pass

    store = app.store()
    run_passes(app, lambda: finalize_pass(store, app.settings, app.owner, app.clock.now(), limit), loop)
