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
    assert report.get("defined") == 12 and "skipped" not in report, report
