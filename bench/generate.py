"""Benchmark: one task of 1,000,000 files, 10 files per job -> 100,000 jobs (issues 5 and 18).

For each backend: a store with three sites and a data catalog holding one dataset of N files; a task
(no scouts, nFilesPerJob 10) is submitted, refined and fed (not timed). The raw database's ceiling for
N file rows is measured in this process (bench/ceiling.py: R on SQLite, C on PostgreSQL); then
`jedictl generate --no-throttle` runs in its own process with the per-pass file limit raised to N, and
its wall time, peak RSS and the time of each chunk (one transaction) are taken; then `jedictl check`.

Printed: generate / primitive against issue 18's goals (SQLite <= 5 R, PostgreSQL <= 15 C), the growth
within the task (last 10 % of chunks over the first 10 %, goal <= 1.2x), the load average, and issue
5's targets (under 60 s on SQLite, peak memory under 1.5 GB).

    python bench/generate.py [--files 1000000] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import func, select  # noqa: E402

from bench import ceiling  # noqa: E402
from bench.chunk_timer import growth  # noqa: E402
from bench.common import jedictl, scratch_store, step  # noqa: E402
from bench.feed import _cpu_since, build_catalog, check  # noqa: E402
from jedictl.store.database import create_store_engine  # noqa: E402
from jedictl.store.schema import files, job_files, jobs, site_storage, sites  # noqa: E402

from bench.feed import DATASET  # noqa: E402

SPEC = f"""
name: bench.generate
label: user
command: -i "${{IN/L}}" -o "${{OUTPUT0}}"
inputs: [{{dataset: {DATASET}}}]
outputs: [{{dataset: user.bench.gen.out/, file_template: "user.bench.${{SN/P}}.root"}}]
log: {{dataset: user.bench.gen.log/, file_template: "user.bench.${{SN/P}}.log.tgz"}}
split: {{n_files_per_job: 10}}
scouts: {{skip_scout: true}}
"""


def add_sites(url: str) -> None:
    engine = create_store_engine(url)
    from jedictl.clock import utcnow

    with engine.begin() as conn:
        for name in ("BENCH_A", "BENCH_B", "BENCH_C"):
            conn.execute(sites.insert().values(name=name, status="online", core_count=1, core_power=10, max_memory=4000,
                                               max_walltime=172800, max_scratch_mb=200_000, attributes={}, modified_at=utcnow()))
            for role in ("read", "write"):
                conn.execute(site_storage.insert().values(site=name, endpoint="BENCH_DATADISK", role=role))
    engine.dispose()


def written_counts(url: str) -> dict[str, int]:
    """Jobs, job-file rows, and input records that are running with a job."""
    engine = create_store_engine(url)
    with engine.connect() as conn:
        counts = {
            "jobs": conn.execute(select(func.count()).select_from(jobs)).scalar_one(),
            "job_files": conn.execute(select(func.count()).select_from(job_files)).scalar_one(),
            "inputs_in_jobs": conn.execute(select(func.count()).select_from(files).where(
                files.c.type == "input", files.c.status == "running", files.c.job_id.is_not(None))).scalar_one(),
        }
    engine.dispose()
    return counts


def run(backend: str, n_files: int, workdir: Path, chunk_times: Path | None = None) -> dict:
    with scratch_store(backend, workdir, "gen") as url:
        build_catalog(url, n_files)
        add_sites(url)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        jedictl(url, "feed")
        if backend == "postgresql":
            _vacuum(url)  # as after any bulk load: fresh statistics and visibility map, outside the clock
        load = ceiling.load()
        indexed = ceiling.measure(backend, workdir, n_files, indexed=True)  # the same into the store's indexed table
        primitive_before = ceiling.measure(backend, workdir, n_files)  # R or C, just before the workload
        times_path = chunk_times or workdir / "generate-chunks.json"
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, peak_mb, out = step(url, "generate", "--no-throttle", "-o", "json", env={"JEDICTL_GENERATE__N_FILES": str(n_files)},
                                     chunk_times=times_path)
        cpu = _cpu_since(children)
        primitive_after = ceiling.measure(backend, workdir, n_files)  # and just after: the load drifts on this machine
        primitive = (primitive_before + primitive_after) / 2
        report = json.loads(out)
        counts = written_counts(url)
        assert counts["jobs"] == n_files // 10 and counts["inputs_in_jobs"] == n_files, (counts, report)
        consistent = check(url)
        chunks = json.loads(times_path.read_text())
    ratio = seconds / primitive
    return {"backend": backend, "files": n_files, "jobs": counts["jobs"], "generate_s": round(seconds, 2),
            "jobs_per_s": round(counts["jobs"] / seconds), "rows_written": counts["jobs"] + counts["job_files"],
            "primitive": "R" if backend == "sqlite" else "C", "primitive_s": round(primitive, 2),
            "primitive_before_s": round(primitive_before, 2), "primitive_after_s": round(primitive_after, 2), "ratio": round(ratio, 2),
            "indexed_s": round(indexed, 2), "indexed_ratio": round(seconds / indexed, 2),
            "goal": ceiling.GOALS[("generate", backend)], "met": ratio <= ceiling.GOALS[("generate", backend)],
            "chunks": len(chunks), "growth": None if growth(chunks) is None else round(growth(chunks), 2),
            "cpu_s": round(cpu, 2), "peak_rss_mb": peak_mb, "load": load, "check": consistent}


def _vacuum(url: str) -> None:
    import psycopg

    plain, _, query = url.replace("postgresql+psycopg", "postgresql").partition("?")
    with psycopg.connect(f"{plain}?{query}", autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) files")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
            result = run(backend, args.files, Path(tmp))
            targets = [f"generate {ceiling.verdict('generate', backend, result['ratio'])}",
                       f"{result['indexed_ratio']:.2f} x the indexed files table ({result['indexed_s']} s)", f"load {result['load']}", f"jedictl CPU {result['cpu_s']} s", ceiling.growth_verdict(result["growth"]),
                       f"check {result['check']}", f"peak {'<' if result['peak_rss_mb'] < 1536 else '>='} 1.5 GB"]
            if backend == "sqlite":
                targets.append(f"{'<' if result['generate_s'] < 60 else '>='} 60 s")
            print(json.dumps(result), "|", ", ".join(targets))


if __name__ == "__main__":
    main()
