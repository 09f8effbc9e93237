"""`jedictl queue-shares [show]|import|export|set`, and the store's definitions driving refine, generate and dispatch
(issue 8): the seed's own examples, redistribution computed by hand, malformed definitions refused with the store
unchanged."""

from __future__ import annotations

import json

import pytest
import yaml
from sqlalchemy import update

from jedictl.store.schema import jobs, tasks
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.conftest import ROOT
from tests.helpers import row_counts, run_sql

EXAMPLE = ROOT / "examples" / "queue-shares.yaml"
SITE = "CERN-PROD_GRID"  # core power 12.5
STRICT = {"JEDICTL_DISPATCH__SLOPPY_RATIO": "0"}


def panda_task(name: str, **attributes) -> str:
    """The worked example under another name, with its own outputs, and the attributes queues look at."""
    params = [{**p, "dataset": f"{name}.out", "value": f"--out={name}.out.${{SN}}.root"} if p.get("param_type") == "output" else p
              for p in WORKED_EXAMPLE["jobParameters"]]
    log = {**WORKED_EXAMPLE["log"], "dataset": f"{name}.log", "value": f"{name}.log.${{SN}}.log.tgz"}
    return json.dumps({**WORKED_EXAMPLE, "taskName": name, "jobParameters": params, "log": log, **attributes})


def by_name(rows, *keys):
    return {row["name"]: tuple(row[key] for key in keys) if len(keys) > 1 else row[keys[0]] for row in rows}


def set_status(store, status, *task_ids):
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id.in_(task_ids)).values(status=status)))


# ---------------------------------------------------------------------------------- import / export

def test_settings_until_an_import_then_the_store_round_trips(cli, store, tmp_path):
    shown = cli.json("queue-shares", db=store)
    assert (shown["work_queues_from"], shown["global_shares_from"]) == ("settings", "settings")
    assert cli.json("queue-shares", "show", db=store) == shown  # bare = show
    defaults = yaml.safe_load(cli("queue-shares", "export", db=store).stdout)
    assert [q["name"] for q in defaults["work_queues"]] == ["evgensimul", "group", "mcore", "managed", "user", "test"]
    assert ("MC Simulation", "Production") in {(s["name"], s["parent"]) for s in defaults["global_shares"]}

    assert cli.json("queue-shares", "import", str(EXAMPLE), db=store) == {"work_queues": 8, "global_shares": 9, "dry_run": False}
    shown = cli.json("queue-shares", db=store)
    assert (shown["work_queues_from"], shown["global_shares_from"]) == ("store", "store")
    exported = tmp_path / "exported.yaml"
    cli("queue-shares", "export", str(exported), db=store)
    document = yaml.safe_load(exported.read_text())
    source = yaml.safe_load(EXAMPLE.read_text())
    assert [q["name"] for q in document["work_queues"]] == [q["name"] for q in source["work_queues"]]
    group = next(q for q in document["work_queues"] if q["name"] == "group")
    assert group == {"name": "group", "vo": "*", "queue_type": "managed", "kind": "normal", "share": 10, "order": 20,
                     "criteria": "workingGroup LIKE :p1", "variables": {"p1": "GP_%"}, "stretchable": True}
    assert {s["name"]: (s["parent"], s["value"]) for s in document["global_shares"]} == {
        s["name"]: (s.get("parent"), s["value"]) for s in source["global_shares"]}
    assert next(s for s in document["global_shares"] if s["name"] == "Test")["throttled"] is False

    # Importing the export changes nothing; JSON works as well.
    before = row_counts(store)
    as_json = tmp_path / "exported.json"
    cli("queue-shares", "export", str(as_json), db=store)
    assert json.loads(as_json.read_text()) == document
    cli("queue-shares", "import", str(as_json), db=store)
    assert row_counts(store) == before
    assert yaml.safe_load(cli("queue-shares", "export", db=store).stdout) == document

    # A file with one section keeps the other; --dry-run writes nothing.
    only_shares = {"global_shares": [{"name": "Everything", "value": 1}]}
    assert cli.json("queue-shares", "import", "-", "--dry-run", db=store, input=json.dumps(only_shares)) == {
        "work_queues": None, "global_shares": 1, "dry_run": True}  # both keys always: null for the section left as it is
    assert yaml.safe_load(cli("queue-shares", "export", db=store).stdout) == document
    cli("queue-shares", "import", "-", db=store, input=json.dumps(only_shares))
    after = yaml.safe_load(cli("queue-shares", "export", db=store).stdout)
    assert after["work_queues"] == document["work_queues"]
    assert after["global_shares"] == [{"name": "Everything", "value": 1, "parent": None, "sort_order": 0}]


def test_the_refiner_tags_tasks_by_the_stored_definitions_with_the_seed_examples(cli, store):
    cli("queue-shares", "import", str(EXAMPLE), db=store)
    submitted = [
        ("evgen", {"processingType": "evgen"}, "evgensimul", "MC Simulation"),
        ("simul-gp", {"processingType": "simul", "workingGroup": "GP_Higgs"}, "evgensimul", "MC Simulation"),  # first by order
        ("merge-gp", {"processingType": "merge", "workingGroup": "GP_Higgs"}, "group", "Group production"),
        ("repro-8", {"processingType": "reprocessing", "coreCount": 8}, "repro_mcore", "Reprocessing"),
        ("repro-1", {"processingType": "reprocessing"}, "repro_score", "Reprocessing"),
        ("merge-ap", {"processingType": "merge", "workingGroup": "AP_Higgs"}, "managed", "Production default"),
        ("urgent", {"processingType": "urgent"}, "managed", "Express"),
    ]
    for name, attributes, _, _ in submitted:
        cli("submit", "-", db=store, input=panda_task(name, **attributes))
    cli("refine", db=store)
    listed = {t["name"]: (t["work_queue"], t["gshare"]) for t in cli.json("task", "list", db=store)}
    assert listed == {name: (queue, share) for name, _, queue, share in submitted}

    # A task no queue matches is broken with the reason; an explicit queue or share wins over matching.
    cli("queue-shares", "import", "-", db=store, input=json.dumps({"work_queues": [
        {"name": "evgensimul", "queue_type": "managed", "share": 1, "criteria": "processingType IN (:p1,:p2)",
         "variables": "p1:evgen,p2:simul"},
        {"name": "group", "queue_type": "managed", "share": 1, "criteria": "workingGroup LIKE :p1", "variables": "p1:GP_%"}]}))
    cli("submit", "-", db=store, input=panda_task("unmatched", processingType="merge"))
    cli("submit", "-", db=store, input=panda_task("named", processingType="merge", workQueueName="group", gshare="Analysis"))
    cli("refine", db=store)
    shown = {t["name"]: t for t in cli.json("task", "list", db=store)}
    assert shown["unmatched"]["status"] == "broken"
    assert (shown["named"]["work_queue"], shown["named"]["gshare"]) == ("group", "Analysis")


# ------------------------------------------------------------------------------------ redistribution

def test_effective_shares_after_redistribution_computed_by_hand(cli, store):
    cli("queue-shares", "import", str(EXAMPLE), db=store)
    for name, attributes in (("evgen", {"processingType": "evgen"}), ("repro-1", {"processingType": "reprocessing"}),
                             ("merge-gp", {"processingType": "merge", "workingGroup": "GP_Higgs"})):
        cli("submit", "-", db=store, input=panda_task(name, **attributes))
    cli("refine", db=store)  # 1 evgensimul, 2 repro_score, 3 group: all `defined`, none active yet
    shown = cli.json("queue-shares", db=store)
    assert all(row["effective_pct"] == 0.0 for row in shown["global_shares"])

    # Active: evgensimul and the partition through repro_score. The pool's shares are 40 evgensimul,
    # 10 group (stretchable but idle), 30 reprocessing, 20 managed. No active queue stretches, so the
    # idle 30 go to evgensimul and reprocessing as 40:30; inside the partition repro_score takes it all.
    set_status(store, "ready", 1, 2)
    queues = cli.json("queue-shares", db=store)["work_queues"]
    assert by_name(queues, "configured_pct", "effective_pct", "active") == {
        "evgensimul": (40.0, round(40 + 30 * 40 / 70, 2), True), "group": (10.0, 0.0, False),
        "reprocessing": (30.0, round(30 + 30 * 30 / 70, 2), True), "repro_mcore": (22.5, 0.0, False),
        "repro_score": (7.5, round(30 + 30 * 30 / 70, 2), True), "managed": (20.0, 0.0, False),
        "analysis": (None, None, False), "test": (None, None, False)}
    assert by_name(queues, "kind", "partition")["repro_score"] == ("sub", "reprocessing")

    # group becomes active: the stretchable queue takes all of managed's idle 20 first.
    set_status(store, "running", 3)
    shown = cli.json("queue-shares", db=store)
    assert {k: v for k, v in by_name(shown["work_queues"], "effective_pct").items() if k != "analysis" and k != "test"} == {
        "evgensimul": 40.0, "group": 30.0, "reprocessing": 30.0, "repro_mcore": 0.0, "repro_score": 30.0, "managed": 0.0}
    # Global shares: only Production's MC Simulation (50), Group production (10) and Reprocessing (25) are active.
    assert {k: v for k, v in by_name(shown["global_shares"], "effective_pct").items() if v} == {
        "Production": 100.0, "MC Simulation": round(5000 / 85, 2), "Group production": round(1000 / 85, 2),
        "Reprocessing": round(2500 / 85, 2)}
    assert by_name(shown["global_shares"], "configured_pct")["Reprocessing"] == 15.0  # 60 x 25 / 100

    # Not stretchable any more: the idle 20 are shared by everyone active, 40:10:30.
    change = cli.json("queue-shares", "set", "group", "--no-stretchable", db=store)
    assert change == {"name": "group", "kind": "work queue", "vo": "*", "queue_type": "managed",
                      "before": {"share": 10, "stretchable": True}, "after": {"share": 10, "stretchable": False}}
    effective = by_name(cli.json("queue-shares", db=store)["work_queues"], "effective_pct")
    assert (effective["evgensimul"], effective["group"], effective["reprocessing"]) == (50.0, 12.5, 37.5)

    # A bigger share for group: 40 + 30 + 30 of 100 active, managed's 20 shared 40:30:30 -> 48, 36, 36 of 120.
    cli("queue-shares", "set", "group", "--share", "30", db=store)
    queues = cli.json("queue-shares", db=store)["work_queues"]
    assert by_name(queues, "configured_pct")["group"] == 25.0  # 30 of 120
    assert (by_name(queues, "effective_pct")["evgensimul"], by_name(queues, "effective_pct")["group"]) == (
        round(100 * 40 / 100, 2), round(100 * 30 / 100, 2))
    # A global share's value: Analysis 25 -> 75 of Express 10, Test 5, Production 60, Analysis 75, Default 0.
    cli("queue-shares", "set", "Analysis", "--share", "75", db=store)
    assert by_name(cli.json("queue-shares", db=store)["global_shares"], "configured_pct")["Analysis"] == 50.0


# -------------------------------------------------------------------------------- jobs: state and order

def _two_tasks(cli, store, tmp_path):
    """Task 1 (evgen: evgensimul, MC Simulation) and task 2 (reprocessing: repro_score, Reprocessing), 25 files
    each at two files per job, no scouts, fed and brokered; generate makes 2 jobs per task per pass."""
    _grid(cli, store, tmp_path)
    cli("queue-shares", "import", str(EXAMPLE), db=store)
    cli("submit", "-", db=store, input=panda_task("evgen", processingType="evgen", skipScout=True))
    cli("submit", "-", db=store, input=panda_task("repro", processingType="reprocessing", skipScout=True))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store)
    return {"JEDICTL_GENERATE__N_FILES": "4", **STRICT}


def _generate_one(cli, store, env):
    """One task visited: which one got jobs."""
    report = json.loads(cli("generate", "--limit", "1", "--seed", "1", "-o", "json", db=store, env=env).stdout)
    run_sql(store, lambda conn: conn.execute(update(jobs).values(site=SITE)))
    return [(item["task_id"], item["jobs"]) for item in report["items"] if item.get("jobs")]


def _dispatch(cli, store, count, env):
    out = json.loads(cli("jobs", "dispatch", "--site", SITE, "--count", str(count), "-o", "json", db=store, env=env).stdout)
    return [job["gshare"] for job in out["jobs"]]


def test_generation_visits_the_most_under_served_share_first(cli, store, tmp_path):
    env = _two_tasks(cli, store, tmp_path)
    # Nothing runs: the tree's order -- MC Simulation comes before Reprocessing.
    assert _generate_one(cli, store, env) == [(1, 2)]
    assert _dispatch(cli, store, 2, env) == ["MC Simulation"] * 2
    # MC Simulation executes and Reprocessing does not: Reprocessing is the most under-served.
    assert _generate_one(cli, store, env) == [(2, 2)]
    assert _dispatch(cli, store, 2, env) == ["Reprocessing"] * 2
    # 2 and 2 running: against 30 % and 15 % of the tree MC Simulation is further below its target.
    shares = {row["name"]: row for row in cli.json("queue-shares", db=store)["global_shares"]}
    # Idle shares with a target lead (Test always first), then MC Simulation (2 of a 1.2 pledge) before
    # Reprocessing (2 of 0.6).
    assert {name: row["rank"] for name, row in shares.items() if row["leaf"]} == {
        "Test": 0, "Express": 1, "Analysis": 2, "Group production": 3, "Production default": 4, "MC Simulation": 5,
        "Reprocessing": 6, "Default": 7}
    assert (shares["MC Simulation"]["state"], shares["Reprocessing"]["state"]) == ("under", "over")
    assert _generate_one(cli, store, env) == [(1, 2)]
    # A bigger Reprocessing share turns the order round.
    cli("queue-shares", "set", "Reprocessing", "--share", "500", db=store)
    assert _generate_one(cli, store, env) == [(2, 2)]


def test_show_reports_jobs_cores_target_and_actual(cli, store, tmp_path):
    env = _two_tasks(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store, env={**env, "JEDICTL_GENERATE__N_FILES": "25"})  # 13 jobs each
    run_sql(store, lambda conn: conn.execute(update(jobs).values(site=SITE)))
    assert _dispatch(cli, store, 3, env) == ["MC Simulation"] * 3  # nothing executed: the tree's order
    shown = cli.json("queue-shares", "--tolerance", "5", db=store)
    shares = {row["name"]: row for row in shown["global_shares"]}
    columns = ("running_jobs", "queued_jobs", "running_cores", "queued_cores", "running_hs06", "effective_pct", "actual_pct", "state")
    # Active: MC Simulation (50) and Reprocessing (25) of Production, which takes the whole 100.
    assert {name: tuple(shares[name][c] for c in columns) for name in ("Production", "MC Simulation", "Reprocessing", "Analysis")} == {
        "Production": (3, 23, 3, 23, 37.5, 100.0, 100.0, "on_target"),
        "MC Simulation": (3, 10, 3, 10, 37.5, round(5000 / 75, 2), 100.0, "over"),
        "Reprocessing": (0, 13, 0, 13, 0.0, round(2500 / 75, 2), 0.0, "under"),
        "Analysis": (0, 0, 0, 0, 0.0, 0.0, 0.0, "idle")}
    # Dispatch order: Test always first, shares with a target and nothing executing by tree order, MC Simulation last
    # but for Default (no target at all).
    assert {name: row["rank"] for name, row in shares.items() if row["leaf"]} == {
        "Test": 0, "Express": 1, "Analysis": 2, "Group production": 3, "Reprocessing": 4, "Production default": 5,
        "MC Simulation": 6, "Default": 7}
    assert (shares["Production"]["leaf"], shares["Production"]["rank"], shares["MC Simulation"]["path"]) == (
        False, None, "Production/MC Simulation")
    queues = {row["name"]: row for row in shown["work_queues"]}
    assert {name: tuple(queues[name][c] for c in columns) for name in ("evgensimul", "reprocessing", "repro_score", "group")} == {
        "evgensimul": (3, 10, 3, 10, 37.5, round(40 + 30 * 40 / 70, 2), 100.0, "over"),
        "reprocessing": (0, 13, 0, 13, 0.0, round(30 + 30 * 30 / 70, 2), 0.0, "under"),
        "repro_score": (0, 13, 0, 13, 0.0, round(30 + 30 * 30 / 70, 2), 0.0, "under"),
        "group": (0, 0, 0, 0, 0.0, 0.0, 0.0, "idle")}
    assert queues["repro_score"]["rank"] < queues["evgensimul"]["rank"]

    # The next executor gets Reprocessing's jobs: the dispatcher uses the same order.
    assert _dispatch(cli, store, 1, env) == ["Reprocessing"]

    # A share jobs carry that the tree lacks is listed as undefined; the table and tsv views render.
    run_sql(store, lambda conn: conn.execute(update(jobs).where(jobs.c.id == 1).values(gshare="Gone")))
    shares = {row["name"]: row for row in cli.json("queue-shares", db=store)["global_shares"]}
    assert (shares["Gone"]["state"], shares["Gone"]["running_jobs"], shares["Gone"]["configured_pct"]) == ("undefined", 1, None)
    table = cli("queue-shares", db=store).stdout
    assert "Production/MC Simulation" in table and "reprocessing/repro_score" in table and "undefined" in table
    tsv = cli("queue-shares", "-o", "tsv", db=store).stdout.splitlines()
    assert tsv[0].split("\t")[:3] == ["section", "path", "vo"] and len(tsv) == 1 + len(shares) + len(queues)


def test_dispatch_follows_the_stored_tree(cli, store, tmp_path):
    env = _two_tasks(cli, store, tmp_path)
    cli("generate", "--seed", "1", db=store, env={**env, "JEDICTL_GENERATE__N_FILES": "25"})
    run_sql(store, lambda conn: conn.execute(update(jobs).values(site=SITE)))
    tree = {"global_shares": [{"name": "MC Simulation", "value": 10, "processingtype": "evgen"},
                              {"name": "Reprocessing", "value": 90, "processingtype": "reprocessing"}]}
    cli("queue-shares", "import", "-", db=store, input=json.dumps(tree))
    # One job per executor: MC Simulation leads on tree order, then Reprocessing until it has 9 of 10
    # (ties keep tree order), then MC Simulation again.
    assert [_dispatch(cli, store, 1, env)[0] for _ in range(11)] == ["MC Simulation"] + ["Reprocessing"] * 9 + ["MC Simulation"]


# ------------------------------------------------------------------------------------- malformed input

BAD_DOCUMENTS = [
    ({"global_shares": [{"name": "A", "value": 1, "parent": "B"}, {"name": "B", "value": 1, "parent": "A"}]},
     "global_shares[0].parent: shares form a cycle: A -> B -> A"),
    ({"global_shares": [{"name": "A", "value": 1, "parent": "A"}]}, "global_shares[0].parent: shares form a cycle: A -> A"),
    ({"global_shares": [{"name": "A", "value": 1, "parent": "Nowhere"}]}, "global_shares[0].parent: names no share defined here"),
    ({"global_shares": [{"name": "A", "value": 1}, {"name": "A", "value": 2}]}, "global_shares[1].name: share 'A' is defined twice"),
    ({"global_shares": [{"name": "A", "value": 1, "children": [{"name": "A", "value": 1}]}]},
     "global_shares[0].children[0].name: share 'A' is defined twice"),
    ({"global_shares": [{"name": "A", "value": 1, "colour": "red"}]}, "global_shares[0].colour: unknown attribute"),
    ({"global_shares": [{"name": "A", "value": 1, "processingtype": "simul("}]},
     "global_shares[0].processingtype: is not a valid regular expression"),
    ({"global_shares": [{"name": "A", "value": -1}]}, "global_shares[0].value"),
    ({"global_shares": []}, "global_shares: at least one share is required"),
    ({"work_queues": [{"name": "q", "queue_type": "managed"}, {"name": "q", "queue_type": "managed"}]},
     "work_queues[1].name: queue 'q' is defined twice"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "colour": "red"}]}, "work_queues[0].colour: unknown attribute"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "colour = 'red'"}]},
     "work_queues[0].criteria: unknown attribute 'colour'"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "workingGroup LIKE"}]}, "work_queues[0].criteria: ends too early"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "workingGroup LIKE :p1"}]},
     "work_queues[0].criteria: bind variable :p1 has no value"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "workingGroup LIKE 'GP_%' 'x'"}]},
     "work_queues[0].criteria: unexpected"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "criteria": "processingType IN ('a' 'b')"}]},
     "work_queues[0].criteria: expected ')'"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "variables": "p1"}]}, "work_queues[0].variables: 'p1' is not name:value"),
    ({"work_queues": [{"name": "s", "queue_type": "managed", "kind": "sub", "partition": "p"}]},
     "work_queues[0].partition: sub-queue 's' names no known partition"),
    ({"work_queues": [{"name": "p", "queue_type": "user", "kind": "partition"},
                      {"name": "s", "queue_type": "managed", "kind": "sub", "partition": "p"}]},
     "work_queues[1].partition: sub-queue 's' names no known partition ('p') of vo * and type managed"),
    ({"work_queues": [{"name": "p", "queue_type": "managed", "kind": "partition", "criteria": "vo = 'x'"}]},
     "work_queues[0].criteria: a partition has no criteria"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "status": "paused"}]}, "work_queues[0].status: must be one of active, inactive"),
    ({"work_queues": [{"name": "q", "queue_type": "managed", "share": -5}]}, "work_queues[0].share"),
    ({"work_queues": [{"name": "q" * 65, "queue_type": "managed"}]}, "work_queues[0].name"),
    ({"work_queues": []}, "work_queues: at least one work queue is required"),
    ({"queues": []}, "queues: unknown section"),
    ({}, "nothing to import"),
]


@pytest.mark.parametrize("document,message", BAD_DOCUMENTS, ids=[m.split(":")[0] + "-" + str(i) for i, (_, m) in enumerate(BAD_DOCUMENTS)])
def test_malformed_definitions_are_refused_and_nothing_changes(cli, store, document, message):
    cli("queue-shares", "import", str(EXAMPLE), db=store)
    before, exported = row_counts(store), cli("queue-shares", "export", db=store).stdout
    # A valid section next to the bad one is not written either.
    full = {"work_queues": [{"name": "only", "queue_type": "managed"}], "global_shares": [{"name": "Only", "value": 1}], **document}
    for candidate in (document, full) if document else (document,):
        result = cli("queue-shares", "import", "-", db=store, input=json.dumps(candidate), code=2)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("jedictl: error: ") and message in lines[0], result.stderr
    assert row_counts(store) == before
    assert cli("queue-shares", "export", db=store).stdout == exported


@pytest.mark.parametrize("text,message", [
    ("- not: a mapping\n", "must hold a mapping"),
    ("work_queues: [\n", "invalid YAML"),
    ('{"work_queues": ', "invalid JSON"),
    ("work_queues: {name: q}\n", "work_queues: must be a list"),
])
def test_unreadable_files_are_refused(cli, store, text, message):
    cli("queue-shares", "import", str(EXAMPLE), db=store)
    before = row_counts(store)
    assert message in cli("queue-shares", "import", "-", db=store, input=text, code=2).stderr
    assert row_counts(store) == before


@pytest.mark.parametrize("args,message", [
    (["nope", "--share", "1"], "no work queue or global share named 'nope'"),
    (["group", "--share", "-1"], "--share: must be a number of at least 0"),
    (["group"], "nothing to set"),
    (["Analysis", "--stretchable"], "--stretchable: only work queues stretch"),
    (["group", "--share", "1", "--queue-type", "user"], "no work queue or global share named 'group' (of type user)"),
    (["Test", "--share", "1", "--kind", "queue"], "no work queue or global share named 'Test'"),
])
def test_set_refuses_what_it_cannot_do(cli, store, args, message):
    cli("queue-shares", "import", str(EXAMPLE), db=store)
    before, exported = row_counts(store), cli("queue-shares", "export", db=store).stdout
    assert message in cli("queue-shares", "set", *args, db=store, code=2).stderr
    assert row_counts(store) == before and cli("queue-shares", "export", db=store).stdout == exported


def test_set_before_any_import_copies_the_settings_section(cli, store):
    assert cli.json("queue-shares", "set", "managed", "--share", "35", db=store)["after"] == {"share": 35, "stretchable": False}
    shown = cli.json("queue-shares", db=store)
    assert (shown["work_queues_from"], shown["global_shares_from"]) == ("store", "settings")
    assert by_name(shown["work_queues"], "configured_pct")["managed"] == round(100 * 35 / 105, 2)  # 40 + 10 + 20 + 35
    # A name that is both a queue and a share needs --kind.
    cli("queue-shares", "import", "-", db=store, input=json.dumps({"global_shares": [{"name": "managed", "value": 1}]}))
    assert "--kind" in cli("queue-shares", "set", "managed", "--share", "2", db=store, code=2).stderr
    assert cli.json("queue-shares", "set", "managed", "--share", "2", "--kind", "share", db=store)["kind"] == "global share"
