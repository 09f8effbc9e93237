"""Migration 0015 (lost-file recovery): undone and redone with the data catalog kept -- a catalog file's
replicas survive it (a rebuild of catalog_files on SQLite would have cascaded to them)."""

from __future__ import annotations

from jedictl.store.migrate import alembic_config, upgrade
from tests.helpers import run_sql


def test_migration_0015_is_undone_and_redone_with_the_catalog_kept(store_url):
    from alembic import command

    def downgrade(conn, revision):
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    def fill(conn):
        conn.exec_driver_sql("INSERT INTO storage_endpoints (name, kind, free_gb, total_gb, blacklisted_read, blacklisted_write, attributes, modified_at) VALUES ('DISK', 'disk', 0, 0, FALSE, FALSE, '{}', '2030-01-01')")
        conn.exec_driver_sql("INSERT INTO catalog_datasets (name, kind, state, attributes, created_at, modified_at) "
                             "VALUES ('ds', 'dataset', 'closed', '{}', '2030-01-01', '2030-01-01')")
        conn.exec_driver_sql("INSERT INTO catalog_files (dataset_id, lfn, created_at) SELECT id, 'a.root', '2030-01-01' FROM catalog_datasets")
        conn.exec_driver_sql("INSERT INTO catalog_file_replicas (file_id, endpoint) SELECT id, 'DISK' FROM catalog_files")

    upgrade(store_url, "0014")
    run_sql(store_url, fill)
    upgrade(store_url)
    assert run_sql(store_url, lambda conn: conn.exec_driver_sql("SELECT lfn, availability FROM catalog_files").all()) == [("a.root", "available")]
    run_sql(store_url, lambda conn: downgrade(conn, "0014"))
    tables = run_sql(store_url, lambda conn: set(conn.dialect.get_table_names(conn)))
    assert "recoveries" not in tables and "recovered_files" not in tables
    assert run_sql(store_url, lambda conn: conn.exec_driver_sql("SELECT count(*) FROM catalog_file_replicas").scalar()) == 1
    upgrade(store_url)
    assert {"recoveries", "recovered_files"} <= run_sql(store_url, lambda conn: set(conn.dialect.get_table_names(conn)))
    assert run_sql(store_url, lambda conn: conn.exec_driver_sql("SELECT count(*) FROM catalog_file_replicas").scalar()) == 1
