"""Running an agent pass from a command: one pass, or `--loop SECONDS`; report and exit code."""

from __future__ import annotations

import time
from typing import Any, Callable

import typer

from jedictl.commands._common import AppContext


def run_passes(app: AppContext, run_once: Callable[[], Any], loop: float | None) -> None:
    """Run `run_once` (returns a PassReport) once or every `loop` seconds; exit 1 if a pass met errors."""
    errors = 0
    while True:
        report = run_once()
        emit_report(app, report)
        errors += report.errors
        if not loop:
            break
        time.sleep(loop)
    if errors:
        raise typer.Exit(1)


def emit_report(app: AppContext, report: Any) -> None:
    data = report.as_dict()
    if app.output in ("json", "yaml"):
        app.emit(data)
        return
    counts = ", ".join(f"{key} {value}" for key, value in data.items() if key not in ("pass", "items")) or "nothing to do"
    app.note(f"{report.name}: {counts}")
    if data["items"] and (app.verbose or app.output == "tsv" or any(item.get("reason") for item in data["items"])):
        app.emit(data["items"])
