"""Operator commands on a task (docs/task-commands.md): kill, retry (also top-level), finish, incexec,
pause, resume, avalanche, reassign, and `settle` for tasks left finishing.

Each command is checked against the task's status as JEDI checks it and applied at once, in one
transaction; a refusal names the task, its status and what the command needs, exits 2 and writes
nothing.
"""

from __future__ import annotations

import time
from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import context, read_source

TaskArg = Annotated[int, typer.Argument(metavar="TASK_ID", help="The task.", min=1)]
UserOpt = Annotated[Optional[str], typer.Option("--user", help="Who gives the command, for the record (default: your login name).")]
CommentOpt = Annotated[Optional[str], typer.Option("--comment", help="Why, for the record (default: \"<command> by <user>\").")]


def _run(ctx: typer.Context, command: str, task_id: int, user: str | None, comment: str | None, **request: object) -> None:
    app = context(ctx)
    from jedictl.commands._agent import publish_events
    from jedictl.commands.submit import _login_name
    from jedictl.engine.commando.commands import Request, run_command

    outcome = run_command(app.store(), Request(command, task_id, user or _login_name(), comment, **request), app.settings,
                          app.clock.now())
    app.emit(outcome.as_dict())
    publish_events(app)


def kill(
    ctx: typer.Context, task_id: TaskArg, user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """Kill a task: every job is killed and the task is aborted.

    Queued jobs end at once (cancelled); a job on a worker is told to stop at its next heartbeat. With
    no job left the task is `aborted` now (datasets failed, outputs closed, children killed);
    otherwise it waits in `toabort` and finalize aborts it once the executors have stopped. Refused
    in finished, done, prepared, broken, aborted, toabort, aborting and failed.
    """
    _run(ctx, "kill", task_id, user, comment)


def retry(
    ctx: typer.Context, task_id: TaskArg,
    max_attempt: Annotated[Optional[int], typer.Option("--max-attempt", min=1, help="New attempt ceiling of the retried inputs (default: their ceiling + 5).")] = None,
    user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """Retry a finished, failed or exhausted task on its unsuccessful inputs only.

    Inputs that used up their attempts get 5 more (or --max-attempt as their ceiling), inputs left
    by killed jobs come back, and the task goes back to `ready`; nothing to retry leaves it as it
    was. Child tasks are retried too, unless aborted, broken or failed. A broken task is refused:
    fix the definition and submit a new task.
    """
    _run(ctx, "retry", task_id, user, comment, max_attempt=max_attempt)


def finish(
    ctx: typer.Context, task_id: TaskArg,
    soft: Annotated[bool, typer.Option("--soft", help="No new jobs; wait for the running ones instead of killing them.")] = False,
    user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """Finish a task with what it has processed: `finishing`, then `passed` (finalize gives the final status).

    Hard (default): every job is force-killed, unprocessed inputs are set failed and the task is
    `passed`. Soft: queued jobs are killed and running ones may end; the task stays `finishing`
    until they have (then `task settle` or finish again makes it `passed`). Refused where kill is.
    """
    _run(ctx, "finish", task_id, user, comment, soft=soft)


def incexec(
    ctx: typer.Context, task_id: TaskArg,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Task parameters to change, YAML or JSON (null removes one); - reads stdin.")],
    user: UserOpt = None, comment: CommentOpt = None,
    rescout: Annotated[bool, typer.Option("--rescout", help="Run scout jobs again before the rest (a task scouts once unless asked).")] = False,
) -> None:
    """Retry a task with changed parameters and a fresh look at its inputs.

    FILE maps PanDA keys or jedictl option names to new values, e.g. `{nFilesPerJob: 5, site:
    MWT2}`: nFilesPerJob, nMaxFilesPerJob, nGBPerJob, nFiles, nEvents, maxWalltime, includedSite,
    excludedSite, site, cloud, ramCount, maxCoreCount, forceStaged (options refused at submission,
    e.g. avoidVP, are refused here too). Unsuccessful inputs are retried as by `retry`, and the task goes back to `defined`
    with its input datasets to be fed again, so `feed` picks up files added since. A task scouts once:
    with `--rescout` its next jobs are scouts again, measured before the rest is released (when the
    changes make the old measurements wrong). Accepted in finished, failed, aborted, done and exhausted.
    """
    from jedictl.engine.input.documents import load_document

    text, name = read_source(source)
    _run(ctx, "incexec", task_id, user, comment, changes=load_document(text, name), rescout=rescout)


def pause(
    ctx: typer.Context, task_id: TaskArg, user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """Pause a task: no new jobs, and its queued (activated) jobs are throttled until `resume`."""
    _run(ctx, "pause", task_id, user, comment)


def resume(
    ctx: typer.Context, task_id: TaskArg, user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """Resume a paused or throttled task: back to the status it had, its throttled jobs activated."""
    _run(ctx, "resume", task_id, user, comment)


def avalanche(
    ctx: typer.Context, task_id: TaskArg, user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """End a task's scouting now: `scouting -> scouted`; finalize then releases all its input and it runs on."""
    _run(ctx, "avalanche", task_id, user, comment)


def reassign(
    ctx: typer.Context, task_id: TaskArg,
    site: Annotated[Optional[str], typer.Option("--site", help="Run the task's jobs at this site (queue).")] = None,
    cloud: Annotated[Optional[str], typer.Option("--cloud", help="Run the task's jobs in this cloud.")] = None,
    nucleus: Annotated[Optional[str], typer.Option("--nucleus", help="Send the task's outputs to this nucleus.")] = None,
    user: UserOpt = None, comment: CommentOpt = None,
) -> None:
    """Move a task to another site, cloud or nucleus: its queued jobs are closed and generated again there.

    Running jobs finish where they are. A cloud or nucleus without --site frees a task pinned to a
    site; a new nucleus also gets the outputs' destinations. Accepted in defined, ready, running,
    scouting, scouted, pending, assigning and exhausted.
    """
    _run(ctx, "reassign", task_id, user, comment, site=site, cloud=cloud,
         nucleus=nucleus)


def settle(
    ctx: typer.Context,
    task_ids: Annotated[Optional[List[int]], typer.Argument(metavar="[TASK_ID]...", help="Only these tasks (default: every finishing task).", show_default=False)] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many tasks.")] = 100,
    user: UserOpt = None,
) -> None:
    """Make `finishing` tasks whose jobs have all ended `passed` (run it from cron with finalize).

    A soft finish, the watchdog's finish of an exhausted task and the feeder's finish of an empty
    input leave a task `finishing`; once none of its jobs is live, its unprocessed inputs are set
    failed and it becomes `passed`. Tasks whose jobs still run are listed as waiting.
    """
    app = context(ctx)
    from jedictl.commands.submit import _login_name
    from jedictl.commands._agent import emit_report, publish_events
    from jedictl.engine.agent import PassReport
    from jedictl.engine.commando.commands import settle_pass

    started = time.monotonic()
    outcomes = settle_pass(app.store(), app.settings, app.clock.now(), user or _login_name(), task_ids or (), limit)
    summary = PassReport("settle")
    for outcome in outcomes:
        item = outcome.as_dict()
        summary.add(item.pop("outcome"), **item)
    emit_report(app, summary, time.monotonic() - started, every_item=True)
    publish_events(app)

