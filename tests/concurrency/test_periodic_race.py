"""Overlapping periodic passes (`jedictl run` fired by cron while the last one is still busy, or on
several hosts): real processes that all read the same due time before any claims it. One instance is
made; with the claim's guard broken, `jedictl check` finds the second (docs/periodic-tasks.md)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers import hooked_env, jedictl_processes_together
from tests.periodic_specs import NOW, hc_template

N_PROCESSES = 3


def _template(cli, store, tmp_path) -> None:
    # allow_task_duplication: the instances' unique task names would otherwise refuse a second
    # instance of one due time on their own; here the claim is the only guard.
    spec = tmp_path / "hc.yaml"
    spec.write_text(yaml.safe_dump(hc_template(dependencies={"allow_task_duplication": True})))
    cli("periodic", "add", str(spec), "--every", "1h", "--max-active", "10", "--now", NOW, db=store)


def _overlapping_passes(store, tmp_path, **hooks: str) -> list[dict]:
    env = hooked_env(slow_periodic="1.5", **hooks)
    workers = jedictl_processes_together([["periodic", "instantiate", "--db", store, "--now", NOW, "-o", "json"]] * N_PROCESSES,
                                         tmp_path, env=env)
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        reports.append(json.loads(out))
    return reports


@pytest.mark.slow
def test_overlapping_passes_make_one_instance_of_a_due_time(cli, store, tmp_path):
    _template(cli, store, tmp_path)
    reports = _overlapping_passes(store, tmp_path)
    outcomes = sorted(item["outcome"] for report in reports for item in report["items"])
    assert outcomes == ["instantiated"] + ["skipped"] * (N_PROCESSES - 1)  # all read the due time; one claimed it
    tasks = cli.json("task", "list", "--template", "hc.test.ANALY_X", db=store)
    assert [task["name"] for task in tasks] == ["hc.test.ANALY_X.20261127T2300"]
    assert cli.json("periodic", "show", "hc.test.ANALY_X", db=store)["instances"] == 1
    assert cli("check", db=store).stdout == "check: consistent\n"


@pytest.mark.slow
def test_check_catches_two_instances_of_a_due_time_when_the_claim_is_unguarded(cli, store, tmp_path):
    _template(cli, store, tmp_path)
    reports = _overlapping_passes(store, tmp_path, break_guard="periodic")
    assert sum(report["counts"]["instantiated"] for report in reports) == N_PROCESSES
    verdict = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    found = [v for v in verdict["violations"] if v["check"] == "periodic_instances_once"]
    assert len(found) == N_PROCESSES - 1
    assert found[0]["object"].startswith("task ") and "for its due time 2026-11-27T23:00Z" in found[0]["message"]


@pytest.mark.slow
def test_a_pass_killed_before_it_commits_leaves_the_due_time_to_the_next(cli, store, tmp_path):
    import subprocess
    import sys

    _template(cli, store, tmp_path)
    killed = subprocess.run([sys.executable, "-m", "jedictl", "periodic", "instantiate", "--db", store, "--now", NOW],
                            env=hooked_env(die_at="periodic-before-commit"), capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9  # SIGKILLed with the instance written and not committed
    assert cli.json("task", "list", db=store) == []
    shown = cli.json("periodic", "show", "hc.test.ANALY_X", db=store)
    assert (shown["next_due_at"], shown["instances"], shown["last_outcome"]) == ("2026-11-27T23:00:00Z", 0, None)
    report = cli.json("periodic", "instantiate", "--now", NOW, db=store)
    assert report["counts"]["instantiated"] == 1 and report["items"][0]["due_at"] == "2026-11-27T23:00:00Z"
    assert len(cli.json("task", "list", db=store)) == 1
    assert cli("check", db=store).stdout == "check: consistent\n"
