"""Migration 0014 (periodic templates) undone and redone on both backends, the tasks kept with their rows."""

from __future__ import annotations

from sqlalchemy import inspect

from jedictl.store.migrate import alembic_config, upgrade
from tests.helpers import run_sql


def test_migration_0014_is_undone_and_redone_keeping_the_tasks(store_url):
    from alembic import command

    def downgrade(conn, revision):
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    upgrade(store_url)
    run_sql(store_url, lambda conn: conn.exec_driver_sql(
        "INSERT INTO tasks (name, user_name, vo, prod_source_label, task_type, status, current_priority, task_priority, options, "
        "created_at, modified_at, state_changed_at, attempt_nr, periodic_id, periodic_due_at) VALUES ('hc.x.20300101T0000', 'u', "
        "'wlcg', 'test', 'prod', 'registered', 1, 1, '{}', '2030-01-01', '2030-01-01', '2030-01-01', 0, 7, '2030-01-01')"))
    run_sql(store_url, lambda conn: downgrade(conn, "0013"))

    def shape(conn):
        found = inspect(conn)
        return (set(found.get_table_names()), {c["name"] for c in found.get_columns("tasks")},
                conn.exec_driver_sql("SELECT name FROM tasks").scalars().all())

    tables, columns, names = run_sql(store_url, shape)
    assert "periodic_templates" not in tables and not {"periodic_id", "periodic_due_at"} & columns
    assert names == ["hc.x.20300101T0000"]
    upgrade(store_url)
    tables, columns, names = run_sql(store_url, shape)
    assert "periodic_templates" in tables and {"periodic_id", "periodic_due_at"} <= columns and names == ["hc.x.20300101T0000"]
