"""Opening a store: one SQLAlchemy engine with the dialect settings each backend needs.

SQLite (the embedded default): WAL, foreign keys, a busy timeout, and every write transaction started
with `BEGIN IMMEDIATE`, so two agents serialise on the write lock up front instead of failing at commit
(Python 3.11's sqlite3 otherwise begins lazily and never before a SELECT). Read-only work opens a
deferred transaction and does not take the write lock, and never writes: WAL mode (a change to the
file's header) is asked for only before a write transaction, so a read command leaves a file that is
not a store -- an empty one, someone else's database -- byte for byte as it was.

A store that refuses writes (a SQLite file or directory without write permission, a PostgreSQL
read-only transaction or a role without the privilege) is a store problem: StoreUnavailable (exit 3)
with one line naming the file or the store and what is missing, never a driver's error with its SQL.

PostgreSQL: psycopg 3. Safety under concurrency comes from guarded UPDATEs and `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterator

from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import QueuePool

from jedictl.errors import SchemaMismatch, StoreUnavailable
from jedictl.redact import mask_url
from jedictl.store.revisions import HEAD_REVISION, REVISIONS

_READ_ONLY = "jedictl_read_only"
#: The connection option that makes status changes write the outbox of task events (store.messages).
TASK_EVENTS = "jedictl_task_events"
_WAL_CHECKED = "jedictl_wal_checked"


def sqlite_path(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


@dataclass
class Store:
    """An open store. `begin()` for work that writes, `read()` for work that only reads."""

    engine: Engine
    url: str
    #: Status changes written through `begin()` also go to the outbox of task events (a broker is
    #: configured: docs/messages.md). A connection option, read by store.messages.queue_status_events.
    task_events: bool = False
    #: Whether this process wrote through `begin()` since the last `refresh_statistics`.
    wrote: bool = False

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        self.wrote = True
        with self.engine.begin() as conn:
            if self.task_events:
                conn.execution_options(**{TASK_EVENTS: True})
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{_READ_ONLY: True})
            with conn.begin():
                yield conn

    def refresh_statistics(self) -> list[str]:
        """After writes, ANALYZE the PostgreSQL tables they made stale (store.statistics); the tables."""
        if not self.wrote or self.dialect != "postgresql":
            return []
        from jedictl.store.statistics import refresh

        self.wrote = False
        return refresh(self.engine)

    def close(self) -> None:
        """Dispose of the engine; a store this process wrote gets its planner statistics first."""
        self.refresh_statistics()
        self.engine.dispose()


def parse_store_url(url: str) -> URL:
    """The parsed store URL; StoreUnavailable (never the URL's password) when it cannot be read."""
    authority = url.split("://", 1)[1].split("/", 1)[0] if "://" in url else ""
    if authority.count("@") > 1:  # the driver would take part of the password for the host, and say so
        raise StoreUnavailable(f"store URL {mask_url(url)!r} is not valid: write an @ in the password as %40")
    try:
        return make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise StoreUnavailable(f"store URL {mask_url(url)!r} is not valid: {mask_url(str(exc))}") from None


def create_store_engine(url: str, busy_timeout_s: float = 60.0, foreign_keys: bool = True) -> Engine:
    """An engine with jedictl's per-dialect settings; raises StoreUnavailable on a bad URL."""
    parsed = parse_store_url(url)
    backend = parsed.get_backend_name()
    try:
        # One connection kept for the life of the process (a few more if a pass nests a read in a
        # write): a pass commits many short transactions, and reconnecting for each threw away
        # SQLite's page cache and paid a WAL checkpoint or a PostgreSQL login every time.
        if backend == "sqlite":
            engine = create_engine(parsed, poolclass=QueuePool, pool_size=1, max_overflow=4)
            _configure_sqlite(engine, busy_timeout_s, foreign_keys)
        elif backend == "postgresql":
            engine = create_engine(parsed, poolclass=QueuePool, pool_size=1, max_overflow=4, pool_pre_ping=True)
        else:
            raise StoreUnavailable(f"store URL {mask_url(url)!r}: backend {backend!r} is not supported (use sqlite or postgresql)")
    except NoSuchModuleError as exc:
        raise StoreUnavailable(f"store URL {mask_url(url)!r}: driver not installed ({exc}); pip install 'jedictl[postgres]'") from exc
    except ModuleNotFoundError as exc:
        raise StoreUnavailable(f"store URL {mask_url(url)!r}: driver not installed ({exc.name}); pip install 'jedictl[postgres]'") from exc
    _report_refused_writes(engine, url, parsed)
    return engine


#: SQLSTATEs of a PostgreSQL store that refuses this process's writes: a read-only transaction (a hot
#: standby, `default_transaction_read_only`), missing privileges.
_PG_REFUSED = {"25006": "is read-only", "42501": "refuses this role"}


def _report_refused_writes(engine: Engine, url: str, parsed: URL) -> None:
    """Errors of a store that cannot be written (or, for SQLite, opened) become StoreUnavailable."""

    @event.listens_for(engine, "handle_error")
    def _on_error(context) -> None:  # noqa: ANN001 - sqlalchemy.engine.ExceptionContext
        problem = refused_write(context.original_exception, url, parsed)
        if problem is not None:
            raise StoreUnavailable(problem) from context.sqlalchemy_exception


def refused_write(error: BaseException, url: str, parsed: URL) -> str | None:
    """The one line for a driver error that says the store cannot be written; None for any other error."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    path = sqlite_path(parsed)
    if isinstance(error, sqlite3.Error):
        name = getattr(error, "sqlite_errorname", "") or ""
        readonly = name.startswith("SQLITE_READONLY") or "readonly database" in message
        cannot_open = name.startswith("SQLITE_CANTOPEN") or "unable to open database file" in message
        if not (readonly or cannot_open):
            return None
        where = str(path) if path is not None else mask_url(url)
        return f"store {where} {'is read-only' if readonly else 'cannot be opened'}: {_missing_permission(path, message)}"
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate in _PG_REFUSED:
        return f"store {mask_url(url)} {_PG_REFUSED[sqlstate]}: {mask_url(message)}"
    return None


def _missing_permission(path: Path | None, message: str) -> str:
    """What keeps SQLite from writing `path`: the file's permission, its directory's, or SQLite's words."""
    if path is None:
        return message
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return "it is a directory, not a file"
    if path.exists() and not os.access(path, os.W_OK):
        return "no write permission on the file"
    if not os.access(directory, os.W_OK):
        return f"no write permission on its directory {directory} (SQLite keeps its -wal and -shm files there)"
    for suffix in ("-wal", "-shm"):
        companion = Path(f"{path}{suffix}")
        if companion.exists() and not os.access(companion, os.W_OK):
            return f"no write permission on {companion}"
    return message


@functools.lru_cache(maxsize=4096)  # a pass writes the same few `now`s on thousands of rows
def _sqlite_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


# Bulk paths hand tuples straight to the driver (store.bulk). Times must then be written exactly as
# SQLAlchemy's DateTime writes them, microseconds always present: SQLite compares times as text, and
# the driver's own default ('2026-11-21 12:00:00', deprecated since Python 3.12) sorts before
# '2026-11-21 12:00:00.000000'.
sqlite3.register_adapter(datetime, _sqlite_time)


def _configure_sqlite(engine: Engine, busy_timeout_s: float, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # noqa: ANN001 - DBAPI types
        # Take transaction control away from the driver; `_on_begin` issues BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        cursor.execute(f"PRAGMA foreign_keys = {'ON' if foreign_keys else 'OFF'}")
        cursor.execute("PRAGMA synchronous = NORMAL")
        # The default 2 MB page cache thrashes once the file table's indexes outgrow it (a 1M-file
        # task); 64 MB is allocated lazily, so small stores and short commands pay nothing for it.
        cursor.execute("PRAGMA cache_size = -65536")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(_READ_ONLY):
            conn.exec_driver_sql("BEGIN DEFERRED")
            return
        # WAL is kept in the file's header: set once, by the first writer (`db init` for a new store),
        # and never by a reader -- on an empty file that alone wrote a 4 KiB header.
        info = conn.connection.info
        if not info.get(_WAL_CHECKED):
            conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            info[_WAL_CHECKED] = True
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def open_store(url: str, busy_timeout_s: float = 60.0, check_schema: bool = True, task_events: bool = False) -> Store:
    """Open an existing store and refuse it unless its schema is at this program's revision; with
    `task_events`, its status changes are queued for publishing (store.messages)."""
    parsed = parse_store_url(url) if "://" in url else None
    if parsed is not None:
        path = sqlite_path(parsed)
        if path is not None and not path.exists():
            raise StoreUnavailable(f"store {path} does not exist; run `jedictl db init` to create it")
    engine = create_store_engine(url, busy_timeout_s)
    store = Store(engine=engine, url=url, task_events=task_events)
    if check_schema:
        current = current_revision(store)
        check_revision(current)
    return store


def current_revision(store: Store) -> str | None:
    """The store's schema revision, None for an empty store. Raises StoreUnavailable when unreachable."""
    try:
        with store.read() as conn:
            if not _has_table(conn, "alembic_version"):
                return None
            row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
            return row[0] if row else None
    except DBAPIError as exc:
        raise StoreUnavailable(f"store {mask_url(store.url)} is unreachable: {_first_line(exc)}") from exc


def check_revision(current: str | None) -> None:
    if current == HEAD_REVISION:
        return
    if current is None:
        raise SchemaMismatch("the store is not initialised; run `jedictl db init`")
    if current in REVISIONS:
        raise SchemaMismatch(
            f"the store's schema is at revision {current}, this jedictl needs {HEAD_REVISION}; run `jedictl db upgrade`"
        )
    raise SchemaMismatch(
        f"the store's schema revision {current} is unknown to this jedictl (head {HEAD_REVISION}); use a newer jedictl"
    )


def _has_table(conn: Connection, name: str) -> bool:
    from sqlalchemy import inspect

    return inspect(conn).has_table(name)


def _first_line(exc: BaseException) -> str:
    message = str(getattr(exc, "orig", exc) or exc).strip()
    return mask_url(message.splitlines()[0] if message else type(exc).__name__)
