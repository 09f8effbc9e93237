"""Ctrl-C and SIGTERM in the middle of a pass (issue 14, defect 2): the process gives back every lease
its pass holds before exiting 130 / 143, so the next run takes those tasks at once instead of skipping
them for the lease time (10 minutes). A real process, made slow at a known moment by a test hook
(tests/hooks: each task waits 30 s before it is handled, and a file says when the pass holds leases)."""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import func, select

from jedictl.store.schema import tasks
from tests.concurrency.test_run_overlap import prepare
from tests.helpers import hooked_env, jedictl_process, run_sql


def _leased(conn):
    return conn.execute(select(func.count()).where(tasks.c.lease_owner.is_not(None))).scalar_one()


@pytest.mark.slow
@pytest.mark.parametrize("command, signum", [(["run", "--once"], signal.SIGINT), (["refine"], signal.SIGTERM)],
                         ids=["run-SIGINT", "refine-SIGTERM"])
def test_a_signal_mid_pass_releases_the_leases_of_the_pass(store_url, tmp_path, cli, signum, command):
    prepare(store_url, n_tasks=12)
    holding = tmp_path / "holding"
    worker = jedictl_process([*command, "--db", store_url, "-q"], env=hooked_env(slow_task="30", holding=str(holding)))
    deadline = time.monotonic() + 60
    while not holding.exists():
        assert worker.poll() is None and time.monotonic() < deadline, worker.communicate()
        time.sleep(0.05)
    assert run_sql(store_url, _leased) == 10  # the refiner's first batch (refine.claim_batch), mid-pass
    worker.send_signal(signum)
    _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 128 + signum, stderr
    assert f"stopped by {signal.Signals(signum).name}; 10 task leases released" in stderr
    assert run_sql(store_url, _leased) == 0
    # The next run takes them at once: every task refined, none skipped for a lease.
    report = cli.json("refine", db=store_url)
    assert report["counts"]["defined"] == 12 and report["counts"]["skipped"] == 0, report


@pytest.mark.slow
@pytest.mark.postgres
def test_a_signal_while_the_server_runs_a_statement_still_releases_the_leases(pg_url, tmp_path, cli):
    """The signal lands while psycopg waits for PostgreSQL (a statement of 30 s): the statement is
    cancelled, its transaction rolled back, and the leases released -- not left for the lease time
    because the interrupted connection could not be rolled back."""
    prepare(pg_url, n_tasks=12)
    holding = tmp_path / "holding"
    worker = jedictl_process(["refine", "--db", pg_url, "-q"], env=hooked_env(slow_query="30", holding=str(holding)))
    deadline = time.monotonic() + 60
    while not holding.exists():
        assert worker.poll() is None and time.monotonic() < deadline, worker.communicate()
        time.sleep(0.05)
    time.sleep(0.5)  # inside pg_sleep now
    started = time.monotonic()
    worker.send_signal(signal.SIGINT)
    _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 130, stderr
    assert time.monotonic() - started < 10, "the statement was not cancelled"
    assert "stopped by SIGINT; 10 task leases released" in stderr, stderr
    assert run_sql(pg_url, _leased) == 0


def test_a_signal_replaced_by_an_error_while_unwinding_is_still_a_stop():
    """If rolling back the interrupted connection fails, the stop is still recognised (and the leases
    released) through the error's context."""
    from jedictl.signals import Interrupted, stopped_by

    try:
        try:
            raise Interrupted(signal.SIGTERM)
        except Interrupted:
            raise RuntimeError("rollback failed on the interrupted connection")  # noqa: B904 - the context is the point
    except RuntimeError as replaced:
        stop = stopped_by(replaced)
    assert stop is not None and stop.exit_code == 143
    assert stopped_by(ValueError("plain")) is None
