"""`jedictl feed`: exact file records and counters for every kind of task, re-scans, lost and missing input."""

from __future__ import annotations

import json

import pytest
import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, tasks
from tests.cli.test_refine import EXAMPLES as SPEC_EXAMPLES
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import run_sql

LATER = "2030-01-01T00:00:00"  # a clock past every re-scan interval and wait


@pytest.fixture
def grid(cli, store):
    """A store with the example grid and data catalog imported."""
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    cli("data", "import", str(ROOT / "examples" / "data.yaml"), db=store)
    return store


def submit(cli, store, text=None, path=None, **changes):
    if path:
        return cli.json("submit", str(path), db=store)["task_id"]
    document = yaml.safe_load(text)
    document.update(changes)
    return cli.json("submit", "-", db=store, input=yaml.safe_dump(document))["task_id"]


def feed(cli, store, *args):
    cli("refine", db=store)
    report = cli.json("feed", *args, db=store)
    assert run_sql(store, check_all) == []
    return report


def records(store, task_id, stream=None):
    def query(conn):
        q = (select(datasets.c.stream_name, files.c.lfn, files.c.status, files.c.max_attempt, files.c.keep_track, files.c.n_events,
                    files.c.start_event, files.c.end_event, files.c.first_event)
             .join(datasets, datasets.c.id == files.c.dataset_id).where(files.c.task_id == task_id).order_by(files.c.id))
        if stream:
            q = q.where(datasets.c.stream_name == stream)
        return [tuple(r) for r in conn.execute(q)]
    return run_sql(store, query)


def input_datasets(cli, store, task_id):
    shown = cli.json("task", "show", str(task_id), db=store)
    return shown, [d for d in shown["datasets"] if d["type"] in ("input", "pseudo_input")]


def test_prun_analysis_task_expands_the_container_and_excludes_logs(cli, grid):
    task_id = submit(cli, grid, path=EXAMPLES / "prun_files.json")
    report = feed(cli, grid)
    assert report["counts"]["ready"] == 1
    task, inputs = input_datasets(cli, grid, task_id)
    assert task["status"] == "ready" and task["error_dialog"] is None
    assert [(d["name"], d["container"], d["n_files"], d["n_files_to_be_used"], d["n_events"], d["state"]) for d in inputs] == [
        ("mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026_tid00000001_00", "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026", 12, 12, 60000, "closed"),
        ("mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026_tid00000002_00", "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026", 8, 8, 40000, "closed"),
    ]
    rows = records(grid, task_id)
    assert len(rows) == 20 and not any(".log." in r[1] for r in rows)
    assert {(r[2], r[3], r[4]) for r in rows} == {("ready", 4, True)}  # maxAttempt 4 from the task
    assert rows[0][1] == "DAOD_PHYS.00000001._000001.pool.root.1" and rows[0][5:] == (5000, None, None, 1)
    assert rows[1][8] == 5001  # first-event numbering runs on across files


def test_a_dataset_that_joined_an_expanded_container_is_fed_when_the_task_reads_its_inputs_again(cli, grid, tmp_path):
    """JEDI's incexec expands the container again and appends its new datasets: a task sent back to the
    feeder (incexec, a resubmission with the same outDS) records the files of a dataset added to the
    container since; a plain re-scan of a running task does not expand it."""
    from sqlalchemy import update

    container = "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026"
    task_id = submit(cli, grid, path=EXAMPLES / "prun_files.json")
    feed(cli, grid)
    members = next(c for c in yaml.safe_load((ROOT / "examples" / "data.yaml").read_text())["containers"] if c["name"] == container)
    joined = tmp_path / "joined.yaml"
    joined.write_text(yaml.safe_dump({
        "datasets": [{"name": f"{container}_tid00000003_00", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}],
                      "files": [{"lfn": f"DAOD_PHYS.00000003._00000{n}.pool.root.1", "size": 10, "events": 50} for n in (1, 2)]}],
        "containers": [{"name": container, "datasets": [*members["datasets"], f"{container}_tid00000003_00"]}]}))
    cli("data", "import", str(joined), db=grid)
    assert len(input_datasets(cli, grid, task_id)[1]) == 2  # nothing asked the feeder to look again
    run_sql(grid, lambda conn: conn.execute(update(tasks).where(tasks.c.id == task_id).values(status="done")))
    cli("task", "incexec", str(task_id), "-", db=grid, input="nFilesPerJob: 2\n")
    feed(cli, grid)
    task, inputs = input_datasets(cli, grid, task_id)
    assert task["status"] == "ready"
    assert [(d["name"], d["container"], d["n_files"], d["status"]) for d in inputs][-1] == (
        f"{container}_tid00000003_00", container, 2, "ready")
    assert len(records(grid, task_id)) == 22


def test_no_input_prun_task_gets_pseudo_files_and_sequence_numbers(cli, grid):
    task_id = submit(cli, grid, path=EXAMPLES / "prun_noinput.json")
    feed(cli, grid)
    assert records(grid, task_id, "IN") == [("IN", "pseudo_lfn", "ready", 3, True, 8, i, i, i + 1) for i in range(8)]
    assert [r[1] for r in records(grid, task_id, "SEQNUMBER")] == [str(n) for n in range(1001, 1009)]
    _, inputs = input_datasets(cli, grid, task_id)
    assert [(d["n_files"], d["n_files_to_be_used"]) for d in inputs] == [(8, 8), (8, 8)]


def test_event_split_production_releases_ten_scout_chunks(cli, grid):
    task_id = submit(cli, grid, SPEC_EXAMPLES["event-split"])
    report = feed(cli, grid)
    assert report["counts"]["assigning"] == 1  # managed task without a nucleus: the task broker chooses
    rows = records(grid, task_id)
    assert len(rows) == 80  # 4 files x 10 000 events / 500
    # n_events is the whole file's (JEDI's convention); each record is a 500-event range of it.
    assert rows[:2] == [("IN", "EVNT.00000020._000001.pool.root.1", "ready", 3, True, 10000, 0, 499, 1),
                        ("IN", "EVNT.00000020._000001.pool.root.1", "ready", 3, True, 10000, 500, 999, 501)]
    assert rows[20][1:] == ("EVNT.00000020._000002.pool.root.1", "ready", 3, True, 10000, 0, 499, 10001)
    _, [master] = input_datasets(cli, grid, task_id)
    assert (master["n_files"], master["n_files_to_be_used"], master["n_events"], master["n_events_to_be_used"]) == (80, 10, 40000, 5000)


def test_generation_task_and_skipped_scouts(cli, grid):
    task_id = submit(cli, grid, SPEC_EXAMPLES["generation"])
    unscouted = submit(cli, grid, SPEC_EXAMPLES["generation"], name="gen.no.scouts", scouts={"skip_scout": True},
                       dependencies={"allow_task_duplication": True})
    feed(cli, grid)
    rows = records(grid, task_id)
    assert [r[6:] for r in rows[:3]] == [(0, 4999, 1), (5000, 9999, 5001), (10000, 14999, 10001)]
    assert len(rows) == 20
    assert [(d["n_files"], d["n_files_to_be_used"]) for d in input_datasets(cli, grid, task_id)[1]] == [(20, 10)]
    assert [(d["n_files"], d["n_files_to_be_used"]) for d in input_datasets(cli, grid, unscouted)[1]] == [(20, 20)]


def test_secondaries_are_fed_with_their_attributes(cli, grid):
    task_id = submit(cli, grid, SPEC_EXAMPLES["secondaries"])
    feed(cli, grid)
    _, inputs = input_datasets(cli, grid, task_id)
    assert [(d["stream"], d["n_files"], d["n_files_to_be_used"]) for d in inputs] == [
        ("IN", 10, 10), ("MINBIAS_LOW", 30, 30), ("MINBIAS_HIGH", 3, 3), ("DBR", 1, 1)]
    dbr = records(grid, task_id, "DBR")
    assert dbr == [("DBR", "DBRelease-34.1.1.tar.gz", "ready", None, False, None, None, None, None)]  # nosplit+repeat: untracked
    assert {r[3:5] for r in records(grid, task_id, "MINBIAS_LOW")} == {(3, True)}


def test_feeding_twice_adds_nothing(cli, grid):
    task_id = submit(cli, grid, path=EXAMPLES / "prun_files.json")
    feed(cli, grid)
    before = records(grid, task_id)
    report = cli.json("feed", "--now", LATER, db=grid)
    assert report["counts"]["ready"] == 0
    assert records(grid, task_id) == before


def test_open_input_grows_and_closing_it_releases_the_task(cli, grid, tmp_path):
    name = "data24_13p6TeV.periodAllYear.physics_Main.PhysCont.DAOD_PHYS.grp24_v01_p6266"
    task_id = submit(cli, grid, SPEC_EXAMPLES["merge"])
    feed(cli, grid)
    task, [master] = input_datasets(cli, grid, task_id)
    assert (task["status"], task["error_dialog"]) == ("defined", f"waiting for input dataset {name} to be closed")
    assert (master["n_files"], master["n_files_to_be_used"], master["state"]) == (40, 0, "open")

    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump([{"lfn": f"DAOD_PHYS.00000040._{i:06d}.pool.root.1", "events": 20000, "size": 10} for i in range(41, 46)]))
    cli("data", "add-files", name, str(new), db=grid)
    assert cli.json("feed", db=grid)["counts"]["defined"] == 0  # not due for a re-scan yet (5 minutes)
    cli("feed", "--now", "2029-01-01T00:00:00", db=grid)
    assert input_datasets(cli, grid, task_id)[1][0]["n_files"] == 45
    assert cli.json("task", "show", str(task_id), db=grid)["status"] == "defined"

    cli("data", "close", name, db=grid)
    assert cli.json("feed", "--now", LATER, db=grid)["counts"]["ready"] == 1
    task, [master] = input_datasets(cli, grid, task_id)
    assert task["status"] == "ready" and task["error_dialog"] is None
    assert (master["n_files"], master["n_files_to_be_used"], master["state"]) == (45, 20, "closed")  # scouts: 10 chunks x 2 files
    assert run_sql(grid, check_all) == []


def test_run_until_closed_releases_growing_input_in_bunches(cli, grid):
    task_id = submit(cli, grid, SPEC_EXAMPLES["merge"], name="user.bob.rc", dependencies={"run_until_closed": True})
    feed(cli, grid)
    task, [master] = input_datasets(cli, grid, task_id)
    assert task["status"] == "ready"
    assert (master["state"], master["n_files"], master["n_files_to_be_used"]) == ("mutable", 40, 20)


def test_vanished_files_become_lost(cli, grid):
    name = "data24_13p6TeV.periodAllYear.physics_Main.PhysCont.DAOD_PHYS.grp24_v01_p6266"
    task_id = submit(cli, grid, SPEC_EXAMPLES["merge"])
    feed(cli, grid)
    cli("data", "remove-files", name, "DAOD_PHYS.00000040._000003.pool.root.1", "DAOD_PHYS.00000040._000007.pool.root.1", db=grid)
    cli("feed", "--now", LATER, db=grid)
    assert run_sql(grid, check_all) == []
    _, [master] = input_datasets(cli, grid, task_id)
    assert (master["n_files"], master["n_files_missing"]) == (38, 2)
    lost = [r[1] for r in records(grid, task_id) if r[2] == "lost"]
    assert lost == ["DAOD_PHYS.00000040._000003.pool.root.1", "DAOD_PHYS.00000040._000007.pool.root.1"]
    cli("data", "close", name, db=grid)
    cli("feed", "--now", "2031-01-01T00:00:00", db=grid)
    assert input_datasets(cli, grid, task_id)[1][0]["n_files_to_be_used"] == 20  # lost files are never released


def test_unknown_input_breaks_the_task(cli, grid):
    # Seed 000 "Broken tasks": input datasets that are unknown break the task (no 7-day wait to exhaustion).
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["inputs"][0]["dataset"] = "user.alice.never.there"
    task_id = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    assert feed(cli, grid)["counts"]["broken"] == 1
    task = cli.json("task", "show", str(task_id), db=grid)
    assert (task["status"], task["error_dialog"]) == ("broken", "input dataset user.alice.never.there is unknown to the data catalog")
    assert [h["status"] for h in task["status_history"]][-1] == "broken"
    assert cli.json("feed", "--now", LATER, db=grid)["counts"]["broken"] == 0  # final: never fed again


def test_unknown_input_with_allow_empty_input_finishes(cli, grid):
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["inputs"][0]["dataset"] = "user.alice.never.there"
    spec["completion"] = {"allow_empty_input": True}
    task_id = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, grid)
    assert cli.json("task", "show", str(task_id), db=grid)["status"] == "finishing"


def test_missing_input_with_wait_input_makes_the_task_pend_until_it_appears(cli, grid, tmp_path):
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["inputs"][0]["dataset"] = "user.alice.not.yet.there"
    spec["dependencies"] = {"wait_input": True}
    task_id = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    assert feed(cli, grid)["counts"]["pending"] == 1
    task = cli.json("task", "show", str(task_id), db=grid)
    assert (task["status"], task["old_status"], task["error_dialog"]) == (
        "pending", "defined", "input dataset user.alice.not.yet.there is not in the data catalog (waiting for it: waitInput)")
    catalog = tmp_path / "new.yaml"
    catalog.write_text(yaml.safe_dump({"datasets": [{"name": "user.alice.not.yet.there", "state": "closed", "files": [{"lfn": "a.root", "events": 10}]}]}))
    cli("data", "import", str(catalog), db=grid)
    assert cli.json("feed", db=grid)["counts"]["ready"] == 0  # still waiting (watchdog.wait_for_pending_minutes)
    assert cli.json("feed", "--now", LATER, db=grid)["counts"]["ready"] == 1
    task = cli.json("task", "show", str(task_id), db=grid)
    assert (task["status"], task["old_status"], task["error_dialog"]) == ("ready", None, None)


def test_an_empty_input_breaks_the_task_unless_allowed(cli, grid):
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["inputs"][0]["include"] = [r"\.nothing$"]
    broken = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    spec.update(name="user.alice.allowed.empty", completion={"allow_empty_input": True}, dependencies={"allow_task_duplication": True})
    allowed = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, grid)
    assert cli.json("task", "show", str(broken), db=grid)["error_dialog"] == "primary input dataset is empty or all files are excluded"
    assert cli.json("task", "show", str(broken), db=grid)["status"] == "broken"
    assert cli.json("task", "show", str(allowed), db=grid)["status"] == "finishing"


def test_include_offset_and_file_cap(cli, grid):
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["inputs"][0].update(include=[r"\._0000(0|1)\d\."], offset=2)
    spec["split"] = {"n_files_per_job": 5, "n_files": 5}
    task_id = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, grid)
    assert [r[1][-14:] for r in records(grid, task_id)] == [f"_0000{n:02d}.pool.root.1"[-14:] for n in (3, 4, 5, 6, 7)]


def test_pfn_list_inputs(cli, grid):
    spec = yaml.safe_load(SPEC_EXAMPLES["analysis"])
    spec["split"] = {"pfn_list": ["root://eos.cern.ch//eos/atlas/a.root^100", "https://host/data/b.root"]}
    task_id = cli.json("submit", "-", db=grid, input=yaml.safe_dump(spec))["task_id"]
    feed(cli, grid)
    assert [(r[1], r[5], r[8]) for r in records(grid, task_id)] == [("000001:a.root", 100, 1), ("000002:b.root", None, None)]


def test_feed_json_report_lists_each_task(cli, grid):
    submit(cli, grid, path=EXAMPLES / "prun_files.json")
    cli("refine", db=grid)
    report = cli.json("feed", db=grid)
    assert isinstance(report.pop("duration_s"), float)
    zero = dict.fromkeys(("ready", "assigning", "defined", "pending", "finishing", "broken", "rescanned", "skipped", "error"), 0)
    assert report == {"pass": "feed", "counts": {**zero, "ready": 1}, "errors": 0,
                      "items": [{"outcome": "ready", "task_id": 1, "reason": None}]}
    again = json.loads(cli("feed", "-o", "json", db=grid).stdout)
    assert (again["counts"], again["errors"], again["items"]) == (zero, 0, [])  # every count, also when nothing happened


def test_task_leases_are_released(cli, grid):
    submit(cli, grid, path=EXAMPLES / "prun_files.json")
    feed(cli, grid)
    assert run_sql(grid, lambda conn: conn.execute(select(tasks.c.lease_owner)).scalars().all()) == [None]


def test_check_reports_a_counter_that_disagrees(cli, grid):
    task_id = submit(cli, grid, path=EXAMPLES / "prun_files.json")
    feed(cli, grid)
    assert cli.json("check", db=grid) == {"ok": True, "violations": []}
    run_sql(grid, lambda conn: conn.execute(datasets.update().where(datasets.c.task_id == task_id, datasets.c.type == "input")
                                            .values(n_files=datasets.c.n_files + 1)))
    result = cli("check", db=grid, code=1)
    assert "n_files 13 but 12 records" in result.stdout


def test_documented_analysis_and_child_examples(cli, grid):
    analysis = submit(cli, grid, SPEC_EXAMPLES["analysis"])
    parent = submit(cli, grid, SPEC_EXAMPLES["event-split"])
    child = submit(cli, grid, SPEC_EXAMPLES["child"], parent=parent)
    feed(cli, grid)
    rows = records(grid, analysis)
    assert len(rows) == 23 and {(r[2], r[3]) for r in rows} == {("ready", 5)}  # retry.max_attempt 5
    assert [(d["n_files"], d["n_files_to_be_used"]) for d in input_datasets(cli, grid, analysis)[1]] == [(23, 23)]
    assert cli.json("task", "show", str(child), db=grid)["status"] == "pending"  # waits for its parent
    run_sql(grid, lambda conn: conn.execute(tasks.update().where(tasks.c.id == parent).values(status="done")))
    cli("refine", db=grid)  # the parent is done: the child is refined, then fed
    cli("feed", db=grid)
    # `done` was planted over input the parent never processed, which check sees; nothing else is wrong.
    assert [problem.split(" but ")[0] for problem in run_sql(grid, check_all)] == [f"task {parent} is done"]
    shown, _ = input_datasets(cli, grid, child)
    # The child reads its parent's output, which reaches the catalog when the parent's jobs register it;
    # a parent that ended without registering any leaves the child's input unknown: the child breaks.
    assert (shown["status"], shown["error_dialog"]) == (
        "broken", "input dataset mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.simul.HITS.e8514_s4162_tid00000001_00 is unknown to the data catalog")


def test_random_seed_dataset_is_ready_after_feeding(cli, grid):
    task_id = submit(cli, grid, SPEC_EXAMPLES["generation"])
    feed(cli, grid)
    seeds = [d for d in cli.json("task", "show", str(task_id), db=grid)["datasets"] if d["type"] == "random_seed"]
    assert [(d["name"], d["status"], d["n_files"]) for d in seeds] == [("RNDMSEED", "ready", 0)]


def test_a_feeder_killed_before_its_task_step_leaves_nothing_the_next_feed_cannot_finish(cli, grid):
    """Each dataset is fed in a transaction of its own and the task moves on in a last one: a feeder
    killed in between leaves the task `defined` with every input fed. The next feed takes it and moves
    it on (before, it was no candidate any more and stayed `defined` for ever)."""
    task_id = submit(cli, grid, SPEC_EXAMPLES["analysis"])
    assert feed(cli, grid)["counts"]["ready"] == 1
    run_sql(grid, lambda conn: conn.execute(tasks.update().where(tasks.c.id == task_id).values(status="defined")))
    assert feed(cli, grid)["counts"]["ready"] == 1
    assert cli.json("task", "show", str(task_id), db=grid)["status"] == "ready"
