"""store/statistics.py: a command that wrote a table many times over leaves it analyzed on PostgreSQL,
so the next command's claims are planned on the table as it is (a dispatch right after a generate was
a nested loop over every candidate and every job); nothing happens on SQLite or for small writes."""

from __future__ import annotations

import pytest
from sqlalchemy import insert

from jedictl.store import statistics
from jedictl.store.database import open_store
from jedictl.store.schema import jobs
from tests.store.rows import T0, add_task


def _write_jobs(store, n: int) -> None:
    with store.begin() as conn:
        task_id = add_task(conn, "t")
        conn.execute(insert(jobs), [{"task_id": task_id, "task_job_index": i, "status": "activated", "site": "CERN", "created_at": T0,
                                     "modified_at": T0, "state_changed_at": T0} for i in range(n)])


def _last_analyze(store, table: str):
    with store.read() as conn:
        return conn.exec_driver_sql("SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = %s",
                                    (table,)).scalar_one()


@pytest.mark.postgres
def test_a_store_written_in_bulk_is_analyzed_once_when_the_command_closes_it(pg_url):
    from tests.conftest import invoke

    assert invoke(["db", "init", "--db", pg_url]).exit_code == 0
    store = open_store(pg_url)
    try:
        _write_jobs(store, statistics.MIN_CHANGES + 500)
        assert _last_analyze(store, "jobs") is None
        assert "jobs" in store.refresh_statistics()
        assert _last_analyze(store, "jobs") is not None
        with store.read() as conn:
            assert "jobs" not in statistics.stale_tables(conn)  # its statistics now match it
        assert store.refresh_statistics() == []  # nothing written since: not even the look
    finally:
        store.close()


@pytest.mark.postgres
def test_small_writes_leave_the_statistics_to_autovacuum(pg_url):
    from tests.conftest import invoke

    assert invoke(["db", "init", "--db", pg_url]).exit_code == 0
    store = open_store(pg_url)
    try:
        _write_jobs(store, 50)
        assert store.refresh_statistics() == []
        assert _last_analyze(store, "jobs") is None
    finally:
        store.close()


def test_sqlite_stores_are_never_analyzed(tmp_path):
    from tests.conftest import invoke

    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert invoke(["db", "init", "--db", url]).exit_code == 0
    store = open_store(url)
    try:
        _write_jobs(store, statistics.MIN_CHANGES + 500)
        assert store.refresh_statistics() == []
        with store.read() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'").scalar_one() == 0
    finally:
        store.close()


@pytest.mark.postgres
def test_a_command_that_wrote_in_bulk_exits_with_its_tables_analyzed(pg_url, cli):
    """Through the CLI: `data import` of a dataset of 1,500 files leaves catalog_files analyzed; the
    command's output and exit code are its own."""
    import json

    cli("db", "init", db=pg_url)
    files = [{"lfn": f"f{i:05d}.root", "size": 1000 + i} for i in range(statistics.MIN_CHANGES + 500)]
    cli("data", "import", "-", db=pg_url, input=json.dumps({"datasets": [{"name": "user.alice.big", "files": files}]}))
    store = open_store(pg_url)
    try:
        assert _last_analyze(store, "catalog_files") is not None
        assert _last_analyze(store, "jobs") is None  # not written: left alone
    finally:
        store.close()
