"""Migration 0018 (the event service): the `events` table and `tasks.use_jumbo`, undone and redone with
the tasks kept."""

from __future__ import annotations

from datetime import datetime

from alembic import command
from sqlalchemy import insert, inspect, select

from jedictl.store.migrate import alembic_config, upgrade
from jedictl.store.schema import tasks
from tests.helpers import run_sql


def _downgrade(conn, revision):
    config = alembic_config()
    config.attributes["connection"] = conn
    command.downgrade(config, revision)


def test_migration_0018_is_undone_and_redone(store_url):
    upgrade(store_url)
    now = datetime(2026, 1, 1)
    run_sql(store_url, lambda conn: conn.execute(insert(tasks).values(
        name="kept", user_name="u", vo="wlcg", prod_source_label="managed", task_type="prod", status="running", options={},
        created_at=now, modified_at=now, state_changed_at=now, use_jumbo=True)))
    run_sql(store_url, lambda conn: _downgrade(conn, "0017"))
    assert "events" not in run_sql(store_url, lambda conn: set(inspect(conn).get_table_names()))
    assert "use_jumbo" not in {c["name"] for c in run_sql(store_url, lambda conn: inspect(conn).get_columns("tasks"))}
    upgrade(store_url)
    assert "events" in run_sql(store_url, lambda conn: set(inspect(conn).get_table_names()))
    assert run_sql(store_url, lambda conn: conn.execute(select(tasks.c.name, tasks.c.use_jumbo)).all()) == [("kept", None)]
