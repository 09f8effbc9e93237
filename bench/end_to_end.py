"""Benchmark (issue 18): tasks of many files through `jedictl run` + `jedictl simulate` until every task is
final -- files per second end to end, and the share of the time each agent takes.

    python bench/end_to_end.py [--tasks 100] [--files 10000] [--backend sqlite|postgresql] [--mode loops|rounds|both]

A store with the demo grid (its sites without a running cap) and N tasks of F input files each (10 files
per job, scouts on) is made (not timed). Then, until every task is final:

- `loops` (as jedictl is deployed): one `jedictl run --loop` (every agent in turn, again and again) and
  one `jedictl simulate --loop` (the pilots: every queued job run, 10 % failing) side by side, each one
  long-lived process on the real clock, the store shared between them. Each pass logs its own duration
  (`--log-format json`); the shares are of each process's busy time.
- `rounds` (as cron and a CI script drive it): rounds of `jedictl run --once` (every agent one pass, on a
  virtual clock five minutes ahead per round) then `jedictl simulate`, each its own process, one after
  the other. "start-up" is the rest of the `run` processes' wall time (interpreter, imports, opening the
  store); simulate is the pilots' process.

Both print the CPU (user + system) of the jedictl processes, which the machine's load moves much less
than the wall time, and the shares for the whole run and for its first and last third, so an agent
whose share grows with the store's size shows. Goal: >= 20,000 files/s end to end on SQLite, no
agent's share growing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import _high_water_kb, analyze, scratch_store, step  # noqa: E402
from bench.feed import _cpu_since  # noqa: E402
from bench.lifecycle import ROOMY, consistent, final_count, load_tasks, roomy_grid  # noqa: E402
from jedictl.clock import utcnow  # noqa: E402

GOAL_FILES_PER_S = 20_000


def settings_env(n_tasks: int) -> dict[str, str]:
    """Every agent takes all the tasks in one pass. The throttler would hold generation to a bunch per
    share and pass, and the simulator empties the queues at once: the benchmark measures the pipeline,
    not that policy."""
    return {"JEDICTL_REFINE__LIMIT": str(n_tasks), "JEDICTL_FEED__LIMIT": str(n_tasks), "JEDICTL_GENERATE__N_TASKS": str(n_tasks),
            "JEDICTL_TASK_BROKER__LIMIT": str(n_tasks), "JEDICTL_FINALIZE__LIMIT": str(n_tasks), "JEDICTL_WATCHDOG__LIMIT": str(n_tasks),
            "JEDICTL_GENERATE__THROTTLE": "false", **ROOMY}


def run(backend: str, n_tasks: int, n_files: int, workdir: Path, files_per_job: int = 10, mode: str = "loops") -> dict:
    """One end-to-end run in `mode` (loops | rounds) on a new store."""
    with scratch_store(backend, workdir, "e2e") as url:
        load_tasks(url, n_tasks, n_files, files_per_job, skip_scout=False, grid=roomy_grid())
        analyze(url)
        jobs_per_site = str(max(1000, n_tasks * n_files // files_per_job))
        if mode == "loops":
            result = run_loops(url, settings_env(n_tasks), jobs_per_site, workdir)
        else:
            result = run_rounds(url, settings_env(n_tasks), jobs_per_site)
        final, total = final_count(url)
        ok = consistent(url)
    files = n_tasks * n_files
    cpu = result.pop("cpu")
    return {"backend": backend, "mode": mode, "tasks": n_tasks, "files": files, "e2e_s": round(result["wall"], 1),
            "files_per_s": round(files / result.pop("wall")), "cpu_s": {name: round(seconds, 2) for name, seconds in cpu.items()},
            "files_per_cpu_s": round(files / max(sum(cpu.values()), 1e-9)), "final": f"{final}/{total}", "consistent": ok, **result}


def run_loops(url: str, env: dict[str, str], jobs_per_site: str, workdir: Path, poll_s: float = 0.5, limit_s: float = 3600) -> dict:
    """`run --loop` and `simulate --loop` side by side until every task is final."""
    logged = {**os.environ, **env, "JEDICTL_LOG_FORMAT": "json"}
    commands = {"run": ["run", "--loop", "0.1"],
                "simulate": ["simulate", "--loop", "0.1", "--jobs", jobs_per_site, "--failure-rate", "0.1", "--seed", "1"]}
    logs = {name: workdir / f"e2e-{name}.log" for name in commands}
    processes: dict[str, subprocess.Popen] = {}
    peak, cpu = 0, {}
    started = time.perf_counter()
    try:
        for name, args in commands.items():
            with open(logs[name], "w") as log:
                processes[name] = subprocess.Popen([sys.executable, "-m", "jedictl", *args, "--db", url], stdout=subprocess.DEVNULL,
                                                   stderr=log, env=logged)
        while time.perf_counter() - started < limit_s:
            for name, process in processes.items():
                if process.poll() is not None:
                    raise SystemExit(f"jedictl {name} --loop ended ({process.returncode}): {logs[name].read_text()[-500:]}")
                peak = max(peak, _high_water_kb(process.pid))
            final, total = final_count(url)
            if final == total:
                break
            time.sleep(poll_s)
        wall = time.perf_counter() - started
        cpu = {name: _process_cpu(process.pid) for name, process in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)  # a pass in flight releases its leases, then the process exits
        for process in processes.values():
            process.wait(timeout=120)
    passes = [_log_records(logs["run"]), _log_records(logs["simulate"])]
    for path in logs.values():
        path.unlink(missing_ok=True)
    # Each process's busy time by pass, in three thirds of the run's wall time.
    thirds: list[dict[str, float]] = [defaultdict(float), defaultdict(float), defaultdict(float)]
    first_ts = min((record["ts"] for records in passes for record in records), default=0.0)
    for records in passes:
        for record in records:
            third = min(int(3 * (record["ts"] - first_ts) / max(wall, 1e-9)), 2)
            thirds[third][record["pass"]] += record["duration_s"]
    return {"wall": wall, "cpu": cpu, "passes": {"run": len(passes[0]), "simulate": len(passes[1])}, "peak_mb": round(peak / 1024),
            "share": _shares(thirds), "share_first_third": _shares(thirds[:1]), "share_last_third": _shares(thirds[2:]),
            "seconds_per_agent": _totals(thirds)}


def _log_records(path: Path) -> list[dict]:
    """The pass lines of a `--log-format json` log: pass, duration_s and ts (seconds since the epoch)."""
    from datetime import datetime, timezone

    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "pass":
            stamp = datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
            records.append({"pass": record["pass"], "duration_s": float(record["duration_s"]), "ts": stamp})
    return records


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_rounds(url: str, env: dict[str, str], jobs_per_site: str, max_rounds: int = 400) -> dict:
    """Rounds of `run --once` then `simulate`, each its own process, on a virtual clock."""
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
    return {"wall": wall, "cpu": dict(cpu), "rounds": len(rounds), "peak_mb": peak,
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
    parser.add_argument("--mode", choices=["loops", "rounds", "both"], default="loops")
    args = parser.parse_args()
    for mode in ("loops", "rounds") if args.mode == "both" else (args.mode,):
        with tempfile.TemporaryDirectory() as tmp:
            result = run(args.backend, args.tasks, args.files, Path(tmp), mode=mode)
        verdict = f"{'>=' if result['files_per_s'] >= GOAL_FILES_PER_S else '<'} {GOAL_FILES_PER_S:,} files/s"
        print(json.dumps(result) + " | " + verdict, flush=True)


if __name__ == "__main__":
    main()
