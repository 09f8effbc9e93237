"""`jedictl db init|upgrade|current`: create and migrate the store."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import context

app = App(help="Create the store and keep its schema at this program's revision.", no_args_is_help=True)


@app.command("init")
def init(
    ctx: typer.Context,
) -> None:
    """Create a new store (a SQLite file is created with its directory) at the current schema revision."""
    app_ctx = context(ctx)
    from jedictl.errors import SchemaMismatch
    from jedictl.redact import mask_url
    from jedictl.store import migrate
    from jedictl.store.revisions import HEAD_REVISION

    url = app_ctx.settings.db
    action = "created"
    existing = _existing_revision(url, app_ctx.settings.sqlite_busy_timeout_s)
    if existing == HEAD_REVISION:
        action = "unchanged"
    elif existing is not None:
        raise SchemaMismatch(f"the store already exists at revision {existing}; run `jedictl db upgrade`")
    else:
        migrate.upgrade(url, "head", app_ctx.settings.sqlite_busy_timeout_s)
    app_ctx.emit({"store": mask_url(url), "revision": HEAD_REVISION, "action": action})


@app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    revision: Annotated[Optional[str], typer.Option("--revision", help="Stop at this revision (default: the newest).")] = None,
) -> None:
    """Apply the migrations a store needs, in one transaction (a failed upgrade changes nothing)."""
    app_ctx = context(ctx)
    from jedictl.redact import mask_url
    from jedictl.store import migrate

    url = app_ctx.settings.db
    before = _existing_revision(url, app_ctx.settings.sqlite_busy_timeout_s, must_exist=True)
    migrate.upgrade(url, revision or "head", app_ctx.settings.sqlite_busy_timeout_s, create=False)
    after = _existing_revision(url, app_ctx.settings.sqlite_busy_timeout_s)
    app_ctx.emit({"store": mask_url(url), "from_revision": before, "to_revision": after})


@app.command("current")
def current(
    ctx: typer.Context,
) -> None:
    """Show the store's schema revision and the one this program needs."""
    app_ctx = context(ctx)
    from jedictl.redact import mask_url
    from jedictl.store.revisions import HEAD_REVISION

    url = app_ctx.settings.db
    revision = _existing_revision(url, app_ctx.settings.sqlite_busy_timeout_s, must_exist=True)
    app_ctx.emit({"store": mask_url(url), "revision": revision, "head": HEAD_REVISION, "up_to_date": revision == HEAD_REVISION})


def _existing_revision(url: str, busy_timeout_s: float, must_exist: bool = False) -> str | None:
    """The revision of the store at `url`, None when it does not exist yet (or is empty)."""
    from jedictl.errors import StoreUnavailable
    from jedictl.store.database import Store, create_store_engine, current_revision, parse_store_url, sqlite_path

    path = sqlite_path(parse_store_url(url))
    if path is not None and not path.exists():
        if must_exist:
            raise StoreUnavailable(f"store {path} does not exist; run `jedictl db init` to create it")
        return None
    store = Store(engine=create_store_engine(url, busy_timeout_s), url=url)
    try:
        return current_revision(store)
    finally:
        store.close()
