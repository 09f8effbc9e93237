"""All agents in pipeline order: what `jedictl run` (the one cron line) and `jedictl demo` call.

Each agent is one pass with its own leases, so a pipeline run overlapping another (cron firing while
the previous run is still busy, or several hosts on one PostgreSQL store) only shares the work out.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Callable, Iterator

from jedictl.config import Settings
from jedictl.engine.agent import PassReport, ending_leases
from jedictl.engine.brokerage.broker import broker_pass
from jedictl.engine.feed.feeder import feed_pass
from jedictl.engine.finalize.postprocessor import finalize_pass
from jedictl.engine.generate.generator import generate_pass
from jedictl.engine.harvest.harvester import HarvestRequest, harvest_pass, harvest_wanted, pilot_store_url
from jedictl.engine.periodic.instances import periodic_pass
from jedictl.engine.refine.refiner import refine_pass
from jedictl.engine.watch.watchdog import watch_pass
from jedictl.errors import BadInput
from jedictl.model.choices import AGENTS as PIPELINE_AGENTS

#: Pipeline order: periodic (the templates due become tasks) -> refine -> feed -> broker -> generate -> harvest (pilots for the new jobs, only where a
#: site has a batch system) -> finalize, then the watchdog's housekeeping.
AGENTS = PIPELINE_AGENTS


def _periodic(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return periodic_pass(store, settings, owner, now)


def _refine(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return refine_pass(store, settings, owner, now)


def _feed(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return feed_pass(store, settings, owner, now)


def _broker(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return broker_pass(store, settings, owner, now, seed=seed)


def _generate(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return generate_pass(store, settings, owner, now, seed=seed)


def _harvest(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return harvest_pass(store, settings, now, HarvestRequest(store_url=pilot_store_url(store.url)))


def _finalize(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return finalize_pass(store, settings, owner, now)


def _watch(store: Any, settings: Settings, owner: str, now: datetime, seed: int | None) -> PassReport:
    return watch_pass(store, settings, owner, now)


PASSES: dict[str, Callable[[Any, Settings, str, datetime, int | None], PassReport]] = {
    "periodic": _periodic, "refine": _refine, "feed": _feed, "broker": _broker, "generate": _generate, "harvest": _harvest, "finalize": _finalize, "watch": _watch,
}


def _quietly(check: Callable[[Any], bool], store: Any) -> bool:
    """A check that must not stop the pipeline: an error means yes, so that the pass reports it."""
    try:
        return check(store)
    except Exception:  # noqa: BLE001 - the pass itself will meet it and report it as its error
        return True


def parse_agents(text: str | None) -> tuple[str, ...]:
    """`refine,feed` -> the named agents, always in pipeline order; None or "" -> all of them."""

    if not text:
        return AGENTS
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PASSES]
    if unknown or not names:
        raise BadInput(f"unknown agent {unknown[0]!r}; choose from {', '.join(AGENTS)}" if unknown else "name at least one agent", "--agents")
    return tuple(name for name in AGENTS if name in names)


def run_pipeline(store: Any, settings: Settings, owner: str, clock: Callable[[], datetime], agents: tuple[str, ...] = AGENTS,
                 seed: int | None = None) -> Iterator[tuple[PassReport, float]]:
    """One pass of each agent in order, yielding (report, seconds) as each ends; a pass that raises is
    reported as one error and the next agent still runs."""

    for name in agents:
        started = time.monotonic()
        if name == "harvest" and not _quietly(harvest_wanted, store):
            continue  # no site has a batch system: pilots come on their own, nothing to harvest
        try:
            report = PASSES[name](store, settings, owner, clock(), seed)
        except Exception as exc:  # noqa: BLE001 - one agent's failure must not stop the pipeline (a store refusing us does)
            report = PassReport(name)
            report.add_failure(exc)
        ending_leases(store, owner, report)  # no pass hands a lease to the next (nor to the next run)
        store.refresh_statistics()  # the next agent plans its queries on what this one wrote (store.statistics)
        yield report, time.monotonic() - started
