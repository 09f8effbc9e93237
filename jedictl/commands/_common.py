"""What every command shares: the global options, the per-invocation context, and the error funnel.

Global options (`--db`, `--config`, `--output`, `--now`, `-v`, `-q`) are declared once, in
`_global_options` below; the command and group classes of `jedictl.commands._app` add them to every
command and group, so they are accepted before the command (`jedictl --db X feed`), after it
(`jedictl feed --db X`) and between (`jedictl task --db X list`), and listed in each `--help`.
`context()` merges the places, the later one winning.

Nothing here imports SQLAlchemy or the engine at import time, so `--help` and completion stay fast and
never touch the store.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Optional, Sequence

import typer

from jedictl.config import ENV_VERBOSE, LoadedSettings, load_settings
from jedictl.errors import JedictlError
from jedictl.redact import mask_url

if TYPE_CHECKING:
    from jedictl.clock import Clock
    from jedictl.store.database import Store

GLOBAL_PANEL = "Global options (also accepted before the command)"


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"
    tsv = "tsv"


DbOpt = Annotated[
    Optional[str],
    typer.Option("--db", metavar="URL", help="Store: a SQLite path or a URL (postgresql+psycopg://...). (env: JEDICTL_DB)", rich_help_panel=GLOBAL_PANEL, show_default=False),
]
ConfigOpt = Annotated[
    Optional[str],
    typer.Option("--config", metavar="FILE", help="YAML configuration file. (env: JEDICTL_CONFIG)", rich_help_panel=GLOBAL_PANEL, show_default=False),
]
OutputOpt = Annotated[
    Optional[OutputFormat],
    typer.Option("--output", "-o", help="Output format. (env: JEDICTL_OUTPUT)", rich_help_panel=GLOBAL_PANEL, show_default=False),
]
NowOpt = Annotated[
    Optional[str],
    typer.Option("--now", metavar="TIME", help="Act as if it were TIME (ISO-8601 UTC), for tests and replays. (env: JEDICTL_NOW)", rich_help_panel=GLOBAL_PANEL, show_default=False),
]
VerboseOpt = Annotated[
    int, typer.Option("--verbose", "-v", count=True, help="More detail; -vv shows tracebacks.", rich_help_panel=GLOBAL_PANEL)
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only results and errors.", rich_help_panel=GLOBAL_PANEL)]
ColumnsOpt = Annotated[
    Optional[str], typer.Option("--columns", metavar="COLUMNS", help="Table and tsv columns, by name, comma-separated, in this order.", show_default=False)
]
WideOpt = Annotated[bool, typer.Option("--wide", help="Every column, wrapped to the terminal's width rather than cut.")]
SeedOpt = Annotated[
    Optional[int], typer.Option("--seed", help="Seed for the random choices, so a run can be repeated exactly.", show_default=False)
]


def _global_options(
    db: DbOpt = None, config: ConfigOpt = None, output: OutputOpt = None, now: NowOpt = None,
    verbose: VerboseOpt = 0, quiet: QuietOpt = False,
) -> None:
    """The one declaration of the global options; never called, only read by `global_params()`."""


@functools.cache
def global_params() -> tuple[Any, ...]:
    """The global options as Typer's own parameter objects, built once and shared by every command."""
    import typer.main

    holder = typer.Typer(add_completion=False)
    holder.callback()(_global_options)
    return tuple(typer.main.get_command(holder).params)


@dataclass
class GlobalOptions:
    """The global options as given on the command line, merged over every level of the command."""

    db: str | None = None
    config: str | None = None
    output: str | None = None
    now: str | None = None
    verbose: int = 0
    quiet: bool = False


@dataclass
class AppContext:
    """Everything a command needs for one invocation; the store is opened only when first asked for."""

    loaded: LoadedSettings
    quiet: bool
    _store: "Store | None" = field(default=None, repr=False)
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}")

    @property
    def settings(self):  # noqa: ANN201 - jedictl.config.Settings
        return self.loaded.settings

    @property
    def output(self) -> str:
        return self.settings.output

    @property
    def verbose(self) -> int:
        return self.settings.verbose

    @property
    def clock(self) -> "Clock":
        from jedictl.clock import EARLIEST, LATEST, Clock, in_range, parse_time

        if self.settings.now:
            try:
                moment = parse_time(self.settings.now)
            except ValueError as exc:
                from jedictl.errors import BadInput

                raise BadInput(f"{self.settings.now!r} is not an ISO-8601 time", "--now") from exc
            if not in_range(moment):
                from jedictl.errors import BadInput

                raise BadInput(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}", "--now")
            return Clock(moment)
        return Clock()

    def store(self, check_schema: bool = True) -> "Store":
        if self._store is None:
            from jedictl.store.database import open_store

            # With a broker configured, every status change also queues its task event (docs/messages.md).
            self._store = open_store(self.settings.db, self.settings.sqlite_busy_timeout_s, check_schema=check_schema,
                                     task_events=bool(self.settings.messages.broker_url))
        return self._store

    def emit(self, data: Any, columns: Any = None, title: str | None = None, *, pick: str | None = None, wide: bool = False) -> None:
        """Print `data` in the chosen format; `columns` is its `output.View` (or a list of columns),
        `pick` and `wide` the command's `--columns` and `--wide`."""
        from jedictl.output import Choice, parse_columns, render

        render(data, self.output, view=columns, choice=Choice(parse_columns(pick), wide), title=title)

    def note(self, message: str) -> None:
        """A human remark on stderr (never mixed into results on stdout); silent with -q."""
        if not self.quiet:
            typer.echo(message, err=True)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def context(ctx: typer.Context, *, db: str | None = None) -> AppContext:
    """Merge the global options given at every level of the command line and load the settings.

    `db` is a command's own store option that replaces the global `--db` (demo's new store)."""
    given = given_options(ctx)
    _check_integers(ctx)
    flags = {
        "db": db or given.db,
        "output": given.output,
        "now": given.now,
        "verbose": given.verbose or None,
    }
    loaded = load_settings(flags, config_path=given.config)
    ctx.meta[VERBOSE_KEY] = loaded.settings.verbose
    app = AppContext(loaded=loaded, quiet=given.quiet)
    ctx.call_on_close(app.close)
    return app


def given_options(ctx: typer.Context) -> GlobalOptions:
    """The global options of the command line: the last value given wins; `-v` counts add up."""
    chain = []
    node: typer.Context | None = ctx
    while node is not None:
        chain.append(node)
        node = node.parent
    merged = GlobalOptions()
    for level in reversed(chain):
        names = getattr(level.command, "global_names", ())
        values = {name: level.params.get(name) for name in names}
        for name in ("db", "config", "now"):
            if values.get(name) is not None:
                setattr(merged, name, values[name])
        if values.get("output") is not None:
            merged.output = getattr(values["output"], "value", values["output"])
        merged.verbose += values.get("verbose") or 0
        merged.quiet = merged.quiet or bool(values.get("quiet"))
    return merged


#: No id, count, code or limit beyond the store's widest integer column (BIGINT) can name or bound anything.
INT64_MAX = 2**63 - 1


def _check_integers(ctx: typer.Context) -> None:
    """Every integer on the command line fits a BIGINT: a larger one is bad input, not a driver's overflow."""
    from jedictl.errors import BadInput

    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, int) and not isinstance(item, bool) and not -INT64_MAX <= item <= INT64_MAX:
                opts = [opt for opt in param.opts if opt.startswith("--")]
                name = opts[0] if opts else (getattr(param, "metavar", None) or (param.name or "").upper()).strip("[]{}. ")
                raise BadInput(range_message(item, getattr(param, "min", None), getattr(param, "max", None)), name)


def range_message(value: float, low: float | None, high: float | None) -> str:
    """What a number out of its range must be, naming the side it crossed (`must be at least 1`), in the
    words of the input checks: a command line's numbers also stop at BIGINT's bounds."""
    low = -INT64_MAX if low is None else max(low, -INT64_MAX)
    high = INT64_MAX if high is None else min(high, INT64_MAX)
    return f"must be at least {low}" if value < low else f"must be at most {high}"


def _env_verbose() -> int:
    text = os.environ.get(ENV_VERBOSE, "").strip()
    return int(text) if text.isdigit() else 0


#: `ctx.meta` key of the verbosity the error funnel goes by (the environment's until a command sets it).
VERBOSE_KEY = "jedictl.verbose"


@contextmanager
def error_funnel(ctx: typer.Context) -> Iterator[None]:
    """The one error funnel, around the whole invocation: a JedictlError becomes one line on stderr and
    its exit code.

    Anything unexpected is reported as an internal error (exit 1) with the traceback only at -vv, so
    store URLs or parameters never spill into cron mail by accident.
    """
    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException):
        # Exits, and Typer's own usage errors (a value is converted only when the command is called):
        # Typer's main reports those.
        raise
    except JedictlError as exc:
        if ctx.meta.get(VERBOSE_KEY, _env_verbose()) >= 2:
            traceback.print_exc(file=sys.stderr)
        typer.echo(f"jedictl: error: {one_line(str(exc))}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("jedictl: interrupted", err=True)
        raise typer.Exit(130) from None
    except BrokenPipeError:
        # The reader went away (`jedictl task list | head`): not an error of ours, say nothing.
        # Point stdout at /dev/null so the interpreter's final flush does not complain again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(141) from None
    except Exception as exc:  # noqa: BLE001 - the funnel is the last line of defence
        traced = ctx.meta.get(VERBOSE_KEY, _env_verbose()) >= 2
        if traced:
            traceback.print_exc(file=sys.stderr)
        message = one_line(mask_url(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
        hint = "" if traced else " (run with -vv for the traceback)"
        typer.echo(f"jedictl: internal error: {type(exc).__name__}: {message}{hint}", err=True)
        raise typer.Exit(1) from None


def one_line(message: str) -> str:
    """`message` with line breaks and other control characters written as escapes (`\\n`, `\\x1b`): an
    error names what the user gave, and what the user gave must not break the one line or drive the terminal."""
    return "".join(char.encode("unicode_escape").decode("ascii") if _breaks_line(char) else char for char in message)


def _breaks_line(char: str) -> bool:
    import unicodedata

    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


def read_source(source: str) -> tuple[str, str]:
    """The text of FILE or of stdin for "-", and the name to use in messages."""
    from jedictl.errors import BadInput

    if source == "-":
        return sys.stdin.read(), "stdin"
    try:
        with open(source, encoding="utf-8") as handle:
            return handle.read(), source
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read the file ({getattr(exc, 'strerror', None) or exc})", source) from exc


@contextmanager
def read_lines(source: str) -> Iterator[tuple[Iterator[bytes], str]]:
    """The lines of FILE or of stdin for "-" as they are read (bytes, each ending at \\n: JSON Lines),
    and the name to use in messages -- for inputs too large to hold at once."""
    from jedictl.errors import BadInput

    if source == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text-only stdin (an embedding caller): its text, split as JSON Lines are
            yield iter([line.encode("utf-8") for line in sys.stdin.read().split("\n")]), "stdin"
        else:
            yield iter(stream), "stdin"
        return
    try:
        handle = open(source, "rb")
    except OSError as exc:
        raise BadInput(f"cannot read the file ({getattr(exc, 'strerror', None) or exc})", source) from exc
    with handle:
        yield iter(handle), source
