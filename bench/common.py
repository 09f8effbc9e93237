"""What every benchmark shares: a scratch store on either backend, and jedictl run as a process."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PG_URL = os.environ.get("JEDICTL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@contextmanager
def scratch_url(backend: str, workdir: Path, name: str) -> Iterator[str]:
    """The URL of a new, empty place for a store: a SQLite file in `workdir`, or a PostgreSQL schema
    of its own that is dropped afterwards. The caller creates the tables (`upgrade`) if it wants them."""
    if backend == "sqlite":
        path = workdir / f"{name}-{uuid.uuid4().hex[:8]}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    plain = PG_URL.replace("+psycopg", "")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def scratch_store(backend: str, workdir: Path, name: str) -> Iterator[str]:
    """`scratch_url` with the store's tables created."""
    from jedictl.store.migrate import upgrade

    with scratch_url(backend, workdir, name) as url:
        upgrade(url)
        yield url


def analyze(url: str) -> None:
    """On PostgreSQL, gather the planner's statistics of a store just filled, as autovacuum would within a
    minute or so. Without them the planner takes a table it has never measured for nearly empty: the
    first finalize of 10,000 tasks loaded a second before scanned the status index for each batch's
    fifty ids and took 173 s, not 17 s. SQLite plans without statistics."""
    if url.startswith("sqlite"):
        return
    from jedictl.store.database import open_store

    store = open_store(url)
    try:
        with store.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    finally:
        store.close()


def jedictl(url: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    """Run a jedictl command on the store (untimed set-up); its stdout."""
    return subprocess.run([sys.executable, "-m", "jedictl", *args, "--db", url], input=stdin, capture_output=True, text=True,
                          check=True, env={**os.environ, **(env or {})}).stdout


def step(url: str, *args: str, env: dict[str, str] | None = None, stdin_path: Path | None = None,
         chunk_times: Path | None = None) -> tuple[float, int, str]:
    """One timed jedictl process: (seconds, its peak RSS in MB, stdout). Exit 1 (a pass met errors,
    e.g. a simulated failure it reported) is accepted; anything else stops the benchmark.

    The peak is the child's own high-water mark (VmHWM), sampled while it runs: the rusage of a
    child (wait4) includes the size of the parent it was forked from, which for run_all is large.

    With `chunk_times`, the command runs under bench/chunk_timer.py, which writes the seconds of each
    chunk of its work there (growth within one task)."""
    started = time.perf_counter()
    stdin = open(stdin_path) if stdin_path else subprocess.DEVNULL
    peak_kb = 0
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as errors:
            program = [str(Path(__file__).parent / "chunk_timer.py"), str(chunk_times)] if chunk_times else ["-m", "jedictl"]
            process = subprocess.Popen([sys.executable, *program, *args, "--db", url], stdin=stdin, stdout=out, stderr=errors,
                                       text=True, env={**os.environ, **(env or {})})
            try:
                while process.poll() is None:
                    peak_kb = max(peak_kb, _high_water_kb(process.pid))
                    time.sleep(0.02)
            finally:
                if process.poll() is None:  # interrupted: leave no jedictl behind
                    process.kill()
                    process.wait()
            out.seek(0)
            errors.seek(0)
            stdout, message = out.read(), errors.read()
    finally:
        if stdin_path:
            stdin.close()
    seconds = time.perf_counter() - started
    if process.returncode not in (0, 1):
        raise SystemExit(f"jedictl {' '.join(args)} failed ({process.returncode}): {message.strip()[-500:]}")
    return seconds, round(peak_kb / 1024), stdout


def _high_water_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass  # the process just ended: its last sample stands
    return 0
