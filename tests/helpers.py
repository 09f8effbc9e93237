"""Helpers for tests: real jedictl processes and direct looks into a store."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Callable, Sequence


def jedictl_process(args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """A real jedictl process (for concurrency and crash tests)."""
    return subprocess.Popen([sys.executable, "-m", "jedictl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def row_counts(url: str) -> dict[str, int]:
    """Rows in every table of the store: the 'store unchanged' assertion compares two of these."""
    from sqlalchemy import func, select

    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import metadata

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return {name: conn.execute(select(func.count()).select_from(table)).scalar_one() for name, table in metadata.tables.items()}
    finally:
        engine.dispose()


def run_sql(url: str, callback: Callable[[Any], Any]) -> Any:
    """Run `callback(conn)` in one transaction on the store at `url`."""
    from jedictl.store.database import create_store_engine

    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            return callback(conn)
    finally:
        engine.dispose()
