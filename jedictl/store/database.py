"""Opening a store: one SQLAlchemy engine with the dialect settings each backend needs.

SQLite (the embedded default): WAL, foreign keys, a busy timeout, and every write transaction started
with `BEGIN IMMEDIATE`, so two agents serialise on the write lock up front instead of failing at commit
(Python 3.11's sqlite3 otherwise begins lazily and never before a SELECT). Read-only work opens a
deferred transaction and does not take the write lock.

PostgreSQL: psycopg 3. Safety under concurrency comes from guarded UPDATEs and `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

import contextlib
import functools
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


def sqlite_path(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


@dataclass
class Store:
    """An open store. `begin()` for work that writes, `read()` for work that only reads."""

    engine: Engine
    url: str

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{_READ_ONLY: True})
            with conn.begin():
                yield conn

    def close(self) -> None:
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
    return engine


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
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        # The default 2 MB page cache thrashes once the file table's indexes outgrow it (a 1M-file
        # task); 64 MB is allocated lazily, so small stores and short commands pay nothing for it.
        cursor.execute("PRAGMA cache_size = -65536")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = "DEFERRED" if conn.get_execution_options().get(_READ_ONLY) else "IMMEDIATE"
        conn.exec_driver_sql(f"BEGIN {mode}")


def open_store(url: str, busy_timeout_s: float = 60.0, check_schema: bool = True) -> Store:
    """Open an existing store and refuse it unless its schema is at this program's revision."""
    parsed = parse_store_url(url) if "://" in url else None
    if parsed is not None:
        path = sqlite_path(parsed)
        if path is not None and not path.exists():
            raise StoreUnavailable(f"store {path} does not exist; run `jedictl db init` to create it")
    engine = create_store_engine(url, busy_timeout_s)
    store = Store(engine=engine, url=url)
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
