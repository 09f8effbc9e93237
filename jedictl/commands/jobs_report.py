"""`jedictl jobs report|heartbeat|kill`: executors report and beat; operators kill (docs/executor-protocol.md)."""

from __future__ import annotations

import itertools
from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import context, read_source


def report(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Job reports, one JSON object per line ('-' reads stdin).")],
) -> None:
    """Take executors' final job reports (finished or failed) and propagate them to the tasks.

    Each line: job_id, status, attempt_nr, error_source/error_code/error_diag, trans_exit_code,
    wall_time, cpu_time, max_pss, max_rss, n_events, started_at, ended_at and outputs [{lfn, size,
    checksum, guid, n_events}]. Inputs of a finished job are finished and its outputs registered in
    the data catalog; a failed job meets the retry rules and its inputs go back to the pool while
    attempts remain. The same report again is a duplicate and changes nothing; a different report for
    a job already ended is a conflict, and an unknown or malformed one is refused -- both exit 1, and
    the other lines still apply.
    """
    app = context(ctx)
    from jedictl.commands._agent import emit_report
    from jedictl.commands._common import read_lines
    from jedictl.engine.agent import PassReport
    from jedictl.engine.jobs.outcomes import ingest_reports
    from jedictl.engine.jobs.reports import Refused, stream_reports
    from jedictl.errors import BadInput

    refused: list[Refused] = []
    with read_lines(source) as (lines, name):
        # Read, parsed and applied a batch at a time: the input is never held whole.
        reports = stream_reports(lines, refused)
        first = next(reports, None)
        if first is None and not refused:
            raise BadInput("holds no reports", name)
        results = ingest_reports(app.store(), itertools.chain([first], reports), app.settings, app.clock.now()) if first is not None else []
    summary = PassReport("report")
    items = [r.as_item() for r in results] + [{"line": r.line, "job_id": r.job_id, "outcome": "refused", "status": None, "reason": r.reason}
                                              for r in refused]
    del results
    for item in sorted(items, key=lambda i: i["line"]):
        summary.add(item.pop("outcome"), **item)
    emit_report(app, summary)
    if summary.counts.get("refused") or summary.counts.get("conflict"):
        raise typer.Exit(1)


def heartbeat(
    ctx: typer.Context,
    job_ids: Annotated[Optional[List[int]], typer.Argument(metavar="[JOB]...", help="Job ids (or use --from).", show_default=False)] = None,
    status: Annotated[str, typer.Option("--status", help="What the jobs are doing: starting, running, holding, transferring.")] = "running",
    attempt: Annotated[Optional[int], typer.Option("--attempt", help="The attempt the executor runs (checked).")] = None,
    source: Annotated[Optional[str], typer.Option("--from", metavar="FILE|-", help="Heartbeats as JSON lines {job_id, status, attempt_nr}.")] = None,
) -> None:
    """Tell the store that jobs are alive, and hear back whether to stop them.

    The reply per job carries `command`: "tobekilled" when the job was killed (stop it and report
    failed), "alreadydone" when the job is final. Late heartbeats never undo progress (a holding job
    does not go back to running).
    """
    app = context(ctx)
    from jedictl.engine.jobs.outcomes import take_heartbeats
    from jedictl.engine.jobs.reports import parse_heartbeat, parse_heartbeats
    from jedictl.errors import BadInput

    if source and job_ids:
        raise BadInput("give job ids or --from, not both", "--from")
    if source:
        text, name = read_source(source)
        beats, refused = parse_heartbeats(text)
        if refused:
            raise BadInput(refused[0].reason, name)
    elif job_ids:
        beats = [parse_heartbeat({"job_id": job_id, "status": status, "attempt_nr": attempt}, None) for job_id in job_ids]
    else:
        raise BadInput("name the jobs (JOB... or --from FILE)", "JOB")
    if not beats:
        raise BadInput("holds no heartbeats", "--from")
    replies = take_heartbeats(app.store(), beats, app.clock.now(), app.settings.report.batch_size)
    app.emit([r.as_item() for r in replies], columns=["job_id", "status", "command", "reason"])


def kill(
    ctx: typer.Context,
    job_ids: Annotated[Optional[List[int]], typer.Argument(metavar="[JOB]...", help="Job ids to kill.", show_default=False)] = None,
    task_id: Annotated[Optional[int], typer.Option("--task", help="Kill every unfinished job of this task.")] = None,
    code: Annotated[Optional[int], typer.Option("--code", help="PanDA kill code (2 expire, 3 abort, 9 force, 51 reassign, ...); default: killed by a person.")] = None,
) -> None:
    """Kill jobs: queued ones end now, running ones at their next heartbeat.

    A queued job ends at once (cancelled; closed for the system's codes) and its input goes back to
    the pool with an attempt used but no failure. A job on a worker is told to stop at its next
    heartbeat and ends when its executor reports (codes 9, 52 and 99 end it at once).
    """
    app = context(ctx)
    from jedictl.engine.jobs.outcomes import kill_jobs
    from jedictl.errors import BadInput
    from jedictl.store import jobs as job_store

    if not job_ids and task_id is None:
        raise BadInput("name the jobs (JOB... or --task ID)", "JOB")
    store = app.store()
    ids = list(job_ids or [])
    if task_id is not None:
        with store.read() as conn:
            ids += job_store.unfinished_job_ids(conn, task_id)
    results = kill_jobs(store, list(dict.fromkeys(ids)), app.settings, app.clock.now(), code=code)
    app.emit([r.as_item() for r in results], columns=["job_id", "outcome", "status", "reason"])
    if any(r.outcome == "refused" for r in results):
        raise typer.Exit(1)
