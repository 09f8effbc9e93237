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
    allow_task_duplication: Annotated[bool, typer.Option(
        "--allow-task-duplication",
        help="Make a new task even if one of yours has this name (outDS), and let it write the output datasets another task "
             "writes (PanDA's allowTaskDuplication).")] = False,
    use_new_code: Annotated[bool, typer.Option(
        "--use-new-code",
        help="When the submission resubmits a task, its code replaces the task's: the sandbox (-a ARCHIVE) and sourceURL "
             "of PanDA task parameters, the command and source_url of a spec (prun's --useNewCode).")] = False,
) -> None:
    """Validate a task and store it as `registered` (the refiner takes it from there), or resubmit yours of the same name.

    The format is detected: PanDA task parameters (as written by prun/pathena) have `taskName` and
    `jobParameters`; anything else is read as a jedictl task spec (docs/task-spec.md).

    A task named as one of yours that is finished, failed, done, aborted or exhausted (its outDS) is
    not made again: that task is resubmitted, as PanDA does -- its failed and unused input files and
    the files added to its inputs since are processed, with the parameters a resubmission may change
    (docs/analysis.md). One still running is refused, and so is a broken one unless
    --allow-task-duplication asks for a new task.
    """
    app = context(ctx)
    from jedictl.engine.input.documents import load_document
    from jedictl.commands._agent import publish_events
    from jedictl.engine.commando.submit import submit as submit_task
    from jedictl.engine.task.privileges import Privileges
    from jedictl.engine.task.submission import PriorityPolicy, parse_definition

    text, name = read_source(source)
    document = load_document(text, name)
    refine = app.settings.refine
    policy = PriorityPolicy(refine.analysis_priority, Privileges.from_settings(app.settings.privileges),
                            app.settings.generate.express_priority)
    definition = parse_definition(
        document, user=user, default_user=_login_name(), priority=priority, parent_id=parent,
        analysis_priority=refine.analysis_priority, policy=policy, allow_task_duplication=allow_task_duplication,
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
    outcome = submit_task(app.store(), definition, document, app.settings, app.clock.now(), app.owner, use_new_code=use_new_code,
                          parent_given=parent is not None, priority_given=priority is not None)
    for warning in outcome.warnings:
        app.note(warning)
    app.emit(outcome.as_dict())
    publish_events(app)


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "unknown"
