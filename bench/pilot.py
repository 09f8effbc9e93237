"""Benchmark: what `jedictl pilot` adds to each job with a payload that does nothing (issue 16).

A store (SQLite file or PostgreSQL schema) gets one site whose endpoint has a file:// URL and a task
without inputs of N jobs whose payload is `/usr/bin/touch ${OUTPUT0}` -- it only writes its output
(not timed). Then ONE real pilot process, `jedictl pilot --site S --once --jobs N` (one slot), runs
every job: dispatch, work directory, payload, stage-out of the output and the log tarball, report.

Per job, from the store's own timestamps (all written from the pilot's clock) and the pilot's log:
  start  = started_at - dispatched_at: dispatch (its transaction included, as dispatched_at is the
           `now` it was called with), work directory, endpoint lookup, the `running` heartbeat, up to
           the moment the payload is started (the pilot reports that moment as started_at)
  end    = accepted - ended_at: from the payload's end (the pilot's ended_at) through stage-out, the
           log tarball and the report's transaction to the pilot logging the job's outcome, which it
           does once `ingest_reports` has returned and the work directory is removed ("job N: finished")
  total  = start + end, the pilot's overhead per job. Target: median < 100 ms on SQLite.
Also printed: the payload phase (ended_at - started_at, fork/exec included; the payload's own
wall_time as the pilot measured it is inside it), `ingest` (accepted - state_changed_at: the report's
transaction, state_changed_at being the `now` it was called with), and the pilot's start-up (the
process started -> the first job's dispatched_at: interpreter, imports, store, site), and the time from
the first dispatch to the last job's report over N (the phases plus the payload plus the slot's loop: a
cross-check that nothing between the phases is missed).

    python bench/pilot.py [--jobs 200] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import jedictl, scratch_store  # noqa: E402
from jedictl.clock import utcnow  # noqa: E402
from tests.cli.pilot_grid import SITE, sites_document, task_spec  # noqa: E402

TARGET_MS = 100
#: Set-up only: generate every job in one pass (the queue cap and the throttler would release 20 at a time).
ROOMY = {"JEDICTL_BROKERAGE__QUEUE_LIMIT_SITE": "100000", "JEDICTL_GENERATE__THROTTLE": "false"}
LOGGED = re.compile(r"^(\S+ \S+) pilot job (\d+): (finished|failed|cancelled|closed)\b")


def make_task(url: str, workdir: Path, n_jobs: int) -> Path:
    """The site, its endpoint on disk and a no-input task of `n_jobs` touch jobs, generated; the disk root."""
    disk = workdir / "disk"
    disk.mkdir()
    (workdir / "sites.yaml").write_text(yaml.safe_dump(sites_document(disk)))
    jedictl(url, "sites", "import", str(workdir / "sites.yaml"))
    spec = task_spec("/usr/bin/touch", name="bench.pilot", command="${OUTPUT0}", no_input=True, inputs=[],
                     split={"n_events": 10 * n_jobs, "n_events_per_job": 10})
    jedictl(url, "submit", "-", stdin=spec)
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        jedictl(url, *agent, env=ROOMY)
    return disk


def job_times(url: str) -> dict[int, dict]:
    from sqlalchemy import select

    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import jobs

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.dispatched_at, jobs.c.started_at, jobs.c.ended_at,
                                       jobs.c.state_changed_at, jobs.c.wall_time))
            return {row.id: row._asdict() for row in rows}
    finally:
        engine.dispose()


def figures(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], "max": ordered[-1]}


def run(backend: str, n_jobs: int, workdir: Path) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="pilot-", dir=workdir))  # run_all calls again with the same folder
    with scratch_store(backend, workdir, "pilot") as url:
        make_task(url, workdir, n_jobs)
        launched = utcnow()
        done = subprocess.run([sys.executable, "-m", "jedictl", "pilot", "--site", SITE, "--once", "--jobs", str(n_jobs),
                               "--workdir", str(workdir / "work"), "--db", url, "-o", "json"],
                              capture_output=True, text=True, env={**os.environ, "TZ": "UTC"})  # log times in UTC, as the store's
        wall_s = (utcnow() - launched).total_seconds()
        if done.returncode != 0:
            raise SystemExit(f"the pilot failed ({done.returncode}): {done.stderr[-1000:]}")
        accepted = {int(m[2]): datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f")
                    for m in map(LOGGED.match, done.stderr.splitlines()) if m}
        rows = job_times(url)
        finished = [row for row in rows.values() if row["status"] == "finished"]
        assert len(finished) == n_jobs == len(accepted), (len(finished), n_jobs, len(accepted), json.loads(done.stdout))
        ms = {"start": [], "end": [], "total": [], "payload": [], "ingest": []}
        for row in finished:
            start = (row["started_at"] - row["dispatched_at"]).total_seconds() * 1000
            end = (accepted[row["id"]] - row["ended_at"]).total_seconds() * 1000
            ms["start"].append(start)
            ms["end"].append(end)
            ms["total"].append(start + end)
            ms["payload"].append((row["ended_at"] - row["started_at"]).total_seconds() * 1000)
            ms["ingest"].append((accepted[row["id"]] - row["state_changed_at"]).total_seconds() * 1000)
        first = min(row["dispatched_at"] for row in finished)
        cycle_ms = (max(accepted.values()) - first).total_seconds() * 1000 / n_jobs
        return {"backend": backend, "jobs": n_jobs, "pilot_wall_s": round(wall_s, 2), "jobs_per_s": round(n_jobs / wall_s, 1),
                "startup_ms": round((first - launched).total_seconds() * 1000), "cycle_ms": round(cycle_ms, 1),
                "payload_wall_ms_median": round(statistics.median(row["wall_time"] for row in finished) * 1000, 1),
                **{phase: {k: round(v, 1) for k, v in figures(values).items()} for phase, values in ms.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="sqlite")
    args = parser.parse_args()
    for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
        with tempfile.TemporaryDirectory() as tmp:
            result = run(backend, args.jobs, Path(tmp))
        print(f"{backend}: {result['jobs']} jobs by one pilot in {result['pilot_wall_s']} s ({result['jobs_per_s']} jobs/s), "
              f"pilot start-up {result['startup_ms']} ms, payload wall_time median {result['payload_wall_ms_median']} ms, "
              f"first dispatch to last report {result['cycle_ms']} ms per job")
        print(f"  {'ms':24s} {'median':>8s} {'p90':>8s} {'max':>8s}")
        for phase, label in (("start", "dispatch -> payload start"), ("end", "payload end -> accepted"), ("total", "overhead (sum)"),
                             ("ingest", "  of which the report"), ("payload", "payload (started..ended)")):
            f = result[phase]
            print(f"  {label:24s} {f['median']:8.1f} {f['p90']:8.1f} {f['max']:8.1f}")
        if backend == "sqlite":
            met = result["total"]["median"] < TARGET_MS
            print(f"  target: overhead median < {TARGET_MS} ms on SQLite: {result['total']['median']:.1f} ms -> {'PASS' if met else 'FAIL'}")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
