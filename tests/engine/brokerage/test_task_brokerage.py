"""Task brokerage: remaining work, the nucleus filters, the weight and the draw.

References: seed 000 "Task brokerage" (RW, the selection criteria, the weight) and jedi-inventory.md §5
(AtlasProdTaskBroker: order of the checks, DISK_THRESHOLD, locality thresholds and waivers, tape weight).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from jedictl.config import BrokerageSettings, TaskBrokerSettings
from jedictl.engine.brokerage.model import (
    BrokerageCatalog,
    ChunkInput,
    JobCounts,
    Nucleus,
    Site,
    SiteLoad,
    StorageEndpoint,
    TaskRequirements,
    chunk_input,
)
from jedictl.engine.brokerage.task_brokerage import (
    ACTIVE_FOR_RW,
    RemainingWork,
    TaskWork,
    choose_nucleus,
    projected_output_gb,
    remaining_work,
)

GB = 1024 ** 3
SETTINGS = TaskBrokerSettings()
BROKERAGE = BrokerageSettings()
TASK = TaskRequirements(task_id=9, prod_source_label="managed", processing_type="simul", priority=500,
                        core_count=1, ram_count=2000, ram_unit="MBPerCore", cpu_time=10.0, base_walltime=600,
                        cpu_efficiency=90, work_queue="evgensimul")


def world(*nuclei: tuple[str, dict], sites: tuple[Site, ...] = ()) -> BrokerageCatalog:
    """Nuclei with one disk endpoint (1 PB total, 500 TB free) and one site each, unless told otherwise."""
    endpoints, all_sites, found = {}, list(sites), {}
    for name, changes in nuclei:
        endpoint = StorageEndpoint(f"{name}_DATADISK", "disk", name, 500_000.0, 1_000_000.0)
        endpoints[endpoint.name] = replace(endpoint, **changes.get("endpoint", {}))
        if "tape" in changes:
            endpoints[f"{name}_DATATAPE"] = StorageEndpoint(f"{name}_DATATAPE", "tape", name, 1e6, 2e6)
        found[name] = Nucleus(name, status=changes.get("status", "active"))
        if not any(site.nucleus == name for site in sites):
            site = Site(name=f"{name}_PROD", nucleus=name, core_count=1, core_power=10.0, max_memory=4000,
                        max_walltime=172800, read_endpoints=(f"{name}_DATADISK",), write_endpoints=(f"{name}_DATADISK",))
            all_sites.append(replace(site, **changes.get("site", {})))
    return BrokerageCatalog(sites=tuple(all_sites), endpoints=endpoints, nuclei=found)


NO_INPUT = ChunkInput()


def choose(catalog: BrokerageCatalog, task: TaskRequirements = TASK, task_input: ChunkInput = NO_INPUT,
           active: tuple[TaskWork, ...] = (), seed: int = 1, **kw):
    loads = {site.name: SiteLoad(JobCounts(running=10)) for site in catalog.sites}
    return choose_nucleus(task, task_input, catalog, active, loads, SETTINGS, BROKERAGE, random.Random(seed), **kw)


# ---------------------------------------------------------------------------------- remaining work

@pytest.mark.parametrize("events,used,cpu_time,unit,expected", [
    (1000, 200, 10.0, "HS06sPerEvent", 8000.0),  # seed 000: (nEvents - nEventsUsed) x cpuTime
    (1000, 200, None, None, 800 * 300.0),  # §5: cpuTime 300 when NULL
    (1000, 0, 5000.0, "mHS06sPerEvent", 5000.0),  # §5: mHS06 units / 1000
    (100, 150, 10.0, None, 0.0),
])
def test_remaining_work(events, used, cpu_time, unit, expected):
    assert remaining_work(events, used, cpu_time, unit, SETTINGS.default_cpu_time) == expected


def test_remaining_work_counts_active_tasks_and_priority_buckets():
    # §5: fullRW over active (ready/scouting/running/pending) tasks; prioRW only at or above a priority, same queue
    tasks = [
        TaskWork(1, "CERN", "running", 900, 1000, 0, 1.0, work_queue="evgensimul"),
        TaskWork(2, "CERN", "ready", 400, 1000, 0, 1.0, work_queue="evgensimul"),
        TaskWork(3, "CERN", "scouting", 900, 1000, 0, 1.0, work_queue="mcore"),
        TaskWork(4, "CERN", "done", 900, 1000, 0, 1.0),
        TaskWork(5, "BNL", "pending", 100, 10, 0, 1.0),
        TaskWork(6, None, "running", 900, 10, 0, 1.0),
    ]
    assert RemainingWork(tasks, 300.0).full() == {"CERN": 3000.0, "BNL": 10.0}
    assert RemainingWork(tasks, 300.0).prio(min_priority=500, work_queue="evgensimul") == {"CERN": 1000.0}


def test_projected_output_of_remaining_work():
    # seed 000: totalRW / (corePower=10) / 24 / 3600 x 0.25 GB
    assert projected_output_gb(10 * 24 * 3600 * 4) == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------- filters

def test_inactive_nuclei_are_dropped():
    # seed 000: the nucleus status must be ACTIVE
    result = choose(world(("CERN", {"status": "offline"}), ("BNL", {})))
    assert result.nucleus == "BNL"
    assert {f.name: f.rule for f in result.trail} == {"BNL": "kept", "CERN": "status"}


@pytest.mark.parametrize("queued,t1_weight,rule", [
    (2000, None, "transfer_queue"),  # seed 000: the output transfer queue must be below 2000 files
    (1999, None, "kept"),
    (5000, -1, "kept"),  # §5: not checked when TW < 0 (jobs run at the nucleus)
])
def test_output_transfer_queue(queued, t1_weight, rule):
    result = choose(world(("CERN", {})), replace(TASK, t1_weight=t1_weight), queued_output_files={"CERN": queued})
    assert result.trail[0].rule == rule


@pytest.mark.parametrize("endpoint,rw,tokens,rule,message", [
    # §5: space_usable - projected >= DISK_THRESHOLD (100 TB), projected = fullRW/10/24/3600 x 0.25 GB
    ({"free_gb": 99_000.0}, 0.0, ("",), "storage", "99000 GB free - 0 GB projected < 100000 GB"),
    ({"free_gb": 150_000.0}, 10 * 24 * 3600 * 4 * 60_000, ("",), "storage", "150000 GB free - 60000 GB projected"),
    ({"free_gb": 150_000.0}, 10 * 24 * 3600 * 4 * 40_000, ("",), "kept", "weight"),
    ({"blacklisted_write": True}, 0.0, ("",), "storage", "CERN_DATADISK is blacklisted"),
    ({}, 0.0, ("DATATAPE",), "storage", "no endpoint for output DATATAPE"),  # an endpoint per output token
    ({}, 0.0, ("DATADISK",), "kept", "weight"),
])
def test_output_storage(endpoint, rw, tokens, rule, message):
    active = (TaskWork(1, "CERN", "running", 100, int(rw), 0, 1.0),) if rw else ()
    result = choose(world(("CERN", {"endpoint": endpoint})), active=active, output_tokens=tokens)
    assert result.trail[0].rule == rule
    assert message in result.trail[0].message
    if rule == "kept":
        assert result.destinations == {tokens[0]: "CERN_DATADISK"}


def test_a_nucleus_must_be_able_to_run_the_work():
    # seed 000 / §5: the job brokerage (hint mode) must keep at least one site of the nucleus
    catalog = world(("CERN", {"site": {"status": "brokeroff"}}), ("BNL", {"site": {"max_memory": 1000}}), ("RAL", {}))
    result = choose(catalog)
    fates = {f.name: f for f in result.trail}
    assert result.nucleus == "RAL"
    assert fates["CERN"].rule == "runnable" and "(status 1)" in fates["CERN"].message
    assert fates["BNL"].rule == "runnable" and "(memory 1)" in fates["BNL"].message


def _input(total_files: int, size: int, where: dict[str, int]) -> ChunkInput:
    """`where`: endpoint -> how many of the first files it holds."""
    files = [(f"f{i}", size, 100) for i in range(total_files)]
    replicas = [(f"f{i}", endpoint) for endpoint, n in where.items() for i in range(n)]
    return chunk_input(files, replicas)


def test_input_locality_thresholds():
    # seed 000: input > 1 GB needs 10 % of the bytes at the nucleus; > 100 files needs 10 % of the files
    catalog = world(("CERN", {}), ("BNL", {}))
    few_bytes = _input(50, GB, {"CERN_DATADISK": 50, "BNL_DATADISK": 4})  # BNL: 8 % of 50 GB
    result = choose(catalog, task_input=few_bytes)
    fates = {f.name: f for f in result.trail}
    assert fates["BNL"].rule == "locality" and "4.0 of 50.0 GB of input at the nucleus < 10%" in fates["BNL"].message
    few_files = _input(200, 1000, {"CERN_DATADISK": 200, "BNL_DATADISK": 19})  # small, but 19 of 200 files
    assert "19 of 200 input files" in {f.name: f for f in choose(catalog, task_input=few_files).trail}["BNL"].message
    small = _input(50, 1000, {"CERN_DATADISK": 50})  # below both thresholds: nothing required
    assert {f.rule for f in choose(catalog, task_input=small).trail} == {"kept"}


@pytest.mark.parametrize("task_changes,days,outcome", [
    ({"io_intensity": 500.0}, 0, None),  # nobody holds the data, IO-heavy, normal priority: no nucleus
    ({"io_intensity": 100.0}, 0, "waived"),  # §5 waiver: io <= 200 and input <= 10000 GB
    ({"io_intensity": None}, 0, "waived"),
    ({"io_intensity": 500.0, "priority": 800}, 0, "waived"),  # §5 waiver: priority >= 800
    ({"io_intensity": 500.0}, 7, "skipped"),  # DATA_LOCATION_CHECK_PERIOD: 7 days in assigning
])
def test_locality_waivers(task_changes, days, outcome):
    catalog = world(("CERN", {}), ("BNL", {}))
    nowhere = _input(50, GB, {})
    result = choose(catalog, replace(TASK, **task_changes), task_input=nowhere, assigning_days=days)
    if outcome is None:
        assert result.nucleus is None and {f.rule for f in result.trail} == {"locality"}
        assert result.error_dialog() == "no nucleus fits: locality 2"
    else:
        assert result.nucleus in ("CERN", "BNL")
        assert result.locality_waived is (outcome == "waived")


def test_a_task_with_a_nucleus_keeps_it():
    result = choose(world(("CERN", {}), ("BNL", {})), replace(TASK, nucleus="BNL"), output_tokens=("DATADISK",))
    assert result.nucleus == "BNL" and result.trail[0].message == "nucleus set on the task"
    assert result.destinations == {"DATADISK": "BNL_DATADISK"}


# ------------------------------------------------------------------------------------------- weight

def test_weight_of_remaining_work_input_tape_and_space():
    # seed 000: 1/totalRW (1 when < 50) x availableInputSize/totalInputSize x tapeWeight x space (§5)
    catalog = world(("CERN", {}), ("BNL", {"tape": True}), ("RAL", {"endpoint": {"free_gb": 2_000_000.0,
                                                                                 "total_gb": 4_000_000.0}}))
    task_input = _input(10, GB, {"CERN_DATADISK": 10, "BNL_DATADISK": 5, "BNL_DATATAPE": 10, "RAL_DATADISK": 2})
    active = (TaskWork(1, "CERN", "running", 900, 1000, 0, 1.0, work_queue="evgensimul"),
              TaskWork(2, "BNL", "running", 100, 1000, 0, 1.0, work_queue="evgensimul"))
    result = choose(catalog, replace(TASK, io_intensity=None), task_input, active)
    weights = result.weights
    space = 0.5 * 500.0  # free fraction 0.5 x free 500 TB
    assert weights["CERN"] == pytest.approx(1 / 1000 * 1.0 * space)  # RW of tasks at >= its priority
    assert weights["BNL"] == pytest.approx(1.0 * 1.0 * 0.001 * space)  # RW 0 (lower priority) -> 1; tape only part
    assert weights["RAL"] == pytest.approx(1.0 * 0.2 * 0.5 * 1000.0)  # free TB capped at FREE_DISK_CUTOFF 1000
    io_light = choose(catalog, replace(TASK, io_intensity=100.0), task_input, active).weights
    assert io_light["RAL"] == pytest.approx(0.5 * 1000.0)  # IO-light tasks do not weigh the input share


def test_draws_repeat_with_a_seed_and_follow_the_weights():
    catalog = world(("A", {"endpoint": {"free_gb": 100_000.0 * 2}}), ("B", {"endpoint": {"free_gb": 100_000.0 * 4}}),
                    ("C", {"endpoint": {"free_gb": 100_000.0 * 6}}))
    assert [choose(catalog, seed=s).nucleus for s in range(20)] == [choose(catalog, seed=s).nucleus for s in range(20)]
    weights = choose(catalog).weights
    total = sum(weights.values())
    rng = random.Random(3)
    loads = {site.name: SiteLoad(JobCounts(running=10)) for site in catalog.sites}
    counts = dict.fromkeys(weights, 0)
    for _ in range(10_000):
        counts[choose_nucleus(TASK, ChunkInput(), catalog, (), loads, SETTINGS, BROKERAGE, rng).nucleus] += 1
    for name, weight in weights.items():
        assert counts[name] / 10_000 == pytest.approx(weight / total, abs=0.03)


def test_remaining_work_kept_as_tasks_are_added_equals_the_sums_over_every_task():
    """A broker pass adds each task it assigns to a RemainingWork instead of summing every active task
    again per decision: its fullRW and prioRW equal the sums over the same tasks, one by one."""
    rng = random.Random(7)
    tasks = [TaskWork(i, rng.choice(["CERN", "BNL", None]), rng.choice(["running", "ready", "done", "pending", "scouting"]),
                      rng.choice([100, 400, 900, 1000]), rng.randrange(0, 5000), rng.randrange(0, 3000), rng.choice([None, 1.0, 250.0]),
                      rng.choice([None, "HS06sPerEvent", "mHS06sPerEvent"]), work_queue=rng.choice([None, "mcore", "evgensimul"]))
             for i in range(300)]
    remaining = RemainingWork([], 300.0)
    for count, work in enumerate(tasks, 1):
        remaining.add(work)
        if count % 50:
            continue
        seen = tasks[:count]
        for priority in (None, 100, 500, 1000):
            for queue in (None, "mcore", "evgensimul", "other"):
                expected = {}
                for work in seen:  # the definition, task by task
                    if work.nucleus is None or work.status not in ACTIVE_FOR_RW or (priority is not None and work.priority < priority) \
                            or (queue is not None and work.work_queue != queue):
                        continue
                    expected[work.nucleus] = expected.get(work.nucleus, 0.0) + remaining_work(
                        work.n_events, work.n_events_used, work.cpu_time, work.cpu_time_unit, 300.0)
                assert remaining.prio(priority, queue) == pytest.approx(expected)
                assert RemainingWork(seen, 300.0).prio(priority, queue) == pytest.approx(expected)
                if priority is None and queue is None:
                    assert remaining.full() == pytest.approx(expected)
