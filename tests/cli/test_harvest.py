"""`jedictl harvest` with the local batch system (real detached pilot processes) on both store backends:
just enough pilots for the activated jobs, jobs run to the end, pilots that fail before taking work
counted and a site whose pilots keep failing turned off (brokerage, explain, sites show) and on again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cli.harvest_grid import FAST, SITE, check_outputs_on_disk, jobs, make_batch_grid, pilots, wait_pilots_ended


@pytest.fixture
def fast(monkeypatch, tmp_path):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("JEDICTL_HARVEST__LOG_DIR", str(tmp_path / "pilot-logs"))
    monkeypatch.setenv("JEDICTL_PILOT__WORKDIR", str(tmp_path / "work"))


def test_dry_run_decides_and_writes_nothing(cli, store, tmp_path, fast):
    make_batch_grid(cli, store, tmp_path, {"system": "local", "jobs_per_pilot": 2, "max_queued": 10}, n_files=5)
    report = cli.json("harvest", "--dry-run", db=store)
    assert report["counts"]["would_submit"] == 3  # ceil(5 activated / 2 per pilot)
    [item] = report["items"]
    assert item["site"] == SITE and "5 activated jobs / 2 per pilot" in item["reason"]
    assert pilots(cli, store) == []
    assert cli.json("harvest", "--dry-run", "--limit", "1", db=store)["counts"]["would_submit"] == 1


def test_pilots_run_the_activated_jobs_and_end_finished(cli, store, tmp_path, fast):
    disk = make_batch_grid(cli, store, tmp_path, {"system": "local", "jobs_per_pilot": 2, "max_queued": 10}, n_files=4)
    report = cli.json("harvest", db=store)
    assert report["counts"]["submitted"] == 2
    rows = wait_pilots_ended(cli, store, 2)
    assert {row["state"] for row in rows} == {"finished"}, rows
    assert sum(row["n_jobs"] for row in rows) == 4 and all(row["batch_id"].startswith("local-") for row in rows)
    done = jobs(cli, store)
    assert [job["status"] for job in done] == ["finished"] * 4
    check_outputs_on_disk(store, disk, "harvest.test.1.out", 4)  # with the checksums the catalog registered
    again = cli.json("harvest", db=store)
    assert again["counts"]["submitted"] == 0 and again["items"][0]["reason"] == "no activated jobs"


def test_a_site_whose_pilots_fail_before_work_is_turned_off_and_back_on(cli, store, tmp_path, fast, monkeypatch):
    monkeypatch.setenv("JEDICTL_HARVEST__MAX_FAILED_PILOTS", "2")
    make_batch_grid(cli, store, tmp_path, {"system": "local", "jobs_per_pilot": 1}, n_files=2)
    # The pilots' `python -m jedictl` finds a broken install first, as on a node without the software.
    broken = tmp_path / "broken" / "jedictl"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "__main__.py").write_text("import sys; print('no software here', file=sys.stderr); sys.exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))
    assert cli.json("harvest", db=store)["counts"]["submitted"] == 2
    wait_pilots_ended(cli, store, 2)
    rows = pilots(cli, store)
    assert [(row["state"], row["exit_code"], row["n_jobs"]) for row in rows] == [("failed", 3, 0)] * 2

    site = cli.json("sites", "show", SITE, db=store)
    assert site["pilots_active"] is False
    assert site["pilots_reason"].startswith("harvest: the last 2 pilots failed before taking work")
    # brokerage now leaves the site out, and explain says why
    cli("submit", "-", db=store, input=_second_task(tmp_path))
    for agent in ("refine", "feed", "broker"):
        cli(agent, db=store)
    explained = cli.json("explain", "task", "2", db=store)
    [row] = [r for r in explained["brokerage"] if r["site"] == SITE]
    assert row["kept"] is False and row["rule"] == "pilots" and "the last 2 pilots failed before taking work" in row["message"]

    # one probe at a time while it is off; once the software is back the probe takes work and the site is on
    monkeypatch.delenv("PYTHONPATH")
    report = cli.json("harvest", db=store)
    probes = [item for item in report["items"] if item["outcome"] == "submitted"]
    assert probes == [] or probes[0]["pilots"] == 1
    deadline = time.monotonic() + 60
    while cli.json("sites", "show", SITE, db=store)["pilots_active"] is False:
        assert time.monotonic() < deadline, pilots(cli, store)
        cli("harvest", db=store)
        time.sleep(0.3)
    assert cli.json("sites", "show", SITE, db=store)["pilots_reason"] is None
    assert any(row["state"] == "finished" and row["n_jobs"] == 1 for row in pilots(cli, store))


def test_bad_input_is_one_line(cli, store, tmp_path, fast):
    make_batch_grid(cli, store, tmp_path, {"system": "slurm"}, n_files=1)
    result = cli("harvest", "--batch", "pbs", db=store, code=2)
    assert "--batch" in result.stderr and "local or slurm" in result.stderr
    result = cli("harvest", "--site", "NOWHERE", db=store, code=1)
    assert "site NOWHERE does not exist" in result.stdout + result.stderr
    result = cli("harvest", db=store, env={"PATH": str(tmp_path)}, code=1)  # no sbatch on PATH
    assert f"site {SITE}: batch system slurm: sbatch not found" in result.stdout + result.stderr
    [row] = pilots(cli, store)
    assert (row["state"], row["error"]) == ("failed", f"site {SITE}: batch system slurm: sbatch not found")
    cli("pilots", "list", "--state", "weird", db=store, code=2)


def _second_task(tmp_path: Path) -> str:
    from tests.cli.pilot_grid import task_spec

    return task_spec(str(tmp_path / "payload.py"), name="harvest.test.2")
