"""baseRamCount per processingType (issue 19 item 8; seed 000 "Memory probe and brokerage"), end to end
on both backends: a task that gives no baseRamCount gets its processingType's from `refine.base_ram_count`
(simul 1000, pile 1500, reco 1000 MB), and the brokerage's memory filter asks base + ramCount x cores,
x 0.9, of every site -- so a site whose slots fit the per-core RAM but not the base is dropped."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import jobs
from tests.helpers import run_sql

NOW = "2030-04-01T08:00:00"
SITES = {"BIG_SLOTS": 9000, "SMALL_SLOTS": 8000}  # max_memory (MB) of an 8-core slot
GRID = {
    "storage_endpoints": [{"name": f"{site}_DISK", "kind": "disk", "free_gb": 100000, "total_gb": 200000} for site in SITES],
    "sites": [{"name": site, "cloud": "WORLD", "core_count": 8, "core_power": 10.0, "max_memory": memory, "max_walltime": 172800,
               "max_scratch_mb": 60000, "read_endpoints": [f"{site}_DISK"], "write_endpoints": [f"{site}_DISK"]}
              for site, memory in SITES.items()],
}
DATA = {"datasets": [{"name": "data.pileup.in", "state": "closed",
                      "files": [{"lfn": f"in.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 5)],
                      "replicas": [{"endpoint": f"{site}_DISK"} for site in SITES]}]}


def task(name: str, **params) -> dict:
    return {"taskName": name, "vo": "atlas", "prodSourceLabel": "user", "taskType": "anal", "userName": "someone",
            "processingType": "pile", "coreCount": 8, "ramCount": 1000, "ramCountUnit": "MBPerCore", "nFilesPerJob": 1,
            "skipScout": True,
            "jobParameters": [{"type": "template", "param_type": "input", "dataset": "data.pileup.in", "value": "-i ${IN}"},
                              {"type": "template", "param_type": "output", "dataset": f"{name}.out", "value": f"{name}.${{SN}}.root"}],
            "log": {"type": "template", "param_type": "log", "dataset": f"{name}.log", "value": f"{name}.${{SN}}.log.tgz"},
            **params}


def grid(cli, store, tmp_path) -> None:
    for kind, document in (("sites", GRID), ("data", DATA)):
        path = tmp_path / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(document))
        cli(kind, "import", str(path), db=store)


def run_to_jobs(cli, store, document: dict, env: dict | None = None, explain: list | None = None) -> int:
    """Submit, refine, feed and generate; `explain` gets the brokerage rows `explain task` shows just before."""
    task_id = cli.json("submit", "-", db=store, input=json.dumps(document))["task_id"]
    for agent in (("refine",), ("feed",)):
        cli(*agent, "--now", NOW, db=store, env=env)
    if explain is not None:
        explain.extend(cli.json("explain", "task", str(task_id), "--now", NOW, db=store)["brokerage"])
    cli("generate", "--seed", "1", "--now", NOW, db=store)
    return task_id


def job_rows(store, task_id: int) -> list:
    return run_sql(store, lambda conn: conn.execute(select(jobs.c.site, jobs.c.min_ram_count).where(jobs.c.task_id == task_id)).all())


def test_the_processing_type_base_reaches_the_memory_filter(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    explained: list = []
    task_id = run_to_jobs(cli, store, task("user.someone.pile"), explain=explained)
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["resources"]["base_ram_count"] == 1500  # seed 000: pile 1500 MB
    # 8 cores x 1000 MB + 1500 MB = 9500 MB, x 0.9 = 8550 MB: more than the small slots' 8000 MB.
    rows = {row["site"]: row for row in explained}
    assert rows["SMALL_SLOTS"]["rule"] == "memory" and rows["SMALL_SLOTS"]["message"] == "memory: needs 8550 MB, site max 8000 MB"
    assert rows["BIG_SLOTS"]["kept"] is True
    made = job_rows(store, task_id)
    assert len(made) == 4 and set(made) == {("BIG_SLOTS", 8550)}
    assert run_sql(store, check_all) == []


def test_the_table_is_a_setting_and_the_task_own_value_wins(cli, store, tmp_path):
    grid(cli, store, tmp_path)
    # The operator's table says pile jobs share nothing: 8 x 1000 x 0.9 = 7200 MB fits both sites.
    explained: list = []
    relaxed = run_to_jobs(cli, store, task("user.someone.relaxed"), env={"JEDICTL_REFINE__BASE_RAM_COUNT": "{pile: 0}"},
                          explain=explained)
    assert cli.json("task", "show", str(relaxed), db=store)["resources"]["base_ram_count"] == 0
    assert {ram for _, ram in job_rows(store, relaxed)} == {7200}
    assert {row["site"] for row in explained if row["kept"]} == set(SITES)
    # A task's own baseRamCount is never replaced by the table: 8000 + 200 = 8200, x 0.9 = 7380 MB.
    own = run_to_jobs(cli, store, task("user.someone.own", baseRamCount=200))
    assert cli.json("task", "show", str(own), db=store)["resources"]["base_ram_count"] == 200
    assert {ram for _, ram in job_rows(store, own)} == {7380}


def test_config_show_prints_the_table_and_refuses_a_bad_value(cli, tmp_path):
    shown = {row["key"]: row for row in cli.json("config", "show")}
    assert shown["refine.base_ram_count"]["value"] == {"simul": 1000, "pile": 1500, "reco": 1000}
    config = tmp_path / "c.yaml"
    config.write_text("refine:\n  base_ram_count:\n    pile: -5\n")
    result = cli("config", "show", "--config", str(config), code=2)
    assert result.stderr.strip() == (f"jedictl: error: refine.base_ram_count.pile: must be a whole number of MB between 0 and "
                                     f"{2**31 - 1} (in {config})")
