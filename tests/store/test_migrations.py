"""The shipped migrations produce exactly the declared schema, on both backends."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from jedictl.store.migrate import alembic_config, upgrade
from jedictl.store.revisions import HEAD_REVISION, REVISIONS
from jedictl.store.schema import CATALOG_TABLES, EVENT_TABLES, MESSAGE_TABLES, PERIODIC_TABLES, POST_PROCESSING_TABLES, REASSIGNMENT_TABLES, TASK_MODEL_TABLES, WMCORE_TABLES, metadata
from tests.helpers import run_sql


def test_revision_constants_match_the_scripts():
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [HEAD_REVISION]
    chain = [rev.revision for rev in script.walk_revisions()]
    assert list(reversed(chain)) == list(REVISIONS)


def test_every_table_belongs_to_one_migration_step():
    assert set(metadata.tables) == {t.name for t in TASK_MODEL_TABLES + CATALOG_TABLES + MESSAGE_TABLES + PERIODIC_TABLES + POST_PROCESSING_TABLES + REASSIGNMENT_TABLES + EVENT_TABLES + WMCORE_TABLES}


def test_migrations_equal_the_declared_schema(store_url):
    upgrade(store_url)

    def diff(conn):
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(context, metadata)

    assert run_sql(store_url, diff) == []


def test_upgrade_is_one_transaction(store_url, monkeypatch):
    """A migration that fails midway leaves the store exactly as it was (here: still empty)."""
    import pytest
    from alembic import op

    from jedictl.errors import StoreUnavailable

    real_create_table = op.create_table
    calls = {"n": 0}

    def failing_create_table(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("disk full")
        return real_create_table(*args, **kwargs)

    monkeypatch.setattr(op, "create_table", failing_create_table)
    with pytest.raises((RuntimeError, StoreUnavailable)):
        upgrade(store_url)
    monkeypatch.undo()
    from sqlalchemy import inspect

    assert run_sql(store_url, lambda conn: inspect(conn).get_table_names()) == []


def test_the_file_key_index_exists(store_url):
    """Autogenerate skips expression indexes, so check the one that guards against duplicate records."""
    upgrade(store_url)

    def definition(conn):
        if conn.dialect.name == "sqlite":  # SQLAlchemy does not reflect expression indexes on SQLite
            return conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'uq_files_key'").scalar()
        return conn.exec_driver_sql("SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_files_key'").scalar()

    text = run_sql(store_url, definition).lower()
    assert "unique" in text and "coalesce(start_event" in text.replace('"', "")
