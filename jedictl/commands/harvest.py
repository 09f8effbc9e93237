"""`jedictl harvest`: one pass of PanDA Harvester -- follow each site's pilots, submit just enough more."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def harvest(
    ctx: typer.Context,
    site: Annotated[Optional[str], typer.Option("--site", help="Only this site (it may lack sites.batch when --batch is given).")] = None,
    batch: Annotated[Optional[str], typer.Option("--batch", metavar="SYSTEM", help="local or slurm for every site, instead of each site's sites.batch.system (local: detached processes on this host, for laptops and tests).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and print; submit, cancel and write nothing.")] = False,
    limit: Annotated[Optional[int], typer.Option("--limit", min=0, help="At most this many pilots per site in this pass (default: harvest.limit).")] = None,
    loop: Annotated[Optional[float], typer.Option("--loop", metavar="SECONDS", min=0.1, help="Repeat the pass every SECONDS until interrupted.")] = None,
) -> None:
    """Keep pilots at every site with a batch system: one pass of PanDA Harvester.

    For each site whose `batch` names a batch system (docs/sites.md): ask the batch system about the
    site's live pilots -- one it no longer knows that never started is `lost`, one that ended without
    saying so is `failed` with the batch exit code -- then submit just enough pilots for the site's
    activated jobs, never more than batch.max_queued waiting or batch.max_pilots in all. Each pilot runs
    `jedictl pilot --site S --once` with this store (JEDICTL_DB) and its pilots row (JEDICTL_PILOT_ID).
    A site whose last harvest.max_failed_pilots pilots all failed before taking work gets its pilots
    turned off (brokerage skips it; `jedictl explain` and `jedictl sites show` say why) until a pilot
    ends well again. `jedictl pilots list` shows the pilots.
    """
    app = context(ctx)
    from jedictl.errors import BadInput

    if batch is not None and batch not in ("local", "slurm"):
        raise BadInput("must be local or slurm", "--batch")
    from jedictl.commands._agent import run_passes
    from jedictl.engine.harvest.harvester import HarvestRequest, harvest_pass, pilot_store_url

    store = app.store()
    request = HarvestRequest(store_url=pilot_store_url(store.url), site=site, batch=batch, dry_run=dry_run, limit=limit,
                             env=pilot_env(app))
    run_passes(app, lambda: harvest_pass(store, app.settings, app.clock.now(), request), loop)


def pilot_env(app: object) -> tuple[tuple[str, str], ...]:
    """What the pilots need besides the store: the same configuration file, if one was read."""
    path = getattr(getattr(app, "loaded", None), "config_path", None)
    return (("JEDICTL_CONFIG", str(path)),) if path else ()
