"""The Typer app every command module builds on: global options declared once, one error funnel.

`App` is `typer.Typer` whose groups and commands are built with the two classes below. Each adds the
global options (`_common.global_params()`, Typer's own parameter objects) to its parameters, so they
are parsed at every level (`jedictl --db X task list`, `jedictl task --db X list`,
`jedictl task list --db X`) and listed in every `--help`; the command's function never sees them:
`_common.context()` reads them back from the context chain. A command that declares an option of
the same name itself (demo's `--db`) keeps its own.

`RootGroup` runs the whole invocation inside `_common.error_funnel`, the one place where errors
become one line and an exit code; Click's usage errors, raised while the command line is parsed at any
level, become one line too (`_usage`), never Typer's box.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import typer
import typer.core

from jedictl.commands._help import HelpMixin
from jedictl.commands._common import VERBOSE_KEY, _env_verbose, error_funnel, given_options, global_params


def _with_globals(params: list[Any] | None, callback: Callable[..., Any] | None) -> tuple[list[Any], Callable[..., Any] | None, frozenset[str]]:
    """The parameters with the global options added (those the command does not declare itself), the
    callback that drops their values, and their names."""
    own = {param.name for param in params or []}
    shared = [param for param in global_params() if param.name not in own]
    names = frozenset(param.name for param in shared)
    if callback is None:
        return [*(params or []), *shared], None, names

    @functools.wraps(callback)
    def call(**values: Any) -> Any:
        return callback(**{name: value for name, value in values.items() if name not in names})

    return [*(params or []), *shared], call, names


class Command(HelpMixin, typer.core.TyperCommand):
    """A command that also takes the global options (and jedictl's help: `_help.HelpMixin`)."""

    def __init__(self, *args: Any, params: list[Any] | None = None, callback: Callable[..., Any] | None = None, **kwargs: Any) -> None:
        params, callback, self.global_names = _with_globals(params, callback)
        super().__init__(*args, params=params, callback=callback, **kwargs)

    def invoke(self, ctx: typer.Context) -> Any:
        # What the funnel goes by until the settings are loaded: -vv shows the traceback of an early error.
        ctx.meta[VERBOSE_KEY] = given_options(ctx).verbose or _env_verbose()
        return super().invoke(ctx)


class Group(HelpMixin, typer.core.TyperGroup):
    """A group that also takes the global options (`jedictl task --db X list`) (and jedictl's help)."""

    def __init__(self, *args: Any, params: list[Any] | None = None, callback: Callable[..., Any] | None = None, **kwargs: Any) -> None:
        params, callback, self.global_names = _with_globals(params, callback)
        super().__init__(*args, params=params, callback=callback, **kwargs)


class RootGroup(Group):
    """The program: every error of every command ends in the one funnel."""

    _argv: Sequence[str] = ()

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        self._argv = tuple(args)
        with _usage_errors(self._argv):
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: typer.Context) -> Any:
        with _usage_errors(self._argv), error_funnel(ctx):
            return super().invoke(ctx)


@contextmanager
def _usage_errors(argv: Sequence[str]) -> Iterator[None]:
    """A usage error of Click's parser (exit 2) as jedictl's one error line and a hint line at most."""
    from jedictl.commands._usage import ClickException, NoArgsIsHelpError, usage_lines

    try:
        yield
    except NoArgsIsHelpError:
        raise  # `jedictl task`: the help, as asked for
    except ClickException as exc:

        for line in usage_lines(exc, argv):
            typer.echo(line, err=True)
        raise typer.Exit(exc.exit_code) from None


class App(typer.Typer):
    """`typer.Typer` with jedictl's group and command classes as defaults."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(name, **kwargs)
