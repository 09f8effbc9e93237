"""The store as the operator finds it: read-only, empty, someone else's, not there. A store that refuses
writes is a store problem (exit 3, one line naming the file or store and what is missing), never an
"internal error"; read commands never write; a pass's errors are one line each on stderr naming the
pass, with the SQL only at -vv."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.helpers import row_counts

PRUN = str(EXAMPLES / "prun_files.json")
SITES = str(ROOT / "examples" / "sites.yaml")
DATA = str(ROOT / "examples" / "data.yaml")
#: Commands that write (to a store holding the example sites and the PRUN task).
WRITES = [["data", "import", DATA], ["sites", "set-status", "MWT2", "offline"], ["run", "-q"], ["kill", "1"]]
#: Commands that only read.
READS = [["task", "list"], ["jobs", "list"], ["sites", "list"], ["data", "list"], ["db", "current"], ["check"], ["explain", "task", "1"],
         ["retry-rules", "list"], ["pilots", "list"], ["queue-shares", "show"], ["task", "show", "1"]]


# ------------------------------------------------------------------------------ a read-only SQLite file

def _without_root_powers() -> list[str]:
    """A prefix that runs a process without the capabilities that let root write any file: as root
    (the tests' machines) `chmod` alone stops nothing. Without root, nothing is needed."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    prefix = [setpriv or "setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]
    if setpriv is None or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root without setpriv able to drop CAP_DAC_OVERRIDE: no way to make a file unwritable")
    return prefix


def _jedictl(prefix: list[str], *args: str, db: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JEDICTL_DB": db}
    return subprocess.run([*prefix, sys.executable, "-m", "jedictl", *args], capture_output=True, text=True, env=env, timeout=120)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def sqlite_store(cli, tmp_path) -> Path:
    """A store with sites and one registered task, in a directory of its own."""
    folder = tmp_path / "stores"
    folder.mkdir()
    path = folder / "store.db"
    cli("db", "init", db=str(path))
    cli("sites", "import", SITES, db=str(path))
    cli("submit", PRUN, db=str(path))
    return path


@pytest.mark.parametrize("args", WRITES, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("unwritable", ["file", "directory"])
def test_writes_to_a_read_only_sqlite_store_are_a_store_error(sqlite_store, args, unwritable):
    """They ended `internal error: OperationalError ... attempt to write a readonly database` (exit 1);
    `run -q` printed raw SQL on stdout. Now exit 3 and one line naming the file and the permission."""
    prefix = _without_root_powers()
    before = _digest(sqlite_store)
    target = sqlite_store if unwritable == "file" else sqlite_store.parent
    mode = target.stat().st_mode
    target.chmod(0o444 if unwritable == "file" else 0o555)
    try:
        result = _jedictl(prefix, *args, db=str(sqlite_store))
    finally:
        target.chmod(mode)
    why = ("no write permission on the file" if unwritable == "file"
           else f"no write permission on its directory {sqlite_store.parent} (SQLite keeps its -wal and -shm files there)")
    assert (result.returncode, result.stdout) == (3, ""), result.stderr
    assert result.stderr == f"jedictl: error: store {sqlite_store} is read-only: {why}\n"
    assert _digest(sqlite_store) == before


def test_reads_of_a_read_only_sqlite_file_still_work(cli, sqlite_store):
    prefix = _without_root_powers()
    sqlite_store.chmod(0o444)
    try:
        result = _jedictl(prefix, "task", "list", "-o", "json", db=str(sqlite_store))
    finally:
        sqlite_store.chmod(0o644)
    assert result.returncode == 0 and '"task_id": 1' in result.stdout, result.stderr


# --------------------------------------------------------------------------- a read-only PostgreSQL store

@pytest.mark.postgres
@pytest.mark.parametrize("args", WRITES, ids=lambda a: " ".join(a[:2]))
def test_writes_to_a_read_only_postgres_store_are_a_store_error(cli, pg_url, args):
    """A read-only transaction (a hot standby, `default_transaction_read_only`): exit 3, one line."""
    cli("db", "init", db=pg_url)
    cli("sites", "import", SITES, db=pg_url)
    cli("submit", PRUN, db=pg_url)
    read_only = pg_url.replace("options=", "options=-cdefault_transaction_read_only%3Don%20", 1)
    before = row_counts(pg_url)
    result = cli(*args, db=read_only, code=3)
    assert result.stdout == ""
    line = result.stderr.removesuffix("\n")
    assert "\n" not in line and line.startswith(f"jedictl: error: store {read_only} is read-only: cannot execute "), line
    assert line.endswith(" in a read-only transaction")
    assert row_counts(pg_url) == before
    assert cli.json("task", "list", db=read_only)[0]["task_id"] == 1  # reading is fine


# ------------------------------------------------------------------------------- a pass's errors, told

def test_pass_errors_are_one_line_each_on_stderr_with_the_sql_only_at_vv(cli, store, monkeypatch):
    """`run -q` printed each failed pass's error -- SQLAlchemy's message with the statement and its
    parameters -- as a table on stdout, and nothing on stderr."""
    from sqlalchemy.exc import IntegrityError

    from jedictl.engine import pipeline

    def broken(*_args, **_kwargs):
        raise IntegrityError("INSERT INTO tasks (name) VALUES (?)", ("secret.parameter",), Exception("UNIQUE constraint failed: tasks.name"))

    for name in ("feed", "finalize"):
        monkeypatch.setitem(pipeline.PASSES, name, broken)
    quiet = cli("run", "-q", db=store, code=1)
    assert quiet.stdout == ""
    assert quiet.stderr == ("jedictl: error: feed: Exception: UNIQUE constraint failed: tasks.name\n"
                            "jedictl: error: finalize: Exception: UNIQUE constraint failed: tasks.name\n")
    plain = cli("run", db=store, code=1)
    assert "jedictl: error: feed: Exception: UNIQUE constraint failed: tasks.name\n" in plain.stderr
    assert "INSERT INTO" not in plain.stdout + plain.stderr and "secret.parameter" not in plain.stdout + plain.stderr
    scripted = cli("run", "-o", "json", db=store, code=1)
    assert [p["pass"] for p in json.loads(scripted.stdout)["passes"] if p.get("error")] == ["feed", "finalize"]
    assert scripted.stderr.count("jedictl: error: ") == 2 and "INSERT INTO" not in scripted.stdout + scripted.stderr
    traced = cli("run", "-q", "-vv", db=store, code=1)
    assert "Traceback" in traced.stderr and "INSERT INTO tasks (name) VALUES (?)" in traced.stderr
    assert traced.stdout == ""


def test_a_task_that_fails_in_a_pass_is_named_in_its_error_line(cli, store, monkeypatch):
    from jedictl.engine.refine import refiner

    cli("submit", PRUN, db=store)

    def broken(*_args, **_kwargs):
        raise ValueError("a bug\nwith a second line")

    monkeypatch.setattr(refiner, "_refine_one", broken)
    result = cli("refine", "-q", db=store, code=1)
    assert result.stdout == ""
    assert result.stderr == "jedictl: error: refine: task 1: ValueError: a bug\n"


# ------------------------------------------------------------------------------ read commands never write

@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_command_on_an_empty_file_leaves_it_empty(cli, tmp_path, args):
    """A read command on a 0-byte file wrote 4 KiB to it (WAL mode asked for on every connection)."""
    path = tmp_path / "empty.db"
    path.touch()
    result = cli(*args, db=str(path), code=None)
    assert result.exit_code in (0, 3), result.stderr
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


@pytest.mark.parametrize("args", [*READS, ["db", "init"], ["db", "upgrade"]], ids=" ".join)
def test_someone_elses_database_is_left_byte_for_byte(cli, tmp_path, args):
    """Reads, and the `db init` that refuses it, leave a database in rollback-journal mode as it was:
    no WAL switched on in its header, no tables added."""
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
        conn.execute("INSERT INTO accounts (owner) VALUES ('them')")
    conn.close()
    before = _digest(path)
    result = cli(*args, db=str(path), code=None)
    assert result.exit_code == 3 or args == ["db", "current"], result.stderr  # db current: "revision: none"
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_command_on_a_missing_store_creates_nothing(cli, tmp_path, args):
    path = tmp_path / "sub" / "missing.db"
    result = cli(*args, db=str(path), code=3)
    assert result.stderr == f"jedictl: error: store {path} does not exist; run `jedictl db init` to create it\n"
    assert not (tmp_path / "sub").exists()
