"""store.messages on both backends: processed message ids (claim, outcome, failed attempts, forgetting),
the outbox written only by a store opened with task events, and migration 0013 undone and redone."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select

from jedictl.store import messages as message_store
from jedictl.store.database import open_store
from jedictl.store.migrate import alembic_config, upgrade
from jedictl.store.schema import message_outbox, processed_messages
from tests.helpers import run_sql

NOW = datetime(2030, 1, 1)


def test_a_message_is_claimed_once_and_failed_ones_again(store):
    opened = open_store(store)
    try:
        with opened.begin() as conn:
            assert message_store.claim(conn, "m1", "feed_task", NOW)
            message_store.settle(conn, "m1", "refused", "task 9 does not exist", NOW)
        with opened.begin() as conn:
            assert not message_store.claim(conn, "m1", "feed_task", NOW)
            assert message_store.failed_attempt(conn, "m1", "feed_task", "boom", NOW) == 0  # settled: left alone
        with opened.begin() as conn:
            assert message_store.failed_attempt(conn, "m2", "task_command", "boom", NOW) == 1
            assert message_store.failed_attempt(conn, "m2", "task_command", "boom again", NOW) == 2
        with opened.begin() as conn:
            assert message_store.claim(conn, "m2", "task_command", NOW)  # an error may be tried again
            message_store.settle(conn, "m2", "applied", None, NOW)
        with opened.read() as conn:
            row = message_store.seen(conn, "m2")
            assert (row.outcome, row.attempts) == ("applied", 2)
        with opened.begin() as conn:
            message_store.settle(conn, "m1", "refused", None, NOW - timedelta(days=8))
            assert message_store.forget_before(conn, NOW - timedelta(days=7)) == 1
        assert run_sql(store, lambda conn: conn.execute(select(processed_messages.c.message_id)).scalars().all()) == ["m2"]
    finally:
        opened.close()


def test_only_a_store_opened_with_task_events_writes_the_outbox(store):
    from jedictl.store.tasks import record_status

    def count():
        return run_sql(store, lambda conn: conn.execute(select(func.count()).select_from(message_outbox)).scalar_one())

    for task_events, expected in ((False, 0), (True, 1)):
        opened = open_store(store, task_events=task_events)
        try:
            with opened.begin() as conn:
                conn.exec_driver_sql("INSERT INTO tasks (name, user_name, vo, prod_source_label, task_type, status, current_priority, "
                                     "task_priority, options, created_at, modified_at, state_changed_at, attempt_nr) "
                                     f"VALUES ('t{expected}', 'u', 'wlcg', 'managed', 'prod', 'registered', 1, 1, '{{}}', "
                                     "'2030-01-01', '2030-01-01', '2030-01-01', 0)")
                task_id = conn.exec_driver_sql(f"SELECT id FROM tasks WHERE name = 't{expected}'").scalar_one()
                record_status(conn, task_id, "defined", "registered", "refined", "me", NOW)
            with opened.read() as conn:  # reads never write the outbox
                pass
        finally:
            opened.close()
        assert count() == expected


def test_migration_0013_is_undone_and_redone(store_url):
    from alembic import command

    def downgrade(conn, revision):
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    upgrade(store_url)
    run_sql(store_url, lambda conn: downgrade(conn, "0012"))
    tables = run_sql(store_url, lambda conn: set(conn.dialect.get_table_names(conn)))
    assert "processed_messages" not in tables and "message_outbox" not in tables and "tasks" in tables
    upgrade(store_url)
    assert {"processed_messages", "message_outbox"} <= run_sql(store_url, lambda conn: set(conn.dialect.get_table_names(conn)))
