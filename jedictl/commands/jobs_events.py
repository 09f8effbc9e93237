"""`jedictl jobs events report`: executors report event ranges in bulk (docs/event-service.md)."""

from __future__ import annotations

import time
from operator import itemgetter
from typing import Annotated

import typer

from jedictl.commands._app import App
from jedictl.commands._common import context

app = App(help="Event ranges of event-service jobs: executors report them.", no_args_is_help=True)


@app.command("report")
def report(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Event range reports, one JSON object per line ('-' reads stdin).")],
) -> None:
    """Take executors' reports of event ranges: running, finished or failed.

    Each line: event_id (as `jobs dispatch` gave it), job_id (the job holding the range), status
    (running | finished | failed), and optionally attempt_nr (the job's, checked), error_code,
    error_diag, output_lfn and output_size (the pre-merged file of a finished range). A failed range
    uses an attempt and is `fatal` when none is left (maxAttemptES); the rest are ready again when
    their job ends. The same report again is a duplicate; a report for a range another job holds, or
    for a job that ended, is refused -- exit 1, and the other lines still apply.
    """
    app_ctx = context(ctx)
    from jedictl.commands._agent import emit_report, ingest_stream
    from jedictl.engine.agent import PassReport
    from jedictl.engine.jobs.event_outcomes import ingest_event_reports
    from jedictl.engine.jobs.event_reports import stream_event_reports

    started = time.monotonic()
    results, refused = ingest_stream(source, stream_event_reports,
                                     lambda reports: ingest_event_reports(app_ctx.store(), reports, app_ctx.clock.now()),
                                     "holds no event range reports")
    summary = PassReport("events")
    items = [result.as_item() for result in results]
    items += [{"outcome": "refused", "line": r.line, "event_id": None, "job_id": r.job_id, "status": None, "reason": r.reason} for r in refused]
    summary.add_items(sorted(items, key=itemgetter("line")))
    emit_report(app_ctx, summary, time.monotonic() - started, every_item=True)
    if summary.errors:
        raise typer.Exit(1)
