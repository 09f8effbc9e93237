"""Benchmark: N short real jobs (default 1,000) through a batch system: Slurm, or `--batch local` (issue 16).

Set-up (not timed): a one-node Slurm cluster from a generated slurm.conf (tests/slurm_cluster.py, the
harvest tests' cluster; skipped with --batch local), a store, one site whose endpoint has a file://
URL and whose `batch` is {system, jobs_per_pilot, slots, max_pilots, max_queued, memory_mb, walltime},
N real input files (random bytes, --size) at their replica paths with their adler32, and a task of
one file per job. Its payload (a Python script) reads its input, sleeps 0.5-1.0 s (fixed per file),
and writes its output: the input plus a line.

Timed: `jedictl run --once` (refine ... generate, harvest, finalize, watch), with --pause seconds
between rounds as a cron job would, until the task is final. Then:
  jobs/min end to end   N / (first round started -> task final) x 60
  payload time          the sum of the payloads' own wall time (the jobs' wall_time, which the pilot
                        measures from the payload's start to its end)
  pilot overhead        the slot time the pilots held that no payload used, over payload time:
                          (sum over pilots of slots x (ended_at - started_at) - payload time) / payload time
                        where started_at/ended_at are the pilot's own words in its pilots row (it says
                        it started once it has imported jedictl and opened the store, and it ended just
                        before it exits). It holds each job's dispatch, stage-in (copy + adler32),
                        heartbeats, stage-out, log tarball and report, and a slot's idle tail when the
                        pilot's other slot still runs its last job. Target: < 10 %. The part within
                        jobs (dispatched_at -> state_changed_at, the report's `now`, minus wall_time) is
                        printed too; the rest is between jobs and the slots' idle tails.
  + start-up            the same with each pilot's fixed cost added: slots x the time of one pilot
                        without work (launch -> exit, the median of 5 at the end on the same store) per pilot,
                        which covers the interpreter and imports before the row says started.
  slot use              payload time over (end-to-end time x max_pilots x slots): what the harvest
                        cadence, the batch system's scheduling and the pilots' start-up leave idle.
Every output and log registered in the catalog is then read back from disk and must have the
registered size and adler32.

The queue cap (NQUEUELIMITSITE) and the throttler are raised/off, as an operator would for a burst
(bench/lifecycle.py does the same): the bench measures execution, not those policies.

    python bench/harvest.py [--jobs 1000] [--batch slurm|local] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import jedictl, scratch_store  # noqa: E402
from tests.cli.pilot_grid import ENDPOINT, INPUT, SITE, place_inputs, sites_document, task_spec  # noqa: E402

TASK = "bench.harvest"
FINAL = ("done", "finished", "failed", "broken", "aborted")
ENV = {"JEDICTL_BROKERAGE__QUEUE_LIMIT_SITE": "100000", "JEDICTL_GENERATE__THROTTLE": "false"}
PAYLOAD = """\
#!{python}
# bench/harvest.py's payload: input -> output with a line added, after 0.5-1.0 s (fixed per input)
import sys, time, zlib
src, dst = sys.argv[1], sys.argv[2]
time.sleep(0.5 + zlib.crc32(src.rsplit("/", 1)[-1].encode()) % 51 / 100)
with open(src, "rb") as i, open(dst, "wb") as o:
    o.write(i.read() + b"processed\\n")
"""


def make_task(url: str, workdir: Path, n_jobs: int, size: int, batch: dict) -> Path:
    disk = workdir / "disk"
    disk.mkdir()
    document = sites_document(disk)
    document["sites"][0]["batch"] = batch
    (workdir / "sites.yaml").write_text(yaml.safe_dump(document))
    jedictl(url, "sites", "import", str(workdir / "sites.yaml"))
    data = {"datasets": [{"name": INPUT, "state": "closed", "replicas": [{"endpoint": ENDPOINT}], "files": place_inputs(disk, n_jobs, size)}]}
    (workdir / "data.yaml").write_text(yaml.safe_dump(data))
    jedictl(url, "data", "import", str(workdir / "data.yaml"))
    script = workdir / "payload.py"
    script.write_text(PAYLOAD.format(python=sys.executable))
    script.chmod(0o755)
    jedictl(url, "submit", "-", stdin=task_spec(str(script), name=TASK))
    return disk


def query(url: str, build):  # noqa: ANN001, ANN201 - a select built from the schema module
    from jedictl.store.database import create_store_engine
    from jedictl.store import schema

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(build(schema)).all()
    finally:
        engine.dispose()


def task_status(url: str) -> str:
    from sqlalchemy import select

    return query(url, lambda s: select(s.tasks.c.status).where(s.tasks.c.name == TASK))[0].status


def verify_outputs(url: str, disk: Path, n_jobs: int) -> int:
    """Every registered output and log read back from its replica path: size and adler32 as registered."""
    from sqlalchemy import select

    from jedictl.engine.storage.checksums import digest
    from jedictl.engine.storage.paths import replica_path, replica_scope

    rows = query(url, lambda s: select(s.catalog_datasets.c.name, s.catalog_files.c.lfn, s.catalog_files.c.size, s.catalog_files.c.checksum)
                 .join(s.catalog_datasets, s.catalog_datasets.c.id == s.catalog_files.c.dataset_id)
                 .where(s.catalog_datasets.c.name.in_([f"{TASK}.out", f"{TASK}.log"])))
    for dataset in (f"{TASK}.out", f"{TASK}.log"):
        assert sum(row.name == dataset for row in rows) == n_jobs, (dataset, sum(row.name == dataset for row in rows))
    for row in rows:
        path = replica_path(f"file://{disk}", replica_scope(None, row.name), row.lfn)
        assert digest(path) == (row.size, row.checksum), (path, digest(path), row.size, row.checksum)
    return len(rows)


def empty_pilot_s(url: str, runs: int = 5) -> float:
    """A pilot without work on this store, launch to exit (median of `runs`: the machine is shared): a pilot's fixed cost."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "jedictl", "pilot", "--site", SITE, "--once", "--db", url, "-q"], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(backend: str, batch_system: str, n_jobs: int, workdir: Path, *, jobs_per_pilot: int = 50, slots: int = 2, max_pilots: int = 2,
        size: int = 100_000, pause: float = 1.0, timeout: float = 3600) -> dict:
    """The whole measurement in a new folder under `workdir`: the Slurm cluster too when batch_system is slurm."""
    workdir = Path(tempfile.mkdtemp(prefix="harvest-", dir=workdir))  # run_all calls again with the same folder
    cluster = None
    env = {**os.environ, **ENV, "JEDICTL_HARVEST__LOG_DIR": str(workdir / "pilot-logs"), "JEDICTL_PILOT__WORKDIR": str(workdir / "work")}
    if batch_system == "slurm":
        from tests.slurm_cluster import SlurmCluster, installed

        missing = installed()
        if missing:
            raise SystemExit(f"bench/harvest.py --batch slurm: {missing} (--batch local runs without it)")
        cluster = SlurmCluster(workdir / "slurm")
        cluster.start()
        env.update(cluster.env)
    batch = {"system": batch_system, "jobs_per_pilot": jobs_per_pilot, "slots": slots, "max_pilots": max_pilots, "max_queued": max_pilots,
             "memory_mb": 200, "walltime": 3600}
    try:
        with scratch_store(backend, workdir, "harvest") as url:
            disk = make_task(url, workdir, n_jobs, size, batch)
            started, rounds = time.perf_counter(), 0
            try:
                while (status := task_status(url)) not in FINAL:
                    if time.perf_counter() - started > timeout:
                        raise SystemExit(f"the task is still {status} after {timeout} s")
                    rounds += 1
                    done = subprocess.run([sys.executable, "-m", "jedictl", "run", "--once", "-q", "--db", url], capture_output=True, text=True,
                                          env=env)
                    if done.returncode not in (0, 1):  # 1: a pass met errors it reported; anything else is a broken run
                        raise SystemExit(f"jedictl run --once failed ({done.returncode}): {done.stderr[-1000:]}")
                    time.sleep(pause)
                elapsed = time.perf_counter() - started
            finally:
                cancel_live_pilots(url, workdir, env)
            return figures(url, disk, n_jobs, batch, elapsed, rounds, status) | {"backend": backend}
    finally:
        if cluster is not None:
            cluster.stop()


def figures(url: str, disk: Path, n_jobs: int, batch: dict, elapsed: float, rounds: int, status: str) -> dict:
    from sqlalchemy import select

    slots, max_pilots = batch["slots"], batch["max_pilots"]
    jobs = query(url, lambda s: select(s.jobs.c.status, s.jobs.c.wall_time, s.jobs.c.dispatched_at, s.jobs.c.state_changed_at))
    pilots = query(url, lambda s: select(s.pilots.c.state, s.pilots.c.started_at, s.pilots.c.ended_at, s.pilots.c.n_jobs))
    payload_s = sum(job.wall_time or 0 for job in jobs)
    in_jobs_s = sum((job.state_changed_at - job.dispatched_at).total_seconds() for job in jobs if job.dispatched_at) - payload_s
    held_s = slots * sum((p.ended_at - p.started_at).total_seconds() for p in pilots if p.started_at and p.ended_at)
    fixed_s = empty_pilot_s(url)
    verified = verify_outputs(url, disk, n_jobs)
    states: dict[str, int] = {}
    for p in pilots:
        states[p.state] = states.get(p.state, 0) + 1
    return {"batch": batch["system"], "jobs": n_jobs, "jobs_per_pilot": batch["jobs_per_pilot"], "slots": slots, "max_pilots": max_pilots,
            "status": status, "rounds": rounds, "e2e_s": round(elapsed, 1), "jobs_per_min": round(n_jobs / elapsed * 60, 1),
            "finished": sum(job.status == "finished" for job in jobs), "job_rows": len(jobs),
            "payload_s": round(payload_s, 1), "pilot_held_slot_s": round(held_s, 1),
            "overhead_pct": round((held_s - payload_s) / payload_s * 100, 2), "in_jobs_pct": round(in_jobs_s / payload_s * 100, 2),
            "empty_pilot_s": round(fixed_s, 2),
            "overhead_with_startup_pct": round((held_s + slots * fixed_s * len(pilots) - payload_s) / payload_s * 100, 2),
            "slot_use_pct": round(payload_s / (elapsed * max_pilots * slots) * 100, 1),
            "pilots": len(pilots), "pilot_states": states, "pilot_jobs": sum(p.n_jobs or 0 for p in pilots), "files_verified": verified}


def cancel_live_pilots(url: str, workdir: Path, env: dict[str, str]) -> None:
    """Leave nothing running: cancel (by batch id) the pilots this run submitted that are still live."""
    from sqlalchemy import select

    from jedictl.engine.harvest.batch import batch_for

    live = query(url, lambda s: select(s.pilots.c.batch_system, s.pilots.c.batch_id)
                 .where(s.pilots.c.state.in_(["submitted", "running"]), s.pilots.c.batch_id.is_not(None)))
    with mock.patch.dict(os.environ, {key: env[key] for key in ("SLURM_CONF",) if key in env}):  # scancel finds the bench's cluster
        for system in {row.batch_system for row in live}:
            batch_for(system, log_root=workdir / "pilot-logs").cancel([row.batch_id for row in live if row.batch_system == system])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--batch", choices=["slurm", "local"], default="slurm")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--jobs-per-pilot", type=int, default=50)
    parser.add_argument("--slots", type=int, default=2, help="payloads per pilot (they mostly sleep: 2 per core)")
    parser.add_argument("--max-pilots", type=int, default=2, help="pilots at once (one core each)")
    parser.add_argument("--size", type=int, default=100_000, help="bytes per input file")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between `jedictl run --once` rounds")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jedictl-bench-harvest-") as tmp:
        r = run(args.backend, args.batch, args.jobs, Path(tmp), jobs_per_pilot=args.jobs_per_pilot, slots=args.slots,
                max_pilots=args.max_pilots, size=args.size, pause=args.pause, timeout=args.timeout)
    print(f"{r['backend']}, {r['batch']}: {r['jobs']} jobs -> task {r['status']} in {r['e2e_s']} s ({r['rounds']} rounds of run --once): "
          f"{r['jobs_per_min']} jobs/min end to end")
    print(f"  jobs: {r['finished']} finished of {r['job_rows']} job rows; pilots submitted: {r['pilots']} {r['pilot_states']}, "
          f"{r['pilot_jobs']} jobs taken ({r['jobs_per_pilot']} per pilot, {r['slots']} slots, at most {r['max_pilots']} at once)")
    print(f"  payload wall time (sum) {r['payload_s']} s; slot time held by pilots {r['pilot_held_slot_s']} s")
    print(f"  pilot overhead over payload time: {r['overhead_pct']} % (within jobs, dispatch -> report: {r['in_jobs_pct']} %); with each pilot's start-up and exit "
          f"({r['empty_pilot_s']} s, a pilot without work): {r['overhead_with_startup_pct']} % -> "
          f"{'PASS' if r['overhead_with_startup_pct'] < 10 else 'FAIL'} (target < 10 %)")
    print(f"  slot use end to end: {r['slot_use_pct']} % of {r['max_pilots']} x {r['slots']} slots")
    print(f"  outputs and logs on disk with the registered size and adler32: {r['files_verified']}")
    print(r, flush=True)


if __name__ == "__main__":
    main()
