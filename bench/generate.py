"""Benchmark: one task of 1,000,000 files, 10 files per job -> 100,000 jobs (issue 5).

For each backend: a store with three sites and a data catalog holding one dataset of N files; a task
(no scouts, nFilesPerJob 10) is submitted, refined and fed (not timed). Then `jedictl generate
--no-throttle` runs in its own process with the per-pass file limit raised to N, and its wall time and
peak RSS are taken. In the same run a plain driver `executemany` writes the very rows the generator
wrote (jobs, job files, output records) into an identical empty store; the ratio compares the two
rates. Targets on the 2-core machine: under 60 s on SQLite, peak memory under 1.5 GB.

    python bench/generate.py [--files 1000000] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import jedictl, scratch_store, step  # noqa: E402
from bench.feed import build_catalog  # noqa: E402
from jedictl.store.database import create_store_engine  # noqa: E402
from jedictl.store.jobs import JOB_COLUMNS, JOB_FILE_COLUMNS  # noqa: E402
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
OUTPUT_COLUMNS = ("task_id", "dataset_id", "lfn", "type", "status", "attempt_nr", "failed_attempt", "keep_track", "out_job_id", "created_at")


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


def written_rows(url: str) -> dict[str, tuple[tuple[str, ...], list[tuple]]]:
    engine = create_store_engine(url)
    with engine.connect() as conn:
        job_rows = [tuple(r) for r in conn.execute(jobs.select().with_only_columns(*[jobs.c[c] for c in JOB_COLUMNS]))]
        link_rows = [tuple(r) for r in conn.execute(job_files.select().with_only_columns(*[job_files.c[c] for c in JOB_FILE_COLUMNS]))]
        out_rows = [tuple(r) for r in conn.execute(files.select().with_only_columns(*[files.c[c] for c in OUTPUT_COLUMNS])
                                                   .where(files.c.type.in_(["output", "log"])))]
    engine.dispose()
    return {"jobs": (JOB_COLUMNS, job_rows), "job_files": (JOB_FILE_COLUMNS, link_rows), "files": (OUTPUT_COLUMNS, out_rows)}


def plain_insert(url: str, rows: dict[str, tuple[tuple[str, ...], list[tuple]]]) -> float:
    """Driver executemany of the same rows, in slices of 10,000, in one transaction (foreign keys off
    on SQLite, as the rows point at a task that only exists in the other store)."""
    engine = create_store_engine(url, foreign_keys=False)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        marker = "?" if engine.dialect.name == "sqlite" else "%s"
        if engine.dialect.name == "postgresql":
            cursor.execute("SET session_replication_role = replica")  # no FK triggers: the same bare rows
        started = time.perf_counter()
        if engine.dialect.name == "sqlite":
            cursor.execute("BEGIN IMMEDIATE")
        for table, (columns, data) in rows.items():
            statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(marker for _ in columns)})"
            for start in range(0, len(data), 10_000):
                cursor.executemany(statement, data[start:start + 10_000])
        raw.commit()
        return time.perf_counter() - started
    finally:
        raw.close()
        engine.dispose()


def run(backend: str, n_files: int, workdir: Path) -> dict:
    with scratch_store(backend, workdir, "gen") as url, scratch_store(backend, workdir, "gen-baseline") as baseline_url:
        build_catalog(url, n_files)
        add_sites(url)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        jedictl(url, "feed")
        seconds, peak_mb, out = step(url, "generate", "--no-throttle", "-o", "json", env={"JEDICTL_GENERATE__N_FILES": str(n_files)})
        report = json.loads(out)
        rows = written_rows(url)
        n_jobs = len(rows["jobs"][1])
        assert n_jobs == n_files // 10, (n_jobs, report)
        baseline = plain_insert(baseline_url, rows)
    n_rows = sum(len(data) for _, data in rows.values())
    return {"backend": backend, "files": n_files, "jobs": n_jobs, "generate_s": round(seconds, 2), "jobs_per_s": round(n_jobs / seconds),
            "rows_written": n_rows, "plain_insert_s": round(baseline, 2),
            "ratio": round((n_rows / seconds) / (n_rows / baseline), 2), "peak_rss_mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
            result = run(backend, args.files, Path(tmp))
            targets = [f"peak {'<' if result['peak_rss_mb'] < 1536 else '>='} 1.5 GB"]
            if backend == "sqlite":
                targets.append(f"{'<' if result['generate_s'] < 60 else '>='} 60 s")
            print(json.dumps(result), "|", ", ".join(targets))


if __name__ == "__main__":
    main()
