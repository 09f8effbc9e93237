"""`jedictl db init|upgrade|current` and the schema check every other command makes."""

from __future__ import annotations

from jedictl.store.revisions import HEAD_REVISION, REVISIONS


def test_init_creates_the_store_once(cli, store_url):
    created = cli.json("db", "init", db=store_url)
    assert (created["revision"], created["action"]) == (HEAD_REVISION, "created")
    assert cli.json("db", "init", db=store_url)["action"] == "unchanged"
    current = cli.json("db", "current", db=store_url)
    assert current == {"store": current["store"], "revision": HEAD_REVISION, "head": HEAD_REVISION, "up_to_date": True}


def test_an_older_store_is_refused_until_upgraded(cli, store_url):
    from jedictl.store.migrate import upgrade

    old = REVISIONS[0]
    upgrade(store_url, old)
    assert cli.json("db", "current", db=store_url)["revision"] == old
    for args in (["task", "list"], ["refine"], ["task", "show", "1"]):
        result = cli(*args, db=store_url, code=3)
        assert result.stderr.strip() == (
            f"jedictl: error: the store's schema is at revision {old}, this jedictl needs {HEAD_REVISION}; run `jedictl db upgrade`"
        )
    assert "run `jedictl db upgrade`" in cli("db", "init", db=store_url, code=3).stderr
    result = cli.json("db", "upgrade", db=store_url)
    assert (result["from_revision"], result["to_revision"]) == (old, HEAD_REVISION)
    assert cli.json("task", "list", db=store_url) == []


def test_upgrade_needs_an_existing_sqlite_store(cli, tmp_path):
    result = cli("db", "upgrade", db=str(tmp_path / "none.db"), code=3)
    assert "does not exist; run `jedictl db init`" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_missing_sqlite_store_is_exit_3_without_creating_it(cli, tmp_path):
    path = tmp_path / "missing.db"
    result = cli("task", "list", db=str(path), code=3)
    assert result.stderr.strip() == f"jedictl: error: store {path} does not exist; run `jedictl db init` to create it"
    assert not path.exists()


def test_unreachable_postgres_is_exit_3_with_masked_password(cli):
    result = cli("task", "list", db="postgresql+psycopg://jedi:s3cret@127.0.0.1:1/none?connect_timeout=2", code=3)
    line = result.stderr.strip()
    assert line.startswith("jedictl: error: store postgresql+psycopg://jedi:***@127.0.0.1:1/none") and "unreachable" in line
    assert "s3cret" not in result.stderr + result.stdout


def test_unsupported_backend(cli):
    result = cli("task", "list", db="mysql://root@localhost/x", code=3)
    assert "backend 'mysql' is not supported" in result.stderr


def test_unknown_revision_is_bad_input(cli, store):
    result = cli("db", "upgrade", "--revision", "9999", db=store, code=2)
    assert "--revision: unknown revision '9999'" in result.stderr


def _sql(url: str, statement: str) -> None:
    from jedictl.store.database import create_store_engine

    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    from sqlalchemy import inspect

    from jedictl.store.database import create_store_engine

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_of_a_store_of_a_newer_jedictl_is_exit_3(cli, store):
    """Alembic's "Can't locate revision" used to end as an internal error (exit 1)."""
    _sql(store, "UPDATE alembic_version SET version_num = '9999'")
    for args in (["db", "upgrade"], ["db", "upgrade", "--revision", REVISIONS[0]]):
        assert cli(*args, db=store, code=3).stderr == (
            f"jedictl: error: the store's schema revision 9999 is unknown to this jedictl (head {HEAD_REVISION}); use a newer jedictl\n")


def test_upgrade_to_a_revision_older_than_the_store_is_refused(cli, store):
    """It exited 0 and left the store at its revision: the target was silently ignored."""
    assert cli("db", "upgrade", "--revision", REVISIONS[0], db=store, code=2).stderr == (
        f"jedictl: error: --revision: the store is already at revision {HEAD_REVISION}; jedictl does not downgrade a store\n")
    assert cli.json("db", "current", db=store)["revision"] == HEAD_REVISION


def test_a_database_with_tables_but_no_revision_is_refused(cli, store_url):
    """Someone else's database got jedictl's tables next to its own; an emptied alembic_version ended
    in "table ... already exists". Both are refused, the database left as it was."""
    _sql(store_url, "CREATE TABLE theirs (x INTEGER)")
    for args in (["db", "init"], ["db", "upgrade"]):
        result = cli(*args, db=store_url, code=3)
        assert "holds tables (theirs) but no jedictl schema revision" in result.stderr and result.stderr.count("\n") == 1
    assert _tables(store_url) == {"theirs"}
    _sql(store_url, "DROP TABLE theirs")
    cli("db", "init", db=store_url)
    _sql(store_url, "DELETE FROM alembic_version")
    tables = _tables(store_url)
    assert "holds tables (" in cli("db", "init", db=store_url, code=3).stderr
    assert _tables(store_url) == tables


def test_upgrade_to_0006_records_the_outputs_of_refined_tasks(cli, store_url):
    """Migration 0006 fills task_outputs from the datasets of the tasks already refined, so a new
    submission of one of their output datasets is refused at once."""
    import json

    from alembic import command

    from jedictl.store.migrate import alembic_config
    from tests.cli.test_generate import WORKED_EXAMPLE
    from tests.helpers import run_sql

    def downgrade(conn, revision):
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    cli("db", "init", db=store_url)
    cli("submit", "-", db=store_url, input=json.dumps(WORKED_EXAMPLE))
    cli("refine", db=store_url)
    run_sql(store_url, lambda conn: downgrade(conn, "0005"))  # the store as a jedictl of 0005 left it
    cli("task", "list", db=store_url, code=3)
    assert cli.json("db", "upgrade", db=store_url)["to_revision"] == HEAD_REVISION
    rows = run_sql(store_url, lambda conn: sorted(tuple(r) for r in conn.exec_driver_sql("SELECT task_id, name FROM task_outputs")))
    assert rows == [(1, "ds.log"), (1, "ds.out")]
    result = cli("submit", "-", db=store_url, input=json.dumps({**WORKED_EXAMPLE, "taskName": "again"}), code=2)
    assert "output dataset ds.out belongs to task 1 (defined)" in result.stderr


def test_upgrade_to_0008_counts_the_tasks_already_ended_as_notified(cli, store_url):
    """docs/notifications.md: a store upgraded with tasks that ended before notifications existed mails
    none of them -- migration 0008 sets their `notified_for` to their end."""
    from datetime import datetime

    from alembic import command
    from sqlalchemy import select, update

    from jedictl.store import notifications
    from jedictl.store.migrate import alembic_config
    from jedictl.store.schema import tasks
    from tests.helpers import run_sql
    from tests.store.rows import add_task

    def downgrade(conn, revision):
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    ended = datetime(2030, 1, 1, 12)
    cli("db", "init", db=store_url)
    task_id = run_sql(store_url, lambda conn: add_task(conn, "ended.before.0008", status="done", ended_at=ended))
    run_sql(store_url, lambda conn: downgrade(conn, "0007"))
    assert cli.json("db", "upgrade", db=store_url)["to_revision"] == HEAD_REVISION
    assert run_sql(store_url, lambda conn: conn.execute(select(tasks.c.notified_for).where(tasks.c.id == task_id)).scalar_one()) == ended
    assert run_sql(store_url, lambda conn: notifications.due(conn, ended, datetime(2029, 1, 1), 10)) == []
    run_sql(store_url, lambda conn: conn.execute(update(tasks).where(tasks.c.id == task_id).values(notified_for=None)))
    assert [row.id for row in run_sql(store_url, lambda conn: notifications.due(conn, ended, datetime(2029, 1, 1), 10))] == [task_id]
