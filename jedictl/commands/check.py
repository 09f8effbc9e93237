"""`jedictl check`: verify the store's invariants (every counter equals the rows it counts)."""

from __future__ import annotations

import typer

from jedictl.commands._common import ConfigOpt, DbOpt, NowOpt, OutputOpt, QuietOpt, VerboseOpt, context, handle_errors


@handle_errors
def check(
    ctx: typer.Context,
    db: DbOpt = None, config: ConfigOpt = None, output: OutputOpt = None, now: NowOpt = None,
    verbose: VerboseOpt = 0, quiet: QuietOpt = False,
) -> None:
    """Check that dataset counters agree with the file records and that no final task is leased.

    Also that no input file is in two live jobs, that the retry history fits the jobs it links, that
    every running input record belongs to a live job reading it (nothing lost) and that no record was
    finished by two jobs (nothing done twice). Exit 0 when the store is consistent, 1 when a
    violation was found (each is printed).
    """
    app = context(ctx, db=db, config=config, output=output, now=now, verbose=verbose, quiet=quiet)
    from jedictl.store.invariants import check_all

    with app.store().read() as conn:
        violations = check_all(conn)
    if app.output in ("json", "yaml"):
        app.emit({"ok": not violations, "violations": violations})
    else:
        for violation in violations:
            typer.echo(violation)
        app.note("check: " + (f"{len(violations)} violations" if violations else "consistent"))
    if violations:
        raise typer.Exit(1)
