"""`jedictl agents add|list|show|set-state|remove`: the agents that take work-queue elements for their sites,
and their resource control -- pending and running thresholds per site and job type, a site's state
(WMCore's wmagent-resource-control; docs/queue-layers.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from jedictl.commands._app import App
from jedictl.commands._common import ColumnsOpt, WideOpt, context
from jedictl.output import View

app = App(help="Agents (one per host or cluster) that take work-queue elements for their sites, with their thresholds per site and job type.",
          no_args_is_help=True)

LIST_VIEW = View(("agent", "sites", "max_jobs_per_owner", "Negotiating", "Acquired", "Running", "modified_at"), keep=2)
SHOW_VIEW = View(tables={"sites": View(("site", "job_type", "state", "pending_threshold", "running_threshold", "pending_jobs",
                                        "running_jobs", "global_slots", "local_slots"), keep=3)})
NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The agent (names from `agents list`).")]


@app.command("add")
def add(
    ctx: typer.Context,
    name: NameArg,
    site: Annotated[Optional[list[str]], typer.Option("--site", metavar="SITE", help="A site the agent serves (repeat for more); it must be in `sites list`.")] = None,
    job_type: Annotated[str, typer.Option("--job-type", metavar="LABEL", help="The job type the thresholds are for: a task's prodSourceLabel (managed, user, test ...).")] = "managed",
    pending: Annotated[Optional[int], typer.Option("--pending-threshold", metavar="N", min=0, help="Jobs that may wait at each --site (WMCore's pending slots); needed for a new site.")] = None,
    running: Annotated[Optional[int], typer.Option("--running-threshold", metavar="N", min=0, help="Jobs that may run at each --site (WMCore's running slots); needed for a new site.")] = None,
    state: Annotated[Optional[str], typer.Option("--state", help="normal, drain (no new work from the global queue) or down (none at all); default: normal for a new site, unchanged otherwise.")] = None,
    max_jobs_per_owner: Annotated[Optional[int], typer.Option("--max-jobs-per-owner", metavar="N", min=1, help="Its schedd's MAX_JOBS_PER_OWNER: no element of an owner with N jobs at the agent is pulled.")] = None,
    no_owner_cap: Annotated[bool, typer.Option("--no-owner-cap", help="Remove the agent's --max-jobs-per-owner.")] = False,
) -> None:
    """Create an agent or change it: its owner cap, its thresholds and state at its sites.

    The thresholds and state are set at each --site for --job-type. What is not given is left as it is. One line per change: created, updated or unchanged."""
    from jedictl.commands._choices import check_choice
    from jedictl.errors import BadInput
    from jedictl.model.choices import AGENT_SITE_STATES

    app_ctx = context(ctx)
    check_choice(state, AGENT_SITE_STATES, "--state", "a site state")
    if no_owner_cap and max_jobs_per_owner is not None:
        raise BadInput("give --max-jobs-per-owner or --no-owner-cap, not both")
    if (pending is not None or running is not None or state is not None or job_type != "managed") and not site:
        raise BadInput("--job-type, --pending-threshold, --running-threshold and --state are per site: give --site")
    from jedictl.store import workqueue as wq

    now = app_ctx.clock.now()
    with app_ctx.store().begin() as conn:
        unknown = sorted(set(site or ()) - wq.site_names(conn, site or ()))
        if unknown:
            raise BadInput(f"unknown site {unknown[0]!r} (`jedictl sites list` shows the sites)", "--site")
        keep = max_jobs_per_owner is None and not no_owner_cap
        lines = [{"agent": name, "site": None, "job_type": None, "action": wq.upsert_agent(conn, name, max_jobs_per_owner, keep, now)}]
        for one in dict.fromkeys(site or ()):
            lines.append({"agent": name, "site": one, "job_type": job_type,
                          "action": wq.set_agent_site(conn, name, one, job_type, pending, running, state, now)})
    app_ctx.emit(lines, ["agent", "site", "job_type", "action"])


@app.command("list")
def list_(
    ctx: typer.Context,
    columns: ColumnsOpt = None,
    wide: WideOpt = False,
) -> None:
    """List the agents: their sites, owner cap and the elements each holds by status."""
    app_ctx = context(ctx)
    from jedictl.store import workqueue as wq

    with app_ctx.store().read() as conn:
        counts = wq.element_counts(conn)
        rows = []
        for agent in wq.list_agents(conn):
            sites = sorted({r.site for r in wq.agent_thresholds(conn, agent.name)})
            rows.append({"agent": agent.name, "sites": ", ".join(sites), "max_jobs_per_owner": agent.max_jobs_per_owner,
                         **{status: counts.get((agent.name, status), 0) for status in ("Negotiating", "Acquired", "Running")},
                         "modified_at": agent.modified_at})
    app_ctx.emit(rows, LIST_VIEW, pick=columns, wide=wide)


@app.command("show")
def show(
    ctx: typer.Context,
    name: NameArg,
    wide: WideOpt = False,
) -> None:
    """One agent: per site and job type its thresholds, state, jobs and free slots.

    The slots each level has left are counted at the lowest priority (global: pending + running thresholds, drained sites none;
    local: less the running jobs)."""
    app_ctx = context(ctx)
    from jedictl.engine.workqueue.queue import agent_slots

    with app_ctx.store().read() as conn:
        details = agent_slots(conn, name)
    app_ctx.emit(details, SHOW_VIEW, wide=wide)


@app.command("set-state")
def set_state(
    ctx: typer.Context,
    name: NameArg,
    site: Annotated[str, typer.Argument(metavar="SITE", help="One of the agent's sites.")],
    state: Annotated[str, typer.Argument(metavar="STATE", help="normal, drain or down.")],
) -> None:
    """Set a site's state for the agent: normal, drain or down.

    For every job type (wmagent-resource-control --normal/--drain/--down): a drained site takes no new element from the global queue but still gets its local queue's work
    released; a down site takes nothing."""
    from jedictl.commands._choices import check_choice
    from jedictl.errors import BadInput
    from jedictl.model.choices import AGENT_SITE_STATES

    app_ctx = context(ctx)
    check_choice(state, AGENT_SITE_STATES, "STATE", "a site state")
    from jedictl.store import workqueue as wq

    with app_ctx.store().begin() as conn:
        wq.get_agent(conn, name)
        if not wq.set_site_state(conn, name, site, state, app_ctx.clock.now()):
            raise BadInput(f"agent {name} does not serve site {site!r} (`jedictl agents show {name}` lists its sites)")
    app_ctx.emit({"agent": name, "site": site, "state": state})


@app.command("remove")
def remove(
    ctx: typer.Context,
    name: NameArg,
) -> None:
    """Remove an agent and its thresholds; refused while it holds elements (Negotiating, Acquired, Running)."""
    app_ctx = context(ctx)
    from jedictl.store import workqueue as wq

    with app_ctx.store().begin() as conn:
        wq.remove_agent(conn, name)
    app_ctx.emit({"agent": name, "action": "removed"})
