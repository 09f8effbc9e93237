"""Helpers for tests: real jedictl processes and direct looks into a store."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any, Callable, Sequence


def jedictl_process(args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """A real jedictl process (for concurrency and crash tests)."""
    return subprocess.Popen([sys.executable, "-m", "jedictl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


# Imports everything a pass needs, waits for the go file, then runs the command: on a loaded 2-core
# machine interpreter start-up alone can differ by seconds, enough for one racer to finish first.
_AT_THE_LINE = """
import os, sys, time
import jedictl.cli, jedictl.store.database, sqlalchemy
go = sys.argv.pop(1)
open(go + "." + str(os.getpid()), "w").close()
while not os.path.exists(go):
    time.sleep(0.005)
sys.argv[0] = "jedictl"
jedictl.cli.main()
"""


def jedictl_processes_together(arg_lists: Sequence[Sequence[str]], tmp_dir: Any, timeout: float = 120,
                               env: dict[str, str] | None = None) -> list[subprocess.Popen]:
    """Real jedictl processes that start their commands at the same moment (a start barrier); `env`:
    their environment (e.g. `hooked_env(...)`), else this process's."""
    import glob
    import os
    import time

    go = os.path.join(str(tmp_dir), f"go-{uuid.uuid4().hex}")
    workers = [subprocess.Popen([sys.executable, "-c", _AT_THE_LINE, go, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env) for args in arg_lists]
    deadline = time.monotonic() + timeout
    while len(glob.glob(go + ".*")) < len(workers):
        if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
            break  # a worker died early: its exit code and stderr tell the test why
        time.sleep(0.01)
    open(go, "w").close()
    return workers


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


#: A folder whose sitecustomize.py gives real jedictl processes test hooks (slow tasks, broken guards).
HOOKS = __import__("pathlib").Path(__file__).resolve().parent / "hooks"


def hooked_env(**hooks: str) -> dict[str, str]:
    """The environment of a real jedictl process with test hooks (tests/hooks/sitecustomize.py)."""
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HOOKS), env.get("PYTHONPATH")]))
    env.update({f"JEDICTL_HOOK_{name.upper()}": value for name, value in hooks.items()})
    return env


def store_dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted: two dumps are equal when nothing was written."""
    from sqlalchemy import select

    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import metadata

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return {name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr) for name, table in metadata.tables.items()}
    finally:
        engine.dispose()


def refused(cli: Any, store: str, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> str:
    """The command is bad input: exit 2, one `jedictl: error:` line on stderr, and the store exactly as
    it was (every row of every table). Returns the error line."""
    before = store_dump(store)
    result = cli(*args, db=store, input=input, env=env, code=2)
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("jedictl: error: "), result.stderr
    assert store_dump(store) == before, f"refused, but the store changed: {args}"
    return lines[0]
