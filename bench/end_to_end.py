"""Benchmark (issue 18): tasks of many files through `jedictl run` + `jedictl simulate` until every task is
final -- files per second end to end, and the share of the time each agent takes.

    python bench/end_to_end.py [--tasks 100] [--files 10000] [--backend sqlite|postgresql]

A store with the demo grid and N tasks of F input files each (10 files per job, scouts on) is made
(not timed). Then rounds of `jedictl run --once -o json` (every agent one pass, on a virtual clock five
minutes ahead per round) and `jedictl simulate -o json` (the pilots: every queued job run, 10 % failing)
until every task is final, each its own process. The time of each agent is its pass's own duration as
`run` reports it; "start-up" is the rest of the `run` processes' wall time (interpreter, imports,
opening the store); simulate is the pilots' process. The shares are printed for the whole run and for
its first and last third of rounds, so an agent whose share grows with the store's size shows. Goal:
>= 20,000 files/s end to end on SQLite, no agent's share growing.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scratch_store, step  # noqa: E402
from bench.feed import _cpu_since  # noqa: E402
from bench.lifecycle import ROOMY, consistent, final_count, load_tasks, roomy_grid  # noqa: E402
from jedictl.clock import utcnow  # noqa: E402

GOAL_FILES_PER_S = 20_000


def run(backend: str, n_tasks: int, n_files: int, workdir: Path, files_per_job: int = 10, max_rounds: int = 400) -> dict:
    with scratch_store(backend, workdir, "e2e") as url:
        load_tasks(url, n_tasks, n_files, files_per_job, skip_scout=False, grid=roomy_grid())
        env = {"JEDICTL_REFINE__LIMIT": str(n_tasks), "JEDICTL_FEED__LIMIT": str(n_tasks), "JEDICTL_GENERATE__N_TASKS": str(n_tasks),
               "JEDICTL_TASK_BROKER__LIMIT": str(n_tasks), "JEDICTL_FINALIZE__LIMIT": str(n_tasks), "JEDICTL_WATCHDOG__LIMIT": str(n_tasks),
               # The throttler would hold generation to a bunch per share and pass, and the simulator
               # empties the queues at once: the benchmark measures the pipeline, not that policy.
               "JEDICTL_GENERATE__THROTTLE": "false", **ROOMY}
        jobs_per_site = str(max(1000, n_tasks * n_files // files_per_job))
        rounds: list[dict[str, float]] = []
        cpu: dict[str, float] = defaultdict(float)  # user + system of the run and simulate processes: what the load does not move
        peak = 0
        start = utcnow()
        started = time.perf_counter()
        for number in range(1, max_rounds + 1):
            now = (start + timedelta(minutes=5 * number)).strftime("%Y-%m-%dT%H:%M:%SZ")
            spent: dict[str, float] = defaultdict(float)
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds, mb, out = step(url, "run", "--once", "-o", "json", "--seed", str(number), "--now", now, env=env)
            peak = max(peak, mb)
            passes = json.loads(out).get("passes", [])
            for one in passes:
                spent[one["pass"]] += one.get("duration_s", 0.0)
            spent["start-up"] = max(seconds - sum(spent.values()), 0.0)
            cpu["run"] += _cpu_since(children)
            final, total = final_count(url)
            if final < total:
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                seconds, mb, _ = step(url, "simulate", "--jobs", jobs_per_site, "--failure-rate", "0.1", "--seed", str(number), "-q",
                                      "--now", now)
                peak = max(peak, mb)
                spent["simulate"] = seconds
                cpu["simulate"] += _cpu_since(children)
            rounds.append(dict(spent))
            if final == total:
                break
        wall = time.perf_counter() - started
        final, total = final_count(url)
        ok = consistent(url)
    files = n_tasks * n_files
    return {"backend": backend, "tasks": n_tasks, "files": files, "e2e_s": round(wall, 1), "rounds": len(rounds),
            "files_per_s": round(files / wall),
            "cpu_s": {name: round(seconds, 2) for name, seconds in cpu.items()}, "files_per_cpu_s": round(files / max(sum(cpu.values()), 1e-9)),
            "peak_mb": peak, "final": f"{final}/{total}", "consistent": ok,
            "share": _shares(rounds), "share_first_third": _shares(rounds[: max(1, len(rounds) // 3)]),
            "share_last_third": _shares(rounds[-max(1, len(rounds) // 3):]), "seconds_per_agent": _totals(rounds)}


def _totals(rounds: list[dict[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for spent in rounds:
        for name, seconds in spent.items():
            totals[name] += seconds
    return {name: round(seconds, 2) for name, seconds in sorted(totals.items(), key=lambda item: -item[1])}


def _shares(rounds: list[dict[str, float]]) -> dict[str, float]:
    totals = _totals(rounds)
    whole = sum(totals.values()) or 1.0
    return {name: round(100 * seconds / whole, 1) for name, seconds in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.backend, args.tasks, args.files, Path(tmp))
    verdict = f"{'>=' if result['files_per_s'] >= GOAL_FILES_PER_S else '<'} {GOAL_FILES_PER_S:,} files/s"
    print(json.dumps(result) + " | " + verdict, flush=True)


if __name__ == "__main__":
    main()
