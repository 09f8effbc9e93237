"""Two agents racing for the global queue on PostgreSQL, as real processes (issue 21, item 3; docs/queue-layers.md):
both read the same Available elements before either claims (a test hook holds them there), and each claim
is one guarded statement (FOR UPDATE SKIP LOCKED), so they take disjoint elements -- and, pass after pass,
as many as their free slots allow: 30 for the agent with 30 slots, 10 for the one with 10. With the guard
broken, `jedictl check` finds the elements both took."""

from __future__ import annotations

import json

import pytest

from tests.helpers import hooked_env, jedictl_processes_together
from tests.workqueue_setup import NOW, agent, catalog, grid, statuses, submit

pytestmark = pytest.mark.parametrize("store_backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])

N_BLOCKS = 60


def _queue(cli, store, tmp_path) -> None:
    grid(cli, store, tmp_path, catalog(n_blocks=N_BLOCKS, last_at=("SITE_A", "SITE_B")))
    submit(cli, store, nFilesPerJob=6)  # one job per element
    agent(cli, store, "agentA", "SITE_A", pending=20, running=10)  # 30 slots
    agent(cli, store, "agentB", "SITE_B", pending=5, running=5)  # 10 slots


def _race(store, tmp_path, **hooks: str) -> list[dict]:
    args = [["workqueue", "acquire", "--agent", name, "--db", store, "--now", NOW, "--seed", "1", "-o", "json"] for name in ("agentA", "agentB")]
    workers = jedictl_processes_together(args, tmp_path, env=hooked_env(slow_workqueue="1.0", **hooks))
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        reports.append(json.loads(out))
    return reports


def _acquired(report: dict) -> set[int]:
    return {item["element"] for item in report["items"] if item["outcome"] == "acquired"}


@pytest.mark.slow
def test_two_agents_take_disjoint_elements_in_proportion_to_their_free_slots(cli, store, tmp_path):
    _queue(cli, store, tmp_path)
    first = _race(store, tmp_path)
    a, b = _acquired(first[0]), _acquired(first[1])
    assert not a & b
    # Both read the same head of the queue: whoever claimed an element second was refused it -- the race was real.
    assert first[0]["counts"]["taken"] + first[1]["counts"]["taken"] > 0
    for _ in range(3):  # further passes fill what the lost races left free
        later = _race(store, tmp_path)
        a |= _acquired(later[0])
        b |= _acquired(later[1])
    assert not a & b
    assert (len(a), len(b)) == (30, 10)  # their free slots: 30 and 10 jobs of one-job elements
    held = statuses(cli, store)
    assert {e for e, (_, who) in held.items() if who == "agentA"} == a
    assert {e for e, (_, who) in held.items() if who == "agentB"} == b
    assert sum(1 for status, _ in held.values() if status == "Available") == N_BLOCKS - 40
    assert cli("check", db=store).stdout == "check: consistent\n"


@pytest.mark.slow
def test_check_catches_elements_both_agents_took_when_the_claim_is_unguarded(cli, store, tmp_path):
    _queue(cli, store, tmp_path)
    reports = _race(store, tmp_path, break_guard="workqueue")
    both = _acquired(reports[0]) & _acquired(reports[1])
    assert both  # without the guard the second claim of an element succeeds too
    verdict = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    found = {v["object"] for v in verdict["violations"] if v["check"] == "workqueue_elements_follow_their_agents"
             and "by agents agentA, agentB" in v["message"]}
    assert found == {f"work-queue element {e}" for e in both}
