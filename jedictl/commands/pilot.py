"""`jedictl pilot`: a real executor -- pull jobs of a site, run their payloads, stage their files, report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from jedictl.commands._common import context

PILOT_ID_ENV = "JEDICTL_PILOT_ID"


def pilot(
    ctx: typer.Context,
    site: Annotated[str, typer.Option("--site", help="The site (PanDA queue) whose activated jobs this pilot runs.")],
    once: Annotated[bool, typer.Option("--once", help="Exit when no job is available instead of waiting for one.")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", min=1, help="Jobs to take in all before exiting (default: one per slot with --once, else no limit).")] = None,
    slots: Annotated[int, typer.Option("--slots", min=1, max=256, help="Payloads run in parallel.")] = 1,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", metavar="DIR", help="Make each job's work directory under DIR (default: pilot.workdir, else a temporary folder).")] = None,
    keep_workdir: Annotated[bool, typer.Option("--keep-workdir", help="Keep each job's work directory after its report (default: removed once the report is accepted).")] = False,
    executor: Annotated[Optional[str], typer.Option("--executor", metavar="NAME", help="Name recorded on the jobs, '/slotK' appended (default: pilot-ID@HOST:PID).")] = None,
) -> None:
    """Run jobs for real: dispatch, stage in, run the payload, stage out, report.

    Each slot takes one activated job of SITE at a time (the `jobs dispatch` contract), makes a work
    directory, copies (or, for a direct_io site, links) its inputs from the endpoints that hold them
    and verifies size and adler32, runs the transformation with the job's parameters as an argument
    vector -- in the job's container when the site has a container_runtime -- and heartbeats every
    pilot.heartbeat_seconds. The job's max_walltime ends it with 1213; `jobs kill` (tobekilled) with
    1144; no heartbeat for pilot.lost_heartbeat_seconds with 1317. A finished payload's outputs and a
    log tarball are copied to their destinations, and the report gives their size and adler32; outputs
    are removed again if the report is not accepted. SIGTERM (scancel) stops the payloads, reports
    their jobs failed with 1201 and exits 143. JEDICTL_PILOT_ID names the pilots row to keep up to date.
    """
    app = context(ctx)
    import logging
    import sys

    from jedictl.commands._agent import record_passes
    from jedictl.engine.pilot.pilot import Pilot, PilotOptions
    from jedictl.errors import BadInput

    pilot_id = os.environ.get(PILOT_ID_ENV) or None
    if pilot_id is not None and not pilot_id.isdigit():
        raise BadInput(f"{pilot_id!r} is not a pilot id (a positive integer)", PILOT_ID_ENV)
    _log_to_stderr(logging, sys.stderr, app.quiet, app.verbose)
    runner = Pilot(app.store(), app.settings, app.clock.now,
                   PilotOptions(site=site, jobs=jobs, once=once, slots=slots, workdir=workdir, keep_workdir=keep_workdir,
                                executor=executor, pilot_id=int(pilot_id) if pilot_id else None))
    import time

    started = time.monotonic()
    report = runner.run()
    errors = record_passes(app, [(report, time.monotonic() - started)])
    if runner.signal_name:
        import signal

        typer.echo(f"jedictl: pilot stopped by {runner.signal_name}", err=True)
        raise typer.Exit(128 + signal.Signals[runner.signal_name].value)
    if errors:
        raise typer.Exit(1)


def _log_to_stderr(logging, stream, quiet: bool, verbose: int) -> None:  # noqa: ANN001 - modules passed in to keep start-up lean
    """The pilot's log (a batch job's output file): one line per step of each job; -q: warnings only."""
    logger = logging.getLogger("jedictl.pilot")
    if not logger.handlers:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s pilot %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose > 0 else logging.INFO)
