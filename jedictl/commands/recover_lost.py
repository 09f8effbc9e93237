"""`jedictl recover-lost DATASET [--files LFN ...] [--dry-run]`: re-make files the data catalog declares
lost (docs/recovery.md; seed 000 "Lost file recovery")."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import context
from jedictl.output import View

VIEW = View(tables={
    "recoveries": View(("task_id", "original_task_id", "status", "parent_id", "jobs", "inputs", "files", "lost_inputs"), keep=3),
    "already_recovering": View(("lfn", "task_id", "status", "replacement"), keep=2),
})


def recover_lost(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="The output dataset whose files are lost.")],
    files: Annotated[Optional[List[str]], typer.Option("--files", metavar="LFN", help="Only these lost files (repeatable, or several comma-separated in one; default: every file of DATASET the catalog declares lost).", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the recovery tasks that would be made; write nothing.")] = False,
    user: Annotated[Optional[str], typer.Option("--user", help="Who asks, for the record (default: your login name).")] = None,
) -> None:
    """Make lost files again: find the jobs that made them and a recovery task that re-runs those jobs.

    Each recovery task re-runs the jobs of the task that wrote the files, on exactly their inputs, and
    registers new files in the same output datasets. When those inputs are lost too, the tasks that made
    them are recovered first and the recovery waits for them. Files a recovery already takes care of are
    not recovered twice.
    """
    app = context(ctx)
    from jedictl.commands.submit import _login_name
    from jedictl.engine.commando.recovery import recover
    from jedictl.errors import BadInput

    names = [name.strip() for text in files or [] for name in text.split(",")]
    if any(not name for name in names):
        raise BadInput("an empty file name", "--files")
    result = recover(app.store(), dataset, names or None, by=user or _login_name(), now=app.clock.now(), dry_run=dry_run)
    if not result["recoveries"]:
        app.note(f"recover-lost: nothing to do for {dataset}" + (": no lost files" if not result["lost_files"] else
                                                                  ": every lost file is already taken care of"))
    app.emit(result, VIEW)
