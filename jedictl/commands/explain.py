"""`jedictl explain task ID`: why a task is or is not progressing."""

from __future__ import annotations

from typing import Annotated

import typer

from jedictl.commands._app import App
from jedictl.commands._common import SeedOpt, WideOpt, context

app = App(help="Explain what holds something back.", no_args_is_help=True)


@app.command("task")
def task(
    ctx: typer.Context,
    task_id: Annotated[int, typer.Argument(metavar="TASK_ID", help="The task.")],
    seed: SeedOpt = None,
    wide: WideOpt = False,
) -> None:
    """Status and reason, lease holder, waits, files by status, the throttle decision for its queue,
    and the brokerage trail of its next chunk: every site kept with its weight or dropped by the
    first rule that failed, with the values; for an analysis task, each site's data locality
    (holds the data, no replica, chosen after ANALY_TIMEOUT with a transfer); once a network matrix is
    imported, each site's network term (the link to the task's nucleus, or from where its missing input is)."""
    app_ctx = context(ctx)
    from jedictl.engine.views.explain import explain_task
    from jedictl.store.data_catalog import StoreDataCatalog

    with app_ctx.store().read() as conn:
        report = explain_task(conn, task_id, app_ctx.settings, app_ctx.clock.now(), StoreDataCatalog(conn), seed)
    if app_ctx.output == "table":  # what does not apply to the task is left out of the table
        flat = {"throttle": _flat(report.get("throttle")), "user_caps": _flat_caps(report.get("user_caps"))}
        report = {key: value for key, value in {**report, **flat}.items()
                  if value is not None or key not in ("nucleus_brokerage", "throttle", "user_caps", "brokerage")}
        rows = report.get("brokerage") or []
        # The data-locality column is for analysis tasks, the network column for sites with a network term.
        empty = {column for column in ("data", "network") if rows and all(row[column] is None for row in rows)}
        if empty:
            report["brokerage"] = [{key: value for key, value in row.items() if key not in empty} for row in rows]
    app_ctx.emit(report, wide=wide)


def _flat_caps(caps: dict | None) -> str | None:
    if not caps:
        return None
    limits = ", ".join(f"{key} {value}" for key, value in caps["caps"].items())
    text = (f"{caps['account']}: running {caps['running_jobs']} jobs / {caps['running_cores']} cores, queued {caps['queued_jobs']} jobs / "
            f"{caps['queued_cores']} cores ({limits}); {caps['capped_jobs']} of its jobs throttled by the cap; generation {caps['generation']}")
    return text + (f"; {caps['privilege']}" if caps.get("privilege") else "")


def _flat(decision: dict | None) -> str | None:
    if not decision:
        return None
    state = "throttled" if decision["throttled"] else "open"
    return f"{state} ({decision['rule']}): {decision['message']}"
