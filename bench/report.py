"""Benchmark: 100,000 job reports through `jedictl jobs report` (issue 6), with dispatch and heartbeats.

For each backend: a store with three sites and one task of N files at one file per job is generated
(not timed). Then, each in its own `jedictl` process and timed: every job is dispatched
(`jobs dispatch --count 10000` until empty), beats once (`jobs heartbeat --from`), and is reported
(`jobs report`): 90 % finished with two outputs each (registered in the data catalog), 10 % failed.
Prints the rate and peak memory of each step. Target on the 2-core machine: at least 2,000 reports/s
on SQLite.

    python bench/report.py [--jobs 100000] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import jedictl, scratch_store, step  # noqa: E402
from bench.feed import DATASET, build_catalog  # noqa: E402
from bench.generate import add_sites  # noqa: E402

SPEC = f"""
name: bench.report
label: user
command: -i "${{IN}}" -o "${{OUTPUT0}}"
inputs: [{{dataset: {DATASET}}}]
outputs: [{{dataset: user.bench.report.out/, file_template: "user.bench.${{SN/P}}.root"}}]
log: {{dataset: user.bench.report.log/, file_template: "user.bench.${{SN/P}}.log.tgz"}}
split: {{n_files_per_job: 1}}
scouts: {{skip_scout: true}}
"""


def report_lines(payloads: list[dict], failure_share: float = 0.1) -> str:
    lines = []
    every = round(1 / failure_share)
    for index, job in enumerate(payloads):
        if index % every == every - 1:
            lines.append({"job_id": job["job_id"], "status": "failed", "attempt_nr": job["attempt_nr"], "error_source": "pilot",
                          "error_code": 1099, "error_diag": "Failed to stage-in file", "wall_time": 60, "max_pss": 500_000})
        else:
            outputs = [{"lfn": o["lfn"], "size": 2_000_000 + index, "checksum": f"ad:{index:08x}", "guid": f"{uuid.UUID(int=index * 2 + n)}",
                        "n_events": 1000 if o["type"] != "log" else None} for n, o in enumerate(job["outputs"])]
            lines.append({"job_id": job["job_id"], "status": "finished", "attempt_nr": job["attempt_nr"], "wall_time": 3600.0,
                          "cpu_time": 3300.0, "max_pss": 1_800_000, "n_events": 1000, "outputs": outputs})
    return "".join(json.dumps(line) + "\n" for line in lines)


def run(backend: str, n_jobs: int, workdir: Path) -> dict:
    with scratch_store(backend, workdir, "report") as url:
        build_catalog(url, n_jobs)
        add_sites(url)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        jedictl(url, "feed")
        jedictl(url, "generate", "--no-throttle", env={"JEDICTL_GENERATE__N_FILES": str(n_jobs)})
        results: dict = {"backend": backend, "jobs": n_jobs}
        payloads: list[dict] = []
        dispatch_s, dispatch_mb = 0.0, 0
        for site in ("BENCH_A", "BENCH_B", "BENCH_C"):
            while True:
                seconds, mb, out = step(url, "jobs", "dispatch", "--site", site, "--count", "10000", "-o", "json")
                got = json.loads(out)["jobs"]
                dispatch_s, dispatch_mb = dispatch_s + seconds, max(dispatch_mb, mb)
                payloads.extend(got)
                if len(got) < 10000:
                    break
        assert len(payloads) == n_jobs, (len(payloads), n_jobs)
        results.update(dispatch_s=round(dispatch_s, 2), dispatch_per_s=round(n_jobs / dispatch_s), dispatch_peak_mb=dispatch_mb)
        beats = workdir / f"beats-{backend}.jsonl"
        beats.write_text("".join(json.dumps({"job_id": p["job_id"], "status": "running"}) + "\n" for p in payloads))
        seconds, mb, _ = step(url, "jobs", "heartbeat", "--from", "-", "-o", "tsv", "-q", stdin_path=beats)
        results.update(heartbeat_s=round(seconds, 2), heartbeats_per_s=round(n_jobs / seconds), heartbeat_peak_mb=mb)
        reports = workdir / f"reports-{backend}.jsonl"
        reports.write_text(report_lines(payloads))
        seconds, mb, out = step(url, "jobs", "report", "-", "-o", "json", stdin_path=reports)
        summary = json.loads(out)
        assert summary["counts"]["applied"] == n_jobs, {k: v for k, v in summary.items() if k != "items"}
        results.update(report_s=round(seconds, 2), reports_per_s=round(n_jobs / seconds), report_peak_mb=mb)
        check = subprocess.run([sys.executable, "-m", "jedictl", "check", "--db", url], capture_output=True, text=True)
        results["check"] = "consistent" if check.returncode == 0 else check.stdout.strip()[:200]
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
            result = run(backend, args.jobs, Path(tmp))
            verdict = "" if backend != "sqlite" else f" | {'>=' if result['reports_per_s'] >= 2000 else '<'} 2000 reports/s"
            print(json.dumps(result) + verdict, flush=True)


if __name__ == "__main__":
    main()
