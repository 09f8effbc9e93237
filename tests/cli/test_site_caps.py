"""A site's caps hold (issue 14, defect 5): `max_queued`, `max_running` and `job_caps` limit what
`generate` puts on a site and what `jobs dispatch` hands out there -- also to two dispatchers at once --
with WMCore's slot model: pending and running thresholds per site and per job type, the 20 % overflow
for higher-priority work, and drained sites taking no new work."""

from __future__ import annotations

import json

import pytest
import yaml
from sqlalchemy import func, select

from jedictl.store.invariants import check_all
from jedictl.store.schema import jobs
from tests.cli.test_generate import DS_IN, WORKED_EXAMPLE
from tests.conftest import ROOT
from tests.helpers import hooked_env, jedictl_processes_together, run_sql

NOW = "2026-11-21T12:00:00"
SITE = "CERN-PROD_GRID"  # single-core, like BNL_PROD: the two sites WORKED_EXAMPLE's jobs can go to


def _grid(cli, store, tmp_path, **caps) -> None:
    """The example grid with `caps` ({site: {field: value}}) applied, and the worked example's input."""
    grid = yaml.safe_load((ROOT / "examples" / "sites.yaml").read_text())
    for site in grid["sites"]:
        site.update(caps.get(site["name"], {}))
    (tmp_path / "sites.yaml").write_text(yaml.safe_dump(grid))
    cli("sites", "import", str(tmp_path / "sites.yaml"), db=store)
    (tmp_path / "ds.yaml").write_text(yaml.safe_dump(DS_IN))
    cli("data", "import", str(tmp_path / "ds.yaml"), db=store)


def _submit(cli, store, **params) -> int:
    document = json.loads(json.dumps(WORKED_EXAMPLE))
    if "taskName" in params:  # a task of its own writes datasets of its own (an output dataset belongs to one task)
        for item in document["jobParameters"] + [document["log"]]:
            if item.get("param_type") in ("output", "log"):
                item["dataset"] += "." + params["taskName"]
    return cli.json("submit", "-", db=store, input=json.dumps({**document, "skipScout": True, **params}))["task_id"]


def _ready(cli, store) -> None:
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)


def _per_site(store, *statuses: str) -> dict[str, int]:
    query = select(jobs.c.site, func.count()).group_by(jobs.c.site)
    if statuses:
        query = query.where(jobs.c.status.in_(statuses))
    return dict(run_sql(store, lambda conn: conn.execute(query).all()))


# ---------------------------------------------------------------------------------------- generation

def test_generate_stops_at_a_sites_max_queued_and_names_the_cap(cli, store, tmp_path):
    _grid(cli, store, tmp_path, **{SITE: {"max_queued": 2}, "BNL_PROD": {"max_queued": 3}})
    task_id = _submit(cli, store)
    _ready(cli, store)
    report = cli.json("generate", "--seed", "1", "--now", NOW, db=store)
    assert _per_site(store) == {SITE: 2, "BNL_PROD": 3}  # before: all 13 jobs on the two sites
    assert report["counts"]["jobs"] == 5
    item = next(i for i in report["items"] if i.get("task_id") == task_id)
    assert "max_queued" in (item.get("reason") or ""), item
    # The rest waits: the next pass makes nothing, and explain names the cap that stopped each site.
    assert cli.json("generate", "--seed", "2", "--now", NOW, db=store)["counts"]["jobs"] == 0
    trail = {row["site"]: row for row in cli.json("explain", "task", str(task_id), db=store)["brokerage"]}
    assert trail[SITE]["rule"] == "site_caps" and "max_queued (NoPendingSlot): site pending 2 >= 2" in trail[SITE]["message"]
    assert trail["BNL_PROD"]["rule"] == "site_caps"
    assert run_sql(store, check_all) == []


def test_job_type_caps_and_the_running_threshold(cli, store, tmp_path):
    # job_caps per prodSourceLabel; max_running counts queued and running jobs together (WMCore).
    _grid(cli, store, tmp_path, **{SITE: {"job_caps": {"managed": {"max_queued": 4}}}, "BNL_PROD": {"max_running": 1}})
    _submit(cli, store)
    _ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert _per_site(store) == {SITE: 4, "BNL_PROD": 1}


def test_higher_priority_work_overflows_the_pending_limit_by_20_percent(cli, store, tmp_path):
    _grid(cli, store, tmp_path, **{SITE: {"max_queued": 5}})
    _submit(cli, store, taskName="low", site=SITE, taskPriority=100)
    _ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert _per_site(store) == {SITE: 5}
    _submit(cli, store, taskName="same", site=SITE, taskPriority=100)
    _submit(cli, store, taskName="high", site=SITE, taskPriority=500)
    _ready(cli, store)
    cli("generate", "--seed", "2", "--now", NOW, db=store)
    made = dict(run_sql(store, lambda conn: conn.execute(select(jobs.c.task_id, func.count()).group_by(jobs.c.task_id)).all()))
    # 5 slots full: the equal-priority task waits; the higher one may go to max(5, 5) + 20 % x 5 = 6.
    assert made == {1: 5, 3: 1}


def test_a_draining_site_takes_no_new_work():
    from jedictl.config import ThrottleSettings
    from jedictl.engine.brokerage.model import Site, SlotLoad
    from jedictl.engine.brokerage.site_slots import cap_message, slot_decision

    site = Site(SITE, status="brokeroff")
    decision = slot_decision(site, "managed", 900, merge=False, settings=ThrottleSettings())
    assert not decision.allowed and cap_message(decision).startswith("site caps: status brokeroff (Draining)")
    full = Site(SITE, max_queued=10)
    now = SlotLoad(pending={"managed": 10}, highest_priority={"managed": 100})
    assert not slot_decision(full, "managed", 100, merge=False, settings=ThrottleSettings(), now=now).allowed
    overflow = slot_decision(full, "managed", 101, merge=False, settings=ThrottleSettings(), now=now)
    assert overflow.allowed and overflow.free == 2  # 10 + 20 % x 10
    assert not slot_decision(full, "managed", 101, merge=True, settings=ThrottleSettings(), now=now).allowed  # merges are I/O bound


# ------------------------------------------------------------------------------------------ dispatch

def _activated(cli, store, tmp_path, **caps) -> None:
    """13 activated jobs at SITE, made before the operator set `caps` (generation respects them too)."""
    _grid(cli, store, tmp_path)
    _submit(cli, store, site=SITE)
    _ready(cli, store)
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    assert _per_site(store, "activated") == {SITE: 13}
    _grid(cli, store, tmp_path, **caps)


def test_dispatch_hands_out_no_more_than_max_running(cli, store, tmp_path):
    _activated(cli, store, tmp_path, **{SITE: {"max_running": 1}})
    got = cli.json("jobs", "dispatch", "--site", SITE, "--count", "5", "--now", NOW, db=store)["jobs"]
    assert len(got) == 1  # before: 5
    assert cli.json("jobs", "dispatch", "--site", SITE, "--count", "5", "--now", NOW, db=store)["jobs"] == []
    # A job that ends frees its slot.
    cli("jobs", "report", "-", "--now", NOW, db=store, input=json.dumps({"job_id": got[0]["job_id"], "status": "failed", "error_source": "pilot", "error_code": 1324}))
    assert len(cli.json("jobs", "dispatch", "--site", SITE, "--count", "5", "--now", NOW, db=store)["jobs"]) == 1


def test_dispatch_keeps_each_job_type_within_its_running_cap(cli, store, tmp_path):
    _activated(cli, store, tmp_path, **{SITE: {"job_caps": {"managed": {"max_running": 3}}}})
    assert len(cli.json("jobs", "dispatch", "--site", SITE, "--count", "10", "--now", NOW, db=store)["jobs"]) == 3
    assert cli.json("jobs", "dispatch", "--site", SITE, "--count", "10", "--now", NOW, db=store)["jobs"] == []


@pytest.mark.parametrize("rounds", [3])
def test_two_dispatchers_at_once_never_exceed_the_cap(cli, store, tmp_path, rounds):
    _activated(cli, store, tmp_path, **{SITE: {"max_running": 4}})
    handed = 0
    for round_nr in range(rounds):
        args = ["jobs", "dispatch", "--db", store, "--site", SITE, "--count", "3", "-o", "json", "--now", NOW]
        workers = jedictl_processes_together([args + ["--executor", f"pilot-{round_nr}-{n}"] for n in range(2)], tmp_path)
        for worker in workers:
            out, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err
            handed += len(json.loads(out)["jobs"])
        assert _per_site(store, "sent") == {SITE: 4}  # before: 6 after the first round
    assert handed == 4
    assert run_sql(store, check_all) == []


@pytest.mark.postgres
@pytest.mark.parametrize("caps, waits", [({"max_running": None}, False), ({"max_running": 10}, True)], ids=["no-caps", "capped"])
def test_only_a_capped_site_is_dispatched_under_its_row_lock(cli, pg_url, tmp_path, caps, waits):
    """Dispatchers of a site without running caps never wait for each other (the SKIP LOCKED claim);
    those of a capped site take turns on its row."""
    import subprocess
    import sys
    import time

    import psycopg

    cli("db", "init", db=pg_url)
    _activated(cli, pg_url, tmp_path, **{SITE: caps})
    schema = pg_url.rsplit("%3D", 1)[1]
    libpq = pg_url.split("?")[0].replace("postgresql+psycopg://", "postgresql://")
    # The observer has its own connection: pg_stat_activity is a snapshot held for a transaction's length.
    with psycopg.connect(libpq) as holder, psycopg.connect(libpq, autocommit=True) as observer:
        holder.execute(f'SELECT 1 FROM "{schema}".sites WHERE name = %s FOR UPDATE', (SITE,))  # another dispatcher's lock
        command = [sys.executable, "-m", "jedictl", "jobs", "dispatch", "--site", SITE, "--count", "1", "--now", NOW, "-o", "json", "--db", pg_url]
        worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Waiting is read from the server (a backend blocked by our lock), not from a wall-clock timeout,
        # which a loaded machine's slow start-up would pass for waiting.
        waited = None
        deadline = time.monotonic() + 120
        while waited is None and time.monotonic() < deadline:
            if worker.poll() is not None:
                waited = False
            elif observer.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                (holder.info.backend_pid,)).fetchone()[0]:
                waited = True
            else:
                time.sleep(0.05)
        holder.rollback()
        out, err = worker.communicate(timeout=120)
    assert waited is waits, err
    if not waits:
        assert worker.returncode == 0 and len(json.loads(out)["jobs"]) == 1, err


@pytest.mark.slow
def test_two_generators_at_once_never_fill_a_site_past_its_cap(cli, store, tmp_path):
    """Two `generate` processes started together, each with tasks for the same capped site: each
    counts the other's jobs under the site's lock before it writes, so together they stay within
    max_queued (each alone would fill it from its snapshot of the pass's start)."""
    _grid(cli, store, tmp_path, **{SITE: {"max_queued": 6}})
    for n in range(4):
        _submit(cli, store, site=SITE, taskName=f"capped.{n}")
    _ready(cli, store)
    args = ["generate", "--db", store, "--now", NOW, "--no-throttle", "-o", "json"]
    # Each chunk waits a second first (tests/hooks): both processes are past their snapshot before either writes.
    workers = jedictl_processes_together([args + ["--seed", str(n)] for n in range(2)], tmp_path, env=hooked_env(slow_chunk="1"))
    made = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode in (0, 1), err
        made.append(json.loads(out)["counts"]["jobs"])
    assert _per_site(store, "activated") == {SITE: 6}, made  # without the recount under the lock: 12
    assert run_sql(store, check_all) == []
