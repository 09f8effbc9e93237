"""Benchmark: 1,000,000 event ranges written, handed out and reported (issue 20, item 1; docs/event-service.md).

For each backend: a store with three sites and one event-service task of N files of 5,000 events, cut
into ranges of 50 events (100 ranges per file, so N = 10,000 makes 1M ranges), refined and fed (not
timed). Then, each in its own `jedictl` process and timed:

- `generate`: the N event-service jobs and their 1M ranges (`store.events.insert_ranges`: COPY or
  executemany of tuples, in each chunk's transaction);
- `jobs dispatch --count 10000` until empty: every job with its ranges, now `sent`;
- `jobs events report`: one line per range, 95 % finished with a pre-merged file, 5 % failed.

Each rate is printed as rows (ranges) per second and as a multiple of the raw primitive of
`bench/ceiling.py` for as many rows (R on SQLite, C on PostgreSQL), measured just before and just after
the workload (their mean), as the other bulk benchmarks do; `jedictl check` must find the store
consistent afterwards. For comparison, issue 18's goals for files: feed <= 1.5 R / 3 C, generate <= 5 R / 15 C.

    python bench/events.py [--files 10000] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ceiling import load, measure  # noqa: E402
from bench.common import analyze, jedictl, scratch_store, step  # noqa: E402
from bench.feed import DATASET, build_catalog  # noqa: E402
from bench.generate import add_sites  # noqa: E402

EVENTS_PER_RANGE = 50  # the catalog's files hold 5,000 events: 100 ranges each
SPEC = f"""
name: bench.events
label: user

command: --in=${{IN}} --out=${{OUTPUT0}}
inputs: [{{dataset: {DATASET}}}]
outputs: [{{dataset: user.bench.events.HITS/, file_template: "user.bench.HITS.${{SN/P}}.root"}}]
log: {{dataset: user.bench.events.log/, file_template: "user.bench.log.${{SN/P}}.tgz"}}
events: {{n_events_per_range: {EVENTS_PER_RANGE}}}
scouts: {{skip_scout: true}}
"""


def range_lines(payloads: list[dict], failure_share: float = 0.05) -> str:
    every = round(1 / failure_share)
    lines = []
    for job in payloads:
        for index, item in enumerate(job["event_ranges"]):
            if index % every == every - 1:
                lines.append({"event_id": item["event_id"], "job_id": job["job_id"], "status": "failed", "error_code": 1220})
            else:
                lines.append({"event_id": item["event_id"], "job_id": job["job_id"], "status": "finished",
                              "output_lfn": f"{item['lfn']}.{item['start_event']}.es", "output_size": 1_000_000})
    return "".join(json.dumps(line) + "\n" for line in lines)


def primitive(backend: str, workdir: Path, rows: int) -> float:
    return measure(backend, workdir, rows)


def run(backend: str, n_files: int, workdir: Path) -> dict:
    n_ranges = n_files * 5000 // EVENTS_PER_RANGE
    before = primitive(backend, workdir, n_ranges)
    with scratch_store(backend, workdir, "events") as url:
        build_catalog(url, n_files)
        add_sites(url)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        jedictl(url, "feed")
        jedictl(url, "broker", "--seed", "1")
        analyze(url)
        results: dict = {"backend": backend, "files": n_files, "ranges": n_ranges}
        seconds, mb, _ = step(url, "generate", "--no-throttle", "-q", env={"JEDICTL_GENERATE__N_FILES": str(n_files)})
        results.update(generate_s=round(seconds, 2), generate_ranges_per_s=round(n_ranges / seconds), generate_peak_mb=mb)
        analyze(url)
        payloads: list[dict] = []
        dispatch_s = 0.0
        for site in ("BENCH_A", "BENCH_B", "BENCH_C"):
            while True:
                seconds, mb, out = step(url, "jobs", "dispatch", "--site", site, "--count", "10000", "-o", "json")
                got = json.loads(out)["jobs"]
                dispatch_s += seconds
                payloads.extend(got)
                if len(got) < 10000:
                    break
        handed = sum(len(p["event_ranges"]) for p in payloads)
        assert len(payloads) == n_files and handed == n_ranges, (len(payloads), handed)
        results.update(dispatch_s=round(dispatch_s, 2), dispatch_ranges_per_s=round(n_ranges / dispatch_s))
        reports = workdir / f"ranges-{backend}.jsonl"
        reports.write_text(range_lines(payloads))
        del payloads
        seconds, mb, _ = step(url, "jobs", "events", "report", "-", "-o", "tsv", "-q", stdin_path=reports)
        results.update(report_s=round(seconds, 2), report_ranges_per_s=round(n_ranges / seconds), report_peak_mb=mb)
        check = subprocess.run([sys.executable, "-m", "jedictl", "check", "--db", url], capture_output=True, text=True)
        results["check"] = "consistent" if check.returncode == 0 else (check.stdout + check.stderr).strip()[:200]
    after = primitive(backend, workdir, n_ranges)
    base = (before + after) / 2
    results.update(primitive_s=round(base, 2), primitive_rows_per_s=round(n_ranges / base), load=load(),
                   generate_x_primitive=round(results["generate_s"] / base, 2), dispatch_x_primitive=round(results["dispatch_s"] / base, 2),
                   report_x_primitive=round(results["report_s"] / base, 2))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
            result = run(backend, args.files, Path(tmp))
            primitive_name = "R" if backend == "sqlite" else "C"
            print(json.dumps(result), flush=True)
            print(f"{backend}: {result['ranges']:,} ranges -- generate {result['generate_ranges_per_s']:,} rows/s "
                  f"({result['generate_x_primitive']} {primitive_name}), dispatch {result['dispatch_ranges_per_s']:,} rows/s "
                  f"({result['dispatch_x_primitive']} {primitive_name}), events report {result['report_ranges_per_s']:,} rows/s "
                  f"({result['report_x_primitive']} {primitive_name}); {primitive_name} = {result['primitive_rows_per_s']:,} rows/s; "
                  f"check: {result['check']}", flush=True)


if __name__ == "__main__":
    main()
