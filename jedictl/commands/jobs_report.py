"""`jedictl jobs report|heartbeat|kill`: executors report and beat; operators kill (docs/executor-protocol.md)."""

from __future__ import annotations

import time
from operator import attrgetter
from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import AppContext, context, read_source
from jedictl.commands.jobs_subjobs import KeepGoingOpt, SubjobOpt


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
    from jedictl.commands._agent import emit_report, ingest_stream
    from jedictl.engine.agent import PassReport
    from jedictl.engine.jobs.outcomes import ingest_reports
    from jedictl.engine.jobs.reports import Refused, stream_reports

    started = time.monotonic()
    results, refused = ingest_stream(source, stream_reports,
                                     lambda reports: ingest_reports(app.store(), reports, app.settings, app.clock.now()), "holds no reports")
    summary = PassReport("report")
    # Results come in line order, as do the lines refused unread: one sort merges them (near-linear),
    # and each becomes its item once, in the shape `PassReport.add` gives (outcome first).
    ordered = sorted([*results, *refused], key=attrgetter("line"))
    del results
    summary.add_items([{"outcome": "refused", "line": r.line, "job_id": r.job_id, "status": None, "reason": r.reason, "retry": None}
                       if type(r) is Refused else r.as_report_item() for r in ordered])
    del ordered
    emit_report(app, summary, time.monotonic() - started, every_item=True)
    if summary.errors:
        raise typer.Exit(1)


def heartbeat(
    ctx: typer.Context,
    job_ids: Annotated[Optional[List[str]], typer.Argument(metavar="[JOB]...", help="Job ids (4711) or TASK.INDEX (12.3), or use --from.", show_default=False)] = None,
    status: Annotated[str, typer.Option("--status", help="What the jobs are doing: starting, running, holding, transferring.")] = "running",
    attempt: Annotated[Optional[int], typer.Option("--attempt", help="The attempt the executor runs (checked).")] = None,
    source: Annotated[Optional[str], typer.Option("--from", metavar="FILE|-", help="Heartbeats as JSON lines {job_id, status, attempt_nr}.")] = None,
) -> None:
    """Tell the store that jobs are alive, and hear back whether to stop them.

    The reply per job carries `command`: "tobekilled" when the job was killed (stop it and report
    failed), "alreadydone" when the job is final (with -o json, the items of one report:
    docs/json-output.md). Late heartbeats never undo progress (a holding job does not go back to
    running).
    """
    app = context(ctx)
    from jedictl.commands._agent import emit_report
    from jedictl.engine.agent import PassReport
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
        ids = _job_ids(app, job_ids)
        beats = [parse_heartbeat({"job_id": job_id, "status": status, "attempt_nr": attempt}, None) for job_id in ids]
    else:
        raise BadInput("name the jobs (JOB... or --from FILE)", "JOB")
    if not beats:
        raise BadInput("holds no heartbeats", "--from")
    started = time.monotonic()
    replies = take_heartbeats(app.store(), beats, app.clock.now(), app.settings.report.batch_size)
    summary = PassReport("heartbeat")
    for reply in replies:
        summary.add(reply.command or "alive", **reply.as_item())
    emit_report(app, summary, time.monotonic() - started, every_item=True)


def kill(
    ctx: typer.Context,
    job_ids: Annotated[Optional[List[str]], typer.Argument(metavar="[JOB]...", help="Jobs to kill: ids (4711) or TASK.INDEX (12.3).", show_default=False)] = None,
    task_id: Annotated[Optional[int], typer.Option("--task", help="Kill every unfinished job of this task.")] = None,
    code: Annotated[Optional[int], typer.Option("--code", help="PanDA kill code (2 expire, 3 abort, 9 force, 51 reassign, ...); default: killed by a person.")] = None,
    subjobs: SubjobOpt = None,
    keep_going: KeepGoingOpt = True,
) -> None:
    """Kill jobs: queued ones end now, running ones at their next heartbeat.

    A queued job ends at once (cancelled; closed for the system's codes) and its input goes back to
    the pool with an attempt used but no failure. A job on a worker is told to stop at its next
    heartbeat and ends when its executor reports (codes 9, 52 and 99 end it at once). --task with
    --subjob kills those subjobs only; --no-keep-going kills in the order given and stops at the first
    job refused (docs/subjobs.md).
    """
    app = context(ctx)
    from jedictl.commands._agent import emit_report
    from jedictl.engine.agent import PassReport
    from jedictl.commands.jobs_subjobs import subjob_ids
    from jedictl.engine.commando.subjobs import kill_in_order
    from jedictl.store import jobs as job_store

    ids = subjob_ids(app, job_ids, task_id, subjobs)
    store = app.store()
    if task_id is not None and not subjobs:
        with store.read() as conn:
            ids += job_store.unfinished_job_ids(conn, task_id)
    started = time.monotonic()
    results = kill_in_order(store, list(dict.fromkeys(ids)), app.settings, app.clock.now(), code=code, keep_going=keep_going)
    summary = PassReport("kill")
    for result in results:
        item = result.as_item()
        summary.add(item.pop("outcome"), **item)
    emit_report(app, summary, time.monotonic() - started, every_item=True)
    if summary.errors:
        raise typer.Exit(1)


def _job_ids(app: AppContext, texts: List[str]) -> list[int]:
    """The ids of JOB arguments: ids as given, TASK.INDEX (12.3) looked up as `jobs show` does."""
    from jedictl.engine.views.jobs import parse_job_refs, resolve_job_ids

    references = parse_job_refs(texts)  # malformed: exit 2 before the store is opened
    if all(reference.job_id is not None for reference in references):
        return [reference.job_id for reference in references]
    with app.store().read() as conn:
        return resolve_job_ids(conn, references)
