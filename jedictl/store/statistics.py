"""Planner statistics after bulk writes (PostgreSQL).

A pass can write a table many times over: a feed of 1,000,000 file records into an empty `files`,
a generate of 100,000 jobs. Until the table is analyzed, PostgreSQL's planner still takes it for
what it was -- empty -- and a claim such as dispatch's `WITH candidates AS (... LIMIT 10000 FOR UPDATE
SKIP LOCKED) UPDATE jobs ... FROM candidates WHERE jobs.id = candidates.id` is planned as a nested
loop that compares every candidate with every activated job of the site: 10,000 x 33,000 comparisons,
25 s for one `jobs dispatch` right after `generate` (measured 2026-11-28) instead of a hash join.
Autovacuum analyzes such a table eventually -- a minute after the load at best, later when its workers
are busy -- while jedictl's next command starts at once.

So a command that wrote ends by analyzing the tables whose changes since their last analysis passed
autovacuum's own rule (`autovacuum_analyze_threshold` + `autovacuum_analyze_scale_factor` x rows,
here 1,000 + 10 %): what autovacuum would do, done when it matters. ANALYZE samples a fixed number of
rows (300 x the statistics target), so it costs a fraction of a second even on a large table; it takes
a lock that only VACUUM and ANALYZE conflict with, never a reader's or writer's. Everything here is
best effort: a store that refuses it (a standby, a role that does not own the tables, autovacuum
already analyzing the table) is left alone and the command's outcome is unchanged.

SQLite needs none of this: its planner uses the indexes without statistics (jedictl never runs
ANALYZE there, so no stale sqlite_stat1 can mislead it).
"""

from __future__ import annotations

from typing import Any

#: The tables passes write in bulk, and whose plans go wrong with stale statistics.
BULK_TABLES = ("tasks", "datasets", "files", "jobs", "job_files", "event_ranges", "catalog_files", "catalog_file_replicas",
               "task_status_history", "job_masks")
#: autovacuum's rule, with a larger base: small stores (tests, demos) never pay for an ANALYZE.
MIN_CHANGES = 1_000
SCALE = 0.1
#: A table autovacuum (or another jedictl) is analyzing is being taken care of: do not wait for it.
LOCK_TIMEOUT_MS = 200

_STALE = """
SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND s.relname = ANY(%s)
  AND s.n_mod_since_analyze > %s + %s * GREATEST(c.reltuples, 0)
ORDER BY s.relname
"""


def stale_tables(conn: Any) -> list[str]:
    """The bulk tables of the connection's schema whose statistics lag their changes (PostgreSQL)."""
    return [name for (name,) in conn.exec_driver_sql(_STALE, (list(BULK_TABLES), MIN_CHANGES, SCALE)).fetchall()]


def refresh(engine: Any) -> list[str]:
    """ANALYZE the stale bulk tables of a PostgreSQL store; the tables analyzed (none on SQLite, or
    when the store refuses)."""
    if engine.dialect.name != "postgresql":
        return []
    analyzed: list[str] = []
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.exec_driver_sql(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
            if conn.connection.dbapi_connection.info.server_version >= 150000:
                # A backend hands its counts of changed rows to the shared statistics at most once a
                # second: the writes just made on this (pooled, usually the same) connection would not
                # show yet. Forced at the end of this statement's own transaction.
                conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
            for name in stale_tables(conn):
                try:
                    conn.exec_driver_sql(f'ANALYZE "{name}"')  # a name from BULK_TABLES, never input
                    analyzed.append(name)
                except Exception:  # noqa: BLE001, S112 - busy (lock timeout) or not ours: autovacuum's turn
                    continue
            conn.exec_driver_sql("RESET lock_timeout")
    except Exception:  # noqa: BLE001 - best effort: a store that refuses statistics still did the command's work
        return analyzed
    return analyzed
