"""The root command: the explicit list of commands (the global options and the error funnel come with
`jedictl.commands._app`'s classes).

Only Typer and the command modules are imported here; each command imports the engine and the store
inside its body, so `jedictl --help` and shell completion never load SQLAlchemy or touch a store.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl import __version__
from jedictl.commands import (
    broker,
    check,
    completion,
    config_cmd,
    data,
    db,
    demo,
    explain,
    feed,
    finalize,
    generate,
    harvest,
    jobs,
    pilot,
    pilots,
    queue_shares,
    refine,
    retry_rules,
    run,
    simulate,
    sites,
    split,
    submit,
    task,
    task_commands,
    watch,
)
from jedictl.commands._app import App, RootGroup

app = App(
    name="jedictl",
    help="PanDA JEDI's agents as one program: submit tasks, turn them into jobs, follow them to the end.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,  # `jedictl completion show|install` instead; it never edits ~/.bashrc
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=RootGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"jedictl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    # Nothing to do: the global options are read by each command (this runs before a subcommand's
    # --help, which must work with the store down).
    pass


# Agents (one pass each), in pipeline order.
app.command("submit")(submit.submit)
app.command("refine")(refine.refine)
app.command("feed")(feed.feed)
app.command("broker")(broker.broker)
app.command("generate")(generate.generate)
app.command("harvest")(harvest.harvest)
app.command("finalize")(finalize.finalize)
app.command("watch")(watch.watch)
app.command("run")(run.run)
app.command("demo")(demo.demo)
# Operator commands on a task (also under `jedictl task`, with finish, incexec, pause, ...).
app.command("kill")(task_commands.kill)
app.command("retry")(task_commands.retry)
# Executors: pilots played by the program, and a real one (others use `jobs dispatch/heartbeat/report`).
app.command("simulate")(simulate.simulate)
app.command("pilot")(pilot.pilot)
# Tools that need no store.
app.command("split")(split.split)
# Inspection and administration.
app.add_typer(task.app, name="task")
app.add_typer(jobs.app, name="jobs")
app.add_typer(explain.app, name="explain")
app.add_typer(sites.app, name="sites")
app.add_typer(pilots.app, name="pilots")
app.add_typer(data.app, name="data")
app.add_typer(retry_rules.app, name="retry-rules")
app.add_typer(queue_shares.app, name="queue-shares")
app.command("check")(check.check)
app.add_typer(db.app, name="db")
app.add_typer(config_cmd.app, name="config")
app.add_typer(completion.app, name="completion")


def main() -> None:
    tune_gc()
    app()


def tune_gc() -> None:
    """Fewer cyclic garbage collections (issue 18): a pass allocates millions of small acyclic objects
    (rows, decisions, report items), and with CPython's default threshold (700 allocations) the
    collector ran thousands of times over every object still alive -- 20-30 % of a 100,000-report
    ingest went to it. The objects already there at start-up (modules, settings) are frozen out of
    its scans; cycles are still collected, only less often."""
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
