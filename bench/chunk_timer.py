"""Run one jedictl command and record how long each chunk of its work took (issue 18: growth within
one task). The benchmarks start it in place of `python -m jedictl`:

    python bench/chunk_timer.py TIMES.json generate --no-throttle --db URL

- generate: one chunk is one transaction of `TaskGenerator` (claim, broker, split, write, commit): the
  time from the start of one `_chunk` to the start of the next (or to the task's `_finish`), so the
  commit is counted with its chunk.
- feed: one chunk is one batch of records written (`store.files.insert_records`, the streamed path) or
  the one `INSERT ... SELECT` of a first feed (`StoreDataCatalog.copy_records`).

TIMES.json gets the list of seconds per chunk when the command exits; `growth(times)` is the mean of
the last 10 % over the mean of the first 10 % (None with fewer than 10 chunks). The timing is a
wrapper around the product's functions, not part of the product.
"""

from __future__ import annotations

import atexit
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def growth(times: list[float]) -> float | None:
    """Mean time of the last 10 % of chunks over the first 10 % (None: too few chunks to say)."""
    if len(times) < 10:
        return None
    tenth = len(times) // 10
    first, last = times[:tenth], times[-tenth:]
    return (sum(last) / len(last)) / (sum(first) / len(first))


def _marking(function: Callable[..., Any], marks: list[float]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        marks.append(time.perf_counter())
        return function(*args, **kwargs)

    return wrapper


def _timing(function: Callable[..., Any], times: list[float]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - started)

    return wrapper


def main() -> None:
    out, args = Path(sys.argv[1]), sys.argv[2:]
    marks: list[float] = []  # generate: chunk starts, then the finish
    times: list[float] = []  # feed: each write
    from jedictl.engine.generate import generator
    from jedictl.store import files
    from jedictl.store.data_catalog import StoreDataCatalog

    generator.TaskGenerator._chunk = _marking(generator.TaskGenerator._chunk, marks)
    generator.TaskGenerator._finish = _marking(generator.TaskGenerator._finish, marks)
    generator.TaskGenerator._pending = _marking(generator.TaskGenerator._pending, marks)
    files.insert_records = _timing(files.insert_records, times)
    if hasattr(StoreDataCatalog, "copy_records"):  # absent before issue 18 (the benchmark also runs older code)
        StoreDataCatalog.copy_records = _timing(StoreDataCatalog.copy_records, times)

    def save() -> None:
        chunks = [b - a for a, b in zip(marks, marks[1:])] if marks else times
        out.write_text(json.dumps(chunks))

    atexit.register(save)
    sys.argv = ["jedictl", *args]
    from jedictl.cli import main as jedictl_main

    jedictl_main()


if __name__ == "__main__":
    main()
