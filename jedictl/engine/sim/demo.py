"""`jedictl demo`: a small grid, a data catalog and one task of every kind, run to the end.

The grid has two clouds with one nucleus each and seven sites with disk and tape endpoints. The
tasks: an analysis task given as PanDA task parameters (what `prun` writes), an event-split
production task with scouts, a no-input generation task whose output a child task reads (parent and
child), a task with a merge step, a task pinned to a site whose pilots fail at first -- it fails,
and the demo retries it, as an operator would -- and an event-service task, whose jobs' event ranges
are reported one by one and merged by ES merge jobs (docs/event-service.md). Each round runs every agent once (`engine.pipeline`)
and the pilot simulator; a virtual clock advances a few minutes per round so that waits (scout
assessment, pending re-checks) pass without anyone waiting for them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.catalogs.importer import import_data_catalog, import_resource_catalog
from jedictl.engine.commando.commands import Request, run_command
from jedictl.engine.jobs.retry_rules import load_rules
from jedictl.engine.pipeline import run_pipeline
from jedictl.engine.sim.simulator import SimError, simulate_pass
from jedictl.engine.task.submission import parse_definition, register_task
from jedictl.model import TASK_FINAL
from jedictl.store import retry_rules as rule_store
from jedictl.store import tasks as task_store
from jedictl.store import views as view_store

FLAKY_SITE = "praguelcg2"
ROUND_MINUTES = 5
JOBS_PER_SITE = 5  # pilots per site per round: the work spreads over rounds you can watch
_FLAKY_ERROR = ("pilot", 1324, "Service not available at the moment (simulated outage)")

GRID: dict[str, Any] = {
    "nuclei": [{"name": "CERN-PROD", "status": "active", "cloud": "CERN"}, {"name": "BNL-ATLAS", "status": "active", "cloud": "US"}],
    "storage_endpoints": [
        {"name": "CERN-PROD_DATADISK", "kind": "disk", "nucleus": "CERN-PROD", "free_gb": 800000, "total_gb": 2000000},
        {"name": "CERN-PROD_DATATAPE", "kind": "tape", "nucleus": "CERN-PROD", "free_gb": 5000000, "total_gb": 9000000},
        {"name": "BNL-ATLAS_DATADISK", "kind": "disk", "nucleus": "BNL-ATLAS", "free_gb": 600000, "total_gb": 1500000},
        {"name": "BNL-ATLAS_DATATAPE", "kind": "tape", "nucleus": "BNL-ATLAS", "free_gb": 4000000, "total_gb": 8000000},
        {"name": "DESY-HH_DATADISK", "kind": "disk", "free_gb": 150000, "total_gb": 400000},
        {"name": "praguelcg2_DATADISK", "kind": "disk", "free_gb": 80000, "total_gb": 200000},
        {"name": "MWT2_DATADISK", "kind": "disk", "free_gb": 120000, "total_gb": 300000},
        {"name": "AGLT2_DATADISK", "kind": "disk", "free_gb": 90000, "total_gb": 250000},
    ],
    "sites": [
        {"name": name, "cloud": cloud, "tier": tier, "nucleus": nucleus, "core_count": 1, "core_power": power, "max_memory": 4000,
         "max_walltime": 172800, "max_scratch_mb": 60000, "read_endpoints": reads, "write_endpoints": [reads[0]], "max_running": 2000}
        for name, cloud, tier, nucleus, power, reads in (
            ("CERN-PROD_GRID", "CERN", 0, "CERN-PROD", 12.5, ["CERN-PROD_DATADISK", "CERN-PROD_DATATAPE"]),
            ("DESY-HH", "CERN", 2, "CERN-PROD", 10.0, ["DESY-HH_DATADISK"]),
            (FLAKY_SITE, "CERN", 2, "CERN-PROD", 9.0, ["praguelcg2_DATADISK"]),
            ("BNL_PROD", "US", 1, "BNL-ATLAS", 11.0, ["BNL-ATLAS_DATADISK", "BNL-ATLAS_DATATAPE"]),
            ("MWT2", "US", 2, "BNL-ATLAS", 10.5, ["MWT2_DATADISK"]),
            ("AGLT2", "US", 2, "BNL-ATLAS", 10.0, ["AGLT2_DATADISK"]),
        )
    ] + [{"name": "SWT2_CPB", "cloud": "US", "tier": 2, "nucleus": "BNL-ATLAS", "core_count": 1, "core_power": 9.5, "max_memory": 4000,
          "max_walltime": 172800, "max_scratch_mb": 60000, "read_endpoints": ["AGLT2_DATADISK"], "write_endpoints": ["AGLT2_DATADISK"]}],
}

PHYS = "data24_13p6TeV.periodAllYear.physics_Main.demo.DAOD_PHYS"
EVNT = "mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.evgen.EVNT.e8514_demo"
NTUP = "data24_13p6TeV.periodAllYear.physics_Main.demo.DAOD_PHYSLITE"
CALIB = "data24_13p6TeV.calibration_LArCells.demo.RAW"


def data_catalog() -> dict[str, Any]:
    """Input datasets: file sizes and checksums are made up but plausible."""
    def files(prefix: str, count: int, size: int, events: int) -> list[dict[str, Any]]:
        return [{"lfn": f"{prefix}._{i:06d}.pool.root.1", "size": size + i * 1000, "events": events,
                 "checksum": f"ad:{(0x1f3a0000 + i * 7919) & 0xffffffff:08x}", "guid": f"DE30{i:04X}-0000-4000-8000-{i:012d}"}
                for i in range(1, count + 1)]
    return {"datasets": [
        {"name": PHYS, "scope": "data24_13p6TeV", "state": "closed", "files": files("DAOD_PHYS.41112233", 60, 1_200_000_000, 2000),
         "replicas": [{"endpoint": "CERN-PROD_DATADISK"}, {"endpoint": "BNL-ATLAS_DATADISK"}, {"endpoint": "MWT2_DATADISK"}]},
        {"name": EVNT, "scope": "mc23_13p6TeV", "state": "closed", "files": files("EVNT.41000001", 6, 300_000_000, 2000),
         "replicas": [{"endpoint": "CERN-PROD_DATADISK"}, {"endpoint": "DESY-HH_DATADISK"}]},
        {"name": NTUP, "scope": "data24_13p6TeV", "state": "closed", "files": files("DAOD_PHYSLITE.41112240", 30, 400_000_000, 1500),
         "replicas": [{"endpoint": "BNL-ATLAS_DATADISK"}, {"endpoint": "AGLT2_DATADISK"}]},
        {"name": CALIB, "scope": "data24_13p6TeV", "state": "closed", "files": files("RAW.41112250", 6, 2_000_000_000, 5000),
         "replicas": [{"endpoint": "praguelcg2_DATADISK"}]},
    ]}


RETRY_RULES = [
    {"error_source": "pilot", "error_code": 1212, "action": "increase_memory"},
    {"error_source": "trans", "error_code": 65, "action": "limit_retry", "parameters": {"maxAttempt": 2}},
]


def analysis_task() -> dict[str, Any]:
    """What `prun --exec "analyse.sh %IN" --inDS ... --outDS ... --outputs hist.root --nFilesPerJob 3` sends."""
    out = "user.demo.ttbar.hist.v1"
    return {
        "taskName": f"{out}/", "uniqueTaskName": True, "vo": "atlas", "prodSourceLabel": "user", "taskType": "anal",
        "processingType": "panda-client-2.2.0-jedi-run", "transPath": "https://pandaserver.cern.ch:25443/trf/user/runGen-00-00-02",
        "cliParams": f"prun --exec \"analyse.sh %IN\" --inDS {PHYS} --outDS {out} --outputs hist.root --nFilesPerJob 3",
        "nFilesPerJob": 3, "nMaxFilesPerJob": 200, "respectSplitRule": True, "maxAttempt": 4, "sourceURL": "https://127.0.0.1:1",
        "log": {"dataset": f"{out}.log/", "container": f"{out}.log/", "type": "template", "param_type": "log",
                "value": f"{out}.log.$JEDITASKID.${{SN}}.log.tgz"},
        "jobParameters": [
            {"type": "constant", "value": "-j \"\" --sourceURL ${SURL}"},
            {"type": "constant", "value": "-r ."},
            {"type": "template", "value": "user.demo.$JEDITASKID._${SN/P}.hist.root", "param_type": "output",
             "dataset": f"{out}_hist.root/", "container": f"{out}_hist.root/", "hidden": True},
            {"type": "constant", "value": "-o \"{'hist.root': 'user.demo.$JEDITASKID._${SN/P}.hist.root'}\""},
            {"type": "template", "param_type": "input", "value": "-i \"${IN/T}\"", "dataset": PHYS, "exclude": "\\.log\\.tgz(\\.\\d+)*$",
             "expand": True},
            {"type": "constant", "value": "-p \"analyse.sh%20%IN\""},
        ],
    }


def spec_tasks() -> list[tuple[str, dict[str, Any]]]:
    """(role, task spec) in submission order; the child's parent is filled in at submission."""
    return [
        ("event split", {
            "name": "mc23_13p6TeV.601229.simul.e8514_s4162_demo", "label": "managed", "processing_type": "simul", "priority": 800,
            "transformation": "Sim_tf.py", "release": "Athena,24.0.40",
            "command": "--inputEVNTFile=${IN} --outputHITSFile=${OUTPUT0} --maxEvents=${MAXEVENTS} --skipEvents=${SKIPEVENTS} "
                       "--firstEvent=${FIRSTEVENT} --randomSeed=${RNDMSEED}",
            "inputs": [{"dataset": EVNT}],
            "outputs": [{"dataset": "mc23_13p6TeV.601229.simul.HITS.e8514_s4162_demo_tid01", "file_template": "HITS.${JEDITASKID}._${SN/P}.pool.root.1"}],
            "log": {"dataset": "mc23_13p6TeV.601229.simul.log.e8514_s4162_demo_tid01", "file_template": "log.${JEDITASKID}._${SN/P}.job.log.tgz.1"},
            "split": {"n_events_per_job": 500, "n_events_per_input_file": 2000},
        }),
        ("generation", {
            "name": "mc23_13p6TeV.700000.Sh_ttbar.evgen.e9000_demo", "label": "managed", "processing_type": "evgen", "priority": 700,
            "transformation": "Gen_tf.py", "release": "AthGeneration,23.6.31",
            "command": "--ecmEnergy=13600 --jobConfig=700000 --randomSeed=${RNDMSEED} --maxEvents=${MAXEVENTS} "
                       "--firstEvent=${FIRSTEVENT} --outputEVNTFile=${OUTPUT0}",
            "no_input": True,
            "outputs": [{"dataset": "mc23_13p6TeV.700000.Sh_ttbar.evgen.EVNT.e9000_demo_tid02", "file_template": "EVNT.${JEDITASKID}._${SN/P}.pool.root.1"}],
            "log": {"dataset": "mc23_13p6TeV.700000.Sh_ttbar.evgen.log.e9000_demo_tid02", "file_template": "log.${JEDITASKID}._${SN/P}.job.log.tgz.1"},
            "split": {"n_events": 40000, "n_events_per_job": 2000, "random_seed_offset": 100},
        }),
        ("child", {
            "name": "mc23_13p6TeV.700000.Sh_ttbar.simul.e9000_s4162_demo", "label": "managed", "processing_type": "simul", "priority": 700,
            "transformation": "Sim_tf.py", "release": "Athena,24.0.40",
            "command": "--inputEVNTFile=${IN} --outputHITSFile=${OUTPUT0} --maxEvents=${MAXEVENTS} --skipEvents=${SKIPEVENTS}",
            "inputs": [{"dataset": "mc23_13p6TeV.700000.Sh_ttbar.evgen.EVNT.e9000_demo_tid02"}],
            "outputs": [{"dataset": "mc23_13p6TeV.700000.Sh_ttbar.simul.HITS.e9000_s4162_demo_tid03", "file_template": "HITS.${JEDITASKID}._${SN/P}.pool.root.1"}],
            "log": {"dataset": "mc23_13p6TeV.700000.Sh_ttbar.simul.log.e9000_s4162_demo_tid03", "file_template": "log.${JEDITASKID}._${SN/P}.job.log.tgz.1"},
            "split": {"n_files_per_job": 1},
        }),
        ("with merge", {
            "name": "user.demo.zmumu.ntuple.v2", "label": "user", "processing_type": "panda-client-jedi-run",
            "transformation": "runGen-00-00-02", "command": "-i \"${IN/L}\" -o \"${OUTPUT0}\" -p \"make_ntuple.sh\"",
            "inputs": [{"dataset": NTUP}],
            "outputs": [{"dataset": "user.demo.zmumu.ntuple.v2_ntuple.root/", "file_template": "user.demo.${JEDITASKID}._${SN/P}.ntuple.root"}],
            "log": {"dataset": "user.demo.zmumu.ntuple.v2.log/", "file_template": "user.demo.${JEDITASKID}._${SN/P}.log.tgz"},
            "split": {"n_files_per_job": 1},
            "merge": {"transformation": "runMerge-00-00-02", "command": "-i \"${TRN_OUTPUT0/L}\" -o \"${OUTPUT0}\" --mergeType hadd",
                      "n_files_per_merge_job": 6},
        }),
        ("fails, retried", {
            "name": "data24_13p6TeV.calibration_LArCells.demo.calib", "label": "managed", "processing_type": "calib", "priority": 600,
            "transformation": "LArCalib_tf.py", "release": "Athena,24.0.40",
            "command": "--inputBSFile=${IN} --outputNTUPFile=${OUTPUT0}",
            "inputs": [{"dataset": CALIB}],
            "outputs": [{"dataset": "data24_13p6TeV.calibration_LArCells.demo.NTUP_CALIB", "file_template": "NTUP_CALIB.${JEDITASKID}._${SN/P}.root"}],
            "log": {"dataset": "data24_13p6TeV.calibration_LArCells.demo.log", "file_template": "log.${JEDITASKID}._${SN/P}.job.log.tgz"},
            "split": {"n_files_per_job": 1},
            "retry": {"max_attempt": 2},
            "scouts": {"skip_scout": True},
            "placement": {"included_sites": [FLAKY_SITE]},
        }),
        ("event service", {
            "name": "mc23_13p6TeV.601229.simul.e8514_s4162_es_demo", "label": "managed", "processing_type": "simul", "priority": 750,
            "transformation": "Sim_tf.py", "release": "Athena,24.0.40",
            "command": "--inputEVNTFile=${IN} --outputHITSFile=${OUTPUT0}",
            "inputs": [{"dataset": EVNT}],
            "outputs": [{"dataset": "mc23_13p6TeV.601229.simul.HITS.e8514_s4162_es_demo_tid06", "file_template": "HITS.${JEDITASKID}._${SN/P}.pool.root.1"}],
            "log": {"dataset": "mc23_13p6TeV.601229.simul.log.e8514_s4162_es_demo_tid06", "file_template": "log.${JEDITASKID}._${SN/P}.job.log.tgz.1"},
            "events": {"n_events_per_range": 250, "max_attempt_es": 3},
            "scouts": {"skip_scout": True},
        }),
    ]


@dataclass
class DemoTasks:
    """Task ids by role, and the demo's own bookkeeping of its one operator action."""

    roles: dict[int, str] = field(default_factory=dict)
    flaky: int | None = None
    retried: bool = False


def build(store: Any, settings: Settings, now: datetime, owner: str) -> DemoTasks:
    """Fill an empty store: grid, data catalog, retry rules, and the tasks (one transaction)."""

    demo = DemoTasks()
    with store.begin() as conn:
        import_resource_catalog(conn, GRID, now)
        import_data_catalog(conn, data_catalog(), now)
        rule_store.import_rules(conn, load_rules(RETRY_RULES, "demo rules"), replace=True, source="demo")
        definition = parse_definition(analysis_task(), user="demo", default_user="demo")
        demo.roles[register_task(conn, definition, analysis_task(), now, owner)] = "analysis (prun)"
        parent_id = None
        for role, spec in spec_tasks():
            child = role.startswith("child")
            definition = parse_definition(spec, user="demo", default_user="demo", parent_id=parent_id if child else None,
                                          analysis_priority=settings.refine.analysis_priority)
            task_id = register_task(conn, definition, spec, now, owner)
            demo.roles[task_id] = f"child of {parent_id}" if child else role
            if role.startswith("generation"):
                parent_id = task_id
            if role.startswith("fails"):
                demo.flaky = task_id
    return demo


@dataclass(frozen=True)
class Round:
    number: int
    now: datetime
    reports: list[tuple[PassReport, float]]
    action: str | None = None  # the operator action the demo took this round


def rounds(store: Any, settings: Settings, owner: str, demo: DemoTasks, start: datetime, seed: int, max_rounds: int = 80) -> Iterator[Round]:
    """Run the grid round by round until every task is final (or `max_rounds`)."""

    rng = random.Random(seed)
    for number in range(1, max_rounds + 1):
        now = start + timedelta(minutes=ROUND_MINUTES * number)
        reports = list(run_pipeline(store, settings, owner, _fixed(now), seed=seed + number))
        action = _operator(store, settings, demo, now)
        others = [site["name"] for site in GRID["sites"] if site["name"] != FLAKY_SITE]
        reports.append((simulate_pass(store, settings, now, rng, sites=others, jobs_per_site=JOBS_PER_SITE), 0.0))
        # The flaky site's pilots fail until the task has been retried (an outage that got fixed).
        outage = not demo.retried
        reports.append((simulate_pass(store, settings, now, rng, sites=[FLAKY_SITE], failure_rate=1.0 if outage else 0.0,
                                      errors=[SimError(*_FLAKY_ERROR)]), 0.0))
        yield Round(number, now, reports, action)
        if all_final(store):
            return


def _fixed(moment: datetime) -> Callable[[], datetime]:
    """A clock that stays at one moment: every agent of a round sees the same time."""
    return lambda: moment


def _operator(store: Any, settings: Settings, demo: DemoTasks, now: datetime) -> str | None:
    """Once the flaky task has failed, retry it -- what `jedictl retry ID` does."""

    if demo.flaky is None or demo.retried or task_status(store, demo.flaky) not in ("failed", "finished", "exhausted"):
        return None
    outcome = run_command(store, Request("retry", demo.flaky, "demo", "site outage is over"), settings, now)
    demo.retried = True
    return f"jedictl retry {demo.flaky}: {outcome.previous} -> {outcome.status}"


def holds_tasks(url: str) -> bool:
    """Whether the store at `url` exists with at least one task (read only; no schema check)."""
    return view_store.holds_tasks(url)


def task_status(store: Any, task_id: int) -> str:
    with store.read() as conn:
        return task_store.status_of(conn, task_id)


def all_final(store: Any) -> bool:
    with store.read() as conn:
        left = task_store.count_not_in_status(conn, [s.value for s in TASK_FINAL])
    return left == 0


def sites_holding(dataset: str) -> list[str]:
    """The demo grid's sites that read an endpoint holding a complete replica of `dataset`."""
    held = {replica["endpoint"] for entry in data_catalog()["datasets"] if entry["name"] == dataset for replica in entry["replicas"]}
    return [site["name"] for site in GRID["sites"] if held & set(site["read_endpoints"])]


def analysis_placement(store: Any, demo: DemoTasks) -> list[str]:
    """One line per analysis task of the demo: where its jobs went, and whether those sites hold its
    input -- analysis brokerage follows the data (docs/analysis.md)."""
    inputs = {"analysis (prun)": PHYS, "with merge": NTUP}
    lines = []
    for task_id, role in demo.roles.items():
        if role not in inputs:
            continue
        with store.read() as conn:
            used = view_store.job_sites_of_task(conn, task_id)
            containers = view_store.site_datasets_of_task(conn, task_id)
        holders = sites_holding(inputs[role])
        went = ", ".join(f"{site} {n}" for site, n in sorted(used.items(), key=lambda item: (-item[1], item[0])))
        elsewhere = sorted(set(used) - set(holders))
        verdict = ("went to its data: every site holds the input" if not elsewhere
                   else f"{', '.join(elsewhere)} without the input (sent with a transfer)")
        outputs = "; ".join(f"{name} holds {len(sites)} datasets, one per site ({', '.join(sites)})"
                            for name, sites in sorted(containers.items()) if not name.endswith(".log/"))
        lines.append(f"Analysis task {task_id} ({role}): jobs at {went or 'no site'} -- {verdict}; "
                     f"it is held at {', '.join(holders)}, not at the {len(GRID['sites']) - len(holders)} other sites."
                     + (f" Outputs: {outputs}." if outputs else ""))
    return lines


@dataclass(frozen=True)
class Snapshot:
    """What the live display and the summary show."""

    tasks: list[dict[str, Any]]  # id, name, status, files, done, failed, jobs {status: n}
    sites: dict[str, dict[str, int]]  # site -> job status -> n
    shares: dict[str, dict[str, int]]  # global share -> job status -> n
    retries: int


def snapshot(store: Any) -> Snapshot:
    with store.read() as conn:
        rows = view_store.task_names(conn)
        counters = view_store.master_input_totals(conn)
        per_task: dict[int, dict[str, int]] = {}
        for task_id, status, count in view_store.job_status_counts_by(conn, "task"):
            per_task.setdefault(task_id, {})[status] = count
        sites: dict[str, dict[str, int]] = {}
        for site, status, count in view_store.job_status_counts_by(conn, "site"):
            sites.setdefault(site or "-", {})[status] = count
        shares: dict[str, dict[str, int]] = {}
        for share, status, count in view_store.job_status_counts_by(conn, "gshare"):
            shares.setdefault(share or "-", {})[status] = count
        retries = view_store.retry_count(conn)
    listed = []
    for row in rows:
        c = counters.get(row.id)
        listed.append({"id": row.id, "name": row.name, "status": row.status, "files": int(c.files or 0) if c else 0,
                       "done": int(c.done or 0) if c else 0, "failed": int(c.failed or 0) if c else 0, "jobs": per_task.get(row.id, {})})
    return Snapshot(listed, sites, shares, retries)
