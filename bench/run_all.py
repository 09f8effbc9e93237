"""The scale table (issue 10): every workload at x0.1 and x1, on SQLite and PostgreSQL, in one run.

For each backend the raw row rates of the store are measured first, in the same run: a plain driver
`executemany` INSERT of `files`-shaped rows and a plain `executemany` UPDATE by primary key. Each
workload then runs at x0.1 and x1 and prints its time, peak memory (of the jedictl process doing the
work), objects per second, the ratio of that rate to the raw row rate (insert for workloads that
write rows, update for those that change them), its target and the growth factor (time at x1 / time
at x0.1: 10 is linear).

Feed and generate (issue 18) measure their own ceiling in the same process just before the workload
(bench/ceiling.py, the mean of a measure just before and one just after: R, a raw `sqlite3` executemany of the same number of `files` rows into a table with
its primary key; C, a psycopg COPY of them; and, for the record, the same into the store's indexed table) and report `workload / primitive` against the goals (feed <= 1.5 R / <= 3 C, generate <= 5 R /
<= 15 C), the growth within the task (the last 10 % of chunks against the first 10 %, goal <= 1.2x),
`jedictl check` afterwards, and the load average when they started; a summary of those follows the table.

    python bench/run_all.py [--backend sqlite|postgresql|both] [--scales 0.1,1] [--json FILE]

Workloads (x1): feed 1,000,000 files; generate 100,000 jobs from 1,000,000 files; ingest 100,000 job
reports; finalize 10,000 tasks; queue-shares over 10,000 active tasks; brokerage over 2,000 sites;
end to end 100 tasks x 1,000 files with the pilot simulator; end to end 100 tasks x 10,000 files
with the agents' shares of the time (bench/end_to_end.py); the real pilot's overhead per job over
200 no-op jobs (bench/pilot.py); 1,000 real jobs through a local Slurm cluster (bench/harvest.py,
skipped with a note when Slurm is not installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import ceiling, end_to_end, feed, generate, harvest, lifecycle, pilot, report  # noqa: E402
from bench.common import scratch_store  # noqa: E402

RAW_ROWS = 200_000


def raw_rates(backend: str, workdir: Path) -> dict[str, float]:
    """Rows per second of a plain executemany INSERT and UPDATE on the `files` table of a new store."""
    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import datasets, tasks

    with scratch_store(backend, workdir, "raw") as url:
        engine = create_store_engine(url)
        now = datetime(2026, 1, 1)
        with engine.begin() as conn:
            task_id = conn.execute(tasks.insert().values(name="raw", user_name="bench", vo="wlcg", prod_source_label="user", task_type="anal",
                                                         status="defined", options={}, created_at=now, modified_at=now, state_changed_at=now)
                                   .returning(tasks.c.id)).scalar_one()
            dataset_id = conn.execute(datasets.insert().values(task_id=task_id, name="raw", type="input", status="ready", attributes={},
                                                               created_at=now, modified_at=now).returning(datasets.c.id)).scalar_one()
        marker = "?" if engine.dialect.name == "sqlite" else "%s"
        columns = ("id", "task_id", "dataset_id", "lfn", "type", "status", "attempt_nr", "failed_attempt", "keep_track", "size", "n_events", "created_at")
        rows = [(i, task_id, dataset_id, f"raw._{i:07d}.root", "input", "ready", 0, 0, True, 2_000_000_000 + i, 5000, now)
                for i in range(1, RAW_ROWS + 1)]
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            insert = f"INSERT INTO files ({', '.join(columns)}) VALUES ({', '.join(marker for _ in columns)})"
            update = f"UPDATE files SET status = {marker}, attempt_nr = {marker} WHERE id = {marker}"
            rates = {}
            for name, statement, values in (("insert", insert, rows), ("update", update, [("running", 1, i) for i in range(1, RAW_ROWS + 1)])):
                started = time.perf_counter()
                if engine.dialect.name == "sqlite":
                    cursor.execute("BEGIN IMMEDIATE")
                for start in range(0, len(values), 10_000):
                    cursor.executemany(statement, values[start:start + 10_000])
                raw.commit()
                rates[name] = RAW_ROWS / (time.perf_counter() - started)
        finally:
            raw.close()
            engine.dispose()
    return rates


def brokerage_run(n_sites: int) -> dict[str, Any]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "brokerage.py"), "--sites", str(n_sites)], capture_output=True,
                         text=True, check=True).stdout
    figures = json.loads(out.split(" | ")[0])
    return figures | {"wall_s": time.perf_counter() - started}


class Row:
    """One workload at one scale, normalised for the table."""

    def __init__(self, name: str, backend: str, scale: float, objects: int, unit: str, seconds: float, peak_mb: int | None,
                 raw_kind: str | None, rows: int | None, target: str, met: bool | None, note: str = "", ceiling: dict | None = None):
        self.name, self.backend, self.scale, self.objects, self.unit = name, backend, scale, objects, unit
        self.seconds, self.peak_mb, self.raw_kind, self.rows = seconds, peak_mb, raw_kind, rows
        self.target, self.met, self.note = target, met, note
        self.ceiling = ceiling  # feed and generate: primitive, its seconds, the ratio, goal, growth, load, check

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


#: Issue 18's goals for the rows that are not ratios to a primitive.
REPORTS_PER_S_GOAL, REPORTS_PEAK_MB_GOAL = 10_000, 200
FINALIZE_PER_S_GOAL = 500

NAMES = ("feed", "generate", "report", "finalize", "brokerage", "e2e", "end_to_end", "pilot", "harvest")


def workloads(backend: str, scale: float, workdir: Path, chosen: tuple[str, ...] = NAMES) -> Iterator[Row]:
    """Each chosen workload at one scale, yielded as soon as it is measured (finalize includes
    queue-shares, which runs on the same store)."""
    sqlite = backend == "sqlite"
    n = int(1_000_000 * scale)
    if "feed" in chosen:
        result = feed.run(backend, n, workdir)
        yield Row("feed", backend, scale, n, "files", result["feed_s"], result["peak_rss_mb"], "insert", n,
                  f"<= {result['goal']:g} {result['primitive']}, < 1 GB",
                  result["met"] and result["peak_rss_mb"] < 1024 and result["check"] == "consistent",
                  f"check {result['check']}", ceiling=result)
    if "generate" in chosen:
        result = generate.run(backend, n, workdir)
        yield Row("generate", backend, scale, result["jobs"], "jobs", result["generate_s"], result["peak_rss_mb"], "insert",
                  result["rows_written"], f"<= {result['goal']:g} {result['primitive']}, growth <= {ceiling.GROWTH_GOAL}x, < 1.5 GB",
                  result["met"] and (result["growth"] is None or result["growth"] <= ceiling.GROWTH_GOAL)
                  and result["peak_rss_mb"] < 1536 and result["check"] == "consistent",
                  f"check {result['check']}", ceiling=result)
    if "report" in chosen:
        n_jobs = int(100_000 * scale)
        result = report.run(backend, n_jobs, workdir)
        # Issue 18's goal on both backends (issue 10's was >= 2,000/s on SQLite).
        yield Row("ingest reports", backend, scale, n_jobs, "reports", result["report_s"], result["report_peak_mb"], "update", n_jobs,
                  f">= {REPORTS_PER_S_GOAL:,}/s, <= {REPORTS_PEAK_MB_GOAL} MB",
                  n_jobs / result["report_s"] >= REPORTS_PER_S_GOAL and result["report_peak_mb"] <= REPORTS_PEAK_MB_GOAL
                  and result["check"] == "consistent",
                  f"check {result['check']}")
    if "finalize" in chosen:
        n_tasks = int(10_000 * scale)
        result = lifecycle.finalize_run(backend, n_tasks, workdir)
        yield Row("finalize", backend, scale, n_tasks, "tasks", result["finalize_s"], result["finalize_peak_mb"], "update", n_tasks,
                  f">= {FINALIZE_PER_S_GOAL} tasks/s", n_tasks / result["finalize_s"] >= FINALIZE_PER_S_GOAL)
        yield Row("queue-shares", backend, scale, n_tasks, "active tasks", result["queue_shares_s"], result["queue_shares_peak_mb"], None,
                  None, "< 5 s", result["queue_shares_s"] < 5)
    if "brokerage" in chosen and sqlite:  # brokerage is computed in memory; its store is always a SQLite file
        n_sites = int(2000 * scale)
        result = brokerage_run(n_sites)
        yield Row("brokerage", "memory", scale, n_sites, "sites", result["job_brokerage_with_loading_s"], None, None, None,
                  "< 1 s per decision", result["job_brokerage_with_loading_s"] < 1,
                  f"decision {result['job_brokerage_s']} s, task brokerage {result['task_brokerage_s']} s")
    if "e2e" in chosen:
        n_tasks = max(1, int(100 * scale))
        result = lifecycle.e2e_run(backend, n_tasks, 1000, workdir)
        final, total = result["final"].split("/")
        yield Row("end to end", backend, scale, n_tasks * 1000, "files", result["e2e_s"], result["peak_mb"], "insert", n_tasks * 1000,
                  "every task final, counters consistent", final == total and result["consistent"],
                  f"{n_tasks} tasks, {result['rounds']} rounds")
    if "end_to_end" in chosen:
        n_tasks = max(1, int(100 * scale))
        result = end_to_end.run(backend, n_tasks, 10_000, workdir)
        final, total = result["final"].split("/")
        shares = ", ".join(f"{name} {share} %" for name, share in result["share"].items())
        yield Row("end to end, 10,000 files per task", backend, scale, result["files"], "files", result["e2e_s"], result["peak_mb"],
                  "insert", result["files"], f">= {end_to_end.GOAL_FILES_PER_S:,} files/s on SQLite, all final, consistent" if sqlite
                  else "all final, consistent",
                  final == total and result["consistent"] and (not sqlite or result["files_per_s"] >= end_to_end.GOAL_FILES_PER_S),
                  f"{n_tasks} tasks, {_e2e_shape(result)}; {shares}")
    if "pilot" in chosen:
        n_jobs = max(10, int(200 * scale))
        result = pilot.run(backend, n_jobs, workdir)
        total = result["total"]
        yield Row("pilot overhead (no-op payload, one pilot)", backend, scale, n_jobs, "jobs", result["pilot_wall_s"], None, None, None,
                  "median < 100 ms per job on SQLite" if sqlite else "-", total["median"] < pilot.TARGET_MS if sqlite else None,
                  f"per job median {total['median']} ms, p90 {total['p90']} ms; start-up {result['startup_ms']} ms")
    if "harvest" in chosen:
        from tests.slurm_cluster import installed

        missing = installed()
        if missing:
            print(f"  x{scale:g} harvest skipped: {missing}", flush=True)
        else:
            n_jobs = max(20, int(1000 * scale))
            result = harvest.run(backend, "slurm", n_jobs, workdir)
            yield Row("harvest (real jobs, local Slurm)", backend, scale, n_jobs, "jobs", result["e2e_s"], None, None, None,
                      "jedictl < 10 % over payload time", result["overhead_with_startup_pct"] < 10,
                      f"{result['jobs_per_min']} jobs/min, overhead {result['overhead_with_startup_pct']} % with start-up, "
                      f"{result['pilots']} pilots")


def _e2e_shape(result: dict) -> str:
    """How bench/end_to_end.py drove the run: its rounds, or the two loops' passes and CPU."""
    if result["mode"] == "rounds":
        return f"{result['rounds']} rounds"
    cpu = ", ".join(f"{name} {seconds} s" for name, seconds in result["cpu_s"].items())
    return (f"run --loop {result['passes']['run']} passes and simulate --loop {result['passes']['simulate']}; CPU {cpu}, "
            f"{result['files_per_cpu_s']:,} files per CPU second")


def table(rows: list[Row], raw: dict[str, dict[str, float]]) -> str:
    by_key: dict[tuple[str, str], dict[float, Row]] = {}
    for row in rows:
        by_key.setdefault((row.name, row.backend), {})[row.scale] = row
    header = ["workload", "backend", "x1 objects", "x1 time s", "objects/s", "peak MB", "ratio to raw", "x0.1 time s", "growth", "target", "met"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (name, backend), scales in by_key.items():
        big = scales.get(max(scales))
        small = scales.get(min(scales)) if len(scales) > 1 else None
        rate = big.objects / big.seconds if big.seconds else 0
        ratio = "-"
        if big.ceiling:
            ratio = f"{big.ceiling['ratio']:.2f} {big.ceiling['primitive']}"
        elif big.raw_kind and big.rows and backend in raw:
            ratio = f"{(big.rows / big.seconds) / raw[backend][big.raw_kind]:.2f}"
        growth = f"{big.seconds / small.seconds:.1f}" if small and small.seconds else "-"
        met = "-" if big.met is None else ("yes" if big.met else "NO")
        note = f" ({big.note})" if big.note else ""
        lines.append(f"| {name}{note} | {backend} | {big.objects:,} {big.unit} | {big.seconds:.2f} | {rate:,.0f} | "
                     f"{big.peak_mb if big.peak_mb is not None else '-'} | {ratio} | {small.seconds if small else '-'} | {growth} | "
                     f"{big.target} | {met} |")
    return "\n".join(lines)


def ceiling_summary(rows: list[Row]) -> str:
    """Issue 18: each feed and generate measured against its own ceiling, at every scale."""
    lines = []
    for row in rows:
        c = row.ceiling
        if not c:
            continue
        lines.append(f"{row.name} {row.backend} x{row.scale:g}: {row.seconds:.2f} s / {c['primitive']} {c['primitive_s']:.2f} s "
                     f"(before {c['primitive_before_s']:.2f}, after {c['primitive_after_s']:.2f}) = "
                     f"{ceiling.verdict(row.name, row.backend, c['ratio'])}; {c['indexed_ratio']:.2f} x the same into the indexed files "
                     f"table ({c['indexed_s']:.2f} s); jedictl CPU {c['cpu_s']:.2f} s; {ceiling.growth_verdict(c['growth'])} over {c['chunks']} chunks; "
                     f"check {c['check']}; load {c['load']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--scales", default="0.1,1")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON here")
    parser.add_argument("--workloads", default=",".join(NAMES), help=f"comma list of {', '.join(NAMES)}")
    args = parser.parse_args()
    scales = sorted(float(s) for s in args.scales.split(","))
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    rows: list[Row] = []
    raw: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            raw[backend] = raw_rates(backend, Path(tmp))
            print(f"{backend}: raw executemany insert {raw[backend]['insert']:,.0f} rows/s, update {raw[backend]['update']:,.0f} rows/s",
                  flush=True)
            for scale in scales:
                for row in workloads(backend, scale, Path(tmp), tuple(args.workloads.split(","))):
                    print(f"  x{row.scale:g} {row.name:15s} {row.objects:>9,} {row.unit:<12s} {row.seconds:8.2f} s  peak {row.peak_mb} MB",
                          flush=True)
                    if row.ceiling:
                        print(f"    {ceiling_summary([row])}", flush=True)
                    rows.append(row)
    print()
    print(f"{datetime.now():%Y-%m-%d}, {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"total {time.perf_counter() - started:.0f} s")
    for backend, rates in raw.items():
        print(f"raw rates {backend}: insert {rates['insert']:,.0f} rows/s, update {rates['update']:,.0f} rows/s")
    print()
    print(table(rows, raw))
    summary = ceiling_summary(rows)
    if summary:
        print()
        print(summary)
    if args.json:
        Path(args.json).write_text(json.dumps({"raw": raw, "rows": [row.as_dict() for row in rows]}, indent=1))


if __name__ == "__main__":
    main()
