"""The root command: the explicit list of commands (the global options and the error funnel come with
`jedictl.commands._app`'s classes).

Only Typer and the command modules are imported here; each command imports the engine and the store
inside its body, so `jedictl --help` and shell completion never load SQLAlchemy or touch a store.

`COMMANDS` names every command and group and the module that holds it, in the order `--help` lists
them. `main()` builds the whole tree only when it needs it (`--help`, completion, an unknown name); a
command named first on the line (`jedictl pilot --site S`, the line harvest submits) gets a root with
that one entry, so it neither imports the other command modules nor has Typer build their options.
Everything else reads `jedictl.cli.app`, the whole tree, built on first use.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any, Collection, Optional

import typer

from jedictl import __version__
from jedictl.commands._app import App, RootGroup

#: name -> (module under jedictl.commands, attribute): a command function, or a sub-app (`app`) for a group.
COMMANDS: dict[str, tuple[str, str]] = {
    # Agents (one pass each), in pipeline order.
    "submit": ("submit", "submit"),
    "refine": ("refine", "refine"),
    "feed": ("feed", "feed"),
    "broker": ("broker", "broker"),
    "generate": ("generate", "generate"),
    "harvest": ("harvest", "harvest"),
    "finalize": ("finalize", "finalize"),
    "watch": ("watch", "watch"),
    "listen": ("listen", "listen"),
    "run": ("run", "run"),
    "demo": ("demo", "demo"),
    # Operator commands on a task (also under `jedictl task`, with finish, incexec, pause, ...).
    "kill": ("task_commands", "kill"),
    "retry": ("task_commands", "retry"),
    # Executors: pilots played by the program, and a real one (others use `jobs dispatch/heartbeat/report`).
    "simulate": ("simulate", "simulate"),
    "pilot": ("pilot", "pilot"),
    # Tools that need no store.
    "split": ("split", "split"),
    # Inspection and administration.
    "task": ("task", "app"),
    "jobs": ("jobs", "app"),
    "explain": ("explain", "app"),
    "sites": ("sites", "app"),
    "network": ("network", "app"),
    "pilots": ("pilots", "app"),
    "data": ("data", "app"),
    "retry-rules": ("retry_rules", "app"),
    "queue-shares": ("queue_shares", "app"),
    "agents": ("agents", "app"),
    "workqueue": ("workqueue", "app"),
    "check": ("check", "check"),
    "db": ("db", "app"),
    "config": ("config_cmd", "app"),
    "completion": ("completion", "app"),
    "periodic": ("periodic", "app"),
    "recover-lost": ("recover_lost", "recover_lost"),
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"jedictl {__version__}")
        raise typer.Exit()


def root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    # Nothing to do: the global options are read by each command (this runs before a subcommand's
    # --help, which must work with the store down).
    pass


def build_app(names: Collection[str] | None = None) -> App:
    """The root app with the entries of COMMANDS named in `names` (all of them by default), in COMMANDS' order."""
    app = App(
        name="jedictl",
        help="PanDA JEDI's agents as one program: submit tasks, turn them into jobs, follow them to the end.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,  # `jedictl completion show|install` instead; it never edits ~/.bashrc
        context_settings={"help_option_names": ["-h", "--help"]},
        cls=RootGroup,
    )
    app.callback()(root)
    for name, (module, attribute) in COMMANDS.items():
        if names is not None and name not in names:
            continue
        entry = getattr(importlib.import_module(f"jedictl.commands.{module}"), attribute)
        if isinstance(entry, typer.Typer):
            app.add_typer(entry, name=name)
        else:
            app.command(name)(entry)
    return app


def __getattr__(name: str) -> Any:
    """`jedictl.cli.app`: the whole tree, built once on first use (docs, man pages, tests)."""
    if name == "app":
        globals()["app"] = build_app()
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    tune_gc()
    first = sys.argv[1] if len(sys.argv) > 1 else None
    # The shell completes through `_JEDICTL_COMPLETE` (Click's `_<PROG>_COMPLETE`): it needs every name.
    completing = any(key.startswith("_") and key.endswith("_COMPLETE") for key in os.environ)
    if first in COMMANDS and not completing:
        build_app({first})()
    else:
        __getattr__("app")()


def tune_gc() -> None:
    """Fewer cyclic garbage collections (issue 18): a pass allocates millions of small acyclic objects
    (rows, decisions, report items), and with CPython's default threshold (700 allocations) the
    collector ran thousands of times over every object still alive -- 20-30 % of a 100,000-report
    ingest went to it. The objects already there at start-up (modules, settings) are frozen out of
    its scans; cycles are still collected, only less often."""
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
