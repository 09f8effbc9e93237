"""One harvest pass: PanDA Harvester's monitor and submitter for every site with a batch system.

Per site: (1) reconcile -- ask the batch system about the site's live pilots and end the rows of
those it says are gone without the pilot having said so (policy.reconcile); (2) health -- a site whose
last N pilots all failed before taking work has its pilots turned off (brokerage then sends it no
jobs, `explain` says why), and turned on again once a pilot ends otherwise; (3) submit -- just enough
pilots for the activated jobs within the site's caps (policy.pilots_to_submit). The rows are inserted
before the batch submission, so a pilot that starts at once finds its row; a pass killed between the
two leaves rows without a batch id, which a later pass calls lost after the grace period.

Several harvest passes may run at once (cron overlap, several hosts): they may submit a few pilots
too many -- bounded by the caps, and harmless, since a pilot without work exits at once -- but every
row write is guarded by the row's state, so none undoes another's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jedictl.config import Settings, default_data_dir
from jedictl.engine.agent import PassReport
from jedictl.engine.harvest.batch import Batch, BatchError, Submission, batch_for
from jedictl.engine.harvest.policy import BatchView, EndedPilot, PilotView, SiteDemand, failing_streak, pilots_to_submit, reconcile
from jedictl.store import pilots as pilot_store


@dataclass(frozen=True)
class HarvestRequest:
    store_url: str  # what the pilots connect to (JEDICTL_DB)
    site: str | None = None  # only this site
    batch: str | None = None  # override every site's batch system (local | slurm)
    dry_run: bool = False
    limit: int | None = None  # pilots per site this pass
    env: tuple[tuple[str, str], ...] = ()  # more environment for the pilots (JEDICTL_CONFIG)


def pilot_store_url(url: str) -> str:
    """The store URL as a pilot elsewhere must see it: a relative SQLite path made absolute."""
    prefix = "sqlite:///"
    path = url[len(prefix):] if url.startswith(prefix) else None
    if path and not path.startswith("/") and path != ":memory:":
        return prefix + str(Path(path).resolve())
    return url


def harvest_wanted(store: Any) -> bool:
    """Whether any site names a batch system (`jedictl run` harvests only then)."""
    with store.read() as conn:
        return pilot_store.any_batch_site(conn)


def harvest_pass(store: Any, settings: Settings, now: datetime, request: HarvestRequest,
                 batches: dict[str, Batch] | None = None) -> PassReport:
    """One pass over the sites; `batches` (system -> Batch) replaces the built-in ones (tests, other systems)."""
    report = PassReport("harvest")
    log_root = Path(settings.harvest.log_dir or default_data_dir() / "pilots")
    with store.read() as conn:
        sites = pilot_store.harvest_sites(conn, request.site)
        activated = pilot_store.activated_jobs(conn, [site["name"] for site in sites])
    if request.site is not None and not sites:
        report.add("error", site=request.site, reason=f"site {request.site} does not exist")
        return report
    batches = dict(batches or {})
    for site in sites:
        name = site["name"]
        options = dict(site["batch"] or {})
        system = request.batch or settings.harvest.batch or options.get("system")
        if not system:
            report.add("error", site=name, reason=f"site {name} has no batch system (sites.batch); give --batch local|slurm")
            continue
        try:
            if system not in batches:
                batches[system] = batch_for(system, log_root=log_root)
            live = _reconcile(store, settings, now, request, report, name, batches, log_root)
            _health(store, settings, now, request, report, site)
            _submit(store, settings, now, request, report, site, options, batches[system], live, activated.get(name, 0), log_root)
        except BatchError as exc:
            report.add("error", site=name, reason=str(exc))
    return report


def _reconcile(store: Any, settings: Settings, now: datetime, request: HarvestRequest, report: PassReport, site: str,
               batches: dict[str, Batch], log_root: Path) -> dict[str, int]:
    """End the rows of pilots the batch system says are gone; the live pilots left, by state."""
    with store.read() as conn:
        rows = pilot_store.live_pilots(conn, site)
    views: dict[str, BatchView] = {}
    for system in sorted({row.batch_system for row in rows}):  # a pilot is asked of the system it went to
        ids = [row.batch_id for row in rows if row.batch_system == system and row.batch_id]
        if ids:
            if system not in batches:
                batches[system] = batch_for(system, log_root=log_root)
            views.update({f"{system}:{key}": view for key, view in batches[system].status(ids).items()})
    live = {"queued": 0, "running": 0}
    for row in rows:
        view = views.get(f"{row.batch_system}:{row.batch_id}") if row.batch_id else None
        pilot = PilotView(id=row.id, state=row.state, batch_id=row.batch_id, age_s=_seconds(now, row.submitted_at),
                          silent_s=_seconds(now, row.heartbeat_at) if row.heartbeat_at else None)
        verdict = reconcile(pilot, view, grace_s=settings.harvest.submit_grace_seconds, quiet_s=settings.harvest.quiet_seconds)
        if verdict is None:
            # Running is the pilot's own word (it said it started); the batch's "running" before that
            # is a pilot still starting up, which takes no job yet: it counts as queued.
            live["running" if row.state == "running" else "queued"] += 1
            continue
        if not request.dry_run:
            with store.begin() as conn:
                if not pilot_store.pilot_ended_by_batch(conn, row.id, now, state=verdict.state, exit_code=verdict.exit_code, error=verdict.error):
                    live["running"] += 1  # it spoke meanwhile (started or ended): its own word stands
                    continue
        before_work = row.n_jobs == 0
        if before_work and verdict.state in ("lost", "failed"):
            report.counts["failed_before_work"] = report.counts.get("failed_before_work", 0) + 1
        report.add(_dry(verdict.state, request), site=site, pilot_id=row.id, batch_id=row.batch_id, exit_code=verdict.exit_code,
                   before_work=before_work, reason=verdict.error)
    return live


def _health(store: Any, settings: Settings, now: datetime, request: HarvestRequest, report: PassReport, site: dict[str, Any]) -> None:
    """Turn the site's pilots off after a streak of pilots that failed before taking work; back on after."""
    name, k = site["name"], settings.harvest.max_failed_pilots
    with store.read() as conn:
        recent = [EndedPilot(row.state, row.n_jobs, row.error) for row in pilot_store.recent_ended(conn, name, max(k, 1))]
    reason = failing_streak(recent, k)
    if reason and site["pilots_active"]:
        if not request.dry_run:
            with store.begin() as conn:
                pilot_store.set_pilots_off(conn, name, reason, now)
        site.update(pilots_active=False, pilots_reason=reason)
        report.add(_dry("pilots_off", request), site=name, reason=reason)
    elif not reason and not site["pilots_active"] and site["pilots_reason"] and recent:
        if not request.dry_run:
            with store.begin() as conn:
                pilot_store.set_pilots_on(conn, name, now)
        site.update(pilots_active=True, pilots_reason=None)
        report.add(_dry("pilots_on", request), site=name, reason=f"pilot {recent[0].state} after {recent[0].n_jobs} jobs: the site works again")


def _submit(store: Any, settings: Settings, now: datetime, request: HarvestRequest, report: PassReport, site: dict[str, Any],
            options: dict[str, Any], batch: Batch, live: dict[str, int], activated: int, log_root: Path) -> None:
    name = site["name"]
    if site["status"] == "offline":
        report.add("idle", site=name, reason="site offline")
        return
    jobs_per_pilot = int(options.get("jobs_per_pilot") or settings.harvest.jobs_per_pilot)
    slots = int(options.get("slots") or settings.harvest.slots)
    demand = SiteDemand(activated=activated, queued=live["queued"], running=live["running"], jobs_per_pilot=jobs_per_pilot, slots=slots,
                        max_pilots=options.get("max_pilots"), max_queued=options.get("max_queued"), site_max_running=site["max_running"],
                        probe=not site["pilots_active"] and bool(site["pilots_reason"]))
    limits = [n for n in (request.limit, settings.harvest.limit) if n is not None]
    decision = pilots_to_submit(demand, min(limits) if limits else None)
    if decision.count == 0:
        report.add("idle", site=name, reason=decision.reason)
        return
    if request.dry_run:
        _add_many(report, "would_submit", decision.count, site=name, pilots=decision.count, batch_system=batch.name, reason=decision.reason)
        return
    argv = [sys.executable, "-m", "jedictl", "pilot", "--site", name, "--once", "--jobs", str(jobs_per_pilot), "--slots", str(slots)]
    if options.get("workdir"):
        argv += ["--workdir", str(options["workdir"])]
    with store.begin() as conn:
        ids = pilot_store.insert_pilots(conn, name, batch.name, decision.count, now)
    submission = Submission(site=name, argv=argv, env={"JEDICTL_DB": request.store_url, **dict(request.env)}, pilot_ids=ids,
                            log_dir=log_root / name, options=options)
    try:
        batch_ids = batch.submit(submission)
    except BatchError as exc:
        with store.begin() as conn:
            pilot_store.submission_failed(conn, ids, str(exc), now)
        report.counts["failed_before_work"] = report.counts.get("failed_before_work", 0) + len(ids)
        raise
    with store.begin() as conn:
        pilot_store.set_batch_ids(conn, dict(zip(ids, batch_ids)), now)
    _add_many(report, "submitted", len(ids), site=name, pilots=len(ids), batch_system=batch.name, pilot_ids=ids, batch_ids=batch_ids,
              reason=decision.reason)


def _add_many(report: PassReport, outcome: str, count: int, **item: Any) -> None:
    """One report line for `count` pilots of a site, counted as `count` (the pass reports pilots, not sites)."""
    report.add(outcome, **item)
    report.counts[outcome] += count - 1


def _dry(outcome: str, request: HarvestRequest) -> str:
    return f"would_{outcome}" if request.dry_run else outcome


def _seconds(now: datetime, then: datetime | None) -> float:
    return (now - then).total_seconds() if then is not None else 0.0
