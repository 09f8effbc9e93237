"""The chaos test in short (issue 10; the full run is `bench/chaos.py`): `jedictl run --loop` and
`jedictl simulate --loop` processes SIGKILLed at random moments and restarted, then the system settles
with the clock past every lease and job timeout, and every invariant holds -- no file in two live jobs,
every counter equal to its rows, every task final, no lease left after a watch pass, a consistent
retry history, nothing lost, nothing done twice. Issue 14 added a plain cron round first (concurrent
`run --once` with default settings: every run exits 0, and once they exit no lease is left and every
task's history is a chain), files appended to re-opened datasets and `task incexec` while the chaos
runs, the lease checks of `check --dead-owner` / `--no-live-passes`, and a run with a lease guard
deliberately broken that the checks must catch.

About a minute on both backends: ~25 s of chaos on PostgreSQL with four `run` processes, ~15 s on
SQLite with two; the settling and the checks take the rest."""

from __future__ import annotations

import pytest

from bench.chaos import report, run_chaos


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_killed_agents_and_pilots_lose_nothing_and_do_nothing_twice(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'chaos.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    seconds, workers = (20, 2) if backend == "sqlite" else (25, 4)
    lines: list[str] = []
    result = run_chaos(url, seconds, workers, seed=11, simulators=1 if backend == "sqlite" else 2, tasks=8, files_per_dataset=20,
                       backlog=4, lease_seconds=20, workdir=tmp_path / "work", kill_every=(0.3, 1.5), cron_rounds=1, cron_workers=2,
                       churn_every=2.0, say=lines.append)
    report(result, say=lines.append)
    text = "\n".join(lines)
    print(text)  # the figures, with -s or -rP
    assert result.kills >= 3, text  # the chaos happened: processes were killed while they ran passes
    assert result.chaos.stopped >= workers, text
    assert [name for name, problems in result.checks if problems] == [], text
    assert len(result.checks) >= 18, text  # ... the lease, live-job, output and input checks of issue 14, and the cron overlap's two
    assert result.cron is not None and result.cron.runs == 2 and result.cron.exits == {0: 3}, text
    assert result.churn is not None and result.churn.files_added > 0 and result.churn.incexecs + result.churn.kills > 0, text
    assert result.final["tasks"] and sum(result.final["jobs"].values()) > 0, text
    assert set(result.final["tasks"]) <= {"done", "finished", "failed", "broken", "aborted"}, text


@pytest.mark.slow
def test_a_deliberately_broken_lease_guard_is_caught(tmp_path):
    """The checks can fail: plain concurrent `run --once` with the lease release broken in every process
    (tests/hooks: `leases.release` and the end-of-pass release do nothing), and the cron overlap's
    invariants report the leases left behind (`check --no-live-passes`)."""
    lines: list[str] = []
    result = run_chaos(f"sqlite:///{tmp_path / 'chaos.db'}", 0, 2, seed=11, simulators=0, tasks=10, files_per_dataset=20, backlog=0,
                       workdir=tmp_path / "work", cron_rounds=1, cron_workers=2, break_guard="release", say=lines.append)
    report(result, say=lines.append)
    text = "\n".join(lines)
    print(text)
    caught = {name: problems for name, problems in result.checks if problems}
    after_rounds = caught.get("cron overlap: no lease, consistent store and history once the runs exited", [])
    assert any("a process that is no longer alive" in problem for problem in after_rounds), text
