"""Benchmark: feed a 1,000,000-file dataset (issue 3).

For each backend: build a store whose data catalog holds one dataset of N files, submit and refine a
task reading it, then time `jedictl feed` in its own process (wall time and peak RSS). In the same run,
time a plain driver `executemany` insert of the very rows the feeder wrote into an identical, empty
`files` table, and print the ratio feed rate / plain-insert rate.

Targets on the 2-core machine: ratio >= 0.5, under 30 s on SQLite, peak memory under 1 GB.

    python bench/feed.py [--files 1000000] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import jedictl, scratch_store, step  # noqa: E402
from jedictl.clock import utcnow  # noqa: E402
from jedictl.store.bulk import insert_tuples  # noqa: E402
from jedictl.store.database import create_store_engine  # noqa: E402
from jedictl.store.schema import catalog_datasets, catalog_files, datasets, files, storage_endpoints, tasks  # noqa: E402

DATASET = "mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.deriv.DAOD_PHYS.e8514_s4162_r14622_p6026_tid01000000_00"
SPEC = f"""
name: bench.feed
label: user
command: -i "${{IN/T}}" -o "${{OUTPUT0}}"
inputs: [{{dataset: {DATASET}}}]
outputs: [{{dataset: user.bench.out/, file_template: "user.bench.${{SN/P}}.root"}}]
scouts: {{skip_scout: true}}
"""


def build_catalog(url: str, n_files: int) -> None:
    engine = create_store_engine(url)
    now = utcnow()
    with engine.begin() as conn:
        conn.execute(storage_endpoints.insert().values(name="BENCH_DATADISK", kind="disk", free_gb=1e6, total_gb=2e6, attributes={}, modified_at=now))
        dataset_id = conn.execute(catalog_datasets.insert().values(name=DATASET, scope="mc23_13p6TeV", kind="dataset", state="closed",
                                                                   attributes={}, created_at=now, modified_at=now).returning(catalog_datasets.c.id)).scalar_one()
        rows = ((dataset_id, "mc23_13p6TeV", f"DAOD_PHYS.01000000._{i:07d}.pool.root.1", uuid.UUID(int=i).hex, 2_000_000_000 + i, f"ad:{i:08x}",
                 5000, None, None, now) for i in range(1, n_files + 1))
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) == 50_000:
                insert_tuples(conn, catalog_files, ("dataset_id", "scope", "lfn", "guid", "size", "checksum", "n_events", "run", "lumi_blocks", "created_at"), batch)
                batch = []
        insert_tuples(conn, catalog_files, ("dataset_id", "scope", "lfn", "guid", "size", "checksum", "n_events", "run", "lumi_blocks", "created_at"), batch)
    engine.dispose()


def plain_insert(url: str, rows: list[tuple], columns: list[str]) -> float:
    """A plain driver executemany of `rows` into an identical empty files table (with a task and dataset for the FK)."""
    engine = create_store_engine(url)
    now = datetime(2026, 1, 1)
    with engine.begin() as conn:
        task_id = conn.execute(tasks.insert().values(name="baseline", user_name="bench", vo="wlcg", prod_source_label="user", task_type="anal",
                                                     status="defined", options={}, created_at=now, modified_at=now, state_changed_at=now)
                               .returning(tasks.c.id)).scalar_one()
        dataset_id = conn.execute(datasets.insert().values(task_id=task_id, name=DATASET, type="input", status="ready", attributes={},
                                                           created_at=now, modified_at=now).returning(datasets.c.id)).scalar_one()
    rows = [(task_id, dataset_id, *row[2:]) for row in rows]
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        marker = "?" if engine.dialect.name == "sqlite" else "%s"
        statement = f"INSERT INTO files ({', '.join(columns)}) VALUES ({', '.join(marker for _ in columns)})"
        started = time.perf_counter()
        if engine.dialect.name == "sqlite":
            cursor.execute("BEGIN IMMEDIATE")
        for start in range(0, len(rows), 10_000):
            cursor.executemany(statement, rows[start:start + 10_000])
        raw.commit()
        elapsed = time.perf_counter() - started
    finally:
        raw.close()
        engine.dispose()
    return elapsed


def fed_rows(url: str) -> tuple[list[str], list[tuple]]:
    columns = ["task_id", "dataset_id", "lfn", "guid", "scope", "size", "checksum", "type", "status", "attempt_nr", "max_attempt",
               "failed_attempt", "max_failure", "keep_track", "n_events", "start_event", "end_event", "first_event", "lumi_block_nr", "created_at"]
    engine = create_store_engine(url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(files.select().with_only_columns(*[files.c[c] for c in columns]).order_by(files.c.id))]
    engine.dispose()
    return columns, rows


def run(backend: str, n_files: int, workdir: Path) -> dict:
    with scratch_store(backend, workdir, "feed") as url, scratch_store(backend, workdir, "baseline") as baseline_url:
        build_catalog(url, n_files)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        feed_seconds, peak_mb, out = step(url, "feed", "-o", "json")  # the feed process's own peak RSS
        report = json.loads(out)
        columns, rows = fed_rows(url)
        assert len(rows) == n_files, (len(rows), report)
        baseline_seconds = plain_insert(baseline_url, rows, columns)
    feed_rate, plain_rate = n_files / feed_seconds, n_files / baseline_seconds
    return {"backend": backend, "files": n_files, "feed_s": round(feed_seconds, 2), "files_per_s": round(feed_rate),
            "plain_insert_s": round(baseline_seconds, 2), "plain_rows_per_s": round(plain_rate), "ratio": round(feed_rate / plain_rate, 2), "peak_rss_mb": round(peak_mb)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            result = run(backend, args.files, Path(tmp))
            targets = [f"ratio {'>=' if result['ratio'] >= 0.5 else '<'} 0.5", f"peak {'<' if result['peak_rss_mb'] < 1024 else '>='} 1 GB"]
            if backend == "sqlite":
                targets.append(f"{'<' if result['feed_s'] < 30 else '>='} 30 s")
            print(json.dumps(result), "|", ", ".join(targets))


if __name__ == "__main__":
    main()
