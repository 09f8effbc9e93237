"""Benchmark: feed a 1,000,000-file dataset (issues 3 and 18).

For each backend: build a store whose data catalog holds one dataset of N files, submit and refine a
task reading it; measure the raw database's ceiling for N file rows in this process (bench/ceiling.py:
R on SQLite, C on PostgreSQL), then time `jedictl feed` in its own process (wall time, peak RSS, the
time of each batch it writes) and check the store (`jedictl check`).

Printed: feed / primitive against issue 18's goals (SQLite <= 1.5 R, PostgreSQL <= 3 C), the growth
within the task (last 10 % of the write batches against the first 10 %, when there are ten or more;
a first feed is one statement), the load average, and issue 3's targets (under 30 s on SQLite, peak
memory under 1 GB).

    python bench/feed.py [--files 1000000] [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import ceiling  # noqa: E402
from bench.chunk_timer import growth  # noqa: E402
from bench.common import jedictl, scratch_store, step  # noqa: E402
from jedictl.clock import utcnow  # noqa: E402
from jedictl.store.bulk import insert_tuples  # noqa: E402
from jedictl.store.database import create_store_engine  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from jedictl.store.schema import catalog_datasets, catalog_files, files, storage_endpoints  # noqa: E402

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


def check(url: str) -> str:
    """`jedictl check` on the store: "consistent", or the start of what it found."""
    done = subprocess.run([sys.executable, "-m", "jedictl", "check", "--db", url], capture_output=True, text=True)
    return "consistent" if done.returncode == 0 else (done.stdout + done.stderr).strip()[:300]


def run(backend: str, n_files: int, workdir: Path) -> dict:
    with scratch_store(backend, workdir, "feed") as url:
        build_catalog(url, n_files)
        jedictl(url, "submit", "-", stdin=SPEC)
        jedictl(url, "refine")
        load = ceiling.load()
        indexed = ceiling.measure(backend, workdir, n_files, indexed=True)  # the same into the store's indexed table
        primitive_before = ceiling.measure(backend, workdir, n_files)  # R or C, just before the workload
        times_path = workdir / "feed-chunks.json"
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        feed_seconds, peak_mb, out = step(url, "feed", "-o", "json", chunk_times=times_path)  # the feed process's own peak RSS
        cpu = _cpu_since(children)
        primitive_after = ceiling.measure(backend, workdir, n_files)  # and just after: the load drifts on this machine
        primitive = (primitive_before + primitive_after) / 2
        report = json.loads(out)
        fed = _count_records(url)
        assert fed == n_files, (fed, report)
        consistent = check(url)
        chunks = json.loads(times_path.read_text())
    ratio = feed_seconds / primitive
    return {"backend": backend, "files": n_files, "feed_s": round(feed_seconds, 2), "files_per_s": round(n_files / feed_seconds),
            "primitive": "R" if backend == "sqlite" else "C", "primitive_s": round(primitive, 2),
            "primitive_before_s": round(primitive_before, 2), "primitive_after_s": round(primitive_after, 2), "ratio": round(ratio, 2),
            "indexed_s": round(indexed, 2), "indexed_ratio": round(feed_seconds / indexed, 2),
            "goal": ceiling.GOALS[("feed", backend)], "met": ratio <= ceiling.GOALS[("feed", backend)],
            "chunks": len(chunks), "growth": None if growth(chunks) is None else round(growth(chunks), 2),
            "cpu_s": round(cpu, 2), "peak_rss_mb": round(peak_mb), "load": load, "check": consistent}


def _cpu_since(children: resource.struct_rusage) -> float:
    """User + system CPU of the child processes reaped since `children` was taken (the timed jedictl
    process: the benchmark runs no other child meanwhile). On PostgreSQL the server's CPU is not in it."""
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (now.ru_utime - children.ru_utime) + (now.ru_stime - children.ru_stime)


def _count_records(url: str) -> int:
    engine = create_store_engine(url)
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(files)).scalar_one()
    engine.dispose()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            result = run(backend, args.files, Path(tmp))
            targets = [f"feed {ceiling.verdict('feed', backend, result['ratio'])}",
                       f"{result['indexed_ratio']:.2f} x the indexed files table ({result['indexed_s']} s)", f"load {result['load']}", f"jedictl CPU {result['cpu_s']} s", ceiling.growth_verdict(result["growth"]),
                       f"check {result['check']}", f"peak {'<' if result['peak_rss_mb'] < 1024 else '>='} 1 GB"]
            if backend == "sqlite":
                targets.append(f"{'<' if result['feed_s'] < 30 else '>='} 30 s")
            print(json.dumps(result), "|", ", ".join(targets))


if __name__ == "__main__":
    main()
