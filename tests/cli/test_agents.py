"""`jedictl agents add|list|show|set-state|remove` on both backends (docs/queue-layers.md): an agent's resource
control -- thresholds per site and job type, a site's state, the owner cap -- its slots at each level as
`agents show` prints them, and the refusals (one line, nothing written)."""

from __future__ import annotations

from tests.helpers import store_dump
from tests.workqueue_setup import NOW, acquire, agent, grid, submit


def test_add_creates_updates_and_leaves_alone(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    made = cli.json("agents", "add", "agentA", "--site", "SITE_A", "--site", "SITE_B", "--pending-threshold", "4", "--running-threshold",
                    "6", "--max-jobs-per-owner", "100", "--now", NOW, db=store)
    assert [(line["site"], line["job_type"], line["action"]) for line in made] == [(None, None, "created"), ("SITE_A", "managed", "created"),
                                                                                 ("SITE_B", "managed", "created")]
    changed = cli.json("agents", "add", "agentA", "--site", "SITE_B", "--running-threshold", "8", db=store)
    assert [(line["site"], line["action"]) for line in changed] == [(None, "unchanged"), ("SITE_B", "updated")]
    user = cli.json("agents", "add", "agentA", "--site", "SITE_B", "--job-type", "user", "--pending-threshold", "1", "--running-threshold",
                    "1", db=store)
    assert user[1]["action"] == "created"
    shown = cli.json("agents", "show", "agentA", db=store)
    assert shown["max_jobs_per_owner"] == 100
    assert [(s["site"], s["job_type"], s["state"], s["pending_threshold"], s["running_threshold"], s["global_slots"], s["local_slots"])
            for s in shown["sites"]] == [("SITE_A", "managed", "normal", 4, 6, 10, 10), ("SITE_B", "managed", "normal", 4, 8, 12, 12),
                                         ("SITE_B", "user", "normal", 1, 1, 2, 2)]
    assert [(a["agent"], a["sites"], a["max_jobs_per_owner"]) for a in cli.json("agents", "list", db=store)] == [
        ("agentA", "SITE_A, SITE_B", 100)]


def test_show_counts_what_the_agent_holds_against_its_slots(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A", pending=5, running=2)
    acquire(cli, store, "agentA", "--limit", "1")
    shown = cli.json("agents", "show", "agentA", db=store)
    assert (shown["Running"], shown["owner_jobs"]) == (1, {"root": 3})
    assert (shown["sites"][0]["global_slots"], shown["sites"][0]["local_slots"]) == (4, 4)  # 7 less the element's 3 jobs


def test_set_state_and_remove(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    submit(cli, store)
    agent(cli, store, "agentA", "SITE_A")
    assert cli.json("agents", "set-state", "agentA", "SITE_A", "down", db=store) == {"agent": "agentA", "site": "SITE_A", "state": "down"}
    shown = cli.json("agents", "show", "agentA", db=store)["sites"][0]
    assert (shown["state"], shown["global_slots"], shown["local_slots"]) == ("down", None, None)
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 0  # down: nothing at either level
    cli("agents", "set-state", "agentA", "SITE_A", "normal", db=store)
    assert acquire(cli, store, "agentA")["counts"]["acquired"] == 1
    refused = cli("agents", "remove", "agentA", db=store, code=2)
    assert refused.stderr == ("jedictl: error: agent agentA holds 1 work-queue elements (Negotiating, Acquired or Running): "
                              "they must end first\n")
    agent(cli, store, "idle", "SITE_B")
    assert cli.json("agents", "remove", "idle", db=store) == {"agent": "idle", "action": "removed"}
    assert [a["agent"] for a in cli.json("agents", "list", db=store)] == ["agentA"]


def test_refusals_are_one_line_and_change_nothing(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    agent(cli, store, "agentA", "SITE_A")
    before = store_dump(store)
    cases = [
        (("agents", "add", "agentA", "--site", "MARS", "--pending-threshold", "1", "--running-threshold", "1"),
         "jedictl: error: --site: unknown site 'MARS' (`jedictl sites list` shows the sites)\n"),
        (("agents", "add", "agentA", "--site", "SITE_B"),
         "jedictl: error: agent agentA has no thresholds at SITE_B for managed yet: give --pending-threshold and --running-threshold\n"),
        (("agents", "add", "agentA", "--pending-threshold", "1"),
         "jedictl: error: --job-type, --pending-threshold, --running-threshold and --state are per site: give --site\n"),
        (("agents", "add", "agentA", "--job-type", "user"),
         "jedictl: error: --job-type, --pending-threshold, --running-threshold and --state are per site: give --site\n"),
        (("agents", "add", "agentA", "--max-jobs-per-owner", "5", "--no-owner-cap"),
         "jedictl: error: give --max-jobs-per-owner or --no-owner-cap, not both\n"),
        (("agents", "set-state", "agentA", "SITE_A", "drained"),
         "jedictl: error: STATE: 'drained' is not a site state (allowed: normal, drain, down; did you mean 'drain'?)\n"),
        (("agents", "set-state", "agentA", "SITE_C", "drain"),
         "jedictl: error: agent agentA does not serve site 'SITE_C' (`jedictl agents show agentA` lists its sites)\n"),
        (("agents", "show", "nobody"), "jedictl: error: no agent 'nobody' (`jedictl agents add nobody --site ...` adds it)\n"),
        (("agents", "remove", "nobody"), "jedictl: error: no agent 'nobody' (`jedictl agents add nobody --site ...` adds it)\n"),
    ]
    for args, message in cases:
        assert cli(*args, db=store, code=2).stderr == message, args
    assert store_dump(store) == before
