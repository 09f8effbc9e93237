"""The chaos test in short (issue 10; the full run is `bench/chaos.py`): `jedictl run --loop` and
`jedictl simulate --loop` processes SIGKILLed at random moments and restarted, then the system settles
with the clock past every lease and job timeout, and every invariant holds -- no file in two live jobs,
every counter equal to its rows, every task final, no lease left after a watch pass, a consistent
retry history, nothing lost, nothing done twice.

About a minute on both backends: ~25 s of chaos on PostgreSQL with four `run` processes, ~15 s on
SQLite with two; the settling and the checks take the rest."""

from __future__ import annotations

import pytest

from bench.chaos import report, run_chaos


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_killed_agents_and_pilots_lose_nothing_and_do_nothing_twice(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'chaos.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    seconds, workers = (15, 2) if backend == "sqlite" else (25, 4)
    lines: list[str] = []
    result = run_chaos(url, seconds, workers, seed=11, simulators=1 if backend == "sqlite" else 2, tasks=8, files_per_dataset=20,
                       backlog=4, lease_seconds=20, workdir=tmp_path / "work", kill_every=(0.3, 1.5), say=lines.append)
    report(result, say=lines.append)
    text = "\n".join(lines)
    print(text)  # the figures, with -s or -rP
    assert result.kills >= 3, text  # the chaos happened: processes were killed while they ran passes
    assert result.chaos.stopped >= workers, text
    assert [name for name, problems in result.checks if problems] == [], text
    assert len(result.checks) == 10, text
    assert result.final["tasks"] and sum(result.final["jobs"].values()) > 0, text
    assert set(result.final["tasks"]) <= {"done", "finished", "failed", "broken", "aborted"}, text
