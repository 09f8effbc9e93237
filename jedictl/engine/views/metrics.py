"""Prometheus text-format metrics for node_exporter's textfile collector.

After a pass, `write_metrics` rewrites one file atomically (a temporary file in the same directory,
then `os.replace`), so the collector never reads half a file. Per-agent series (duration, objects
processed per outcome, errors, when it last ran) of agents that did not run in this process are kept
from the previous file: every agent command and `jedictl run` may point at the same file. Store-wide
gauges (tasks and jobs by status) are read fresh each time.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jedictl.store import views as view_store

PREFIX = "jedictl"
_AGENT_LABEL = re.compile(r'\{[^}]*agent="([^"]+)"')
_HELP = {
    "pass_duration_seconds": ("gauge", "Wall-clock duration of the agent's last pass."),
    "pass_objects": ("gauge", "Objects the agent's last pass handled, per outcome."),
    "pass_errors": ("gauge", "Errors met by the agent's last pass."),
    "pass_last_run_timestamp_seconds": ("gauge", "When the agent's last pass ended (Unix time)."),
    "tasks": ("gauge", "Tasks in the store per status."),
    "jobs": ("gauge", "Jobs in the store per status."),
}
AGENT_METRICS = ("pass_duration_seconds", "pass_objects", "pass_errors", "pass_last_run_timestamp_seconds")


@dataclass(frozen=True)
class PassFigures:
    agent: str
    duration_s: float
    counts: Mapping[str, int]  # outcome -> objects
    errors: int
    ended_at: float  # Unix time


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: Mapping[str, str], value: float) -> str:
    inner = ",".join(f'{key}="{_label(str(val))}"' for key, val in labels.items())
    number = repr(float(value)) if isinstance(value, float) else str(value)
    return f"{PREFIX}_{name}{{{inner}}} {number}"


def agent_lines(figures: PassFigures) -> dict[str, list[str]]:
    """The series of one agent's pass, by metric name."""
    agent = {"agent": figures.agent}
    return {
        "pass_duration_seconds": [_series("pass_duration_seconds", agent, round(figures.duration_s, 6))],
        "pass_objects": [_series("pass_objects", agent | {"outcome": outcome}, count) for outcome, count in sorted(figures.counts.items())],
        "pass_errors": [_series("pass_errors", agent, figures.errors)],
        "pass_last_run_timestamp_seconds": [_series("pass_last_run_timestamp_seconds", agent, round(figures.ended_at, 3))],
    }


def kept_agent_lines(previous: str, replaced: Iterable[str]) -> dict[str, list[str]]:
    """Agent series of the previous file, except those of the agents that ran now."""
    skip = set(replaced)
    kept: dict[str, list[str]] = {name: [] for name in AGENT_METRICS}
    for line in previous.splitlines():
        if not line.startswith(PREFIX + "_"):
            continue
        name = line[len(PREFIX) + 1:].split("{", 1)[0]
        match = _AGENT_LABEL.search(line)
        if name in kept and match and match.group(1) not in skip:
            kept[name].append(line)
    return kept


def render(agent_series: Mapping[str, list[str]], tasks: Mapping[str, int], jobs: Mapping[str, int]) -> str:
    """The whole file: HELP and TYPE once per metric, series sorted (stable diffs for people)."""
    blocks = {name: sorted(lines) for name, lines in agent_series.items()}
    blocks["tasks"] = [_series("tasks", {"status": status}, count) for status, count in sorted(tasks.items())]
    blocks["jobs"] = [_series("jobs", {"status": status}, count) for status, count in sorted(jobs.items())]
    out: list[str] = []
    for name, (kind, text) in _HELP.items():
        lines = blocks.get(name) or []
        if not lines:
            continue
        out += [f"# HELP {PREFIX}_{name} {text}", f"# TYPE {PREFIX}_{name} {kind}", *lines]
    return "\n".join(out) + "\n"


def path_problem(path: str) -> str | None:
    """Why the metrics file cannot be written at `path`, or None: asked before any pass runs, so that a
    typo in a cron line is refused (exit 2) instead of every pass committing and the write failing."""
    if os.path.isdir(path) or path.endswith(os.sep):
        what = "is a directory" if os.path.isdir(path) else "names a directory"
        return f"{path} {what}; name the file to write in it (e.g. {os.path.join(path, 'jedictl.prom')})"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(directory):
        return f"directory {directory} does not exist"
    if not os.path.isdir(directory):
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"no write permission on the directory {directory} (the file is replaced through a temporary file there)"
    if os.path.exists(path) and not os.path.isfile(path):
        return f"{path} is not a regular file"
    return None


def write_metrics(path: str, figures: Iterable[PassFigures], tasks: Mapping[str, int], jobs: Mapping[str, int]) -> None:
    """Merge this process's passes into the file at `path` and replace it atomically."""
    figures = list(figures)
    try:
        with open(path, encoding="utf-8") as handle:
            previous = handle.read()
    except OSError:
        previous = ""
    series = kept_agent_lines(previous, (f.agent for f in figures))
    for figure in figures:
        for name, lines in agent_lines(figure).items():
            series[name].extend(lines)
    text = render(series, tasks, jobs)
    if os.path.isdir(path):  # its "directory" would be the parent: the temporary file would land there
        raise IsADirectoryError(21, "Is a directory", path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".jedictl-metrics.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)  # the collector runs as another user
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def status_counts(store: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Tasks and jobs per status, read in one short transaction."""
    with store.read() as conn:
        return view_store.task_status_counts(conn), view_store.job_status_counts(conn)
