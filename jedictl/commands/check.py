"""`jedictl check`: verify the store's invariants (every counter equals the rows it counts)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def check(
    ctx: typer.Context,
    dead_owner: Annotated[Optional[list[str]], typer.Option(
        "--dead-owner", metavar="OWNER",
        help="A lease owner (host:pid:tag, or host:pid) known to be dead: any task it still leases is a violation. Repeatable.")] = None,
    no_live_passes: Annotated[bool, typer.Option(
        "--no-live-passes", help="No agent pass runs anywhere now: every task lease is a violation.")] = False,
) -> None:
    """Check that every dataset's counters agree with its file records and that no final task is leased.

    Also that no input file is in two live jobs, that the retry history fits the jobs it links, that
    every running input record belongs to a live job reading it (nothing lost), that no record was
    finished by two jobs (nothing done twice), that no task that ended (or was never generated) has a
    live job, that no output name was registered by two jobs and none is missing from the data
    catalog, that every input of a done or finished task was processed or failed for good (unless
    the task was forced to finish), that no many-time input was consumed by a job, that no periodic
    template has two instances for one due time, that no lost file is recovered twice, that no run job
    went ahead of its site's build job, that no job but a task's preprocess job was made before that
    job finished, and that event ranges follow their jobs (none held by a job that ended, none left to
    do or unmerged for a file that ended, no file finished without merged ranges, no event-service job
    merging without its ES merge job), and that each work-queue element was taken by one agent, names a
    live agent while held and agrees with its jobs (none for a block not released, all at its agent's
    sites, none left for a Done block). With `--dead-owner` or `--no-live-passes`, also that no
    task is leased by a process that is gone (a pass releases its leases when it ends, also on SIGINT
    or SIGTERM; only a SIGKILL leaves them). Exit 0 when the store is consistent, 1 when a violation
    was found (each is printed).
    """
    app = context(ctx)
    from jedictl.output import View
    from jedictl.store.invariants import check_violations

    with app.store().read() as conn:
        violations = check_violations(conn, dead_owners=tuple(dead_owner or ()), no_live_passes=no_live_passes)
    if app.output in ("json", "yaml"):
        app.emit({"ok": not violations, "violations": violations})
    elif app.output == "tsv":
        app.emit(violations, View(VIOLATION_COLUMNS))
    else:  # the verdict is the result: on stdout, like the violations
        if violations:
            app.emit(violations, View(VIOLATION_COLUMNS, keep=3), title=f"check: {len(violations)} violations")
        elif not app.quiet:
            typer.echo("check: consistent")
    if violations:
        raise typer.Exit(1)


VIOLATION_COLUMNS = ("check", "object", "message")
