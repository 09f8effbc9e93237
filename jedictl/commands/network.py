"""`jedictl network import|list|show`: the network matrix between sites and nuclei (docs/sites.md, "Network weight")."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context, read_source
from jedictl.output import View

app = App(help="The network matrix: files queued, throughput and closeness between sites and nuclei (brokerage's network weight).",
          no_args_is_help=True)

LIST_VIEW = View(("source", "destination", "queued", "mbps_1h", "mbps_1d", "mbps_1w", "closeness", "blocked", "weight", "basis",
                  "state", "modified_at"), keep=2)


@app.command("import")
def import_(
    ctx: typer.Context,
    matrix: Annotated[str, typer.Argument(metavar="FILE|-", help="Matrix file (YAML, JSON or CSV, docs/sites.md); - reads stdin.")],
    replace: Annotated[bool, typer.Option("--replace", help="Make the stored matrix exactly the file's: links not in it are removed.")] = False,
) -> None:
    """Create or update links between sites and nuclei; report what changed. All or nothing: one bad row
    changes nothing."""
    app_ctx = context(ctx)
    from jedictl.engine.catalogs.importer import import_network

    text, name = read_source(matrix)
    with app_ctx.store().begin() as conn:
        report = import_network(conn, text, name, replace, app_ctx.clock.now())
    counts: dict[str, int] = {}
    for line in report:
        counts[line["action"]] = counts.get(line["action"], 0) + 1
    app_ctx.note("network import: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing in the file"))
    app_ctx.emit(report, columns=["source", "destination", "action", "changed"])


@app.command("list")
def list_(
    ctx: typer.Context,
    source: Annotated[Optional[str], typer.Option("--source", metavar="NAME", help="Only links from this site or nucleus.")] = None,
    destination: Annotated[Optional[str], typer.Option("--destination", metavar="NAME", help="Only links to this site or nucleus.")] = None,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List the links with the network weight brokerage gives each (with the current settings) and
    whether it may use them."""
    app_ctx = context(ctx)
    from jedictl.engine.brokerage.network import describe_link, link_from_row
    from jedictl.store import network as network_store

    with app_ctx.store().read() as conn:
        rows = network_store.list_links(conn, source, destination)
    settings = app_ctx.settings.brokerage
    app_ctx.emit([describe_link(link_from_row(row._mapping), settings) | {"modified_at": row.modified_at} for row in rows],
                 LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="The site or nucleus the link starts at.")],
    destination: Annotated[str, typer.Argument(metavar="DESTINATION", help="The site or nucleus it ends at.")],
    wide: WideOpt = False,
) -> None:
    """One link: its figures, the queued and throughput (or closeness) weights, the network weight and
    whether brokerage may use it."""
    app_ctx = context(ctx)
    from jedictl.engine.brokerage.network import describe_link, link_from_row
    from jedictl.store import network as network_store

    with app_ctx.store().read() as conn:
        row = network_store.get_link(conn, source, destination)
    app_ctx.emit(describe_link(link_from_row(row._mapping), app_ctx.settings.brokerage) | {"modified_at": row.modified_at},
                 wide=wide)
