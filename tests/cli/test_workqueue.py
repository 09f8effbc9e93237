"""`jedictl workqueue create|list|show|acquire|update-locations` on both backends (issue 21, item 3; seed 002;
docs/queue-layers.md): elements per block, an agent's global pull by its free slots and local release,
`generate` making jobs only for released blocks at the agent's sites, drained sites, priority, the owner
cap, the location update, element status following its jobs and task, and `check` catching an element
two agents took when the claim's guard is broken."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import files, jobs
from tests.helpers import run_sql
from tests.workqueue_setup import NOW, acquire, agent, catalog, elements, grid, statuses, submit, write


def _jobs_by_block(store) -> dict[str, set[str]]:
    """Dataset (block) name -> the sites of the jobs reading its records."""
    from jedictl.store.schema import datasets

    def read(conn):
        rows = conn.execute(select(datasets.c.name, jobs.c.site).join(files, files.c.dataset_id == datasets.c.id)
                            .join(jobs, jobs.c.id == files.c.job_id).distinct())
        found: dict[str, set[str]] = {}
        for name, site in rows:
            found.setdefault(name, set()).add(site)
        return found

    return run_sql(store, read)


def _generate(cli, store) -> int:
    return cli.json("generate", "--seed", "1", "--now", NOW, db=store)["counts"]["jobs"]


# ------------------------------------------------------------------------------------------ creation

def test_create_makes_one_element_per_block_with_its_estimate_and_possible_sites(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    task_id = submit(cli, store, queue=False)
    made = cli.json("workqueue", "create", str(task_id), "--now", NOW, db=store)
    assert [(line["element"], line["block"], line["action"]) for line in made] == [
        (1, "wq.blk0", "created"), (2, "wq.blk1", "created"), (3, "wq.blk2", "created"), (4, "wq.blk3", "created")]
    listed = elements(cli, store)
    assert [(e["status"], e["n_files"], e["n_jobs"], e["possible_sites"], e["priority"], e["job_type"]) for e in listed.values()] == [
        ("Available", 6, 3, ["SITE_A", "SITE_B"], 500, "managed")] * 3 + [("Available", 6, 3, ["SITE_C"], 500, "managed")]
    again = cli.json("workqueue", "create", str(task_id), "--now", NOW, db=store)
    assert {line["action"] for line in again} == {"exists"}  # idempotent: WMCore's deterministic element ids
    shown = cli.json("workqueue", "show", "1", db=store)
    assert shown["block"] == "wq.blk0" and [(h["from_status"], h["to_status"]) for h in shown["history"]] == [(None, "Available")]
    assert run_sql(store, check_all) == []


def test_the_task_s_site_lists_bound_the_possible_sites(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store, excludedSite=["SITE_B"])
    assert [e["possible_sites"] for e in elements(cli, store).values()] == [["SITE_A"]] * 3 + [["SITE_C"]]


def test_bad_input_is_one_line_and_changes_nothing(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    assert cli("workqueue", "create", "99", db=store, code=2).stderr == "jedictl: error: no task 99\n"
    registered = cli.json("submit", "-", db=store, input=json.dumps(__import__("tests.workqueue_setup", fromlist=["task"]).task()))["task_id"]
    assert "has no input dataset yet (registered)" in cli("workqueue", "create", str(registered), db=store, code=2).stderr
    assert cli("workqueue", "show", "7", db=store, code=2).stderr == (
        "jedictl: error: no work-queue element 7 (`jedictl workqueue list` shows them)\n")
    assert "'Runing' is not an element status" in cli("workqueue", "list", "--status", "Runing", db=store, code=2).stderr
    assert cli("workqueue", "acquire", "--agent", "nobody", db=store, code=2).stderr == (
        "jedictl: error: no agent 'nobody' (`jedictl agents add nobody --site ...` adds it)\n")
    assert cli.json("workqueue", "list", db=store) == []


def test_a_task_with_jobs_is_not_put_in_the_queue(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    task_id = submit(cli, store, queue=False)
    assert _generate(cli, store) > 0
    assert cli("workqueue", "create", str(task_id), db=store, code=2).stderr == (
        f"jedictl: error: task {task_id} already has jobs: the work queue takes a task before its first job\n")


# --------------------------------------------------------------------------------- acquire and generate

def test_an_agent_takes_what_its_global_slots_allow_and_generate_makes_only_those_blocks_jobs(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store)
    assert _generate(cli, store) == 0  # nothing released yet: a queued task's blocks wait for an agent
    agent(cli, store, "agentA", "SITE_A", pending=2, running=1)  # 3 slots: one element of 3 jobs
    report = acquire(cli, store, "agentA")
    assert report["counts"]["acquired"] == 1 and report["counts"]["released"] == 1
    left = {item["element"]: item["reason"] for item in report["items"] if item["outcome"] == "left"}
    assert left == {2: "no free slot at priority 500 (SITE_A)", 3: "no free slot at priority 500 (SITE_A)",
                    4: "no site of the agent holds its data"}
    assert statuses(cli, store) == {1: ("Running", "agentA"), 2: ("Available", None), 3: ("Available", None), 4: ("Available", None)}
    assert [(h["from_status"], h["to_status"], h["agent"]) for h in cli.json("workqueue", "show", "1", db=store)["history"]] == [
        (None, "Available", None), ("Available", "Negotiating", "agentA"), ("Negotiating", "Acquired", "agentA"),
        ("Acquired", "Running", "agentA")]
    assert _generate(cli, store) == 3
    assert _jobs_by_block(store) == {"wq.blk0": {"SITE_A"}}  # its block only, at the agent's site
    # Its 3 queued jobs fill SITE_A: the next pass takes nothing more.
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 0
    # A second agent at SITE_B and SITE_C splits the rest by its own slots.
    agent(cli, store, "agentB", "SITE_B", "SITE_C", pending=3, running=3)
    report = acquire(cli, store, "agentB")
    assert sorted((i["element"], i["site"]) for i in report["items"] if i["outcome"] == "acquired") == [
        (2, "SITE_B"), (3, "SITE_B"), (4, "SITE_C")]
    assert _generate(cli, store) == 9
    assert _jobs_by_block(store) == {"wq.blk0": {"SITE_A"}, "wq.blk1": {"SITE_B"}, "wq.blk2": {"SITE_B"}, "wq.blk3": {"SITE_C"}}
    listed = cli.json("agents", "list", db=store)
    assert [(a["agent"], a["Running"]) for a in listed] == [("agentA", 1), ("agentB", 3)]
    assert cli("check", db=store).stdout == "check: consistent\n"


def test_a_drained_site_takes_nothing_from_the_global_queue_but_its_agent_still_releases(cli, store, tmp_path):
    grid(cli, store, tmp_path, catalog(n_blocks=5))
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3, running=3)
    report = acquire(cli, store, "agentA")  # global 6: blocks 0 and 1; local 6: both released
    assert (report["counts"]["acquired"], report["counts"]["released"]) == (2, 2)
    assert _generate(cli, store) == 6
    dispatched = cli.json("jobs", "dispatch", "--site", "SITE_A", "--count", "3", "--now", NOW, db=store)["jobs"]
    assert len(dispatched) == 3  # 3 running, 3 queued
    report = acquire(cli, store, "agentA")
    # Global: running jobs are not subtracted -- 3 queued of 6 -- so block 2 comes; local: 6 less 3 running
    # leaves 3, all used by the 3 queued jobs, so it waits in the agent's local queue.
    assert [(i["outcome"], i["element"]) for i in report["items"] if i["outcome"] in ("acquired", "held")] == [("acquired", 3), ("held", 3)]
    assert statuses(cli, store)[3] == ("Acquired", "agentA")
    cli("agents", "set-state", "agentA", "SITE_A", "drain", db=store)
    cli("agents", "add", "agentA", "--site", "SITE_A", "--running-threshold", "10", db=store)  # room at both levels now
    shown = cli.json("agents", "show", "agentA", db=store)["sites"][0]
    assert (shown["state"], shown["global_slots"], shown["local_slots"], shown["pending_jobs"], shown["running_jobs"]) == (
        "drain", None, 7, 3, 3)
    report = acquire(cli, store, "agentA")
    assert report["counts"]["acquired"] == 0  # drained: the global level leaves SITE_A out (block 3 stays Available)
    assert {i["reason"] for i in report["items"] if i["outcome"] == "left" and i["element"] == 4} == {
        "its sites at the agent take no new work here (drained or down)"}
    assert [(i["outcome"], i["element"]) for i in report["items"] if i["outcome"] == "released"] == [("released", 3)]
    assert statuses(cli, store)[4] == ("Available", None)
    cli("agents", "set-state", "agentA", "SITE_A", "normal", db=store)
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 1
    assert run_sql(store, check_all) == []


def test_higher_priority_work_is_pulled_past_lower_priority_work_filling_the_site(cli, store, tmp_path):
    grid(cli, store, tmp_path, catalog(n_blocks=3))
    low = submit(cli, store, name="wq.low", priority=100)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 1  # the site is full at priority 100
    assert _generate(cli, store) == 3
    high = submit(cli, store, name="wq.high", priority=900)
    report = acquire(cli, store, "agentA")
    taken = [i["element"] for i in report["items"] if i["outcome"] == "acquired"]
    by_id = elements(cli, store)
    assert [by_id[e]["task_id"] for e in taken] == [high]  # only work at 900 or above counts against the 900 element
    assert {by_id[e]["task_id"] for e, row in by_id.items() if row["status"] == "Available" and "SITE_A" in row["possible_sites"]} == {low, high}
    assert run_sql(store, check_all) == []


def test_the_owner_cap_stops_an_agent_pulling_an_owners_work(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", "SITE_B", pending=50, max_jobs_per_owner="3")
    report = acquire(cli, store, "agentA")
    assert report["counts"]["acquired"] == 1
    assert {i["reason"] for i in report["items"] if i["outcome"] == "left" and i["element"] in (2, 3)} == {
        "owner root has 3 jobs at the agent, its max_jobs_per_owner is 3"}
    cli("agents", "add", "agentA", "--no-owner-cap", db=store)
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 2


def test_the_pass_limit_is_work_per_cycle(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", "SITE_C", pending=50)
    assert acquire(cli, store, "agentA", "--limit", "2")["counts"]["acquired"] == 2
    assert acquire(cli, store, "agentA", "--limit", "2")["counts"]["acquired"] == 2


# ------------------------------------------------------------------------------ locations and the ends

def test_update_locations_refreshes_available_elements_from_the_replicas(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    acquire(cli, store, "agentA")  # element 1 Running
    more = catalog()
    for block in more["datasets"]:
        block["replicas"] = [{"endpoint": f"{site}_DISK"} for site in ("SITE_A", "SITE_B", "SITE_C")]
        block["files"] = []
    cli("data", "import", write(tmp_path, "more.yaml", {"datasets": more["datasets"]}), db=store)
    report = cli.json("workqueue", "update-locations", "--now", "2030-03-01T09:00:00", db=store)
    assert [(i["outcome"], i["element"]) for i in report["items"]] == [("updated", 2), ("updated", 3), ("updated", 4)]
    listed = elements(cli, store)
    assert listed[1]["possible_sites"] == ["SITE_A", "SITE_B"]  # Running: not refreshed (WMCore refreshes Available ones)
    assert listed[4]["possible_sites"] == ["SITE_A", "SITE_B", "SITE_C"] and listed[4]["locations_at"] == "2030-03-01T09:00:00Z"
    assert {i["outcome"] for i in cli.json("workqueue", "update-locations", db=store)["items"]} == {"unchanged"}


def test_an_element_follows_its_jobs_to_done_and_its_killed_task_to_canceled(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    task_id = submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    acquire(cli, store, "agentA")
    assert _generate(cli, store) == 3
    cli("simulate", "--site", "SITE_A", "--jobs", "10", "--failure-rate", "0", "--seed", "1", "--now", NOW, db=store)
    report = acquire(cli, store, "agentA")
    assert [(i["outcome"], i["element"], i["reason"]) for i in report["items"] if i["outcome"] == "done"] == [
        ("done", 1, "6 of 6 records finished, 0 failed")]
    assert statuses(cli, store)[1] == ("Done", "agentA")
    cli("kill", str(task_id), "--now", NOW, db=store)
    assert cli.json("task", "show", str(task_id), db=store)["status"] == "aborted"
    report = cli.json("workqueue", "update-locations", "--now", NOW, db=store)
    assert [(i["outcome"], i["element"], i["reason"]) for i in report["items"]] == [
        ("canceled", 2, "task aborted"), ("canceled", 3, "task aborted"), ("canceled", 4, "task aborted")]
    # The pass that ended element 1 took element 2 into the freed slots; killed, it ends Canceled with its agent.
    assert statuses(cli, store) == {1: ("Done", "agentA"), 2: ("Canceled", "agentA"), 3: ("Canceled", None), 4: ("Canceled", None)}
    assert run_sql(store, check_all) == []


# --------------------------------------------------------------------------------------- the invariant

def test_check_catches_an_element_two_agents_took_when_the_claim_is_unguarded(cli, store, tmp_path, monkeypatch):
    from sqlalchemy import true

    from jedictl.store import workqueue

    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    agent(cli, store, "agentB", "SITE_B", pending=3)
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 1
    monkeypatch.setattr(workqueue, "_claimable", lambda: true())  # the guard gone: held elements look Available
    report = acquire(cli, store, "agentB")
    assert 1 in [i["element"] for i in report["items"] if i["outcome"] == "acquired"]  # agentA's element taken again
    verdict = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    found = [v for v in verdict["violations"] if v["check"] == "workqueue_elements_follow_their_agents"]
    assert found[0]["object"] == "work-queue element 1"
    assert found[0]["message"] == "work-queue element 1 was taken from the global queue by agents agentA, agentB: one agent only"


def test_check_catches_elements_that_disagree_with_their_agent_or_jobs(cli, store, tmp_path):
    from sqlalchemy import update

    from jedictl.store.schema import workqueue_elements as wqe

    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    agent(cli, store, "agentB", "SITE_B", pending=50)
    acquire(cli, store, "agentA")  # element 1 Running at agentA
    assert _generate(cli, store) == 3
    assert cli("check", db=store).stdout == "check: consistent\n"

    def break_it(conn):
        conn.execute(update(wqe).where(wqe.c.id == 2).values(agent="agentB"))  # Available, yet naming an agent
        conn.execute(update(wqe).where(wqe.c.id == 3).values(status="Acquired", agent="ghost"))  # an agent that does not exist
        conn.execute(update(wqe).where(wqe.c.id == 1).values(status="Acquired"))  # its block has jobs, yet not released

    run_sql(store, break_it)
    messages = [v["message"] for v in json.loads(cli("check", "-o", "json", db=store, code=1).stdout)["violations"]
                if v["check"] == "workqueue_elements_follow_their_agents"]
    assert messages == [
        "work-queue element 2 is Available but names agent agentB",
        "work-queue element 3 is Acquired for agent ghost, which does not exist",
        "work-queue element 1 is Acquired yet 6 records of its block are in jobs (job 1 first): only a released (Running) block gets jobs"]

    def more(conn):
        conn.execute(update(wqe).where(wqe.c.id.in_((2, 3))).values(status="Available", agent=None))
        conn.execute(update(wqe).where(wqe.c.id == 1).values(status="Running", agent="agentB"))  # jobs at SITE_A, agentB serves SITE_B

    run_sql(store, more)
    messages = [v["message"] for v in json.loads(cli("check", "-o", "json", db=store, code=1).stdout)["violations"]
                if v["check"] == "workqueue_elements_follow_their_agents"]
    assert "work-queue element 1: job 1 of its block runs at SITE_A, which its agent agentB does not serve" in messages

    def done(conn):
        conn.execute(update(wqe).where(wqe.c.id == 1).values(status="Done", agent="agentA"))

    run_sql(store, done)
    messages = [v["message"] for v in json.loads(cli("check", "-o", "json", db=store, code=1).stdout)["violations"]
                if v["check"] == "workqueue_elements_follow_their_agents"]
    assert messages == ["work-queue element 1 is Done but 6 records of its block are still to process"]


def test_an_element_that_gets_sites_from_the_location_update_drops_its_no_location_reason(cli, store, tmp_path):
    grid(cli, store, tmp_path, catalog(last_at=()))
    submit(cli, store)
    assert elements(cli, store)[4]["reason"] == "its data is at no site the task may use: waiting for the location update"
    more = catalog()
    cli("data", "import", write(tmp_path, "more.yaml", {"datasets": [{**more["datasets"][3], "files": []}]}), db=store)
    cli("workqueue", "update-locations", db=store)
    element = elements(cli, store)[4]
    assert element["possible_sites"] == ["SITE_C"] and element["reason"] is None


def test_the_jobs_of_an_ended_element_are_not_checked_against_a_removed_agents_sites(cli, store, tmp_path):
    from sqlalchemy import delete, update

    from jedictl.store.schema import agent_sites
    from jedictl.store.schema import workqueue_elements as wqe

    # `agents remove` is allowed once the agent holds nothing; its agent_sites go with it (cascade), and the
    # jobs of its Done blocks must not then read as running where no agent serves.
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    acquire(cli, store, "agentA")
    assert _generate(cli, store) == 3
    run_sql(store, lambda conn: conn.execute(update(wqe).where(wqe.c.id == 1).values(status="Done")))
    run_sql(store, lambda conn: conn.execute(delete(agent_sites).where(agent_sites.c.agent == "agentA")))
    messages = [v["message"] for v in json.loads(cli("check", "-o", "json", db=store, code=None).stdout)["violations"]
                if v["check"] == "workqueue_elements_follow_their_agents"]
    assert not any("does not serve" in m for m in messages)


# ------------------------------------------------------------------------- a block that cannot be claimed

def _block_ids(store) -> dict[str, int]:
    from jedictl.store.schema import datasets

    return dict(run_sql(store, lambda conn: conn.execute(select(datasets.c.name, datasets.c.id).where(datasets.c.name.like("wq.blk%"))).all()))


def test_a_block_whose_records_cannot_be_taken_leaves_the_task_s_next_released_block_to_generate(cli, store, tmp_path):
    from sqlalchemy import update

    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=6)  # blocks 0 and 1 released at SITE_A
    assert acquire(cli, store, "agentA")["counts"]["released"] == 2
    blk0 = _block_ids(store)["wq.blk0"]
    # Block 0's records may not be attempted by any job (no attempt left): no pass can take them.
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.dataset_id == blk0).values(max_attempt=files.c.attempt_nr)))
    assert _generate(cli, store) == 3
    assert _jobs_by_block(store) == {"wq.blk1": {"SITE_A"}}
    assert run_sql(store, check_all) == []


@pytest.mark.parametrize("store_backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_a_block_another_transaction_holds_is_passed_over_on_postgresql(cli, store, tmp_path):
    """PostgreSQL's claim skips the records another transaction has locked (SKIP LOCKED): the generator goes on to
    the task's next released block, and takes the first block once it is free."""
    from jedictl.store.database import create_store_engine

    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=6)
    acquire(cli, store, "agentA")
    blk0 = _block_ids(store)["wq.blk0"]
    engine = create_store_engine(store)
    try:
        with engine.connect() as holder:
            transaction = holder.begin()
            held = holder.execute(select(files.c.id).where(files.c.dataset_id == blk0).with_for_update()).all()
            assert len(held) == 6
            assert _generate(cli, store) == 3
            assert _jobs_by_block(store) == {"wq.blk1": {"SITE_A"}}
            transaction.rollback()
    finally:
        engine.dispose()
    assert _generate(cli, store) == 3
    assert _jobs_by_block(store) == {"wq.blk0": {"SITE_A"}, "wq.blk1": {"SITE_A"}}
    assert run_sql(store, check_all) == []


# ------------------------------------------------------------------------------------ a retried task

def test_a_retried_task_s_ended_elements_go_back_to_the_global_queue_and_get_their_jobs(cli, store, tmp_path):
    """WMCore's ResubmitBlock: `task retry` puts a finished task's failed records back to ready and, in the same
    transaction, its ended elements whose blocks have records to process again back in the global queue (Available,
    no agent, no site); another agent takes them, `generate` makes the retried records' jobs at its sites, the
    elements end again -- and `check` holds at every step."""
    from tests.cli.test_jobs_report import _dispatch_all, _failed, _finished, _report

    grid(cli, store, tmp_path, catalog(n_blocks=2, last_at=("SITE_A", "SITE_B")))
    task_id = submit(cli, store, maxAttempt=1)
    agent(cli, store, "agentA", "SITE_A", pending=6)
    assert acquire(cli, store, "agentA")["counts"]["released"] == 2
    assert _generate(cli, store) == 6
    jobs_ = sorted(_dispatch_all(cli, store), key=lambda j: j["job_id"])
    _report(cli, store, _failed(jobs_[0]), *[_finished(j) for j in jobs_[1:]])  # block 0's first job fails: 2 records
    assert [(i["outcome"], i["element"]) for i in acquire(cli, store, "agentA")["items"] if i["outcome"] in ("done", "failed")] == [
        ("done", 1), ("done", 2)]
    assert cli.json("finalize", "--now", NOW, db=store)["counts"]["finished"] == 1
    assert run_sql(store, check_all) == []

    result = cli.json("retry", str(task_id), "--now", NOW, db=store)
    assert result["files"] == {"retried": 2} and "1 work-queue elements back in the global queue" in result["message"]
    assert statuses(cli, store) == {1: ("Available", None), 2: ("Done", "agentA")}
    element = cli.json("workqueue", "show", "1", db=store)
    assert (element["site"], element["reason"]) == (None, "back from Done: 2 records of its block to process again")
    assert [(h["from_status"], h["to_status"], h["agent"]) for h in element["history"]][-2:] == [
        ("Running", "Done", "agentA"), ("Done", "Available", None)]
    assert run_sql(store, check_all) == []

    agent(cli, store, "agentB", "SITE_B", pending=6)
    cli("agents", "set-state", "agentA", "SITE_A", "down", db=store)  # agentA takes nothing now
    assert [(i["outcome"], i["element"]) for i in acquire(cli, store, "agentB")["items"] if i["outcome"] in ("acquired", "released")] == [
        ("acquired", 1), ("released", 1)]
    assert run_sql(store, check_all) == []  # block 0's first round of jobs ran at SITE_A, which agentB does not serve
    assert _generate(cli, store) == 1  # the two retried records, two files per job, at agentB's site
    assert _jobs_by_block(store)["wq.blk0"] == {"SITE_A", "SITE_B"}
    assert run_sql(store, check_all) == []
    _report(cli, store, *[_finished(j) for j in _dispatch_all(cli, store)])
    assert [(i["outcome"], i["element"]) for i in acquire(cli, store, "agentB")["items"] if i["outcome"] == "done"] == [("done", 1)]
    assert cli.json("finalize", "--now", NOW, db=store)["counts"]["done"] == 1
    assert statuses(cli, store) == {1: ("Done", "agentB"), 2: ("Done", "agentA")}
    assert cli("check", db=store).stdout == "check: consistent\n"


def test_check_still_catches_two_agents_in_one_round_and_jobs_of_a_requeued_block_made_before_its_release(cli, store, tmp_path):
    from sqlalchemy import insert, update

    from jedictl.store.schema import workqueue_elements as wqe
    from jedictl.store.schema import workqueue_history as wqh

    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    acquire(cli, store, "agentA")
    assert _generate(cli, store) == 3

    def requeue_while_live(conn):  # Available again, yet its block's records are in live jobs
        conn.execute(update(wqe).where(wqe.c.id == 1).values(status="Available", agent=None, site=None))
        conn.execute(insert(wqh).values(element_id=1, from_status="Done", to_status="Available", agent=None, owner="t",
                                        changed_at=__import__("datetime").datetime(2030, 3, 1)))
        for agent_name in ("agentA", "agentB"):  # and taken twice in this round
            conn.execute(insert(wqh).values(element_id=1, from_status="Available", to_status="Negotiating", agent=agent_name, owner="t",
                                            changed_at=__import__("datetime").datetime(2030, 3, 1)))

    run_sql(store, requeue_while_live)
    messages = [v["message"] for v in json.loads(cli("check", "-o", "json", db=store, code=1).stdout)["violations"]
                if v["check"] == "workqueue_elements_follow_their_agents"]
    assert messages == ["work-queue element 1 was taken from the global queue by agents agentA, agentB: one agent only",
                        "work-queue element 1 is Available yet 6 records of its block are in jobs (job 1 first): only a released "
                        "(Running) block gets jobs"]


def test_an_acquire_or_location_pass_requeues_an_ended_element_whose_records_came_back_another_way(cli, store, tmp_path):
    from sqlalchemy import update

    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    acquire(cli, store, "agentA")
    assert _generate(cli, store) == 3
    cli("simulate", "--site", "SITE_A", "--failure-rate", "0", "--seed", "1", "--now", NOW, db=store)
    acquire(cli, store, "agentA")
    assert statuses(cli, store)[1] == ("Done", "agentA")
    blk0 = _block_ids(store)["wq.blk0"]
    first = run_sql(store, lambda conn: conn.execute(select(files.c.id).where(files.c.dataset_id == blk0).order_by(files.c.id)).scalar())
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.id == first).values(status="ready")))  # e.g. a resubmitted job's
    report = cli.json("workqueue", "update-locations", "--now", NOW, db=store)
    assert [(i["outcome"], i["element"], i["reason"]) for i in report["items"] if i["outcome"] == "requeued"] == [
        ("requeued", 1, "back from Done: 1 records of its block to process again")]
    assert statuses(cli, store)[1] == ("Available", None)
    assert [m for m in run_sql(store, check_all) if "work-queue" in m] == []


def test_an_incexec_of_a_killed_task_puts_its_canceled_elements_back_in_the_global_queue(cli, store, tmp_path):
    grid(cli, store, tmp_path, catalog(n_blocks=2, last_at=("SITE_A", "SITE_B")))
    task_id = submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=3)
    acquire(cli, store, "agentA")  # element 1 Running, element 2 Available
    assert _generate(cli, store) == 3
    cli("kill", str(task_id), "--now", NOW, db=store)
    cli("workqueue", "update-locations", "--now", NOW, db=store)
    assert statuses(cli, store) == {1: ("Canceled", "agentA"), 2: ("Canceled", None)}
    result = cli.json("task", "incexec", str(task_id), "-", "--now", NOW, db=store, input="nFilesPerJob: 3\n")
    assert "2 work-queue elements back in the global queue" in result["message"]
    assert statuses(cli, store) == {1: ("Available", None), 2: ("Available", None)}
    assert run_sql(store, check_all) == []
    for step in (("feed",), ("broker", "--seed", "1")):
        cli(*step, "--now", NOW, db=store)
    cli("agents", "add", "agentA", "--site", "SITE_A", "--pending-threshold", "20", db=store)
    assert acquire(cli, store, "agentA")["counts"]["released"] == 2
    assert _generate(cli, store) == 4  # both blocks' six records, three per job now
    assert run_sql(store, check_all) == []


def test_a_resubmitted_job_puts_its_ended_element_back_in_the_global_queue_in_the_same_transaction(cli, store, tmp_path):
    from tests.cli.test_jobs_report import _dispatch_all, _failed, _finished, _report

    grid(cli, store, tmp_path, catalog(n_blocks=2, last_at=("SITE_A", "SITE_B")))
    submit(cli, store, maxAttempt=1)
    agent(cli, store, "agentA", "SITE_A", pending=6)
    acquire(cli, store, "agentA")
    assert _generate(cli, store) == 6
    jobs_ = sorted(_dispatch_all(cli, store), key=lambda j: j["job_id"])
    _report(cli, store, _failed(jobs_[0]), *[_finished(j) for j in jobs_[1:3]])  # block 0 ended, block 1 still running
    acquire(cli, store, "agentA")
    assert statuses(cli, store) == {1: ("Done", "agentA"), 2: ("Running", "agentA")}
    cli("jobs", "resubmit", str(jobs_[0]["job_id"]), "--now", NOW, db=store)
    assert statuses(cli, store) == {1: ("Available", None), 2: ("Running", "agentA")}
    assert run_sql(store, check_all) == []
