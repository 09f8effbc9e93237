"""Click's usage errors in jedictl's words: one line `jedictl: error: WHAT: why`, a hint on a second
line at most, exit 2 -- never Typer's five-line box, on a terminal or in a pipe.

Click raises a usage error for a missing argument or option, an unknown option or command, a value
its type refuses (Typer has pydantic convert and bound the values) and an extra argument. The error
object knows the parameter at fault; its message is rewritten here in the words jedictl's own input
checks use (`must be at least 1`, `'x' is not an integer`).

`-v` is a counter (`-v`, `-vv`, `-v -v`): it takes no value. `-v 3` would otherwise end as "no such
command '3'" (or as an extra argument), so a number right after `-v`/`--verbose` is named for what it is.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

try:  # Typer 0.29 carries its own copy of Click; earlier releases use Click itself
    from typer import _click as click  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the Typer release
    import click  # type: ignore[no-redef]

#: Flags that take no value; a number right after one of them was meant as its value.
_COUNTERS = re.compile(r"^(-v+|--verbose)$")


#: What the usage errors are (for `_app`'s root group, which catches them).
ClickException = click.exceptions.ClickException
NoArgsIsHelpError = click.exceptions.NoArgsIsHelpError


def usage_lines(error: Any, argv: Sequence[str]) -> list[str]:
    """The one error line (and at most one hint line) for a Click exception raised while parsing `argv`."""
    ctx = getattr(error, "ctx", None)
    what, why, hint = _describe(error, ctx, list(argv))
    head = f"jedictl: error: {what}: {why}" if what else f"jedictl: error: {why}"
    from jedictl.commands._common import one_line

    return [one_line(head)] + ([one_line(hint)] if hint else [])


def _describe(error: Any, ctx: Any, argv: list[str]) -> tuple[str, str, str | None]:
    see = f"see '{ctx.command_path} -h'" if ctx is not None else "see 'jedictl -h'"
    if isinstance(error, click.exceptions.MissingParameter):
        kind = getattr(error.param, "param_type_name", None) or "parameter"
        return param_name(error.param), f"missing {kind}", _usage(ctx) or see
    if isinstance(error, click.exceptions.BadParameter):
        return param_name(error.param) if error.param is not None else (error.param_hint or ""), _value_message(error), None
    if isinstance(error, click.exceptions.NoSuchOption):
        name = error.option_name
        if "=" in name and _COUNTERS.match(name.split("=", 1)[0]):
            return _counter_value(name.split("=", 1)[0])
        return name, "no such option", _did_you_mean(error.possibilities) or see
    if isinstance(error, click.exceptions.BadOptionUsage):
        flag = error.option_name
        if "does not take a value" in error.message:
            return _counter_value(flag) if _COUNTERS.match(flag) else (flag, "takes no value", see)
        if "requires an argument" in error.message:
            return flag, "needs a value", None
        return flag, _sentence(error.message), None
    if error.message.startswith("No such command"):
        name = _quoted(error.message)
        counter = _after_counter(name, argv)
        if counter:
            return _counter_value(counter)
        group = _path(ctx)
        commands = sorted(getattr(ctx.command, "commands", {})) if ctx is not None and group else []
        suggested = re.findall(r"'([^']*)'", error.message.split("Did you mean", 1)[1]) if "Did you mean" in error.message else []
        hint = _did_you_mean(suggested) or (f"commands: {', '.join(commands)}" if commands else see)
        return group, f"no such command {name!r}", hint
    extra = re.match(r"Got unexpected extra argument(?:s|\(s\))? \((.*)\)$", error.message)
    if extra:
        first = extra.group(1).split(" ")[0]
        counter = _after_counter(first, argv)
        if counter:
            return _counter_value(counter)
        words = extra.group(1).split(" ")
        return _path(ctx), f"unexpected argument{'s' if len(words) > 1 else ''} {', '.join(repr(w) for w in words)}", _usage(ctx) or see
    return "", _sentence(error.format_message()), see if isinstance(error, click.exceptions.UsageError) else None


def _counter_value(flag: str) -> tuple[str, str, str]:
    return flag, "takes no value; repeat it for more detail (-v, -vv)", None  # type: ignore[return-value]


def _after_counter(token: str, argv: list[str]) -> str | None:
    """The counter flag right before `token` in `argv` when `token` is a number given as its value."""
    if not token.isdigit():
        return None
    for index, item in enumerate(argv[1:], start=1):
        if item == token and _COUNTERS.match(argv[index - 1]):
            return argv[index - 1]
    return None


def param_name(param: Any) -> str:
    """How the command line names a parameter: its long option, else its metavar (`TASK_ID`)."""
    if param is None:
        return ""
    if getattr(param, "param_type_name", None) == "option":
        longs = [opt for opt in param.opts if opt.startswith("--")]
        return (longs or param.opts or [param.name or ""])[0]
    metavar = getattr(param, "metavar", None) or (param.name or "").upper()
    return metavar.strip("[]{}. ")


def _path(ctx: Any) -> str:
    """The command's words after the program's name (`jobs show`), "" for the program itself."""
    if ctx is None:
        return ""
    return " ".join(ctx.command_path.split(" ")[1:])


def _usage(ctx: Any) -> str | None:
    if ctx is None:
        return None
    try:
        text = " ".join(ctx.command.collect_usage_pieces(ctx))
    except Exception:  # noqa: BLE001 - a hint is optional
        return None
    return f"usage: {ctx.command_path} {text}".rstrip()


def _did_you_mean(possibilities: Sequence[str] | None) -> str | None:
    if not possibilities:
        return None
    return f"did you mean {' or '.join(possibilities)}?"


def _quoted(message: str) -> str:
    match = re.search(r"'([^']*)'", message)
    return match.group(1) if match else message


def _sentence(message: str) -> str:
    text = message.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _value_message(error: Any) -> str:
    """Pydantic's and Click's value messages in jedictl's words."""
    cause = error.__cause__
    errors = _pydantic_errors(cause)
    if errors:
        return "; ".join(_pydantic_message(item) for item in errors[:1])
    return _sentence(error.message)


def _pydantic_errors(cause: BaseException | None) -> list[dict[str, Any]]:
    errors = getattr(cause, "errors", None)
    if not callable(errors):
        return []
    try:
        return list(errors())
    except Exception:  # noqa: BLE001 - not a pydantic ValidationError after all
        return []


def _pydantic_message(item: dict[str, Any]) -> str:
    kind, context, given = item.get("type", ""), item.get("ctx") or {}, item.get("input")
    bounds = {"greater_than_equal": ("ge", "must be at least"), "greater_than": ("gt", "must be more than"),
              "less_than_equal": ("le", "must be at most"), "less_than": ("lt", "must be less than")}
    if kind in bounds:
        key, words = bounds[kind]
        bound = context.get(key)
        return f"{words} {int(bound) if isinstance(bound, float) and bound.is_integer() else bound}"
    if kind in ("int_parsing", "int_type", "int_from_float", "int_parsing_size"):
        return f"{given!r} is not an integer" if isinstance(given, str) else "must be an integer"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return f"{given!r} is not a number" if kind != "finite_number" else "must be a finite number"
    if kind in ("bool_parsing", "bool_type"):
        return f"{given!r} is not true or false"
    if kind == "enum":
        return f"{given!r} is not one of {context.get('expected', '')}"
    message = str(item.get("msg", "")).removeprefix("Value error, ")
    return _sentence(message)
