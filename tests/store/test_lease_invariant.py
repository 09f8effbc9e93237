"""`jedictl check --dead-owner / --no-live-passes` and `check_all(dead_owners=, no_live_passes=)`: a lease
left behind by a process that is gone is a violation (issue 14: the checks must be able to fail). The
leftover is planted as the broken guard of defect 1 left it: a pending task, leased by a process that
has exited."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import update

from jedictl.store.invariants import check_all
from jedictl.store.schema import tasks
from tests.concurrency.test_run_overlap import evgen_task
from tests.helpers import run_sql

NOW = datetime(2030, 1, 1, 12, 0, 0)
DEAD, LIVE = "host-a:4242:9f3e1c", "host-b:77:0a1b2c"


def _plant(conn):
    from jedictl.engine.task.submission import parse_definition, register_task

    ids = [register_task(conn, parse_definition(evgen_task(n), user="u", default_user="u"), evgen_task(n), NOW, "test") for n in range(3)]
    conn.execute(update(tasks).where(tasks.c.id == ids[0]).values(status="pending", lease_owner=DEAD, lease_expires_at=NOW))
    conn.execute(update(tasks).where(tasks.c.id == ids[1]).values(lease_owner=LIVE, lease_expires_at=NOW))
    return ids


def test_a_lease_of_a_dead_process_is_a_violation(store):
    ids = run_sql(store, _plant)
    assert run_sql(store, check_all) == []  # without knowing who is dead, a lease is normal
    dead = run_sql(store, lambda conn: check_all(conn, dead_owners=[DEAD]))
    assert dead == [f"task {ids[0]} (pending) is leased by {DEAD} until {NOW}, a process that is no longer alive"]
    assert run_sql(store, lambda conn: check_all(conn, dead_owners=["host-a:4242"])) == dead  # host:pid names the process
    assert run_sql(store, lambda conn: check_all(conn, dead_owners=["host-a:424"])) == []  # not a prefix of the pid
    every = run_sql(store, lambda conn: check_all(conn, no_live_passes=True))
    assert [line.split(" ")[1] for line in every] == [str(ids[0]), str(ids[1])]


def test_check_command_takes_the_dead_owners(cli, store):
    ids = run_sql(store, _plant)
    assert cli("check", db=store).exit_code == 0
    result = cli("check", "--dead-owner", "host-x:1", "--dead-owner", DEAD, db=store, code=1)
    assert f"task {ids[0]} (pending) is leased by {DEAD}" in result.stdout and "check: 1 violations" in result.stdout
    result = cli("check", "--no-live-passes", "-o", "json", db=store, code=1)
    assert len(json.loads(result.stdout)["violations"]) == 2
