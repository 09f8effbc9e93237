"""`jedictl simulate`: pilots played by the program itself, for demos and end-to-end tests.

A pass takes each site that has activated jobs, dispatches up to N of them exactly as an executor
would (engine.jobs.dispatcher), sends a `running` heartbeat, "runs" them and reports the outcome through
the same path as `jobs report`. Nothing is special-cased: the store cannot tell a simulated pilot
from a real one, which is the point.

Outcomes are drawn from a seeded generator: a job fails with `failure_rate`, its error drawn by
weight from the failure mix (settings.simulate.failure_mix or --error). Metrics are plausible: wall
time from the input events (simulate.seconds_per_event per core; analysis_seconds_per_event for
analysis jobs; plus JEDI's 600 s base), CPU at 90 % efficiency, PSS below the job's RAM -- above it
for a memory failure (pilot 1212 or trans 137), so that the retry module's memory ladder has something
to climb.

A job's events are those of its master input (a secondary, e.g. pile-up, adds none; a merge job reads
one stream's events, however many streams it merges). A job that would run past its own `max_walltime`
is killed by the pilot at that limit: failed with pilot error 1213, "Reached batch system time limit"
(PanDA pilot's REACHEDMAXTIME). Time is compressed, not bent: a job starts when it is dispatched (never
before it was created) and ends `wall` seconds later, so its `ended_at` may lie after the pass's clock.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.jobs.dispatcher import DispatchRequest, dispatch_jobs
from jedictl.engine.jobs.event_outcomes import ingest_event_reports
from jedictl.engine.jobs.event_reports import EventReport
from jedictl.engine.jobs.outcomes import ingest_reports, take_heartbeats
from jedictl.engine.jobs.results import OutputReport
from jedictl.engine.jobs.reports import ExecutorReport, Heartbeat
from jedictl.engine.task.spec import ANALYSIS_LABELS
from jedictl.errors import BadInput
from jedictl.store import jobs as job_store

LOG_TYPES = ("log", "trn_log")

EXECUTOR = "jedictl-simulate"
#: Errors that mean "out of memory": the simulated PSS goes above the job's RAM.
MEMORY_ERRORS = frozenset({("pilot", 1212), ("trans", 137)})
BASE_WALLTIME_S = 600
#: The pilot's error when the batch system's time limit ends a job (pilot/common/errorcodes.py REACHEDMAXTIME).
WALLTIME_ERROR = ("pilot", 1213, "Reached batch system time limit")


@dataclass(frozen=True)
class SimError:
    source: str
    code: int
    diag: str
    weight: float = 1.0


def load_failure_mix(entries: Sequence[Mapping[str, Any]]) -> tuple[SimError, ...]:
    mix = []
    for index, entry in enumerate(entries):
        try:
            mix.append(SimError(str(entry["source"]), int(entry["code"]), str(entry.get("diag", "")), float(entry.get("weight", 1))))
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput("needs source, code and optionally diag and weight", f"simulate.failure_mix[{index}]") from exc
    if not mix or any(e.weight < 0 for e in mix) or sum(e.weight for e in mix) <= 0:
        raise BadInput("needs at least one error with a positive weight", "simulate.failure_mix")
    return tuple(mix)


def parse_error_option(text: str) -> SimError:
    """`--error pilot:1212[:diag]`."""
    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1].lstrip("-").isdigit():
        raise BadInput(f"{text!r} is not SOURCE:CODE[:DIAG] (e.g. pilot:1212)", "--error")
    return SimError(parts[0], int(parts[1]), parts[2] if len(parts) > 2 else f"simulated {parts[0]} error {parts[1]}")


def simulated_report(payload: Mapping[str, Any], events: int, rng: random.Random, now: datetime, failure_rate: float,
                     mix: Sequence[SimError], seconds_per_event: float) -> ExecutorReport:
    """One job's report, drawn from `rng`: pure, so a seed replays a run exactly."""
    cores = max(int(payload.get("core_count") or 1), 1)
    ram_kb = int(payload.get("min_ram_count") or 2000) * 1024
    wall = BASE_WALLTIME_S + events * seconds_per_event / cores * rng.uniform(0.8, 1.2)
    failed = rng.random() < failure_rate
    error = rng.choices(list(mix), weights=[e.weight for e in mix])[0] if failed else None
    if error is not None and (error.source, error.code) in MEMORY_ERRORS:
        pss = int(ram_kb * rng.uniform(1.05, 1.4))
    else:
        pss = int(ram_kb * rng.uniform(0.4, 0.9))
    if error is not None:
        wall *= rng.uniform(0.1, 0.9)  # failures end early
    limit = payload.get("max_walltime") or 0
    if limit > 0 and wall > limit:
        # The batch system ends the job at its walltime: nothing is written, whatever it would have done.
        failed, wall = True, float(limit)
        error = SimError(*WALLTIME_ERROR)
    wall = round(wall, 1)
    outputs = () if failed else tuple(
        OutputReport(lfn=out["lfn"], size=rng.randint(1_000_000, 2_000_000_000) if out["type"] not in LOG_TYPES else rng.randint(10_000, 5_000_000),
                     checksum=f"ad:{rng.getrandbits(32):08x}", guid=_guid(rng), n_events=events if out["type"] not in LOG_TYPES else None)
        for out in payload.get("outputs", []))
    return ExecutorReport(
        line=0, job_id=payload["job_id"], status="failed" if failed else "finished", attempt_nr=payload.get("attempt_nr"),
        error_source=error.source if error else None, error_code=error.code if error else None, error_diag=error.diag if error else None,
        trans_exit_code=error.code if error is not None and error.source == "trans" else 0,
        wall_time=wall, cpu_time=round(wall * cores * 0.9, 1), max_pss=pss, max_rss=int(pss * 1.1),
        n_events=events, started_at=now, ended_at=now + timedelta(seconds=wall), outputs=outputs)


def simulated_ranges(payload: Mapping[str, Any], rng: random.Random, failure_rate: float) -> list[EventReport]:
    """An event-service job's range reports: each range finished with its pre-merged file, or failed
    with `failure_rate` (pilot error 1220, as an event-service payload's failed range)."""
    reports = []
    for item in payload.get("event_ranges", ()):
        failed = rng.random() < failure_rate
        reports.append(EventReport(0, item["event_id"], payload["job_id"], "failed" if failed else "finished", payload.get("attempt_nr"),
                                   error_code=1220 if failed else None, error_diag="simulated event range failure" if failed else None,
                                   output_lfn=None if failed else f"{item['lfn']}.{item['start_event']}-{item['end_event']}.es",
                                   output_size=None if failed else rng.randint(100_000, 50_000_000)))
    return reports


def simulated_es_report(payload: Mapping[str, Any], events: int, rng: random.Random, now: datetime, failure_rate: float,
                        mix: Sequence[SimError], seconds: float) -> ExecutorReport:
    """An event-service job's own report: it writes no final output (its ES merge job does)."""
    report = simulated_report({**payload, "outputs": []}, events, rng, now, failure_rate, mix, seconds)
    return report._replace(outputs=())


def _guid(rng: random.Random) -> str:
    value = f"{rng.getrandbits(128):032x}"
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}".upper()


def seconds_per_event(settings: Settings, payload: Mapping[str, Any]) -> float:
    """The simulated cost of one input event: analysis jobs read derived data at a fraction of a second
    per event; production's default models simulation (10 s). One figure for both made every analysis
    job of 20,000 events run 55 h, past the 48 h walltime of the example sites."""
    if payload.get("prod_source_label") in ANALYSIS_LABELS:
        return settings.simulate.analysis_seconds_per_event
    return settings.simulate.seconds_per_event


def simulate_pass(store: Any, settings: Settings, now: datetime, rng: random.Random, *, sites: Sequence[str] = (),
                  jobs_per_site: int = 100, failure_rate: float | None = None, errors: Sequence[SimError] = ()) -> PassReport:
    """Dispatch, run and report up to `jobs_per_site` jobs at each site (all sites with activated jobs
    when `sites` is empty)."""
    rate = settings.simulate.failure_rate if failure_rate is None else failure_rate
    if not 0 <= rate <= 1:
        raise BadInput("must be between 0 and 1", "--failure-rate")
    mix = tuple(errors) or load_failure_mix(settings.simulate.failure_mix)
    report = PassReport("simulate")
    with store.read() as conn:
        targets = list(sites) or job_store.sites_with_activated_jobs(conn)
    for site in targets:
        payloads = dispatch_jobs(store, settings, DispatchRequest(site, min(jobs_per_site, settings.dispatch.max_count), EXECUTOR), now, rng)
        if not payloads:
            report.add("idle", site=site, jobs=0, finished=0, failed=0)
            continue
        take_heartbeats(store, [Heartbeat(None, p["job_id"], "running", p.get("attempt_nr")) for p in payloads], now,
                        settings.report.batch_size)
        with store.read() as conn:
            events = job_store.input_events(conn, [p["job_id"] for p in payloads])
        range_reports = [r for p in payloads if p.get("event_service") and p.get("kind") != "esmerge" for r in simulated_ranges(p, rng, rate)]
        if range_reports:
            ingest_event_reports(store, range_reports, now)
        for p in payloads:
            mask = p.get("mask")
            if mask and mask.get("first_event") is not None and mask.get("last_event") is not None:
                # A WMCore job processes the events of its mask, not its whole file.
                events[p["job_id"]] = mask["last_event"] - mask["first_event"] + 1
            if p.get("event_service"):
                # An event-service job's events are its ranges (processed ones, or those merged).
                events[p["job_id"]] = sum(r["end_event"] - r["start_event"] + 1 for r in p.get("event_ranges", ()))
        outcomes = [simulated_es_report(p, events.get(p["job_id"], 0), rng, now, rate, mix, seconds_per_event(settings, p))
                    if p.get("event_service") and p.get("kind") != "esmerge" else
                    simulated_report(p, events.get(p["job_id"], 0), rng, now, rate, mix, seconds_per_event(settings, p))
                    for p in payloads]
        results = ingest_reports(store, outcomes, settings, now)
        ended = [r for r in results if r.outcome == "applied"]
        refused = [r for r in results if r.outcome in ("refused", "conflict")]
        report.add("error" if refused else "ran", site=site, jobs=len(payloads),
                   # an event-service job whose ranges all went well goes `merging` (its ES merge job finishes it)
                   finished=sum(1 for r in ended if r.status in ("finished", "merging")),
                   failed=sum(1 for r in ended if r.status not in ("finished", "merging")),
                   reason="; ".join(r.reason for r in refused[:3]) or None)
    report.counts["jobs"] = sum(item.get("jobs", 0) for item in report.items)
    report.counts["finished"] = sum(item.get("finished", 0) for item in report.items)
    report.counts["failed"] = sum(item.get("failed", 0) for item in report.items)
    return report
