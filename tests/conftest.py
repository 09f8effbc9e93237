"""Shared fixtures: a frozen environment, stores on both backends, a message broker, and a CLI runner.

PostgreSQL tests use `JEDICTL_TEST_PG_URL` (default: the local trust-auth server) and get a schema of
their own, dropped afterwards. Without a server they are skipped -- unless `JEDICTL_REQUIRE_PG=1`
(set by `.ci/run`), which turns that skip into a failure and fails the session if no PostgreSQL test
passed. Message tests (`amqp`) likewise use `JEDICTL_TEST_AMQP_URL` (default: the local RabbitMQ, guest)
with queues and an exchange of their own, deleted afterwards, and `JEDICTL_REQUIRE_MQ=1`.

In-process commands share two things a real jedictl process would build once: compiled statements and
(PostgreSQL) server connections, reset between commands; `JEDICTL_TEST_NEW_PG_CONNECTIONS=1` gives every
engine new connections again, to rule the reuse out when a PostgreSQL test fails oddly.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

# Bytecode caches are written even under PYTHONDONTWRITEBYTECODE (set in this machine's environment):
# without them every xdist worker compiled all of jedictl and pytest rewrote every test module again, and
# every real jedictl process the tests start compiled jedictl again (~0.6 s CPU each). The caches go to
# the git-ignored __pycache__ folders, as in any Python run without the variable. This module is loaded
# before any test module is collected, and before the workers and the real processes start.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402
import typer.main
from typer.testing import CliRunner, Result

from jedictl.cli import app

PG_URL = os.environ.get("JEDICTL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("JEDICTL_REQUIRE_PG") == "1"
REQUIRE_SLURM = os.environ.get("JEDICTL_REQUIRE_SLURM") == "1"
AMQP_URL = os.environ.get("JEDICTL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REQUIRE_MQ = os.environ.get("JEDICTL_REQUIRE_MQ") == "1"
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "panda-taskparams"  # task parameters written by PanDA's own client

_pg_state: dict[str, Any] = {"available": None, "passed": 0}
_slurm_state: dict[str, Any] = {"passed": 0}
_mq_state: dict[str, Any] = {"available": None, "passed": 0}


# ------------------------------------------------------------------------------------- environment

@pytest.fixture(autouse=True, scope="session")
def isolation(tmp_path_factory: pytest.TempPathFactory):
    """No JEDICTL_* from the developer's shell; config and data directories in a temp dir."""
    home = tmp_path_factory.mktemp("home")
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith("JEDICTL_") and name not in ("JEDICTL_TEST_PG_URL", "JEDICTL_REQUIRE_PG", "JEDICTL_REQUIRE_SLURM",
                                                         "JEDICTL_TEST_AMQP_URL", "JEDICTL_REQUIRE_MQ", "JEDICTL_REQUIRE_WMCORE"):
            del os.environ[name]
    os.environ.update({
        "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
        "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb",
    })
    yield
    os.environ.clear()
    os.environ.update(saved)


# ------------------------------------------------------------------------------- compiled statements

class _SharedCompiledCache(dict):
    """SQLAlchemy's compiled-statement cache shared by every engine of this test process.

    A jedictl process opens one engine and compiles each statement once. An in-process test opens a
    new engine for every command it invokes (and for every look into the store), each with an empty
    cache of its own keyed by its own dialect object, so every statement was compiled again: a fifth of
    the time of the in-process tests. Here the dialect in the key stands for the dialect's configuration
    -- its class and every plain setting, the server version and default schema included, read at each
    look-up -- so an engine reuses what an engine of the same backend, server and configuration
    compiled. Compilation depends on nothing else (the statement's own structure is the rest of the key)."""

    @staticmethod
    def _canonical(key: tuple[Any, ...]) -> tuple[Any, ...]:
        dialect = key[0]
        plain = tuple(sorted((name, value) for name, value in vars(dialect).items()
                             if isinstance(value, (str, int, float, bool, type(None))) or
                             (isinstance(value, tuple) and all(isinstance(v, (str, int, float, bool, type(None))) for v in value))))
        return (type(dialect), plain, *key[1:])

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._canonical(key), default)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._canonical(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        if len(self) >= 5000:  # a bound on memory, as SQLAlchemy's own cache has (500 statements an engine)
            self.clear()
        super().__setitem__(self._canonical(key), value)

    def __contains__(self, key: Any) -> bool:
        return super().__contains__(self._canonical(key))


def _share_compiled_statements() -> None:
    from sqlalchemy.engine import Engine

    if getattr(Engine.__init__, "_jedictl_shared_cache", False):
        return
    shared = _SharedCompiledCache()
    original = Engine.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if self._compiled_cache is not None:  # an engine made without a cache keeps none
            self._compiled_cache = shared

    init._jedictl_shared_cache = True  # type: ignore[attr-defined]
    Engine.__init__ = init  # type: ignore[method-assign]


_share_compiled_statements()


# ------------------------------------------------------------------------- PostgreSQL connections

class _ReusedPgConnections:
    """PostgreSQL connections of in-process commands, kept open from one command's engine to the next.

    A jedictl process opens one connection and keeps it for its life. An in-process test opens a new
    engine, so a new connection, for every command it invokes and every look into the store: a server
    process forked, logged in and its catalog caches filled each time, ~10 ms, most of the time of a
    short command and a third of a PostgreSQL test's. Here a connection an engine closes is reset to what
    a new one is -- no transaction, every setting back to the value it was opened with (RESET ALL: the
    URL's `options` are opening values), no advisory lock, no LISTEN, no cursor, no prepared statement --
    and handed to the next engine that connects with the same arguments (same URL: a test's own schema,
    role or read-only option is its own). SQLAlchemy still runs its first-connect and on-connect steps
    for each engine. A connection that is broken, or whose transaction or driver settings are not those
    of a new one, is closed as before."""

    LIMIT = 4  # connections kept open by one test process; more are closed (the oldest first)

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.idle: list[tuple[Any, Any]] = []  # (key, connection), oldest first

    @staticmethod
    def key(cargs: tuple[Any, ...], cparams: dict[str, Any]) -> Any:
        # `context` is the dialect's adapters map, one per engine and alike for every jedictl engine
        return (cargs, tuple(sorted((name, repr(value)) for name, value in cparams.items() if name != "context")))

    def take(self, key: Any) -> Any:
        with self.lock:
            for index in range(len(self.idle) - 1, -1, -1):
                if self.idle[index][0] == key:
                    return self.idle.pop(index)[1]
        return None

    def give_back(self, key: Any, conn: Any) -> None:
        """Reset `conn` and keep it for the next engine, or close it."""
        import psycopg
        from psycopg.pq import TransactionStatus
        from sqlalchemy.dialects.postgresql.psycopg import _log_notices

        try:
            if conn.closed or conn.broken or conn.info.transaction_status != TransactionStatus.IDLE or conn.autocommit \
                    or (conn.isolation_level, conn.read_only, conn.deferrable) != (None, None, None):
                conn.close()
                return
            conn.autocommit = True
            # psycopg forgets its prepared statements when it sees DEALLOCATE ALL succeed
            conn.execute("RESET ALL; SELECT pg_advisory_unlock_all(); UNLISTEN *; CLOSE ALL; DEALLOCATE ALL")
            conn.autocommit = False
            while _log_notices in conn._notice_handlers:  # SQLAlchemy's on-connect step adds it again
                conn.remove_notice_handler(_log_notices)
        except psycopg.Error:
            conn.close()
            return
        with self.lock:
            self.idle.append((key, conn))
            surplus = self.idle[:-self.LIMIT]
            del self.idle[:-self.LIMIT]
        for _, old in surplus:
            old.close()

    def close_all(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for _, conn in idle:
            conn.close()


_PG_CONNECTIONS = _ReusedPgConnections()


def _reuse_pg_connections() -> None:
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

    if getattr(PGDialect_psycopg.connect, "_jedictl_reuse", False):
        return
    original_connect = PGDialect_psycopg.connect

    def connect(self: Any, *cargs: Any, **cparams: Any) -> Any:
        key = _ReusedPgConnections.key(cargs, cparams)
        conn = _PG_CONNECTIONS.take(key)
        if conn is None:
            conn = original_connect(self, *cargs, **cparams)
        conn._jedictl_reuse_key = key
        return conn

    def do_close(self: Any, conn: Any) -> None:
        key = getattr(conn, "_jedictl_reuse_key", None)
        if key is None:
            conn.close()
        else:
            _PG_CONNECTIONS.give_back(key, conn)

    def do_terminate(self: Any, conn: Any) -> None:  # an invalidated connection: never kept
        conn.close()

    connect._jedictl_reuse = True  # type: ignore[attr-defined]
    PGDialect_psycopg.connect = connect  # type: ignore[method-assign]
    PGDialect_psycopg.do_close = do_close  # type: ignore[method-assign]
    PGDialect_psycopg.do_terminate = do_terminate  # type: ignore[method-assign]


if os.environ.get("JEDICTL_TEST_NEW_PG_CONNECTIONS") != "1":
    _reuse_pg_connections()


# ------------------------------------------------------------------------------------------ stores

def pg_available() -> bool:
    if _pg_state["available"] is None:
        try:
            import psycopg

            with psycopg.connect(_libpq(PG_URL), connect_timeout=3):
                _pg_state["available"] = True
        except Exception:  # noqa: BLE001 - any failure means "not available"
            _pg_state["available"] = False
    return bool(_pg_state["available"])


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def require_pg() -> None:
    if not pg_available():
        message = f"PostgreSQL not reachable at {PG_URL}"
        if REQUIRE_PG:
            pytest.fail(message + " (JEDICTL_REQUIRE_PG=1)")
        pytest.skip(message)


@pytest.fixture
def pg_url() -> Any:
    """A fresh, empty PostgreSQL schema as a store URL; dropped after the test."""
    require_pg()
    import psycopg

    schema = f"jt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(PG_URL), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{separator}options=-csearch_path%3D{schema}"
    with psycopg.connect(_libpq(PG_URL), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_backend(request: pytest.FixtureRequest) -> str:
    """The store backend of a test that uses `store` or `store_url` (both share this parameter)."""
    return request.param


@pytest.fixture
def store_url(store_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store location on each backend (not yet initialised)."""
    if store_backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """An initialised store on each backend, at the newest revision and empty.

    Migrating a store costs ~0.1 s on SQLite and ~1 s on PostgreSQL, more than most tests: SQLite
    stores are copies of one file migrated per session, and PostgreSQL tests of one worker share one
    migrated schema that is emptied (rows deleted, sequences reset) before each test. `db init` on an
    empty store is still tested from scratch on both backends (tests/cli/test_db.py, tests/store)."""
    if "store_url" in request.fixturenames:  # a test that also names the location gets it initialised
        url = request.getfixturevalue("store_url")
        assert invoke(["db", "init", "--db", url]).exit_code == 0
        return url
    if store_backend == "sqlite":
        return request.getfixturevalue("_sqlite_template").copy_to(tmp_path / "store.db")
    require_pg()
    return request.getfixturevalue("_pg_template").fresh()


class _SqliteTemplate:
    """A SQLite store migrated once; each test gets a byte copy of the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        result = invoke(["db", "init", "--db", f"sqlite:///{path}"])
        assert result.exit_code == 0, result.stderr
        # WAL is in the header; the -wal file is gone once the last connection closed (checkpoint).
        assert not Path(f"{path}-wal").exists(), "the template store was left with an open WAL"

    def copy_to(self, target: Path) -> str:
        import shutil

        shutil.copyfile(self.path, target)
        return f"sqlite:///{target}"


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> _SqliteTemplate:
    return _SqliteTemplate(tmp_path_factory.mktemp("template") / "store.db")


class _PgTemplate:
    """One migrated PostgreSQL schema per session (and per xdist worker), emptied before each test that
    takes it after another. Emptying -- DELETE in foreign-key order and every sequence set back to its
    start, one round trip -- takes ~10 ms; TRUNCATE ... RESTART IDENTITY took ~1 s, a fresh migration ~1 s.
    If a test left the schema unlike a fresh one (a table gone, another revision), it is rebuilt."""

    def __init__(self) -> None:
        import psycopg

        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.schemas: list[str] = []
        self.conn = psycopg.connect(_libpq(PG_URL), autocommit=True)
        self.conn.execute("SET lock_timeout = '20s'")  # a test's leaked transaction must not hang the run
        self.worker = worker
        self.used = False
        self._build()

    def _build(self) -> None:
        from jedictl.store.revisions import HEAD_REVISION
        from jedictl.store.schema import metadata

        self.schema = f"jt_{self.worker}_{uuid.uuid4().hex[:8]}"
        self.schemas.append(self.schema)
        self.conn.execute(f'CREATE SCHEMA "{self.schema}"')
        separator = "&" if "?" in PG_URL else "?"
        self.url = f"{PG_URL}{separator}options=-csearch_path%3D{self.schema}"
        result = invoke(["db", "init", "--db", self.url])
        assert result.exit_code == 0, result.stderr
        present = {row[0] for row in self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_name <> 'alembic_version'",
            (self.schema,))}
        order = [table.name for table in reversed(metadata.sorted_tables) if table.name in present]
        order = sorted(present - set(order)) + order  # tables the metadata does not know come first
        sequences = self.conn.execute("SELECT sequencename, start_value FROM pg_sequences WHERE schemaname = %s",
                                      (self.schema,)).fetchall()
        self.shape = (len(present), HEAD_REVISION)
        q = f'"{self.schema}"'
        self.empty_sql = ("BEGIN;" + "".join(f'DELETE FROM {q}."{name}";' for name in order)
                          + "".join(f"SELECT setval('{q}.\"{name}\"', {start}, false);" for name, start in sequences)
                          + "COMMIT;")
        self.used = False

    def _intact(self) -> bool:
        tables = self.conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name <> 'alembic_version'",
                                   (self.schema,)).fetchone()[0]
        try:
            revisions = [row[0] for row in self.conn.execute(f'SELECT version_num FROM "{self.schema}".alembic_version')]
        except Exception:  # noqa: BLE001 - the table itself is gone
            return False
        return (tables, revisions) == (self.shape[0], [self.shape[1]])

    def fresh(self) -> str:
        import psycopg

        if self.used:
            try:
                if self._intact():
                    self.conn.execute(self.empty_sql)
                else:
                    self._build()
            except psycopg.errors.LockNotAvailable:  # a test left a transaction open on it: leave it be
                self.conn.execute("ROLLBACK")
                self._build()
        self.used = True
        return self.url

    def close(self) -> None:
        for schema in self.schemas:
            try:
                self.conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            except Exception:  # noqa: BLE001 - best effort, like a crashed run's leftovers
                pass
        self.conn.close()


@pytest.fixture(scope="session")
def _pg_template() -> Any:
    require_pg()
    template = _PgTemplate()
    yield template
    template.close()


class _PreparedStores:
    """Stores a module prepares with real commands (a demo run, a seeded grid), built once per session
    (per xdist worker) and backend, and copied for each test that asks: the preparation was most of the
    time of such tests (a demo: ~5 s on SQLite, ~10 s on PostgreSQL, for every test of
    tests/store/test_invariants.py). A SQLite copy is a byte copy of the file; a PostgreSQL copy is every
    row of the prepared schema inserted into the worker's emptied template schema (the `store` fixture's)
    and every sequence set to where the prepared one stands -- both schemas made by the same migrations."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.built: dict[tuple[str, str], str] = {}  # (backend, key) -> SQLite path or PostgreSQL schema

    def copy(self, backend: str, key: str, build: Any, target: Path, request: pytest.FixtureRequest) -> str:
        if backend == "sqlite":
            import shutil

            source = self.built.get((backend, key))
            if source is None:
                source = str(self.directory / f"{len(self.built)}.db")
                build(f"sqlite:///{source}")
                assert not Path(f"{source}-wal").exists(), "the prepared store was left with an open WAL"
                self.built[(backend, key)] = source
            shutil.copyfile(source, target)
            return f"sqlite:///{target}"
        require_pg()
        template = request.getfixturevalue("_pg_template")
        source = self.built.get((backend, key))
        if source is None:
            source = f"jt_{template.worker}_prepared_{uuid.uuid4().hex[:8]}"
            template.schemas.append(source)  # dropped with the template's schemas at the end of the session
            template.conn.execute(f'CREATE SCHEMA "{source}"')
            separator = "&" if "?" in PG_URL else "?"
            build(f"{PG_URL}{separator}options=-csearch_path%3D{source}")
            self.built[(backend, key)] = source
        url = template.fresh()
        self._copy_rows(template.conn, source, template.schema)
        return url

    @staticmethod
    def _copy_rows(conn: Any, source: str, target: str) -> None:
        from jedictl.store.schema import metadata

        def tables(schema: str) -> set[str]:
            return {row[0] for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE' "
                "AND table_name <> 'alembic_version'", (schema,))}

        def revision(schema: str) -> list[str]:
            return [row[0] for row in conn.execute(f'SELECT version_num FROM "{schema}".alembic_version')]

        present = tables(source)
        assert present == tables(target) and revision(source) == revision(target), "the prepared store is not at the template's revision"
        order = [table.name for table in metadata.sorted_tables if table.name in present]  # parents first
        order += sorted(present - set(order))
        sequences = conn.execute("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = %s AND last_value IS NOT NULL",
                                 (source,)).fetchall()
        conn.execute("BEGIN;" + "".join(f'INSERT INTO "{target}"."{name}" SELECT * FROM "{source}"."{name}";' for name in order)
                     + "".join(f"SELECT setval('\"{target}\".\"{name}\"', {value}, true);" for name, value in sequences)
                     + "COMMIT;")


@pytest.fixture(scope="session")
def _prepared_stores(tmp_path_factory: pytest.TempPathFactory) -> _PreparedStores:
    return _PreparedStores(tmp_path_factory.mktemp("prepared"))


@pytest.fixture
def prepared_store(_prepared_stores: _PreparedStores, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """`prepared_store(backend, key, build)`: a store of its own for this test, a copy of what
    `build(url)` made of an empty location (a SQLite path not yet created, an empty PostgreSQL schema),
    which runs once per session and backend for each `key`. `build` must make the same store every time
    (seeded commands), as a test cannot tell which run it gets a copy of."""

    def prepare(backend: str, key: str, build: Any) -> str:
        return _prepared_stores.copy(backend, key, build, tmp_path / "store.db", request)

    return prepare


# ------------------------------------------------------------------------------------------ broker

def mq_available() -> bool:
    if _mq_state["available"] is None:
        try:
            import pika

            parameters = pika.URLParameters(AMQP_URL)
            parameters.connection_attempts, parameters.socket_timeout, parameters.stack_timeout = 1, 3, 3
            pika.BlockingConnection(parameters).close()
            _mq_state["available"] = True
        except Exception:  # noqa: BLE001 - any failure (pika missing too) means "not available"
            _mq_state["available"] = False
    return bool(_mq_state["available"])


def require_mq() -> None:
    if not mq_available():
        from jedictl.redact import mask_url

        message = f"no AMQP broker answers at {mask_url(AMQP_URL)}"
        if REQUIRE_MQ:
            pytest.fail(message + " (JEDICTL_REQUIRE_MQ=1)")
        pytest.skip(message)


@pytest.fixture
def amqp() -> Any:
    """A broker with this test's own queues and events exchange (tests/mq.py), deleted afterwards. Tests
    that use it carry the `mq` mark."""
    require_mq()
    from tests.mq import TestBroker

    broker = TestBroker(AMQP_URL, f"jt.{uuid.uuid4().hex[:10]}")
    yield broker
    broker.remove()


# ------------------------------------------------------------------------------------------- Slurm

@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A one-node Slurm cluster for the session (tests/slurm_cluster.py), `SLURM_CONF` set for the
    clients. Without Slurm installed (or not root) the test is skipped -- unless
    `JEDICTL_REQUIRE_SLURM=1` (set by `.ci/run`), which makes that a failure. Tests that use it carry
    the `slurm` mark."""
    from tests.slurm_cluster import SlurmCluster, installed

    missing = installed()
    if missing:
        if REQUIRE_SLURM:
            pytest.fail(missing + " (JEDICTL_REQUIRE_SLURM=1)")
        pytest.skip(missing)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    saved = os.environ.get("SLURM_CONF")
    os.environ.update(cluster.env)
    yield cluster
    cluster.stop()
    if saved is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = saved


# --------------------------------------------------------------------------------------------- CLI

_COMMAND: dict[str, Any] = {}


def click_command() -> Any:
    """The Click command tree of `jedictl`, built once per session: `CliRunner.invoke(app)` converts the
    Typer app again on every call, which was half the time of a short in-process command."""
    if "root" not in _COMMAND:
        _COMMAND["root"] = typer.main.get_command(app)
    return _COMMAND["root"]


def invoke(argv: list[str], input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """`CliRunner().invoke(app, argv, catch_exceptions=False)` on the prebuilt command: the same
    isolation (stdin, separate stdout/stderr, env overrides), prog name and exit-code rules."""
    runner = CliRunner()
    command = click_command()
    return_value, exit_code, exception, exc_info = None, 0, None, None
    with runner.isolation(input=input, env=env) as (stdout, stderr, output):
        try:
            return_value = command.main(args=argv, prog_name=runner.get_default_prog_name(command))
        except SystemExit as exc:
            exc_info = sys.exc_info()
            code = 0 if exc.code is None else exc.code
            if code != 0:
                exception = exc
            if not isinstance(code, int):
                sys.stdout.write(f"{code}\n")
                code = 1
            exit_code = code
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            captured = stdout.getvalue(), stderr.getvalue(), output.getvalue()
    return Result(runner=runner, stdout_bytes=captured[0], stderr_bytes=captured[1], output_bytes=captured[2],
                  return_value=return_value, exit_code=exit_code, exception=exception, exc_info=exc_info)


class Cli:
    """Run jedictl in-process; `check` asserts the exit code and shows stderr when it differs."""

    def __call__(self, *args: str, db: str | None = None, input: str | None = None, code: int | None = 0,
                 env: dict[str, str] | None = None) -> Any:
        argv = list(args) + (["--db", db] if db else [])
        result = invoke(argv, input=input, env=env)
        if code is not None:
            assert result.exit_code == code, f"exit {result.exit_code} != {code}\nargs: {argv}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        return result

    def json(self, *args: str, db: str | None = None, input: str | None = None, env: dict[str, str] | None = None) -> Any:
        import json

        return json.loads(self(*args, "-o", "json", db=db, input=input, env=env).stdout)


@pytest.fixture
def cli() -> Cli:
    return Cli()


# ------------------------------------------------------------------------- the order of hand-out

#: Test modules run whole on one xdist worker: their module- or session-scoped preparation is long, and
#: one worker builds it once instead of every worker building its own; the Slurm modules share one
#: cluster (the `slurm_cluster` fixture starts one per worker that needs it).
ONE_WORKER_MODULES = {
    "tests/test_json_output.py": "json-output",            # the scenario every answer is taken from
    "tests/test_help.py": "help",                          # a demo store
    "tests/store/test_invariants.py": "invariants",        # a demo run per backend (prepared_store)
    "tests/fuzz/test_fuzz_postgres.py": "fuzz-postgres",   # a seeded PostgreSQL store (prepared_store)
    "tests/cli/test_task_command_table.py": "task-command-table",  # a generated task
    "tests/cli/test_harvest_slurm.py": "slurm",
    "tests/engine/harvest/test_slurm_batch.py": "slurm",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the order the tests are handed out in (`_HandOut`: one test, or one module of
    ONE_WORKER_MODULES, at a time to the worker that has run out). The README's command runs every test
    in one session on more workers than cores, so the `slow` tests -- real processes that mostly wait on
    each other, a lease or a Slurm job -- are spread over the first half of the run, each beside fast
    tests that keep the cores busy meanwhile, and are all done well before the end; the top-level
    modules (the README tour, lint-imports, the man pages: single tests of 10-30 s) come first among the
    fast ones, so that no long test is handed out last. Without xdist the order is left as collected."""
    if not hasattr(config, "workerinput"):  # xdist's workers collect; the controller hands out their order
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    fast = [item for item in items if not item.get_closest_marker("slow")]
    fast = ([item for item in fast if "/" not in item.nodeid.split("::", 1)[0][len("tests/"):]]
            + [item for item in fast if "/" in item.nodeid.split("::", 1)[0][len("tests/"):]])
    stride = len(fast) // (2 * len(slow)) if slow else 0
    order: list[pytest.Item] = []
    for index, item in enumerate(slow):
        order.append(item)
        order.extend(fast[index * stride:(index + 1) * stride])
    order.extend(fast[len(slow) * stride:])
    assert len(order) == len(items)
    items[:] = order


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N` (xdist's default `--dist load`) hands out tests with `_HandOut`; another `--dist` is xdist's."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _HandOut(LoadScopeScheduling):
        """xdist's load-by-scope scheduling with a scope per test, or per module of ONE_WORKER_MODULES,
        handed out in the workers' collection order (pytest_collection_modifyitems above): a worker that
        has two tests or fewer left gets the next unit. (xdist's `loadgroup` would do this from marks, but
        the test ids it renames are read-only since pytest 9.2, so its groups silently fall apart.)"""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return f"group:{ONE_WORKER_MODULES[module]}" if module in ONE_WORKER_MODULES else nodeid

    config.option.loadscopereorder = False  # the order above, not the biggest scope first
    return _HandOut(config, log)


# ------------------------------------------------------------------ PostgreSQL must run under CI

def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist this runs on the controller too, with every worker's reports.
    if report.when == "call" and report.passed and "postgres" in report.keywords:
        _pg_state["passed"] += 1
    if report.when == "call" and report.passed and "slurm" in report.keywords:
        _slurm_state["passed"] += 1
    if report.when == "call" and report.passed and "mq" in report.keywords:
        _mq_state["passed"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _PG_CONNECTIONS.close_all()
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker sees only its share of the tests: the controller decides
    if REQUIRE_PG and session.testscollected and _pg_state["passed"] == 0 and exitstatus == 0:
        session.config.get_terminal_writer().line("JEDICTL_REQUIRE_PG=1 but no PostgreSQL test passed", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # No message test is `slow`: a session of the slow tests alone need not pass one.
    markexpr = session.config.getoption("markexpr", "") or ""
    mq_due = session.testscollected and (markexpr.strip() != "slow")
    if REQUIRE_MQ and mq_due and _mq_state["passed"] == 0 and session.exitstatus == 0:
        session.config.get_terminal_writer().line("JEDICTL_REQUIRE_MQ=1 but no message test passed", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # The Slurm tests are all `slow` too: a session that excludes slow tests need not pass one.
    slurm_due = session.testscollected and "not slow" not in (session.config.getoption("markexpr", "") or "")
    if REQUIRE_SLURM and slurm_due and _slurm_state["passed"] == 0 and session.exitstatus == 0:
        session.config.get_terminal_writer().line("JEDICTL_REQUIRE_SLURM=1 but no Slurm test passed", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
