"""`jedictl split --algorithm NAME [--param k=v ...] FILE|-`: split a file list without a store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, List, Optional

import typer

from jedictl.commands._common import context, read_source

TABLE_COLUMNS = ["job", "group", "n_files", "files", "events", "lumis", "locations", "status"]
#: JEDI has no job groups: its table leaves the column out.
JEDI_COLUMNS = [column for column in TABLE_COLUMNS if column != "group"]


def split(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help='The fileset as JSON: {"closed": true, "files": [...]}; - reads stdin.')],
    algorithm: Annotated[str, typer.Option("--algorithm", "-a", metavar="NAME",
                                           help="FileBased, MinFileBased, EventBased, LumiBased, EventAwareLumiBased, SizeBased, "
                                                "RunBased, ParentlessMergeBySize, WMBSMergeBySize, SiblingProcessingBased, Harvest, or jedi.")],
    param: Annotated[Optional[List[str]], typer.Option("--param", "-p", metavar="KEY=VALUE",
                                                       help="An algorithm parameter (repeatable): WMCore's names, or JEDI's task options for jedi.")] = None,
) -> None:
    """Split a fileset into jobs with a WMCore algorithm or JEDI's rules, to preview a task.

    Prints one row per job; with `--output json` the contract of docs/splitting.md:
    {"jobs": [{"files", "first_event", "last_event", "lumis", "locations", "failed", "short",
    "failed_reason", "failed_code", "parents", "group"}]}. Jobs WMCore creates failed carry its reason and
    error code; `group` is WMCore's job group (null for jedi). Nothing is stored; the store is never opened.
    """
    app = context(ctx)
    from jedictl.engine.input.documents import parse_json
    from jedictl.engine.generate.splitters.contract import job_rows, jobs_document, parse_fileset
    from jedictl.engine.generate.splitters.jedi_limits import SplitDefaults
    from jedictl.engine.generate.splitters.registry import JEDI, canonical_name, split_fileset

    params = _parse_params(param or [])
    text, name = read_source(source)
    document = parse_json(text, name)
    fileset = parse_fileset(document)
    moment = app.clock.now()
    jobs = split_fileset(algorithm, fileset, params, now=_epoch(moment), defaults=SplitDefaults.from_settings(app.settings))
    if app.output in ("json", "yaml"):
        app.emit(jobs_document(jobs))
    else:
        app.emit(job_rows(jobs), columns=JEDI_COLUMNS if canonical_name(algorithm) == JEDI else TABLE_COLUMNS)
    failed = sum(1 for job in jobs if job.failed)
    app.note(f"{len(jobs)} jobs from {len(fileset.files)} files" + (f", {failed} failed on creation" if failed else ""))


def _parse_params(items: list[str]) -> dict[str, str]:
    from jedictl.errors import BadInput

    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{item!r} must be KEY=VALUE", "--param")
        if key.strip() in params:
            raise BadInput("given twice", f"--param {key.strip()}")
        params[key.strip()] = value
    return params


def _epoch(moment: datetime) -> float:
    """Seconds since the epoch of a naive UTC time (the clock of merge waiting and harvesting)."""
    return moment.replace(tzinfo=UTC).timestamp()
