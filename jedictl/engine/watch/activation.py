"""Activating `assigned` jobs once their input has arrived (seed 000 "Direct replica lookup for assigned
jobs"; panda-server.md §2.3: assigned -> activated when the dispatch block is complete).

A job the analysis brokerage sent to a site without its input waits `assigned`; its missing input files
name the endpoint they must reach (job_files.destination). PanDA activates such jobs on Rucio's callback
and, in case the callback is lost, by an hourly direct look at the replicas. jedictl has no callbacks:
the look is the rule. Each watch pass asks the data catalog where the awaited files are, and a job whose
every awaited file is on a disk endpoint its site reads (not blacklisted for reading) becomes
`activated` -- dispatchable. A job whose input never comes is closed by the assigned timeout
(`job_timeouts.assigned_hours`, 12 h) and its input placed again.

`missing_inputs` is the pure decision; `activate_assigned` the thin loop around it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from jedictl.engine.brokerage.loading import load_catalog
from jedictl.engine.brokerage.model import BrokerageCatalog, Site
from jedictl.engine.catalogs.data import DataCatalog
from jedictl.model import TaskStatus
from jedictl.store import assigned as store


@dataclass(frozen=True)
class AwaitedFile:
    """One input file an assigned job waits for."""

    dataset: str
    lfn: str
    destination: str


def readable_endpoints(site: Site | None, catalog: BrokerageCatalog) -> frozenset[str]:
    """The disk endpoints a site reads its input from (its write endpoints when it names no read one),
    minus those blacklisted for reading -- as the brokerage's data locality counts them."""
    if site is None:
        return frozenset()
    found = set()
    for name in site.read_endpoints or site.write_endpoints:
        endpoint = catalog.endpoints.get(name)
        if endpoint is None or (not endpoint.is_tape and not endpoint.blacklisted_read):
            found.add(name)
    return frozenset(found)


def missing_inputs(awaited: Iterable[AwaitedFile], held: Mapping[str, Mapping[str, set[str]]], readable: frozenset[str]) -> list[str]:
    """The LFNs of `awaited` not yet on any endpoint in `readable`; `held` is dataset -> endpoint -> LFNs."""
    missing = []
    for item in awaited:
        at = held.get(item.dataset, {})
        if not any(item.lfn in at.get(endpoint, ()) for endpoint in readable):
            missing.append(item.lfn)
    return missing


def activate_assigned(store_: Any, now: datetime, limit: int, catalog_factory: Callable[[Any], DataCatalog]) -> list[dict[str, Any]]:
    """One look at the assigned jobs (the oldest `limit`): activate those whose input has arrived.
    Returns one item per activated job (job_id, site, reason)."""
    with store_.read() as conn:
        # A paused task's jobs stay queued: its activated jobs were throttled, and its assigned ones wait
        # until it is resumed (the next look after that activates them).
        jobs = store.assigned_jobs(conn, limit, skip_task_statuses=(TaskStatus.PAUSED.value,))
        if not jobs:
            return []
        catalog = load_catalog(conn)
        awaited: dict[int, list[AwaitedFile]] = defaultdict(list)
        for row in store.awaited_inputs(conn, [job.id for job in jobs]):
            awaited[row.job_id].append(AwaitedFile(row.dataset, row.lfn, row.destination))
        wanted: dict[str, set[str]] = defaultdict(set)
        for items in awaited.values():
            for item in items:
                wanted[item.dataset].add(item.lfn)
        data = catalog_factory(conn)
        held = {dataset: data.replica_map(dataset, sorted(lfns)) for dataset, lfns in wanted.items()}
    sites = {site.name: site for site in catalog.sites}
    ready: list[tuple[Any, str]] = []
    for job in jobs:
        readable = readable_endpoints(sites.get(job.site or ""), catalog)
        if not missing_inputs(awaited.get(job.id, ()), held, readable):
            endpoints = sorted({item.destination for item in awaited.get(job.id, ())})
            ready.append((job, f"input at {', '.join(endpoints)}" if endpoints else "no input to wait for"))
    if not ready:
        return []
    with store_.begin() as conn:
        moved = set(store.activate(conn, [job.id for job, _ in ready], now))
    return [{"job_id": job.id, "site": job.site, "reason": reason} for job, reason in ready if job.id in moved]
