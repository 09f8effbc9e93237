"""Job reassignment (docs/reassignment.md): the watch pass moves queued jobs off a site whose queue is long
and does not move, within their task's brokerage; `jedictl jobs reassign` does it by hand -- on both backends.

The grid is examples/sites.yaml; the task's 13 jobs (25 files, 2 per job) all go to BNL_PROD, the first
site of the brokerage's bootstrap with this seed. Its input is on CERN-PROD_DATADISK and
BNL-ATLAS_DATADISK, so CERN-PROD_GRID (a single-core site reading CERN's disk) is where they can go.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import yaml
from sqlalchemy import insert, select, update

from jedictl.clock import parse_time
from jedictl.store.invariants import check_all
from jedictl.store.schema import job_files, job_reassignments, jobs
from tests.conftest import ROOT
from tests.helpers import hooked_env, jedictl_process, jedictl_processes_together, run_sql, store_dump

NOW = "2026-11-27T10:00:00"
LATER = "2026-11-27T14:00:00"  # 4 h on: past the 3 h stall and queue age
SOURCE, TARGET = "BNL_PROD", "CERN-PROD_GRID"
TASK = {
    "taskName": "reassign.tests", "vo": "wlcg", "prodSourceLabel": "managed", "taskType": "prod", "processingType": "sim",
    "nFilesPerJob": 2, "skipScout": True,
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"},
    ],
    "log": {"type": "template", "param_type": "log", "dataset": "ds.log", "value": "ds.log.${SN}.log.tgz"},
}
DS_IN = {"datasets": [{"name": "ds.in", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}, {"endpoint": "BNL-ATLAS_DATADISK"}],
                       "files": [{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 26)]}]}


def _at(text: str, **delta: float) -> str:
    return (parse_time(text) + timedelta(**delta)).isoformat()


def _setup(cli, store, tmp_path, **params) -> list[dict]:
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    catalog = tmp_path / "ds.yaml"
    catalog.write_text(yaml.safe_dump(DS_IN))
    cli("data", "import", str(catalog), db=store)
    env = {"JEDICTL_NOW": NOW}
    cli("submit", "-", db=store, input=json.dumps({**TASK, **params}), env=env)
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store, env=env)
    queued = cli.json("jobs", "list", "--status", "activated", "--limit", "100", db=store)
    assert len(queued) == 13 and {job["site"] for job in queued} == {SOURCE}
    return queued


def _watch(cli, store, at: str = LATER, **settings: str) -> dict:
    env = {"JEDICTL_NOW": at, **{f"JEDICTL_REASSIGN__{key.upper()}": value for key, value in settings.items()}}
    return cli.json("watch", db=store, env=env)


def _moves(store) -> list[tuple]:
    r = job_reassignments.c
    return run_sql(store, lambda conn: [tuple(row) for row in conn.execute(
        select(r.job_id, r.from_site, r.to_site, r.from_status, r.to_status, r.moved_by).order_by(r.id))])


def _sites(store) -> dict[int, tuple[str, str]]:
    return run_sql(store, lambda conn: {row.id: (row.site, row.status) for row in conn.execute(select(jobs.c.id, jobs.c.site, jobs.c.status))})


def _consistent(store) -> None:
    assert run_sql(store, check_all) == []


# ------------------------------------------------------------------------------------ the watch pass

def test_watch_moves_the_excess_of_a_long_queue_that_does_not_move(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    report = _watch(cli, store)
    # PanDA's three checks: 13 queued > 3 x 0 running, > 10, > 0.3 x 13; excess = the least overshoot, 13 - 10.
    assert report["counts"]["overloaded"] == 1 and report["counts"]["reassign"] == 3 and report["counts"]["skipped"] == 0
    overloaded = next(item for item in report["items"] if item["outcome"] == "overloaded")
    assert (overloaded["site"], overloaded["queued"], overloaded["running"], overloaded["excess"], overloaded["moved"]) == (SOURCE, 13, 0, 3, 3)
    assert "never took a job" in overloaded["reason"] and "waited 4h00m (limit 3h00m)" in overloaded["reason"]
    moved = [item for item in report["items"] if item["outcome"] == "reassign"]
    assert [item["job_id"] for item in moved] == [1, 2, 3]  # the oldest first
    assert {(item["from_site"], item["to_site"], item["status"]) for item in moved} == {(SOURCE, TARGET, "activated")}
    assert _moves(store) == [(job_id, SOURCE, TARGET, "activated", "activated", "jedictl watch") for job_id in (1, 2, 3)]
    # jobs show says why the job moved
    shown = cli.json("jobs", "show", "1", db=store)
    assert shown["site"] == TARGET and len(shown["moves"]) == 1
    move = shown["moves"][0]
    assert (move["from_site"], move["to_site"], move["moved_by"]) == (SOURCE, TARGET, "jedictl watch")
    assert move["reason"].startswith(f"site {SOURCE} (Production default): 13 queued > 3 x 0 running") and f"moved to {TARGET}" in move["reason"]
    assert cli.json("jobs", "show", "4", db=store)["moves"] == []
    _consistent(store)
    cli("check", db=store)
    # 10 queued is no longer more than min_queue: nothing moves again, and nothing moves twice.
    again = _watch(cli, store, _at(LATER, minutes=10))
    assert again["counts"]["overloaded"] == 0 and again["counts"]["reassign"] == 0
    # the moved jobs are handed out at their new site
    taken = cli.json("jobs", "dispatch", "--site", TARGET, "--count", "10", db=store, env={"JEDICTL_NOW": _at(LATER, minutes=20)})["jobs"]
    assert sorted(job["job_id"] for job in taken) == [1, 2, 3]
    _consistent(store)


def test_thresholds_are_settings(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    early = _at(NOW, hours=2)
    assert _watch(cli, store, early)["counts"]["overloaded"] == 0  # 2 h: not stalled for 3 h yet
    # A shorter stall and queue age, no floor on the queue and no share fraction: all 13 are the excess.
    report = _watch(cli, store, early, stall_minutes="60", min_queued_minutes="60", min_queue="0", queue_fraction="0")
    assert report["counts"]["reassign"] == 13 and {site for site, _ in _sites(store).values()} == {TARGET}
    _consistent(store)


def test_a_queue_that_moves_is_left_alone(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    cli("jobs", "dispatch", "--site", SOURCE, "--count", "1", db=store, env={"JEDICTL_NOW": _at(LATER, minutes=-30)})
    report = _watch(cli, store)
    assert report["counts"]["overloaded"] == 0 and report["counts"]["reassign"] == 0 and _moves(store) == []


def test_disabled_reports_the_overload_and_moves_nothing(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    before = _sites(store)
    report = _watch(cli, store, enabled="false")
    assert report["counts"]["overloaded"] == 1 and report["counts"]["reassign"] == 0
    assert "reassign.enabled is false" in report["items"][0]["note"]
    assert _sites(store) == before and _moves(store) == []


def test_a_task_that_disables_reassignment_keeps_its_jobs(cli, store, tmp_path):
    _setup(cli, store, tmp_path, disableReassign=True)
    report = _watch(cli, store)
    assert report["counts"]["overloaded"] == 1 and report["counts"]["reassign"] == 0 and report["items"][0]["movable"] == 0
    assert _moves(store) == []


# ------------------------------------------------------------------------ guards, in real processes

def _watch_process(store, tmp_path, **hooks: str):
    """A real watch pass that has decided its moves and waits, before it writes them, until `_finish`
    lets it go on (or 60 s passed)."""
    stamp = time.monotonic_ns()
    decided, resume = tmp_path / f"decided-{stamp}", tmp_path / f"resume-{stamp}"
    env = hooked_env(slow_reassign="60", decided=str(decided), resume=str(resume), **hooks)
    env.update({"JEDICTL_NOW": LATER})
    process = jedictl_process(["watch", "-o", "json", "--db", store], env=env)
    process.resume = resume
    deadline = time.monotonic() + 90
    while not decided.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    return process


def _finish(process) -> dict:
    process.resume.touch()  # what the test did meanwhile is done: the pass writes its moves now
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out)


def test_a_job_dispatched_meanwhile_is_not_moved(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    process = _watch_process(store, tmp_path)
    # The pass has decided to move jobs 1-3; an executor takes 1 and 2 before it writes.
    taken = cli.json("jobs", "dispatch", "--site", SOURCE, "--count", "2", db=store, env={"JEDICTL_NOW": _at(LATER, minutes=-1)})["jobs"]
    assert sorted(job["job_id"] for job in taken) == [1, 2]
    report = _finish(process)
    assert report["counts"]["reassign"] == 1 and report["counts"]["skipped"] == 2
    skipped = [item for item in report["items"] if item["outcome"] == "skipped"]
    assert {item["job_id"] for item in skipped} == {1, 2} and all("no longer activated at BNL_PROD" in item["reason"] for item in skipped)
    sites = _sites(store)
    assert sites[1] == (SOURCE, "sent") and sites[2] == (SOURCE, "sent") and sites[3] == (TARGET, "activated")
    assert [move[0] for move in _moves(store)] == [3]
    _consistent(store)


def test_check_catches_a_move_of_a_dispatched_job(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    process = _watch_process(store, tmp_path, break_guard="reassign")
    cli("jobs", "dispatch", "--site", SOURCE, "--count", "2", db=store, env={"JEDICTL_NOW": _at(LATER, minutes=-1)})
    _finish(process)
    problems = run_sql(store, check_all)
    assert any("came after an executor took the job" in problem for problem in problems), problems
    result = cli("check", db=store, code=1)
    assert "reassignments_chain" in result.stdout


def _two_passes(store, tmp_path, **hooks: str) -> list[dict]:
    env = hooked_env(slow_reassign="3", **hooks)
    env.update({"JEDICTL_NOW": LATER})
    workers = jedictl_processes_together([["watch", "-o", "json", "--db", store]] * 2, tmp_path, env=env)
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err
        reports.append(json.loads(out))
    return reports


def test_two_passes_at_once_move_each_job_once(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    reports = _two_passes(store, tmp_path)
    assert sum(report["counts"]["reassign"] for report in reports) == 3
    moves = _moves(store)
    assert len(moves) == 3 and len({move[0] for move in moves}) == 3
    _consistent(store)


def test_check_catches_a_job_moved_twice(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    _two_passes(store, tmp_path, break_guard="reassign")
    problems = run_sql(store, check_all)
    assert any("but its previous move put the job at" in problem for problem in problems), (problems, _moves(store))


# --------------------------------------------------------------------------------- jobs reassign

def test_jobs_reassign_moves_queued_jobs_within_the_brokerage(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    env = {"JEDICTL_NOW": _at(NOW, minutes=5)}
    moved = cli.json("jobs", "reassign", "1", "1.2", "--site", TARGET, "--user", "alice", db=store, env=env)
    assert moved["counts"] == {"moved": 2, "refused": 0}
    assert [(i["job_id"], i["from_site"], i["to_site"]) for i in moved["items"]] == [(1, SOURCE, TARGET), (2, SOURCE, TARGET)]
    assert _moves(store)[0][5] == "jedictl jobs reassign (alice)"
    assert cli.json("jobs", "show", "2", db=store)["moves"][0]["reason"] == f"by jedictl jobs reassign (alice): to {TARGET} (asked for)"
    # a site the task's brokerage drops is refused with the brokerage's reason; the job stays
    refused = cli("jobs", "reassign", "3", "--site", "DESY-HH", "-o", "json", db=store, env=env, code=1)
    item = json.loads(refused.stdout)["items"][0]
    assert item["outcome"] == "refused" and "core count" in item["reason"] and _sites(store)[3] == (SOURCE, "activated")
    # without --site the brokerage chooses
    chosen = cli.json("jobs", "reassign", "3", db=store, env=env)
    assert chosen["items"][0]["to_site"] == TARGET and "(chosen: weight" in chosen["items"][0]["reason"]
    # a job an executor took does not move
    cli("jobs", "dispatch", "--site", TARGET, "--count", "1", db=store, env=env)
    taken = json.loads(cli("jobs", "reassign", "1", "-o", "json", db=store, env=env, code=1).stdout)["items"][0]
    assert taken["outcome"] == "refused" and taken["reason"] == "the job is sent: only queued jobs (activated, assigned) move"
    assert len(_moves(store)) == 3
    _consistent(store)


def test_jobs_reassign_refuses_bad_input_and_writes_nothing(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    before = store_dump(store)
    assert "site NOPE is not in the resource catalog" in cli("jobs", "reassign", "4", "--site", "NOPE", db=store, code=2).stderr
    assert "--site" in cli("jobs", "reassign", "4", "--site", " ", db=store, code=2).stderr
    assert "JOB" in cli("jobs", "reassign", "x4", db=store, code=2).stderr
    cli("jobs", "reassign", db=store, code=2)
    assert store_dump(store) == before


def test_an_assigned_job_moves_to_a_site_that_holds_its_input(cli, store, tmp_path):
    _setup(cli, store, tmp_path)

    def waiting(conn):  # job 4 waits at BNL_PROD for its input to be transferred to BNL's disk
        conn.execute(update(jobs).where(jobs.c.id == 4).values(status="assigned"))
        conn.execute(update(job_files).where(job_files.c.job_id == 4, job_files.c.type == "input").values(destination="BNL-ATLAS_DATADISK"))
    run_sql(store, waiting)
    _consistent(store)
    item = cli.json("jobs", "reassign", "4", "--site", TARGET, db=store, env={"JEDICTL_NOW": NOW})["items"][0]
    assert (item["outcome"], item["to_site"], item["status"]) == ("moved", TARGET, "activated")
    assert _moves(store) == [(4, SOURCE, TARGET, "assigned", "activated", item["reason"].split(":")[0].removeprefix("by "))]
    destinations = run_sql(store, lambda conn: set(conn.execute(select(job_files.c.destination).where(
        job_files.c.job_id == 4, job_files.c.type == "input")).scalars()))
    assert destinations == {None}
    _consistent(store)


def test_check_names_a_move_that_does_not_follow_the_last_one(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    cli("jobs", "reassign", "5", "--site", TARGET, db=store, env={"JEDICTL_NOW": NOW})
    _consistent(store)

    def second_move_from_the_old_site(conn):
        conn.execute(insert(job_reassignments).values(job_id=5, task_id=1, attempt_nr=1, from_site=SOURCE, to_site="CERN-PROD_MCORE",
                                                      from_status="activated", to_status="activated", reason="planted", moved_by="test",
                                                      owner="test", moved_at=parse_time(NOW)))
    run_sql(store, second_move_from_the_old_site)
    problems = run_sql(store, check_all)
    assert f"task 1 job 5: move 2 ({SOURCE} -> CERN-PROD_MCORE) starts at {SOURCE}, but its previous move put the job at {TARGET}" in problems
    assert f"task 1 job 5: move 2 ({SOURCE} -> CERN-PROD_MCORE) is its last, but the job is at {TARGET}" in problems


def test_run_includes_the_reassignment(cli, store, tmp_path):
    _setup(cli, store, tmp_path)
    report = cli.json("run", db=store, env={"JEDICTL_NOW": LATER})
    watch = next(p for p in report["passes"] if p["pass"] == "watch")
    assert watch["counts"]["overloaded"] == 1 and watch["counts"]["reassign"] == 3 and len(_moves(store)) == 3


def test_jobs_without_input_move_and_never_to_a_stalled_site(cli, store, tmp_path):
    """A generation task's jobs read no file (pseudo input): any site its brokerage keeps fits them, but
    not one whose own queue is stalled too."""
    from tests.cli.test_refine import EXAMPLES

    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    env = {"JEDICTL_NOW": NOW}
    cli("submit", "-", db=store, input=EXAMPLES["generation"], env=env)
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store, env=env)
    before = _sites(store)
    at_source = sum(1 for site, _ in before.values() if site == SOURCE)
    assert at_source == 8 and sum(1 for site, _ in before.values() if site == TARGET) == 2
    # CERN-PROD_GRID's two jobs waited as long with no dispatch: it is stalled too, so nothing moves there.
    stuck = _watch(cli, store, min_queue="2")
    assert stuck["counts"]["overloaded"] == 1 and stuck["items"][0]["targets_found"] == 0 and _moves(store) == []
    cli("jobs", "dispatch", "--site", TARGET, "--count", "1", db=store, env={"JEDICTL_NOW": _at(LATER, minutes=-30)})
    report = _watch(cli, store, min_queue="2")
    # 8 queued at BNL_PROD of 9 in the share: min(8, 8 - 2, 8 - 2.7) = 6
    assert report["counts"]["reassign"] == 6 and {move[2] for move in _moves(store)} == {TARGET}
    _consistent(store)


def test_a_target_takes_no_more_than_its_site_caps(cli, store, tmp_path):
    grid = yaml.safe_load((ROOT / "examples" / "sites.yaml").read_text())
    next(site for site in grid["sites"] if site["name"] == TARGET)["max_queued"] = 2
    capped = tmp_path / "sites.yaml"
    capped.write_text(yaml.safe_dump(grid))
    _setup(cli, store, tmp_path)
    cli("sites", "import", str(capped), db=store)
    report = _watch(cli, store, min_queue="0", queue_fraction="0")
    overloaded = report["items"][0]
    assert (overloaded["excess"], overloaded["targets_found"], overloaded["moved"]) == (13, 2, 2)
    assert sum(1 for site, _ in _sites(store).values() if site == TARGET) == 2
    _consistent(store)


def test_moves_beyond_a_capped_site_s_room_at_write_time_are_refused(cli, store, tmp_path):
    """The room of a capped site is counted again, its row locked, when the moves are written: moves
    decided on an older count (another process filled the site meanwhile) stop at its cap."""
    from jedictl.config import load_settings
    from jedictl.engine.brokerage.loading import load_catalog
    from jedictl.engine.watch.reassignment import apply_moves
    from jedictl.store import reassignments
    from jedictl.store.database import open_store

    grid = yaml.safe_load((ROOT / "examples" / "sites.yaml").read_text())
    next(site for site in grid["sites"] if site["name"] == TARGET)["max_queued"] = 2
    capped = tmp_path / "sites.yaml"
    capped.write_text(yaml.safe_dump(grid))
    _setup(cli, store, tmp_path)
    cli("sites", "import", str(capped), db=store)
    settings = load_settings({"db": store}).settings
    db = open_store(store)
    try:
        with db.read() as conn:
            rows = reassignments.jobs_by_id(conn, [1, 2, 3])
            sites = {site.name: site for site in load_catalog(conn).sites}
        moves = [reassignments.Move(job_id, 1, 1, SOURCE, TARGET, "activated", "activated", "CERN", "test", "test", "test")
                 for job_id in (1, 2, 3)]
        outcomes = apply_moves(db, moves, settings, parse_time(LATER), sites, rows)
    finally:
        db.close()
    assert [(o.job_id, o.moved) for o in outcomes] == [(1, True), (2, True), (3, False)]
    assert outcomes[2].reason == f"site {TARGET} has no room left under its caps"
    assert [move[0] for move in _moves(store)] == [1, 2]
    _consistent(store)
