"""The raw database's ceiling for a bulk workload (issue 18): what the store itself allows, measured in
the same process just before the workload, so that host speed (which drifts by 2x in an afternoon on
the shared machine) cancels out of `workload / primitive`.

- SQLite, **R**: the stdlib `sqlite3` driver, `executemany` of 1,000,000 plain tuples into a table of
  the `files` columns with its primary key (WAL, synchronous=NORMAL, the store's cache size), slices of
  10,000, one transaction.
- PostgreSQL, **C**: psycopg `cursor.copy()` + `write_row` of the same 1,000,000 rows into the same
  table, one transaction.

These are the primitives of issue 18 and of the research note (performance.md C.1): the table has its
primary key but not the store's secondary indexes. For the record, `measure(..., indexed=True)` times
the same rows into the store's own `files` table with its indexes (the claim index, the task index and
the unique file key), which any workload must also maintain: on this machine they make the insert
1.2-1.9x slower on SQLite and 2-3.3x slower on PostgreSQL. Goals are judged against R and C.

The benchmarks measure the primitive just before and just after the workload and divide by the mean
of the two: the load of this shared machine drifts within a minute, and one side alone was off by up
to 2x. The rows have the columns the feeder writes (store.files.RECORD_COLUMNS) and 60-odd-character LFNs; they
are built before the clock starts.

    python bench/ceiling.py [--rows 1000000] [--backend sqlite|postgresql|both] [--indexed]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scratch_store  # noqa: E402

ROWS = 1_000_000
#: The goals of issue 18, as multiples of the primitive of their backend.
GOALS = {("feed", "sqlite"): 1.5, ("generate", "sqlite"): 5.0, ("feed", "postgresql"): 3.0, ("generate", "postgresql"): 15.0}
#: Growth within one task: the last 10 % of chunks against the first 10 % (goal).
GROWTH_GOAL = 1.2


def file_rows(n: int, task_id: int, dataset_id: int) -> list[tuple]:
    """`n` rows of store.files.RECORD_COLUMNS, as the feeder writes them."""
    now = datetime(2026, 1, 1)
    return [(task_id, dataset_id, f"DAOD_PHYS.01000000._{i:07d}.pool.root.1.ceiling.mc23_13p6TeV", f"{i:032x}", "mc23_13p6TeV",
             2_000_000_000 + i, f"ad:{i:08x}", "input", "ready", 0, 3, 0, None, True, 5000, None, None, 1 + 5000 * (i - 1), None, now)
            for i in range(1, n + 1)]


def _task_and_dataset(url: str) -> tuple[int, int]:
    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import datasets, tasks

    engine = create_store_engine(url)
    now = datetime(2026, 1, 1)
    try:
        with engine.begin() as conn:
            task_id = conn.execute(tasks.insert().values(name="ceiling", user_name="bench", vo="wlcg", prod_source_label="user",
                                                         task_type="anal", status="defined", options={}, created_at=now, modified_at=now,
                                                         state_changed_at=now).returning(tasks.c.id)).scalar_one()
            dataset_id = conn.execute(datasets.insert().values(task_id=task_id, name="ceiling", type="input", status="ready", attributes={},
                                                               created_at=now, modified_at=now).returning(datasets.c.id)).scalar_one()
    finally:
        engine.dispose()
    return task_id, dataset_id


def measure(backend: str, workdir: Path, n_rows: int = ROWS, indexed: bool = False) -> float:
    """Seconds of the backend's primitive (R on SQLite, C on PostgreSQL) for `n_rows` file rows;
    `indexed`: into the store's `files` table itself, with its secondary indexes (for the record)."""
    from jedictl.store.files import RECORD_COLUMNS

    with scratch_store(backend, workdir, "ceiling") as url:
        task_id, dataset_id = _task_and_dataset(url)
        rows = file_rows(n_rows, task_id, dataset_id)
        names = ", ".join(RECORD_COLUMNS)
        table = "files" if indexed else _plain_table(url)
        if backend == "sqlite":
            conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
            try:
                for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "cache_size = -65536"):
                    conn.execute(f"PRAGMA {pragma}")
                statement = f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' for _ in RECORD_COLUMNS)})"
                started = time.perf_counter()
                conn.execute("BEGIN IMMEDIATE")
                for start in range(0, len(rows), 10_000):
                    conn.executemany(statement, rows[start:start + 10_000])
                conn.execute("COMMIT")
                return time.perf_counter() - started
            finally:
                conn.close()
        import psycopg

        plain, _, query = url.replace("postgresql+psycopg", "postgresql").partition("?")
        with psycopg.connect(f"{plain}?{query}") as conn:
            started = time.perf_counter()
            with conn.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            conn.commit()
            return time.perf_counter() - started


def _plain_table(url: str) -> str:
    """A table of the `files` columns with its primary key and no other index or constraint."""
    from sqlalchemy import Column, MetaData, Table

    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import files

    metadata = MetaData()
    Table("files_plain", metadata, *(Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable) for c in files.columns))
    engine = create_store_engine(url)
    try:
        metadata.create_all(engine)
    finally:
        engine.dispose()
    return "files_plain"


def load() -> str:
    """The 1-minute load average, for the record next to every figure."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def verdict(workload: str, backend: str, ratio: float) -> str:
    goal = GOALS[(workload, backend)]
    primitive = "R" if backend == "sqlite" else "C"
    return f"{ratio:.2f} {primitive} ({'met' if ratio <= goal else 'NOT met'}: goal <= {goal:g} {primitive})"


def growth_verdict(growth: float | None) -> str:
    if growth is None:
        return "growth n/a"
    return f"growth last/first 10 % of chunks {growth:.2f}x ({'met' if growth <= GROWTH_GOAL else 'NOT met'}: goal <= {GROWTH_GOAL}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--indexed", action="store_true", help="also time the same rows into the store's files table with its indexes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in (["sqlite", "postgresql"] if args.backend == "both" else [args.backend]):
            seconds = measure(backend, Path(tmp), args.rows)
            print(f"{backend}: {'R' if backend == 'sqlite' else 'C'} = {seconds:.2f} s for {args.rows:,} rows "
                  f"({args.rows / seconds:,.0f} rows/s), load {load()}")
            if args.indexed:
                seconds = measure(backend, Path(tmp), args.rows, indexed=True)
                print(f"{backend}: the same into the store's files table with its indexes: {seconds:.2f} s, load {load()}")


if __name__ == "__main__":
    main()
