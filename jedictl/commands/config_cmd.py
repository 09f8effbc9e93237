"""`jedictl config show`: the effective settings and where each came from."""

from __future__ import annotations

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context
from jedictl.output import View

app = App(help="Inspect the configuration.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """Print every setting with its value and source (default, file, env or flag); passwords masked."""
    app_ctx = context(ctx)
    from jedictl.config import default_config_path, describe
    from jedictl.redact import mask_url

    rows = describe(app_ctx.loaded)
    for row in rows:
        if row["key"] in ("db", "messages.broker_url"):
            row["value"] = mask_url(row["value"])
    view = View(("key", "value", "source", "help") if app_ctx.verbose else ("key", "value", "source"), keep=2)
    app_ctx.emit(rows, view, pick=columns, wide=wide)
    # After the rows, so that a refused --columns is the only line on stderr.
    path = app_ctx.loaded.config_path
    app_ctx.note(f"config file: {path if path else f'none (would be read from {default_config_path()})'}")
