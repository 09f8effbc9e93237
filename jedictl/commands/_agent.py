"""Running agent passes from a command: one pass, or `--loop SECONDS`; report, logs, metrics, exit code."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import typer

from jedictl.commands._common import AppContext


def ingest_stream(source: str, stream: Callable[..., Iterator[Any]], ingest: Callable[[Iterator[Any]], list[Any]],
                  empty: str) -> tuple[list[Any], list[Any]]:
    """Reports read from `source` (a file or -) and applied a batch at a time, never held whole:
    `stream(lines, refused)` parses them (lines it cannot read go to `refused`), `ingest(reports)`
    applies them. (results, refused); an input with no report at all is refused as `empty`."""
    import itertools

    from jedictl.commands._common import read_lines
    from jedictl.errors import BadInput

    refused: list[Any] = []
    with read_lines(source) as (lines, name):
        reports = stream(lines, refused)
        first = next(reports, None)
        if first is None and not refused:
            raise BadInput(empty, name)
        results = ingest(itertools.chain([first], reports)) if first is not None else []
    return results, refused


def run_passes(app: AppContext, run_once: Callable[[], Any], loop: float | None) -> None:
    """Run `run_once` (returns a PassReport) once or every `loop` seconds; exit 1 if a pass met errors."""
    from jedictl.engine.agent import ending_leases

    check_metrics_file(app)
    errors = 0
    with stoppable(app):
        while True:
            started = time.monotonic()
            with progress(app):
                try:
                    report = run_once()
                except Exception:
                    ending_leases(app.store(), app.owner, None)  # the pass failed as a whole: still let go
                    raise
                ending_leases(app.store(), app.owner, report)
            if loop:
                app.store().refresh_statistics()  # a loop's next pass plans on what this one wrote (store.statistics)
            errors += record_passes(app, [(report, time.monotonic() - started)])
            publish_events(app)
            if not loop:
                break
            time.sleep(loop)
    if errors:
        raise typer.Exit(1)


def publish_events(app: AppContext) -> None:
    """Publish the task events this command's status changes (and anyone's before) left in the outbox,
    when a broker is configured (docs/messages.md). A failure is one warning line: the changes are
    committed, their events wait for the next publisher, and the command's exit code is its own."""
    if not app.settings.messages.broker_url or app._store is None:
        return
    from jedictl.commands._common import one_line

    try:
        from jedictl.engine.messages.publisher import publish_now

        publish_now(app.store(), app.settings, app.owner, app.clock.now())
    except Exception as exc:  # noqa: BLE001 - publishing never fails the command that changed the tasks
        typer.echo(one_line(f"jedictl: warning: task events not published yet: {exc}"), err=True)


@contextmanager
def stoppable(app: AppContext) -> Iterator[None]:
    """Passes that SIGINT or SIGTERM stop at once, releasing the leases they hold before the process
    exits 130 or 143 (jedictl.signals)."""
    from jedictl.signals import interruptible, shielded, stopped_by

    try:
        with interruptible():
            yield
    except BaseException as exc:
        stop = stopped_by(exc)
        if stop is None:
            raise
        with shielded(stop.previous):
            from jedictl.engine.agent import release_after_stop

            released = release_after_stop(app.store(), app.owner)
        typer.echo(f"jedictl: stopped by {stop.name}; {len(released)} task leases released", err=True)
        raise typer.Exit(stop.exit_code) from None


def record_passes(app: AppContext, passes: Iterable[tuple[Any, float]], *, several: bool = False) -> int:
    """Print each pass's report as it ends, then write the metrics file if configured; returns the
    errors met. With `-o json|yaml` one document: the report, or with `several` (run) {"passes": [...]}
    whatever the number of passes; with `-o tsv` one table of every pass's items."""
    figures = []
    errors = 0
    structured = app.output in ("json", "yaml")
    for report, duration in passes:
        if not structured and app.output != "tsv":
            emit_report(app, report, duration)
        elif app.settings.log_format != "json":
            tell_errors(app, report)  # the results are for programs; what went wrong is still told
        errors += report.errors
        figures.append((report, duration, time.time()))
    if app.settings.metrics_file:
        from jedictl.engine.views.metrics import PassFigures, status_counts, write_metrics
        from jedictl.errors import JedictlError

        tasks, jobs = status_counts(app.store())
        try:
            write_metrics(app.settings.metrics_file,
                          [PassFigures(report.name, duration, {k: v for k, v in report.counts.items() if isinstance(v, int)}, report.errors, ended)
                           for report, duration, ended in figures], tasks, jobs)
        except OSError as exc:  # checked before the passes; the disk or the directory changed since
            raise JedictlError(f"{metrics_file_name(app)}: cannot write {app.settings.metrics_file}: {exc.strerror or exc}") from exc
    if structured:
        reports = [report.as_dict(duration) for report, duration, _ in figures]
        app.emit({"passes": reports} if several else reports[0])
    elif app.output == "tsv":
        for report, duration, _ in figures:
            _note_counts(app, report)
        emit_items(app, [report for report, _, _ in figures])
    return errors


def check_metrics_file(app: AppContext, flag: bool = False) -> None:
    """Refuse a metrics file that cannot be written before any pass runs (exit 2, nothing written);
    `flag`: it was given as --metrics-file."""
    path = app.settings.metrics_file
    if not path:
        return
    from jedictl.engine.views.metrics import path_problem
    from jedictl.errors import BadInput

    problem = path_problem(path)
    if problem:
        raise BadInput(problem, "--metrics-file" if flag else metrics_file_name(app))


def metrics_file_name(app: AppContext) -> str:
    """Where the metrics file was named: the option, the environment variable or the setting."""
    source = app.loaded.sources.get("metrics_file", "")
    if source.startswith("env "):
        return source.removeprefix("env ")
    return "--metrics-file" if source in ("flag", "") else "metrics_file"


def emit_report(app: AppContext, report: Any, duration: float | None = None, *, every_item: bool = False) -> None:
    """A pass's report for people (or for log shippers with --log-format json): the counts on stderr,
    and the items on stdout under a heading naming the pass -- those with a reason (all with -v or
    `every_item`, for commands whose items are the answer: jobs report, kill; with -q only the refused
    ones). Errors are one line each on stderr (tell_errors)."""
    if app.output in ("json", "yaml"):
        app.emit(report.as_dict(duration))
        return
    if app.output == "tsv":
        _note_counts(app, report)
        emit_items(app, [report])
        return
    if app.settings.log_format == "json":
        counts = {key: value for key, value in sorted(report.counts.items())}  # the log line keeps only what happened
        log_line(app, {"event": "pass", "level": "error" if report.errors else "info", "pass": report.name, **counts,
                       "duration_s": round(duration or 0.0, 3), "items": report.items if app.verbose else len(report.items)})
        return
    _note_counts(app, report)
    tell_errors(app, report)
    # What went wrong is on stderr (above); stdout keeps the results -- with -q (cron) only the reports
    # refused, which are an executor's answer, so that mail means something.
    items = [item for item in report.items if item.get("outcome") != "error"]
    if app.quiet:
        items = [item for item in items if item.get("outcome") == "refused"]
    if items and (app.verbose or every_item or any(item.get("reason") for item in items)):
        app.emit(items, title=report.name)


def _note_counts(app: AppContext, report: Any) -> None:
    counts = ", ".join(f"{key} {value}" for key, value in sorted(report.counts.items())) or "nothing to do"
    app.note(f"{report.name}: {counts}")


def emit_items(app: AppContext, reports: list[Any]) -> None:
    """The items of one or more passes as one table (tsv): the pass and the outcome first."""
    from jedictl.output import View

    app.emit([{"pass": report.name, **item} for report in reports for item in report.items], View(("pass", "outcome")), wide=True)


#: The item fields that name what an error item is about, in the order they are told.
_SUBJECTS = (("task_id", "task"), ("job_id", "job"), ("site", "site"), ("pilot_id", "pilot"), ("action", "action"))


def tell_errors(app: AppContext, report: Any) -> None:
    """One line on stderr per error of a pass, naming the pass and the object; at -vv each error's
    traceback (with the SQL statement of a store error) before them."""
    import sys
    import traceback

    from jedictl.commands._common import one_line

    if app.verbose >= 2:
        for failure in getattr(report, "failures", ()):
            traceback.print_exception(failure, file=sys.stderr)
    for item in report.items:
        if item.get("outcome") != "error":
            continue
        subject = " ".join(f"{word} {item[key]}" for key, word in _SUBJECTS if item.get(key) is not None)
        where = f"{report.name}: {subject}" if subject else report.name
        typer.echo(one_line(f"jedictl: error: {where}: {item.get('reason') or 'failed'}"), err=True)


def log_line(app: AppContext, record: dict[str, Any]) -> None:
    """One JSON object per line on stderr, with a UTC timestamp first (for log shippers)."""
    from jedictl.clock import utcnow

    stamp = utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if not app.quiet or record.get("level") == "error":
        typer.echo(json.dumps({"ts": stamp, "level": record.pop("level", "info"), **record}, default=str, separators=(",", ":")), err=True)


@contextmanager
def progress(app: AppContext) -> Iterator[None]:
    """A live line per pass on a terminal (objects done, last outcome, time), gone when the pass ends;
    nothing at all in cron, in pipes, with -q, or when the output is for programs."""
    import sys

    if app.quiet or not sys.stderr.isatty() or app.output != "table" or app.settings.log_format != "text":
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from jedictl.commands._help import console
    from jedictl.engine.agent import watching

    bars: dict[int, Any] = {}
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed} done"), TimeElapsedColumn(),
                  console=console(stderr=True), transient=True) as display:
        def seen(report: Any, outcome: str) -> None:
            bar = bars.get(id(report))
            if bar is None:
                bar = bars[id(report)] = display.add_task(report.name, total=None)
            display.update(bar, advance=1, description=f"{report.name}: {outcome}")

        with watching(seen):
            yield
