"""Benchmarks of the task life cycle (issue 10's scale table): finalize many tasks, queue-shares over
many active tasks, and end to end -- tasks of many files driven by `jedictl run` and the simulator.

    python bench/lifecycle.py finalize [--tasks 10000] [--backend sqlite|postgresql]
    python bench/lifecycle.py e2e [--tasks 100] [--files 1000] [--backend sqlite|postgresql]

Every timed step runs as its own `jedictl` process (wall time, peak RSS).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import analyze, scratch_store, step  # noqa: E402
from jedictl.clock import utcnow  # noqa: E402

#: Simulated jobs end within the round, so no site ever shows running jobs and the queued cap would
#: stay at NQUEUELIMITSITE (20 per site): raised as an operator would for a burst of work.
ROOMY = {"JEDICTL_BROKERAGE__QUEUE_LIMIT_SITE": "100000"}


def roomy_grid() -> dict:
    """The demo grid with no running cap on its sites. The demo's 2,000 slots per site are a policy
    (seed 002's thresholds): with them, tasks of 1M files fill every site at once, the rest go
    `pending` for the hour JEDI waits (twelve rounds of the virtual clock), and the end-to-end figure
    measures that wait instead of the pipeline."""
    from jedictl.engine.sim import demo

    return {**demo.GRID, "sites": [{**site, "max_running": None} for site in demo.GRID["sites"]]}


def load_tasks(url: str, n_tasks: int, n_files: int, files_per_job: int, skip_scout: bool, grid: dict | None = None) -> None:
    """The demo grid (or `grid`), one input dataset of `n_files` per task, and `n_tasks` registered tasks."""
    from jedictl.engine.sim import demo
    from jedictl.engine.catalogs.importer import import_data_catalog, import_resource_catalog
    from jedictl.engine.task.submission import parse_definition, register_task
    from jedictl.store.database import open_store

    store = open_store(url)
    now = utcnow()
    try:
        with store.begin() as conn:
            import_resource_catalog(conn, grid or demo.GRID, now)
            disks = ["CERN-PROD_DATADISK", "BNL-ATLAS_DATADISK", "MWT2_DATADISK", "DESY-HH_DATADISK"]
            import_data_catalog(conn, {"datasets": [
                {"name": f"bench.in.{t:05d}", "state": "closed", "replicas": [{"endpoint": disks[(t + k) % len(disks)]} for k in range(3)],
                 "files": [{"lfn": f"bench.{t:05d}._{i:06d}.root", "size": 500_000_000 + i, "events": 100} for i in range(n_files)]}
                for t in range(n_tasks)]}, now)
        # Registered in transactions of 500: on PostgreSQL each registration takes transaction-level advisory
        # locks (per dataset name and user), and 10,000 in one transaction overflow the server's lock table.
        for first in range(0, n_tasks, 500):
            with store.begin() as conn:
                for t in range(first, min(first + 500, n_tasks)):
                    spec = {"name": f"bench.task.{t:05d}", "label": "managed", "processing_type": "simul", "command": "${IN} ${OUTPUT0}",
                            "inputs": [{"dataset": f"bench.in.{t:05d}"}],
                            "outputs": [{"dataset": f"bench.out.{t:05d}", "file_template": "bench.out.${SN}.root"}],
                            "log": {"dataset": f"bench.log.{t:05d}", "file_template": "bench.log.${SN}.tgz"},
                            "split": {"n_files_per_job": files_per_job}, "scouts": {"skip_scout": skip_scout}}
                    register_task(conn, parse_definition(spec, user="bench", default_user="bench"), spec, now, "bench")
    finally:
        store.close()


def final_count(url: str) -> tuple[int, int]:
    from sqlalchemy import func, select

    from jedictl.model import TASK_FINAL
    from jedictl.store.database import open_store
    from jedictl.store.schema import tasks

    store = open_store(url)
    try:
        with store.read() as conn:
            total = conn.execute(select(func.count()).select_from(tasks)).scalar_one()
            final = conn.execute(select(func.count()).where(tasks.c.status.in_([s.value for s in TASK_FINAL]))).scalar_one()
    finally:
        store.close()
    return final, total


def consistent(url: str) -> bool:
    return subprocess.run([sys.executable, "-m", "jedictl", "check", "--db", url], capture_output=True).returncode == 0


def finalize_run(backend: str, n_tasks: int, workdir: Path) -> dict:
    """n one-file tasks run to the point where every input is processed; then `queue-shares` over them
    (all active) and one `finalize` pass that ends them all, each timed."""
    with scratch_store(backend, workdir, "finalize") as url:
        load_tasks(url, n_tasks, 1, 1, skip_scout=True)
        limit = str(n_tasks)
        for args in (["refine", "--limit", limit], ["feed", "--limit", limit], ["broker", "--limit", limit],
                     ["generate", "--limit", limit, "--no-throttle"], ["simulate", "--jobs", limit, "--failure-rate", "0"]):
            step(url, *args, "-q", env=ROOMY)
        analyze(url)
        shares_s, shares_mb, _ = step(url, "queue-shares", "-o", "json")
        seconds, peak, out = step(url, "finalize", "--limit", limit, "-o", "json")
        done = json.loads(out)["counts"]["done"]
        assert done == n_tasks, (done, n_tasks)
        ok = consistent(url)
    return {"backend": backend, "tasks": n_tasks, "finalize_s": round(seconds, 2), "tasks_per_s": round(n_tasks / seconds),
            "finalize_peak_mb": peak, "queue_shares_s": round(shares_s, 2), "queue_shares_peak_mb": shares_mb, "consistent": ok}


def e2e_run(backend: str, n_tasks: int, n_files: int, workdir: Path, files_per_job: int = 10, max_rounds: int = 200) -> dict:
    """Tasks of `n_files` files each (scouts on, 10 files per job), driven by `jedictl run --once` and
    `jedictl simulate` (10 % failures) until every task is final."""
    with scratch_store(backend, workdir, "e2e") as url:
        load_tasks(url, n_tasks, n_files, files_per_job, skip_scout=False)
        started = time.perf_counter()
        peak, rounds = 0, 0
        big = {"JEDICTL_REFINE__LIMIT": str(n_tasks), "JEDICTL_FEED__LIMIT": str(n_tasks), "JEDICTL_GENERATE__N_TASKS": str(n_tasks),
               "JEDICTL_TASK_BROKER__LIMIT": str(n_tasks),
               "JEDICTL_FINALIZE__LIMIT": str(n_tasks),
               # The throttler would hold generation to a bunch per share and pass, and the simulator
               # empties the queues at once: the benchmark measures the pipeline, not that policy.
               "JEDICTL_GENERATE__THROTTLE": "false",
               **ROOMY}
        start = utcnow()
        for rounds in range(1, max_rounds + 1):
            # A virtual clock, five minutes per round (as the demo): waits (pending re-checks, scout
            # assessment) pass without the benchmark sleeping through them.
            now = (start + timedelta(minutes=5 * rounds)).strftime("%Y-%m-%dT%H:%M:%SZ")
            _, mb, _ = step(url, "run", "--once", "-q", "--seed", str(rounds), "--now", now, env=big)
            peak = max(peak, mb)
            final, total = final_count(url)
            if final == total:
                break
            _, mb, _ = step(url, "simulate", "--jobs", "5000", "--failure-rate", "0.1", "--seed", str(rounds), "-q", "--now", now)
            peak = max(peak, mb)
        seconds = time.perf_counter() - started
        final, total = final_count(url)
        ok = consistent(url)
    return {"backend": backend, "tasks": n_tasks, "files": n_tasks * n_files, "e2e_s": round(seconds, 1), "rounds": rounds,
            "files_per_s": round(n_tasks * n_files / seconds), "peak_mb": peak, "final": f"{final}/{total}", "consistent": ok}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["finalize", "e2e"])
    parser.add_argument("--tasks", type=int)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.what == "finalize":
            print(json.dumps(finalize_run(args.backend, args.tasks or 10_000, Path(tmp))))
        else:
            print(json.dumps(e2e_run(args.backend, args.tasks or 100, args.files, Path(tmp))))


if __name__ == "__main__":
    main()
