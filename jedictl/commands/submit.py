"""`jedictl submit FILE|-`: register a task from a jedictl task spec or PanDA task parameters."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context, read_source


def submit(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Task spec or PanDA task parameters (YAML or JSON); - reads stdin.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print the normalised task; write nothing.")] = False,
    user: Annotated[Optional[str], typer.Option("--user", help="Owner of the task (default: the spec's, else your login name).")] = None,
    priority: Annotated[Optional[int], typer.Option("--priority", help="Task priority (overrides the spec).")] = None,
    parent: Annotated[Optional[int], typer.Option("--parent", metavar="TASK_ID", help="Parent task this one waits for.", min=1)] = None,
) -> None:
    """Validate a task and store it as `registered` (the refiner takes it from there).

    The format is detected: PanDA task parameters (as written by prun/pathena) have `taskName` and
    `jobParameters`; anything else is read as a jedictl task spec (docs/task-spec.md).
    """
    app = context(ctx)
    from jedictl.engine.input.documents import load_document
    from jedictl.engine.task.privileges import Privileges
    from jedictl.engine.task.submission import PriorityPolicy, parse_definition, register_task

    text, name = read_source(source)
    document = load_document(text, name)
    refine = app.settings.refine
    policy = PriorityPolicy(refine.analysis_priority, Privileges.from_settings(app.settings.privileges),
                            app.settings.generate.express_priority)
    definition = parse_definition(
        document, user=user, default_user=_login_name(), priority=priority, parent_id=parent,
        analysis_priority=refine.analysis_priority, policy=policy,
    )
    if definition.priority_capped_from is not None:
        app.note(f"priority {definition.priority_capped_from} lowered to {definition.task_priority}: analysis tasks of "
                 f"{definition.user_name} are capped (`privileges` lifts the cap: s for a user, g or s for a group)")
    if definition.format == "panda":
        from jedictl.engine.task.panda_params import misspelt_keys

        # PanDA's format keeps keys it does not know, so a typo is no error -- but it is silently unused.
        for key, meant in misspelt_keys(definition.unknown_keys):
            app.note(f"jedictl: warning: {key}: not a task parameter jedictl knows (kept, not used); did you mean {meant}?")
    if definition.unknown_keys and app.verbose:
        app.note(f"kept but not used by jedictl: {', '.join(definition.unknown_keys)}")
    if dry_run:
        app.emit(definition.summary())
        return
    store = app.store()
    with store.begin() as conn:
        task_id = register_task(conn, definition, document, app.clock.now(), app.owner,
                                max_active_tasks=app.settings.user_caps.max_active_tasks)
    app.emit({"task_id": task_id, "status": "registered"})


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "unknown"
