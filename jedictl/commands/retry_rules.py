"""`jedictl retry-rules import|list|remove|match`: PanDA's retry module rules in the store (docs/retry-rules.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, List, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context, read_source
from jedictl.output import View

if TYPE_CHECKING:
    from jedictl.engine.jobs.retry_rules import RetryRule

app = App(help="Retry rules: what to do when a job fails with a given error (PanDA's retry module).",
          no_args_is_help=True)

RULE_COLUMNS = ["id", "error_source", "error_code", "message_pattern", "action", "parameters", "scope", "active",
                "expires_at", "description"]
LIST_VIEW = View(tuple(RULE_COLUMNS), keep=5)


def rule_row(rule: RetryRule) -> dict[str, Any]:
    """A rule as one output row: the scope fields it sets are gathered in `scope`, unset ones left out."""
    from jedictl.model.retry import SCOPE_FIELDS

    return {
        "id": rule.id, "error_source": rule.error_source, "error_code": rule.error_code,
        "message_pattern": rule.message_pattern, "action": rule.action, "parameters": dict(rule.parameters),
        "scope": {name: getattr(rule, name) for name in SCOPE_FIELDS if getattr(rule, name)},
        "active": rule.active, "expires_at": rule.expires_at, "description": rule.description,
    }


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Rules file (a YAML or JSON list, docs/retry-rules.md); - reads stdin.")],
    replace: Annotated[bool, typer.Option("--replace", help="Make the stored rules exactly the file's: rules not in it are removed.")] = False,
) -> None:
    """Add the file's rules; rules already stored unchanged are skipped. All or nothing."""
    app_ctx = context(ctx)
    from jedictl.engine.jobs.retry_rules import parse_rules_text
    from jedictl.store import retry_rules as rule_store

    text, name = read_source(source)
    rules = parse_rules_text(text, name)  # the whole file is checked before the store is opened
    with app_ctx.store().begin() as conn:
        counts = rule_store.import_rules(conn, rules, replace, source=name)
    app_ctx.emit(counts)


@app.command("list")
def list_(
    ctx: typer.Context,
    source: Annotated[Optional[str], typer.Option("--source", help="Only rules for this error source (pilot finds pilotErrorCode too).")] = None,
    code: Annotated[Optional[int], typer.Option("--code", help="Only rules for this error code.")] = None,
    action: Annotated[Optional[str], typer.Option("--action", help="Only rules with this action.")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List the stored rules, expired ones included, by id."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import RETRY_ACTIONS

    app_ctx = context(ctx)
    check_choice(action, RETRY_ACTIONS, "--action", "a retry action")
    from jedictl.store import retry_rules as rule_store

    with app_ctx.store().read() as conn:
        rules = rule_store.list_rules(conn, source=source, code=code, action=action)
    app_ctx.emit([rule_row(rule) for rule in rules], LIST_VIEW, pick=columns, wide=wide)


@app.command("remove")
def remove(
    ctx: typer.Context,
    ids: Annotated[List[int], typer.Argument(metavar="ID...", help="Rules to remove (ids from `retry-rules list`).")],
) -> None:
    """Remove rules by id. An unknown id removes nothing."""
    app_ctx = context(ctx)
    from jedictl.store import retry_rules as rule_store

    with app_ctx.store().begin() as conn:
        removed = rule_store.remove_rules(conn, ids)
    app_ctx.emit({"removed": removed})


@app.command("match")
def match(
    ctx: typer.Context,
    source: Annotated[str, typer.Option("--source", help="The error source (pilot, exe, ddm, trans, jobdispatcher, ...).")],
    code: Annotated[int, typer.Option("--code", help="The error code.")],
    diag: Annotated[str, typer.Option("--diag", metavar="TEXT", help="The error message, for rules with a message pattern.")] = "",
    vo: Annotated[Optional[str], typer.Option("--vo", help="The job's VO.")] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="The job's prodSourceLabel (managed, user, test, ...).")] = None,
    architecture: Annotated[Optional[str], typer.Option("--architecture", help="The job's architecture (cmtConfig).")] = None,
    release: Annotated[Optional[str], typer.Option("--release", help="The job's software release.")] = None,
    work_queue: Annotated[Optional[str], typer.Option("--work-queue", help="The job's work queue.")] = None,
) -> None:
    """Show the rule that would act on a job failing with this error, or "no rule matches"."""
    app_ctx = context(ctx)
    from jedictl.engine.jobs.retry_rules import FailedJob, JobError, matches, select_rule
    from jedictl.store import retry_rules as rule_store

    moment = app_ctx.clock.now()
    with app_ctx.store().read() as conn:
        rules = rule_store.load_rules(conn, moment)
    job = FailedJob(id=0, attempt_nr=1, vo=vo, prod_source_label=label, architecture=architecture,
                    release=release, work_queue=work_queue)
    error = JobError(source, code, diag)
    chosen = select_rule(rules, job, [error], moment)
    rule = chosen[0] if chosen is not None else None
    answer = {
        "matched": rule is not None,
        "rule": rule_row(rule) if rule is not None else None,
        "mode": None if rule is None else ("acts" if rule.active else "passive: reports only"),
        # The other rules that matched too but lost on specificity/strictness: what an operator checks.
        "outranked": [other.id for other in rules if other is not rule and matches(other, job, error, moment)] if rule else [],
    }
    if app_ctx.output in ("json", "yaml"):  # one object, the same keys whether a rule matched or not
        app_ctx.emit(answer)
    elif app_ctx.output == "tsv":  # the rule as one row, or just the header
        rows = [{**answer["rule"], "mode": answer["mode"], "outranked": answer["outranked"]}] if rule else []
        app_ctx.emit(rows, columns=RULE_COLUMNS + ["mode", "outranked"])
    elif rule is None:
        typer.echo("no rule matches")
    else:
        app_ctx.emit({**answer["rule"], "mode": answer["mode"], "outranked": answer["outranked"]})
