"""Schema migrations, driven from `jedictl db ...` with no alembic.ini: the scripts ship in the package.

An upgrade runs in one transaction (SQLite with BEGIN IMMEDIATE and transactional DDL; PostgreSQL under
an advisory lock), so a failed or killed upgrade leaves the store as it was and two concurrent upgrades
do not both apply the same step.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect
from sqlalchemy.exc import DBAPIError

from jedictl.errors import BadInput, SchemaMismatch, StoreUnavailable
from jedictl.redact import mask_url
from jedictl.store.database import Store, create_store_engine, parse_store_url, sqlite_path
from jedictl.store.revisions import HEAD_REVISION, REVISIONS

#: Arbitrary constant naming jedictl's migration lock on PostgreSQL.
ADVISORY_LOCK_KEY = 0x6A656469


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", "jedictl.store:migrations")
    return config


def script_heads() -> tuple[str, ...]:
    return tuple(ScriptDirectory.from_config(alembic_config()).get_heads())


def upgrade(url: str, revision: str = "head", busy_timeout_s: float = 60.0, create: bool = True) -> None:
    """Bring the store to `revision`; create the SQLite file when `create`."""
    if revision != "head" and revision not in REVISIONS:
        raise BadInput(f"unknown revision {revision!r} (known: {', '.join(REVISIONS)})", "--revision")
    path = sqlite_path(parse_store_url(url))
    if path is not None:
        if not path.exists() and not create:
            raise StoreUnavailable(f"store {path} does not exist; run `jedictl db init` to create it")
        path.parent.mkdir(parents=True, exist_ok=True)
    # SQLite batch migrations copy tables, which needs foreign keys off for the whole connection.
    engine = create_store_engine(url, busy_timeout_s, foreign_keys=False)
    config = alembic_config()
    try:
        # First in a read: a database that is refused (someone else's) is left byte for byte as it was
        # -- a write transaction on SQLite would already have turned on WAL in its header.
        with Store(engine=engine, url=url).read() as conn:
            check_upgrade(conn, url, revision)
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({ADVISORY_LOCK_KEY})")
            check_upgrade(conn, url, revision)
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
    except DBAPIError as exc:
        message = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise StoreUnavailable(f"store {mask_url(url)}: {mask_url(message)}") from exc
    finally:
        engine.dispose()


def check_upgrade(conn: Connection, url: str, revision: str) -> None:
    """Refuse what Alembic would do wrong or report as a crash: a store of a newer jedictl ("Can't
    locate revision"), a target older than the store (silently ignored), and a database that holds
    tables but no revision (someone else's, or an emptied `alembic_version`: the schema would be
    created next to them, or fail half-way on "table already exists")."""
    tables = set(inspect(conn).get_table_names())
    current = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() if "alembic_version" in tables else None
    if current is None:
        others = sorted(tables - {"alembic_version"})
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise SchemaMismatch(f"store {mask_url(url)} holds tables ({shown}) but no jedictl schema revision; "
                                 f"give jedictl an empty database or one of its own stores")
        return
    if current not in REVISIONS:
        raise SchemaMismatch(f"the store's schema revision {current} is unknown to this jedictl (head {HEAD_REVISION}); use a newer jedictl")
    if revision != "head" and REVISIONS.index(current) > REVISIONS.index(revision):
        raise BadInput(f"the store is already at revision {current}; jedictl does not downgrade a store", "--revision")
