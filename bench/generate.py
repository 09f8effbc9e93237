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
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.feed import PG_URL, build_catalog  # noqa: E402
from jedictl.store.database import create_store_engine  # noqa: E402
from jedictl.store.jobs import JOB_COLUMNS, JOB_FILE_COLUMNS  # noqa: E402
from jedictl.store.migrate import upgrade  # noqa: E402
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


def jedictl(url: str, *args: str, stdin: str | None = None) -> None:
    subprocess.run([sys.executable, "-m", "jedictl", *args, "--db", url, "-q"], input=stdin, capture_output=True, text=True, check=True)


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
    if backend == "sqlite":
        url, baseline_url, cleanup = f"sqlite:///{workdir / 'gen.db'}", f"sqlite:///{workdir / 'gen-baseline.db'}", lambda: None
    else:
        import psycopg

        schemas = [f"bench_{uuid.uuid4().hex[:8]}" for _ in range(2)]
        plain = PG_URL.replace("+psycopg", "")
        with psycopg.connect(plain, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"CREATE SCHEMA {schema}")
        url, baseline_url = (f"{PG_URL}?options=-csearch_path%3D{schema}" for schema in schemas)

        def cleanup() -> None:
            with psycopg.connect(plain, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f"DROP SCHEMA {schema} CASCADE")
    try:
        upgrade(url)
        upgrade(baseline_url)
        build_catalog(url, n_files)
        add_sites(url)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        jedictl(url, "feed")
        env = {**os.environ, "JEDICTL_GENERATE__N_FILES": str(n_files)}
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "jedictl", "generate", "--no-throttle", "-o", "json", "--db", url],
                                   stdout=subprocess.PIPE, text=True, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        report = json.loads(process.stdout.read())
        assert status == 0, f"generate exited with {status}"
        rows = written_rows(url)
        n_jobs = len(rows["jobs"][1])
        assert n_jobs == n_files // 10, (n_jobs, report)
        baseline = plain_insert(baseline_url, rows)
    finally:
        cleanup()
    n_rows = sum(len(data) for _, data in rows.values())
    return {"backend": backend, "files": n_files, "jobs": n_jobs, "generate_s": round(seconds, 2), "jobs_per_s": round(n_jobs / seconds),
            "rows_written": n_rows, "plain_insert_s": round(baseline, 2),
            "ratio": round((n_rows / seconds) / (n_rows / baseline), 2), "peak_rss_mb": round(usage.ru_maxrss / 1024)}


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
