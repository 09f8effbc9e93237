"""`agents remove` against `workqueue acquire --agent` of the same agent (docs/queue-layers.md): removal and
acquisition are exclusive -- both lock the agent's row, a claim shared and a removal alone -- so an element
never ends held by an agent that no longer exists. Real jedictl processes against a second connection that
holds the other side open, at each moment the two can meet."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from sqlalchemy import text

from jedictl.store import workqueue as wq
from jedictl.store.database import create_store_engine
from jedictl.store.invariants import check_all
from tests.helpers import hooked_env, jedictl_process, run_sql
from tests.workqueue_setup import NOW, agent, grid, statuses, submit

POSTGRESQL = pytest.mark.parametrize("store_backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])


def _queue(cli, store, tmp_path) -> None:
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)


def _wait(done, process, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def _no_element_of_a_removed_agent(cli, store) -> None:
    agents = {row["agent"] for row in cli.json("agents", "list", db=store)}
    assert all(who is None or who in agents for _status, who in statuses(cli, store).values())
    assert run_sql(store, check_all) == []


def test_an_agent_removed_after_its_pass_read_the_queue_takes_no_element(cli, store, tmp_path):
    """The pass has read its agent and the global queue; the agent is removed; then the pass claims."""
    _queue(cli, store, tmp_path)
    decided, resume = tmp_path / "decided", tmp_path / "resume"
    process = jedictl_process(["workqueue", "acquire", "--agent", "agentA", "--db", store, "--now", NOW, "--seed", "1"],
                              env=hooked_env(slow_workqueue="60", decided=str(decided), resume=str(resume)))
    _wait(decided.exists, process)
    assert decided.exists(), process.communicate()
    assert cli("agents", "remove", "agentA", db=store).exit_code == 0  # it holds nothing yet
    resume.touch()
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 1 and err.strip() == "jedictl: error: agent 'agentA' was removed during the pass: it takes no element"
    assert set(statuses(cli, store).values()) == {("Available", None)}
    _no_element_of_a_removed_agent(cli, store)


def _blocked_by(store, pid: int):
    def blocked() -> bool:
        return bool(run_sql(store, lambda conn: conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"), {"pid": pid}).scalar_one()))
    return blocked


@POSTGRESQL
def test_a_removal_waits_for_a_claim_in_progress_and_then_refuses(cli, store, tmp_path):
    _queue(cli, store, tmp_path)
    engine = create_store_engine(store)
    try:
        with engine.connect() as conn:
            transaction = conn.begin()
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            assert wq.claim_element(conn, 1, "agentA", "SITE_A", "test", datetime(2030, 3, 1, 8))
            process = jedictl_process(["agents", "remove", "agentA", "--db", store])
            _wait(_blocked_by(store, pid), process)
            assert process.poll() is None, process.communicate()  # waiting for the claim's transaction
            transaction.commit()
    finally:
        engine.dispose()
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "agent agentA holds 1 work-queue elements" in err
    assert statuses(cli, store)[1] == ("Negotiating", "agentA")
    _no_element_of_a_removed_agent(cli, store)


@POSTGRESQL
def test_a_claim_waits_for_a_removal_in_progress_and_then_takes_nothing(cli, store, tmp_path):
    _queue(cli, store, tmp_path)
    engine = create_store_engine(store)
    try:
        with engine.connect() as conn:
            transaction = conn.begin()
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            wq.remove_agent(conn, "agentA")
            process = jedictl_process(["workqueue", "acquire", "--agent", "agentA", "--db", store, "--now", NOW, "--seed", "1"])
            _wait(_blocked_by(store, pid), process)
            assert process.poll() is None, process.communicate()  # its claim waits for the removal's transaction
            transaction.commit()
    finally:
        engine.dispose()
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 1 and "agent 'agentA' was removed during the pass" in err
    assert set(statuses(cli, store).values()) == {("Available", None)}
    _no_element_of_a_removed_agent(cli, store)
