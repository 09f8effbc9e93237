"""`jedictl data import|add-files|remove-files|mark-lost|close|open|list|show`: the data catalog in the store; `data import
--scan` registers real files and puts them at their replica paths under a storage endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context, read_source
from jedictl.output import View

if TYPE_CHECKING:
    from jedictl.commands._common import AppContext

LIST_VIEW = View(("name", "kind", "state", "n_files", "bytes", "n_events", "modified_at"), keep=3)
SHOW_VIEW = View(tables={"files": View(("lfn", "size", "checksum", "events", "guid", "scope"), keep=2)})

app = App(help="The data catalog: containers, datasets, files and replicas (JEDI's DDM).", no_args_is_help=True)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[Optional[str], typer.Argument(metavar="FILE|-", help="Catalog file (YAML or JSON, docs/data-catalog.md); - reads stdin.", show_default=False)] = None,
    scan: Annotated[Optional[str], typer.Option("--scan", metavar="DIR", help="Instead of a FILE: register every regular file under DIR (recursively) with its size and adler32, as dataset --dataset with a complete replica at --endpoint.", show_default=False)] = None,
    endpoint: Annotated[Optional[str], typer.Option("--endpoint", help="With --scan: the storage endpoint (it must have a url); the files end up at their replica paths under it.", show_default=False)] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", help="With --scan: the dataset (created open, or an open one that gets the new files).", show_default=False)] = None,
    scope: Annotated[Optional[str], typer.Option("--scope", help="With --scan: the files' scope (default: from the dataset name, user.alice.x -> user.alice).", show_default=False)] = None,
    sidecar: Annotated[Optional[str], typer.Option("--sidecar", metavar="FILE", help="With --scan: YAML or JSON mapping each file name to {events, guid, run, lumi_blocks}.", show_default=False)] = None,
    transfer: Annotated[str, typer.Option("--transfer", help="With --scan: copy, move, link (a hard link, else a copy) or none (the files are already at their replica paths).")] = "copy",
) -> None:
    """Add datasets, containers, files and replicas. All or nothing; files already known are skipped."""
    app_ctx = context(ctx)
    from jedictl.errors import BadInput

    scan_options = {"--endpoint": endpoint, "--dataset": dataset, "--scope": scope, "--sidecar": sidecar}
    if scan is not None:
        if source is not None:
            raise BadInput("give a catalog FILE or --scan DIR, not both")
        for name in ("--endpoint", "--dataset"):
            if not scan_options[name]:
                raise BadInput(f"--scan needs {name}")
        _import_scan(app_ctx, scan, endpoint or "", dataset or "", scope, sidecar, transfer)
        return
    if source is None:
        raise BadInput("give a catalog FILE (or - for stdin), or --scan DIR --endpoint E --dataset D")
    given = [name for name, value in scan_options.items() if value] + (["--transfer"] if transfer != "copy" else [])
    if given:
        raise BadInput(f"{given[0]} goes with --scan DIR")
    from jedictl.engine.catalogs.importer import import_data_catalog
    from jedictl.engine.input.documents import load_document

    text, name = read_source(source)
    document = load_document(text, name)
    with app_ctx.store().begin() as conn:
        report = import_data_catalog(conn, document, app_ctx.clock.now())
    app_ctx.note(f"data import: {sum(r['files_added'] for r in report)} files added")
    app_ctx.emit(report, columns=["kind", "name", "action", "files_added"])


def _import_scan(app_ctx: "AppContext", directory: str, endpoint: str, dataset: str, scope: Optional[str], sidecar: Optional[str],
                 transfer: str) -> None:
    """`data import --scan`: plan (read only), place the files (no transaction open: a long copy must not
    hold the store's write lock), then register them through the same import as `data import FILE`."""
    from pathlib import Path

    from jedictl.engine.catalogs.scan import finish_move, place_files, plan_scan, register_scan
    from jedictl.engine.input.documents import load_document

    sidecar_document = None
    if sidecar is not None:
        text, name = read_source(sidecar)
        sidecar_document = (load_document(text, name), name)
    with app_ctx.store().read() as conn:
        plan = plan_scan(conn, Path(directory), endpoint, dataset, scope, transfer, sidecar_document)
    entries = place_files(plan)
    with app_ctx.store().begin() as conn:
        report = register_scan(conn, plan, entries, app_ctx.clock.now())
    finish_move(plan)
    app_ctx.note(f"data import --scan: {report['files_added']} files added to {dataset} at {endpoint} "
                 f"({report['files_known']} already in the dataset)")
    app_ctx.emit(report)


@app.command("add-files")
def add_files(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="An open dataset.")],
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="A list of file entries (lfn, size, events, ...), YAML or JSON.")],
) -> None:
    """Append files to an open dataset (tasks reading it pick them up on their next feed)."""
    app_ctx = context(ctx)
    from jedictl.engine.catalogs.data import parse_files
    from jedictl.engine.input.documents import load_list
    from jedictl.store import data_catalog as store_catalog

    text, name = read_source(source)
    files = parse_files(load_list(text, name), name)
    with app_ctx.store().begin() as conn:
        added = store_catalog.add_files(conn, dataset, files, app_ctx.clock.now())
    app_ctx.emit({"dataset": dataset, "files_added": added})


@app.command("remove-files")
def remove_files(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="The dataset.")],
    lfns: Annotated[List[str], typer.Argument(metavar="LFN...", help="Files to remove (tasks mark them lost on their next feed).")],
) -> None:
    """Remove files from a dataset, as when a data-management system declares them lost."""
    app_ctx = context(ctx)
    from jedictl.store import data_catalog as store_catalog

    with app_ctx.store().begin() as conn:
        removed = store_catalog.remove_files(conn, dataset, list(dict.fromkeys(lfns)), app_ctx.clock.now())
    app_ctx.emit({"dataset": dataset, "files_removed": removed})


@app.command("mark-lost")
def mark_lost(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="The dataset.")],
    lfns: Annotated[List[str], typer.Argument(metavar="LFN...", help="Files whose every replica is gone.")],
) -> None:
    """Declare files lost (Rucio's availability LOST): they stay in the dataset, and `jedictl recover-lost`
    can make them again (docs/recovery.md)."""
    app_ctx = context(ctx)
    from jedictl.errors import BadInput, NotFound
    from jedictl.store import recovery as store_recovery

    wanted = list(dict.fromkeys(lfns))
    with app_ctx.store().begin() as conn:
        row = store_recovery.catalog_dataset(conn, dataset, lock=True)
        if row is None or row.kind != "dataset":
            raise NotFound(f"unknown dataset {dataset!r}" if row is None else f"{dataset} is a container: name the dataset that holds the files")
        known = store_recovery.availability(conn, row.id, wanted)
        unknown = [lfn for lfn in wanted if lfn not in known]
        if unknown:
            raise BadInput(f"file {unknown[0]!r} is not in dataset {dataset}")
        marked = store_recovery.mark_lost(conn, row.id, wanted)
    app_ctx.emit({"dataset": dataset, "files_marked_lost": marked, "already_lost": len(wanted) - marked})


def _set_state(ctx: typer.Context, name: str, state: str) -> None:
    app_ctx = context(ctx)
    from jedictl.store import data_catalog as store_catalog

    with app_ctx.store().begin() as conn:
        previous = store_catalog.set_state(conn, name, state, app_ctx.clock.now())
    app_ctx.emit({"dataset": name, "state": state, "previous_state": previous})


@app.command("close")
def close(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="The dataset or container.")],
) -> None:
    """Close a dataset: no more files will come, and tasks waiting for it can proceed."""
    _set_state(ctx, dataset, "closed")


@app.command("open")
def open_(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="The dataset or container.")],
) -> None:
    """Re-open a dataset so files can be added again."""
    _set_state(ctx, dataset, "open")


@app.command("list")
def list_(
    ctx: typer.Context,
    pattern: Annotated[Optional[str], typer.Argument(help="Only names matching this pattern (* wildcards).")] = None,
    kind: Annotated[Optional[str], typer.Option("--kind", help="dataset or container.")] = None,
    state: Annotated[Optional[str], typer.Option("--state", help="open or closed.")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List datasets and containers with their file counts, sizes and events."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import CATALOG_KINDS, CATALOG_STATES

    app_ctx = context(ctx)
    check_choice(kind, CATALOG_KINDS, "--kind", "a catalog kind")
    check_choice(state, CATALOG_STATES, "--state", "a dataset state")
    from jedictl.store import data_catalog as store_catalog

    with app_ctx.store().read() as conn:
        rows = store_catalog.list_datasets(conn, kind, state, pattern)
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The dataset or container.")],
    files: Annotated[bool, typer.Option("--files", help="Also list every file.")] = False,
    wide: WideOpt = False,
) -> None:
    """Show a dataset (files, size, events, replicas, containers) or a container (its datasets)."""
    app_ctx = context(ctx)
    from jedictl.store import data_catalog as store_catalog

    with app_ctx.store().read() as conn:
        data = store_catalog.show_dataset(conn, name, files)
    if "datasets" in data and app_ctx.output == "table":
        data["datasets"] = [{"dataset": d} for d in data["datasets"]]
    if data.get("files") is None and app_ctx.output == "table":
        data.pop("files", None)  # not asked for (--files)
    app_ctx.emit(data, SHOW_VIEW, wide=wide)
