"""How every `--help` reads, decided once for all commands rather than option by option.

- A value's placeholder is a word: the option's own `metavar`, else the object it names (`--task`
  TASK_ID, `--site` SITE, `--status` STATUS), else its type (INTEGER, NUMBER, TEXT, PATH), a short
  set of choices as `{a|b|c}`; flags and counters have none. Never Typer's `<int range>`, `<list[str]>`
  or `<bool>`.
- A number's bounds are words in the help ("At least 1."), not `[x>=1]`.
- A default that comes from the configuration is shown with its value: "(default: refine.limit)" in
  a help string reads "(default: 100, from config refine.limit)".
- Every command gets an epilog with its EXAMPLES (`_examples.py`); the program's own help also points
  to the glossary.
- With NO_COLOR set (no-color.org), help has no escape sequences at all, bold included.

`tidy()` rewrites Typer's parameter objects in place (idempotent), so `--help`, the man pages
(`jedictl.manpages` reads the same objects) and completion (`_complete.py`) agree. Nothing here imports
the engine or the store.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from enum import Enum
from pathlib import PurePath
from typing import Any, Iterable, Iterator

import typer.core

#: The placeholder of an option (by its Python name) that names an object or a fixed vocabulary.
VALUE_NAMES = {
    "task_id": "TASK_ID", "task": "TASK_ID", "parent": "TASK_ID",
    "job": "JOB_ID", "job_id": "JOB_ID",
    "site": "SITE", "sites": "SITE", "cloud": "CLOUD", "nucleus": "NUCLEUS", "endpoint": "ENDPOINT",
    "dataset": "DATASET", "user": "USER",
    "status": "STATUS", "state": "STATE", "kind": "KIND", "action": "ACTION",
}
#: Placeholders of plain types.
TYPE_NAMES = {int: "INTEGER", float: "NUMBER", str: "TEXT", bool: "BOOLEAN"}
#: Choices up to this many are spelled out as `{a|b|c}`; a longer set is named (STATUS) and completed.
MAX_SPELLED_CHOICES = 6

_TIDY = "_jedictl_tidy"
_CONFIG_DEFAULT = re.compile(r"\bdefault: ([a-z_]+\.[a-z_]+)\b")


def tidy(params: Iterable[Any]) -> list[Any]:
    """`params` with their placeholders, bounds, defaults and completion in jedictl's form."""
    params = list(params)
    for param in params:
        if getattr(param, _TIDY, False):
            continue
        setattr(param, _TIDY, True)
        _tidy_one(param)
    return params


def _tidy_one(param: Any) -> None:
    from jedictl.commands._complete import attach

    is_option = param.param_type_name == "option"
    if is_option and (getattr(param, "is_flag", False) or getattr(param, "count", False)):
        param.metavar = ""  # a switch takes no value: no placeholder (Typer would print <bool>)
        if getattr(param, "count", False):
            param.show_default = False  # "-v" counts; "[default: 0]" says nothing
    elif is_option and param.metavar is None:
        param.metavar = value_name(param)
    elif not is_option:
        param.metavar = bare_name(param.metavar or str(param.name).upper())
    help_text = config_defaults(param.help) if param.help else param.help
    bounds = bounds_in_words(param)
    if bounds:
        help_text = f"{help_text.rstrip()} {bounds}" if help_text else bounds
    param.help = help_text
    _use_words(param)
    attach(param)


def bare_name(metavar: str) -> str:
    """An argument's placeholder without the decoration usage adds (`[TASK_ID]...` -> `TASK_ID`)."""
    name = metavar.strip()
    name = name[:-3] if name.endswith("...") else name
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


def usage_name(param: Any) -> str:
    """An argument in a usage line: `TASK_ID`, `[FILE]` when optional, `LFN...` / `[TASK_ID]...` when
    repeatable -- the man pages' SYNOPSIS writes the same."""
    name = bare_name(param.metavar or str(param.name).upper())
    name = name if param.required else f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


def value_name(param: Any) -> str:
    """The placeholder of an option that has no metavar of its own."""
    choices = _choices(param)
    if choices and len(choices) <= MAX_SPELLED_CHOICES:
        return "{" + "|".join(choices) + "}"
    if param.name in VALUE_NAMES:
        return VALUE_NAMES[param.name]
    if choices:
        return str(param.name).upper()
    kind = _element_type(param)
    if isinstance(kind, type) and issubclass(kind, PurePath):
        return "PATH"
    return TYPE_NAMES.get(kind, str(param.name).upper())  # type: ignore[arg-type]


def _choices(param: Any) -> list[str]:
    descriptor = getattr(param, "type_descriptor", None)
    choices = getattr(descriptor, "choices", None) if descriptor is not None else getattr(param.type, "choices", None)
    return [str(c.value if isinstance(c, Enum) else c) for c in choices or ()]


def _element_type(param: Any) -> Any:
    """The Python type of one value (`list[int]` -> int); for plain Click parameters, by the type's name."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:
        return {"integer": int, "float": float, "text": str, "boolean": bool}.get(getattr(param.type, "name", ""), str)
    annotation = descriptor.annotation
    args = getattr(annotation, "__args__", None)
    if getattr(annotation, "__origin__", None) in (list, tuple) and args:
        annotation = args[0]
    return annotation


def bounds_in_words(param: Any) -> str | None:
    """"At least 1.", "At most 256.", "From 0.0 to 1.0." -- what Typer writes as `[x>=1]`."""
    if getattr(param, "count", False) or param.param_type_name != "option":
        return None
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is None and high is None:
        return None
    if low is not None and high is not None:
        return f"From {low} to {high}."
    return f"At least {low}." if low is not None else f"At most {high}."


_WORDED: dict[type, type] = {}


def _use_words(param: Any) -> None:
    """Give `param` a subclass of its Typer class that prints what `tidy` decided instead of Typer's own
    forms: no `[x>=1]` (the help says the bounds in words; they still apply), and for an argument no
    type column (`<str>`) and the usage form of `usage_name` (not `{dataset}` or `[[TASK_ID]...]...`)."""
    cls = type(param)
    if cls in _WORDED.values() or not hasattr(cls, "_get_number_range_help_str"):
        return
    if cls not in _WORDED:
        methods: dict[str, Any] = {"_get_number_range_help_str": lambda self: None, "__module__": cls.__module__}
        if param.param_type_name == "argument":
            methods.update(
                display_type_rich=lambda self, ctx: None,
                _usage_display_name=lambda self: usage_name(self),
                display_name_raw=property(lambda self: self.metavar + ("..." if self.nargs != 1 else "")),
            )
        _WORDED[cls] = type(cls.__name__, (cls,), methods)
    param.__class__ = _WORDED[cls]


def config_defaults(text: str) -> str:
    """"(default: refine.limit)" -> "(default: 100, from config refine.limit)": a default that is a
    setting is shown with its built-in value (a list or a mapping is left to `jedictl config show`)."""
    return _CONFIG_DEFAULT.sub(lambda match: "default: " + setting_default(match.group(1)), text)


def setting_default(key: str) -> str:
    """How a help text names the default of a setting: its built-in value, and where to change it."""
    value = _setting_value(key)
    if value is _MISSING:
        return key
    if value in (None, "", [], {}):
        return f"unset, from config {key}"
    if isinstance(value, (list, dict)):
        return f"from config {key} (`jedictl config show`)"
    if isinstance(value, bool):
        value = str(value).lower()
    return f"{value}, from config {key}"


_MISSING = object()


def _setting_value(key: str) -> Any:
    from jedictl.config import Settings

    value: Any = Settings()
    for part in key.split("."):
        if not hasattr(value, part):
            return _MISSING
        value = getattr(value, part)
    return value


# ------------------------------------------------------------------------------------ examples

def command_path(ctx: typer.Context) -> str:
    """`task list` for `jedictl task list` (the program's own name left out), "" for the program."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def epilog(path: str) -> str | None:
    """The text under a command's help: its examples, and for the program the glossary."""
    from jedictl.commands._examples import EXAMPLES, GLOSSARY_NOTE

    lines: list[str] = []
    examples = EXAMPLES.get(path, ())
    if examples:
        lines.append("Examples:")
        for example in examples:
            lines += ["", f"{example.what}:", f"  {example.command}"]
    if path == "":
        lines += ["", GLOSSARY_NOTE]
    return "\n".join(lines) if lines else None


# ------------------------------------------------------------------------------------- NO_COLOR

def no_color() -> bool:
    """NO_COLOR is set and not empty (no-color.org): no escape sequences at all, bold included."""
    return bool(os.environ.get("NO_COLOR"))


def console(**kwargs: Any) -> Any:
    """A rich Console that honours NO_COLOR fully: rich alone drops colours but keeps bold and dim."""
    from rich.console import Console

    if no_color():
        kwargs["color_system"] = None
    return Console(**kwargs)


@contextmanager
def _help_colours() -> Iterator[None]:
    import typer.rich_utils as rich_utils

    saved = rich_utils.COLOR_SYSTEM
    if no_color():
        rich_utils.COLOR_SYSTEM = None  # rich then writes text only
    try:
        yield
    finally:
        rich_utils.COLOR_SYSTEM = saved


# ---------------------------------------------------------------------------------- the classes

class HelpMixin:
    """For a command or group class: tidy parameters, the examples as epilog, NO_COLOR in help."""

    def get_params(self, ctx: typer.Context) -> list[Any]:
        return tidy(super().get_params(ctx))  # type: ignore[misc]

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        text = epilog(command_path(ctx))
        if text is not None:
            if getattr(self, "rich_markup_mode", None) == "rich":
                from rich.markup import escape

                text = escape(text)  # an example's `[...]` is text, not a style
            self.epilog = text
        with _help_colours():
            return super().format_help(ctx, formatter)  # type: ignore[misc]


class HelpCommand(HelpMixin, typer.core.TyperCommand):
    """A command without jedictl's global options (`completion show`), with jedictl's help."""


class HelpGroup(HelpMixin, typer.core.TyperGroup):
    """A group without jedictl's global options, with jedictl's help."""
