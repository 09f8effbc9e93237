"""`jedictl jobs dispatch`: an executor pulls activated jobs of its site (PanDA's getJob).

Registered by commands/jobs.py, which imports this module at start-up: keep it free of SQLAlchemy and
the engine (they are imported inside the command), so `--help` and completion stay fast.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from jedictl.commands._common import SeedOpt, context

DISPATCH_COLUMNS = ["job_id", "task_job", "priority", "gshare", "cores", "ram_mb", "inputs"]


class LabelFamily(str, Enum):
    user = "user"
    managed = "managed"
    unified = "unified"


def dispatch(
    ctx: typer.Context,
    site: Annotated[str, typer.Option("--site", metavar="SITE", help="The site (PanDA queue) the executor runs at.", show_default=False)],
    count: Annotated[Optional[int], typer.Option("--count", metavar="N", help="Take at most N jobs (default: dispatch.count).", show_default=False)] = None,
    executor: Annotated[Optional[str], typer.Option("--executor", metavar="NAME", help="Who takes the jobs, recorded on each (default: host:pid:id).", show_default=False)] = None,
    memory: Annotated[Optional[int], typer.Option("--memory", metavar="MB", help="Only jobs needing at most MB of RAM (or stating none).", show_default=False)] = None,
    disk: Annotated[Optional[int], typer.Option("--disk", metavar="MB", help="Only jobs needing at most MB of scratch disk (or stating none).", show_default=False)] = None,
    walltime: Annotated[Optional[int], typer.Option("--walltime", metavar="SECONDS", help="Only jobs needing at most SECONDS of walltime (or stating none).", show_default=False)] = None,
    resource_type: Annotated[Optional[str], typer.Option("--resource-type", metavar="TYPE", help="Only jobs of this resource type (SCORE, MCORE, ...).", show_default=False)] = None,
    label: Annotated[Optional[LabelFamily], typer.Option("--label", help="Only this family: user (user, panda, install), managed (managed, test, prod_test, install) or unified (both).", show_default=False)] = None,
    task_id: Annotated[Optional[int], typer.Option("--task", metavar="TASK_ID", help="Only jobs of this task.", show_default=False)] = None,
    seed: SeedOpt = None,
) -> None:
    """Hand activated jobs of SITE to an executor: they become `sent`, and their payloads are printed.

    Jobs are taken in PanDA's dispatch order: the most under-served global share first ("Test"
    always leads), then priority, then the oldest; in a share of calls (dispatch.sloppy_ratio) simply
    the oldest. Several executors may call at once: no job is ever handed out twice. Executors use
    `-o json`, which prints {"jobs": [...]} (an empty list when nothing fits); see
    docs/executor-protocol.md for every key.
    """
    import random

    app = context(ctx)
    from jedictl.engine.jobs.dispatcher import DispatchFilters, DispatchRequest, dispatch_jobs

    filters = DispatchFilters(memory_mb=memory, disk_mb=disk, walltime_s=walltime, resource_type=resource_type,
                              label=label.value if label else None, task_id=task_id)
    request = DispatchRequest(site=site, count=app.settings.dispatch.count if count is None else count,
                              executor=executor or app.owner, filters=filters)
    payloads = dispatch_jobs(app.store(), app.settings, request, app.clock.now(), random.Random(seed))
    if app.output in ("json", "yaml"):
        app.emit({"jobs": payloads})
        return
    if payloads:
        app.emit([{"job_id": p["job_id"], "task_job": p["task_job"], "priority": p["priority"], "gshare": p["gshare"],
                   "cores": p["core_count"], "ram_mb": p["min_ram_count"], "inputs": len(p["inputs"])} for p in payloads],
                 columns=DISPATCH_COLUMNS)
    app.note(f"dispatched {len(payloads)} job(s) to {site}")
