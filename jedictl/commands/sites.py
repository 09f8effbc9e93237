"""`jedictl sites import|list|show|set-status|nuclei|endpoints`: the resource catalog."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context, read_source
from jedictl.output import View

app = App(help="The resource catalog: sites (PanDA queues), nuclei and storage endpoints.", no_args_is_help=True)

LIST_VIEW = View(("name", "status", "cloud", "tier", "nucleus", "core_count", "core_power", "max_memory", "max_walltime", "pilots_active"),
                 keep=2)
NUCLEI_VIEW = View(("name", "status", "cloud", "modified_at"), keep=2)
ENDPOINTS_VIEW = View(("name", "kind", "nucleus", "url", "free_gb", "total_gb", "blacklisted_read", "blacklisted_write"), keep=2)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="Sites file (YAML or JSON, docs/sites.md); - reads stdin.")],
) -> None:
    """Create or update nuclei, storage endpoints and sites; report what changed. All or nothing."""
    app_ctx = context(ctx)
    from jedictl.engine.catalogs.importer import import_resource_catalog
    from jedictl.engine.input.documents import load_document

    text, name = read_source(source)
    document = load_document(text, name)
    with app_ctx.store().begin() as conn:
        report = import_resource_catalog(conn, document, app_ctx.clock.now())
    counts: dict[str, int] = {}
    for line in report:
        counts[line["action"]] = counts.get(line["action"], 0) + 1
    app_ctx.note("sites import: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing in the file"))
    app_ctx.emit(report, columns=["kind", "name", "action", "changed"])


@app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[Optional[str], typer.Option("--status", help="Only sites in this status.")] = None,
    cloud: Annotated[Optional[str], typer.Option("--cloud", help="Only sites of this cloud.")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List sites."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import SITE_STATUSES

    app_ctx = context(ctx)
    check_choice(status, SITE_STATUSES, "--status", "a site status")
    from jedictl.output import iter_rows
    from jedictl.store import sites as site_store

    with app_ctx.store().read() as conn:
        rows = iter_rows(site_store.list_sites(conn, status, cloud))
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The site.")],
    wide: WideOpt = False,
) -> None:
    """Show one site with its storage endpoints."""
    app_ctx = context(ctx)
    from jedictl.store import sites as site_store

    with app_ctx.store().read() as conn:
        site = dict(site_store.get_site(conn, name)._mapping)
        site["storage"] = [{"endpoint": r.endpoint, "role": r.role} for r in site_store.storage_of(conn, [name])]
    app_ctx.emit(site, wide=wide)


@app.command("set-status")
def set_status(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The site.")],
    status: Annotated[str, typer.Argument(help="online, brokeroff, offline or test.")],
) -> None:
    """Change a site's status (brokerage uses only online sites; test sites only for test tasks)."""
    from jedictl.commands._choices import check_choice
    from jedictl.model.choices import SITE_STATUSES

    app_ctx = context(ctx)
    check_choice(status, SITE_STATUSES, "STATUS", "a site status")
    from jedictl.store import sites as site_store

    with app_ctx.store().begin() as conn:
        previous = site_store.set_status(conn, name, status, app_ctx.clock.now())
    app_ctx.emit({"site": name, "status": status, "previous_status": previous})


@app.command("nuclei")
def list_nuclei(
    ctx: typer.Context,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List nuclei (where task outputs are collected)."""
    app_ctx = context(ctx)
    from jedictl.output import iter_rows
    from jedictl.store import sites as site_store

    with app_ctx.store().read() as conn:
        rows = iter_rows(site_store.list_nuclei(conn))
    app_ctx.emit(rows, NUCLEI_VIEW, pick=columns, wide=wide)


@app.command("endpoints")
def list_endpoints(
    ctx: typer.Context,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List storage endpoints with their url and space."""
    app_ctx = context(ctx)
    from jedictl.output import iter_rows
    from jedictl.store import sites as site_store

    with app_ctx.store().read() as conn:
        rows = iter_rows(site_store.list_endpoints(conn))
    app_ctx.emit(rows, ENDPOINTS_VIEW, pick=columns, wide=wide)
