"""Privileges in the generator's order, end to end on both backends (issue 19, item 5; docs/analysis.md
"Privileges", docs/queue-shares.md "Group shares").

- a privileged user's analysis task jumps over the others when jobs are generated, from the first pass
  after the permission is granted;
- working groups given a share take their turn before the others, the one furthest below its share first.
"""

from __future__ import annotations

from datetime import timedelta

from jedictl.store.invariants import check_all
from tests.cli.test_user_caps import _grid, _ready, at, dataset, task
from tests.helpers import run_sql

#: One job per task visited, one task per pass: each pass shows which task the order put first.
ONE_AT_A_TIME = {"JEDICTL_GENERATE__N_FILES": "1", "JEDICTL_GENERATE__EXPRESS_RATIO": "1"}


def _first_generated(cli, store, seed: str, env: dict[str, str]) -> int:
    made = cli.json("generate", "--seed", seed, "--limit", "1", db=store, env={**at(), **ONE_AT_A_TIME, **env})
    generated = [item["task_id"] for item in made["items"] if item["outcome"] == "generated"]
    assert len(generated) == 1 and made["counts"]["jobs"] == 1, made
    return generated[0]


def test_a_super_users_task_jumps_over_the_others_from_the_next_pass(cli, store, tmp_path):
    _grid(cli, store, tmp_path, *(dataset(f"data.{user}", 20, "DATA_SITE_DISK") for user in ("bob", "cy", "alice")))
    ids = {user: cli.json("submit", "-", db=store, input=task(user, f"data.{user}"), env=at())["task_id"] for user in ("bob", "cy", "alice")}
    _ready(cli, store, at())
    assert cli.json("task", "show", str(ids["alice"]), db=store)["current_priority"] == 1000  # submitted before the grant
    seeds = [str(seed) for seed in range(8)]
    plain = {_first_generated(cli, store, seed, {}) for seed in seeds}
    assert len(plain) > 1  # without the permission: one user among three
    granted = {"JEDICTL_PRIVILEGES": "[{user: alice, permissions: s}]"}
    assert {_first_generated(cli, store, seed, granted) for seed in seeds} == {ids["alice"]}
    assert "super user alice" in cli("explain", "task", str(ids["alice"]), db=store, env={**at(), **granted}).stdout


def test_groups_with_a_share_are_served_by_how_far_below_their_share_they_are(cli, store, tmp_path):
    _grid(cli, store, tmp_path, dataset("data.top1", 20, "DATA_SITE_DISK"), dataset("data.top2", 20, "DATA_SITE_DISK"),
          dataset("data.higgs", 20, "DATA_SITE_DISK"), dataset("data.dan", 20, "DATA_SITE_DISK"))
    top = cli.json("submit", "-", db=store, input=task("ann", "data.top1", workingGroup="GP_Top"), env=at())["task_id"]
    _ready(cli, store, at())
    cli("generate", "--seed", "1", db=store, env=at())
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "2", db=store, env=at())  # GP_Top executes 2 jobs: 20 HS06
    top2 = cli.json("submit", "-", db=store, input=task("bob", "data.top2", workingGroup="GP_Top"), env=at())["task_id"]
    higgs = cli.json("submit", "-", db=store, input=task("cy", "data.higgs", workingGroup="GP_Higgs"), env=at())["task_id"]
    dan = cli.json("submit", "-", db=store, input=task("dan", "data.dan"), env=at())["task_id"]
    _ready(cli, store, at())
    seeds = [str(seed) for seed in range(8)]
    assert len({_first_generated(cli, store, seed, {}) for seed in seeds}) > 1  # without shares: whoever the draw puts first
    # GP_Higgs executes nothing: furthest below its share, first -- even with GP_Top's share ten times larger
    # (GP_Top's 20 HS06 are 2 per unit of its share, GP_Higgs's 0).
    shares = {"JEDICTL_PRIVILEGES": "[{group: GP_Top, share: 10}, {group: GP_Higgs, share: 1}]"}
    assert {_first_generated(cli, store, seed, shares) for seed in seeds} == {higgs}
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "2", "--task", str(higgs), db=store, env=at(timedelta(minutes=1)))
    # Both execute 20 HS06 now: 20 per unit of share for GP_Higgs, 2 for GP_Top: GP_Top's tasks first.
    assert {_first_generated(cli, store, seed, shares) for seed in seeds} <= {top, top2}
    assert dan not in {_first_generated(cli, store, seed, shares) for seed in seeds}
    shown = cli.json("queue-shares", "show", db=store, env={**at(timedelta(minutes=3)), **shares})["group_shares"]
    assert [(row["group"], row["configured_pct"], row["running_hs06"], row["actual_pct"], row["state"], row["rank"]) for row in shown] == [
        ("GP_Higgs", 9.09, 20.0, 50.0, "over", 1), ("GP_Top", 90.91, 20.0, 50.0, "under", 0)]
    table = cli("queue-shares", "show", db=store, env={**at(timedelta(minutes=3)), **shares}).stdout
    assert "group shares (from `privileges`" in table
    assert cli.json("queue-shares", "show", db=store)["group_shares"] == []  # no group has a share
    assert run_sql(store, check_all) == []
