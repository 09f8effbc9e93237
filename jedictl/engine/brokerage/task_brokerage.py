"""Task brokerage: the nucleus (output destination) of a WORLD task in `assigning`.

Nuclei are dropped, in JEDI's order, when they are not active, have too many output files queued
towards them, lack free space on an output endpoint once the remaining work already assigned there is
accounted for, cannot run the work (no site of the nucleus passes the job brokerage's site filters), or
hold too little of the input. The survivors are weighed 1/RW x available input x tape weight x free
space fraction x min(cutoff, free TB) and one is drawn at random in proportion to its weight.
Every nucleus' fate goes into the trail. Reference: jedi-inventory.md §5, seed 000 "Task brokerage".
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from jedictl.config import BrokerageSettings, TaskBrokerSettings
from jedictl.engine.brokerage.job_brokerage import runnable_sites
from jedictl.engine.brokerage.filters import DEFAULT_TUNING, JobBrokerTuning
from jedictl.engine.brokerage.model import (
    BrokerageCatalog,
    ChunkInput,
    Drop,
    Fate,
    Nucleus,
    SiteLoad,
    StorageEndpoint,
    TaskRequirements,
)

GB_PER_TB = 1000.0  # storage systems count in decimal units
GIB = 1024 ** 3
#: Statuses whose tasks load a nucleus with remaining work (jedi-inventory.md §5).
ACTIVE_FOR_RW = frozenset({"ready", "scouting", "running", "pending"})


# -------------------------------------------------------------------------------- remaining work

@dataclass(frozen=True)
class TaskWork:
    """Figures of one task for the remaining-work (RW) sums: its master input events and cpuTime."""

    task_id: int
    nucleus: str | None
    status: str
    priority: int  # current_priority
    n_events: int
    n_events_used: int
    cpu_time: float | None = None
    cpu_time_unit: str | None = None
    work_queue: str | None = None


def remaining_work(n_events: int, n_events_used: int, cpu_time: float | None, cpu_time_unit: str | None,
                   default_cpu_time: float) -> float:
    """RW = remaining events x cpuTime (HS06 s); the default cpuTime when the task has none, and
    thousandths for `mHS06...` units (seed 000 "Task brokerage")."""
    events = max(n_events - n_events_used, 0)
    per_event = default_cpu_time if cpu_time is None else cpu_time
    if cpu_time is not None and (cpu_time_unit or "").startswith("m"):
        per_event = cpu_time / 1000.0
    return events * per_event


class RemainingWork:
    """Σ RW of active tasks per nucleus, kept as tasks are added: JEDI's fullRW, and its prioRW by work
    queue and priority. A broker pass adds each task it assigns, so the next decision sees the load;
    summing every active task again for each decision made a pass over N tasks quadratic (10,000
    tasks: 10^8 additions, most of a 485 s pass)."""

    def __init__(self, tasks: Iterable[TaskWork], default_cpu_time: float) -> None:
        self.default_cpu_time = default_cpu_time
        self._full: dict[str, float] = {}
        # work queue -> priority -> nucleus -> RW: a decision sums a few priority levels, not the tasks
        self._by_queue: dict[str | None, dict[int, dict[str, float]]] = {}
        for work in tasks:
            self.add(work)

    def add(self, work: TaskWork) -> None:
        if work.nucleus is None or work.status not in ACTIVE_FOR_RW:
            return
        rw = remaining_work(work.n_events, work.n_events_used, work.cpu_time, work.cpu_time_unit, self.default_cpu_time)
        self._full[work.nucleus] = self._full.get(work.nucleus, 0.0) + rw
        level = self._by_queue.setdefault(work.work_queue, {}).setdefault(work.priority, {})
        level[work.nucleus] = level.get(work.nucleus, 0.0) + rw

    def full(self) -> dict[str, float]:
        return dict(self._full)

    def prio(self, min_priority: int | None = None, work_queue: str | None = None) -> dict[str, float]:
        """Only the tasks of `work_queue` (any, when None) at or above `min_priority` (any, when None)."""
        queues = self._by_queue.values() if work_queue is None else [self._by_queue.get(work_queue, {})]
        totals: dict[str, float] = {}
        for levels in queues:
            for priority, per_nucleus in levels.items():
                if min_priority is not None and priority < min_priority:
                    continue
                for nucleus, rw in per_nucleus.items():
                    totals[nucleus] = totals.get(nucleus, 0.0) + rw
        return totals


def projected_output_gb(nucleus_rw: float) -> float:
    """Space the work already at a nucleus will still write: RW / 10 HS06 per core / 1 day x 0.25 GB."""
    return nucleus_rw / 10 / 24 / 3600 * 0.25


# ----------------------------------------------------------------------------------- data and space

@dataclass(frozen=True)
class NucleusData:
    """How much of the task's input a nucleus holds (on its disk endpoints / on any endpoint)."""

    total_files: int
    total_bytes: int
    disk_files: int
    disk_bytes: int
    any_files: int
    any_bytes: int


def nucleus_data(chunk: ChunkInput, endpoints: Sequence[StorageEndpoint]) -> NucleusData:
    readable = [e for e in endpoints if not e.blacklisted_read and e.name in chunk.replicas]
    disk = frozenset().union(*(chunk.replicas[e.name] for e in readable if not e.is_tape))
    tape = frozenset().union(*(chunk.replicas[e.name] for e in readable if e.is_tape))
    anywhere = disk | tape
    return NucleusData(chunk.n_files, chunk.total_bytes, len(disk), chunk.bytes_of(disk),
                       len(anywhere), chunk.bytes_of(anywhere))


def output_endpoint(endpoints: Sequence[StorageEndpoint], token: str) -> StorageEndpoint | None:
    """The nucleus endpoint for an output storage token (e.g. DATADISK -> XYZ_DATADISK); without a
    token, the disk endpoint with the most free space."""
    if token:
        for endpoint in endpoints:
            if endpoint.name == token or endpoint.name.endswith("_" + token):
                return endpoint
        return None
    disks = [e for e in endpoints if not e.is_tape]
    return max(disks, key=lambda e: e.free_gb, default=None)


# ---------------------------------------------------------------------------------------- result

@dataclass(frozen=True)
class TaskBrokerage:
    nucleus: str | None  # None: no nucleus fits; the task stays in assigning
    destinations: Mapping[str, str] = field(default_factory=dict)  # output token ("" = default) -> endpoint
    weights: Mapping[str, float] = field(default_factory=dict)
    trail: tuple[Fate, ...] = ()
    locality_waived: bool = False

    @property
    def ok(self) -> bool:
        return self.nucleus is not None

    def error_dialog(self) -> str:
        counts: dict[str, int] = {}
        for fate in self.trail:
            if not fate.kept:
                counts[fate.rule] = counts.get(fate.rule, 0) + 1
        if not counts:
            return "no nucleus fits: the store defines none (`jedictl sites import` adds nuclei)"
        return "no nucleus fits: " + ", ".join(f"{rule} {n}" for rule, n in counts.items())

    def rows(self) -> list[dict]:
        return [fate.as_dict("nucleus") for fate in self.trail]


@dataclass(frozen=True)
class StoragePlan:
    """Where the outputs would go at a nucleus and how roomy the tightest endpoint is."""

    destinations: Mapping[str, str]
    free_fraction: float
    free_tb: float


@dataclass(frozen=True)
class _Survivor:
    nucleus: Nucleus
    data: NucleusData
    storage: StoragePlan


def choose_nucleus(
    task: TaskRequirements,
    task_input: ChunkInput,
    catalog: BrokerageCatalog,
    active_tasks: "RemainingWork | Sequence[TaskWork]",
    site_loads: Mapping[str, SiteLoad],
    settings: TaskBrokerSettings,
    brokerage: BrokerageSettings,
    rng: random.Random,
    *,
    output_tokens: Sequence[str] = ("",),
    queued_output_files: Mapping[str, int] | None = None,
    assigning_days: float = 0.0,
    tuning: JobBrokerTuning = DEFAULT_TUNING,
) -> TaskBrokerage:
    """Choose the nucleus of one task. `active_tasks` are the figures of tasks already assigned, as a
    `RemainingWork` (`add` each task you assign in a pass so the next one sees the load) or a list."""
    if task.nucleus and task.nucleus in catalog.nuclei:
        endpoints = catalog.endpoints_of_nucleus(task.nucleus)
        found = {token: endpoint.name for token in output_tokens if (endpoint := output_endpoint(endpoints, token))}
        fate = Fate(task.nucleus, True, "kept", "nucleus set on the task", weight=1.0)
        return TaskBrokerage(task.nucleus, MappingProxyType(found), MappingProxyType({task.nucleus: 1.0}), (fate,))
    remaining = active_tasks if isinstance(active_tasks, RemainingWork) else RemainingWork(active_tasks, settings.default_cpu_time)
    full_rw = remaining.full()
    prio_rw = remaining.prio(min_priority=task.priority, work_queue=task.work_queue)
    queued = queued_output_files or {}
    fates: dict[str, Fate] = {}
    survivors: list[_Survivor] = []
    for nucleus in sorted(catalog.nuclei.values(), key=lambda n: n.name):
        endpoints = catalog.endpoints_of_nucleus(nucleus.name)
        screened = _screen(nucleus, endpoints, task, queued, output_tokens, full_rw.get(nucleus.name, 0.0), settings)
        if isinstance(screened, StoragePlan):
            survivors.append(_Survivor(nucleus, nucleus_data(task_input, endpoints), screened))
        else:
            rule, drop = screened
            fates[nucleus.name] = Fate(nucleus.name, False, rule, drop.message, drop.numbers)

    survivors = _check_runnable(survivors, task, task_input, catalog, site_loads, brokerage, tuning, fates)
    survivors, waived = _check_locality(survivors, task, settings, assigning_days, fates)

    weights: dict[str, float] = {}
    for survivor in survivors:
        weight, numbers, text = nucleus_weight(survivor, task, prio_rw.get(survivor.nucleus.name, 0.0), settings)
        weights[survivor.nucleus.name] = weight
        note = " (input locality waived)" if waived else ""
        fates[survivor.nucleus.name] = Fate(survivor.nucleus.name, True, "kept", f"weight {weight:.4g} = {text}{note}",
                                            MappingProxyType(numbers), weight)
    chosen = _draw(survivors, weights, rng)
    trail = tuple(fates[name] for name in sorted(fates))
    return TaskBrokerage(
        nucleus=chosen.nucleus.name if chosen else None,
        destinations=MappingProxyType(dict(chosen.storage.destinations)) if chosen else MappingProxyType({}),
        weights=MappingProxyType(weights), trail=trail, locality_waived=waived,
    )


# ------------------------------------------------------------------------------------- the checks

def _screen(nucleus: Nucleus, endpoints: Sequence[StorageEndpoint], task: TaskRequirements, queued: Mapping[str, int],
            tokens: Sequence[str], nucleus_rw: float, settings: TaskBrokerSettings) -> tuple[str, Drop] | StoragePlan:
    """The first check a nucleus fails (rule, why) or, when it passes them, where its outputs would go."""
    drop = _check_status(nucleus)
    if drop is not None:
        return "status", drop
    drop = _check_transfer_queue(nucleus, task, queued, settings)
    if drop is not None:
        return "transfer_queue", drop
    storage = _check_storage(endpoints, tokens, nucleus_rw, settings)
    return ("storage", storage) if isinstance(storage, Drop) else storage


def _check_status(nucleus: Nucleus) -> Drop | None:
    if nucleus.status.lower() != "active":
        return Drop(f"status: nucleus is {nucleus.status}", {"status": nucleus.status})
    return None


def _check_transfer_queue(nucleus: Nucleus, task: TaskRequirements, queued: Mapping[str, int],
                          settings: TaskBrokerSettings) -> Drop | None:
    if task.t1_weight is not None and task.t1_weight < 0:  # jobs run at the nucleus: nothing to transfer
        return None
    files = queued.get(nucleus.name, 0)
    if files >= settings.max_transfer_queue:
        return Drop(f"transfer queue: {files} output files queued, limit {settings.max_transfer_queue}",
                    {"queued_files": files, "limit": settings.max_transfer_queue})
    return None


def _check_storage(endpoints: Sequence[StorageEndpoint], tokens: Sequence[str], nucleus_rw: float,
                   settings: TaskBrokerSettings) -> StoragePlan | Drop:
    """Each output needs an endpoint at the nucleus, usable, with DISK_THRESHOLD left after the
    projected output of the work already there."""
    projected = projected_output_gb(nucleus_rw)
    threshold_gb = settings.disk_threshold_tb * GB_PER_TB
    destinations: dict[str, str] = {}
    worst: tuple[float, float] | None = None
    for token in tokens or ("",):
        endpoint = output_endpoint(endpoints, token)
        if endpoint is None:
            return Drop(f"storage: no endpoint for output {token or 'disk'}", {"token": token})
        if endpoint.blacklisted_write or endpoint.blacklisted_read:
            return Drop(f"storage: endpoint {endpoint.name} is blacklisted", {"endpoint": endpoint.name})
        usable = endpoint.free_gb - projected
        if usable < threshold_gb:
            numbers = {"endpoint": endpoint.name, "free_gb": endpoint.free_gb, "projected_gb": round(projected, 1),
                       "threshold_gb": threshold_gb}
            return Drop(f"storage: {endpoint.name} has {endpoint.free_gb:g} GB free - {projected:.0f} GB projected "
                        f"< {threshold_gb:g} GB", numbers)
        destinations[token] = endpoint.name
        fraction = endpoint.free_gb / endpoint.total_gb if endpoint.total_gb > 0 else 0.0
        if worst is None or fraction < worst[0]:
            worst = (fraction, endpoint.free_gb / GB_PER_TB)
    assert worst is not None
    return StoragePlan(MappingProxyType(destinations), worst[0], worst[1])


def _check_runnable(survivors: list[_Survivor], task: TaskRequirements, task_input: ChunkInput,
                    catalog: BrokerageCatalog, site_loads: Mapping[str, SiteLoad], brokerage: BrokerageSettings,
                    tuning: JobBrokerTuning, fates: dict[str, Fate]) -> list[_Survivor]:
    """A nucleus must have at least one site that passes the job brokerage's site filters."""
    if not survivors:
        return survivors
    ok_sites, site_fates = runnable_sites(task, task_input, catalog, site_loads, brokerage, tuning=tuning)
    kept = []
    for survivor in survivors:
        own = [site.name for site in catalog.sites if site.nucleus == survivor.nucleus.name]
        if any(name in ok_sites for name in own):
            kept.append(survivor)
            continue
        rules: dict[str, int] = {}
        for name in own:
            rule = site_fates[name].rule if name in site_fates else "none"
            rules[rule] = rules.get(rule, 0) + 1
        detail = ", ".join(f"{rule} {n}" for rule, n in rules.items()) or "the nucleus has no sites"
        name = survivor.nucleus.name
        fates[name] = Fate(name, False, "runnable", f"runnable: no site passes the job brokerage ({detail})",
                           {"n_sites": len(own), **{f"dropped_{rule}": n for rule, n in rules.items()}})
    return kept


def _check_locality(survivors: list[_Survivor], task: TaskRequirements, settings: TaskBrokerSettings,
                    assigning_days: float, fates: dict[str, Fate]) -> tuple[list[_Survivor], bool]:
    """Input must largely be at the nucleus (1 GB / 10 %, 100 files / 10 %) -- not after a week in
    assigning, and waived when no nucleus qualifies and the task is light on IO or urgent."""
    if not survivors or assigning_days >= settings.data_location_check_days:
        return survivors, False
    kept, failed = [], []
    for survivor in survivors:
        drop = _locality_drop(survivor.data, settings)
        if drop is None:
            kept.append(survivor)
        else:
            failed.append((survivor, drop))
    if kept or not failed:
        for survivor, drop in failed:
            name = survivor.nucleus.name
            fates[name] = Fate(name, False, "locality", drop.message, drop.numbers)
        return kept, False
    io = task.io_intensity
    size_gb = survivors[0].data.total_bytes / GIB
    light = ((io is None or io <= settings.min_io_intensity_with_local_data)
             and size_gb <= settings.min_input_size_with_local_data_gb)
    if light or task.priority >= settings.max_task_prio_with_local_data:
        return survivors, True
    for survivor, drop in failed:
        name = survivor.nucleus.name
        fates[name] = Fate(name, False, "locality", drop.message, drop.numbers)
    return [], False


def _locality_drop(data: NucleusData, settings: TaskBrokerSettings) -> Drop | None:
    numbers = {"total_bytes": data.total_bytes, "available_bytes": data.any_bytes,
               "total_files": data.total_files, "available_files": data.any_files}
    size_threshold = settings.input_size_threshold_gb * GIB
    if data.total_bytes > size_threshold and data.any_bytes < data.total_bytes * settings.input_size_fraction:
        return Drop(f"locality: {data.any_bytes / GIB:.1f} of {data.total_bytes / GIB:.1f} GB of input at the nucleus "
                    f"< {settings.input_size_fraction:.0%}", numbers)
    if data.total_files > settings.input_num_threshold and data.any_files < data.total_files * settings.input_num_fraction:
        return Drop(f"locality: {data.any_files} of {data.total_files} input files at the nucleus "
                    f"< {settings.input_num_fraction:.0%}", numbers)
    return None


# ------------------------------------------------------------------------------------ weight, draw

def nucleus_weight(survivor: _Survivor, task: TaskRequirements, prio_rw: float,
                   settings: TaskBrokerSettings) -> tuple[float, dict[str, float], str]:
    """1/RW (1 below 50) x available input (unless IO-light) x tape weight x free fraction x min(cutoff, free TB)."""
    data = survivor.data
    weight = 1.0 / prio_rw if prio_rw >= 50 else 1.0
    text = f"1/RW {prio_rw:.4g}" if prio_rw >= 50 else "RW < 50 -> 1"
    numbers: dict[str, float] = {"rw": prio_rw}
    if data.total_bytes > 0:
        io = task.io_intensity
        if io is None or io > settings.min_io_intensity_with_local_data:
            available = data.any_bytes / data.total_bytes
            weight *= available
            text += f" x input {available:.3g}"
            numbers["available_fraction"] = available
        if data.any_bytes > data.disk_bytes:
            weight *= settings.tape_weight
            text += f" x tape {settings.tape_weight:g}"
            numbers["tape_weight"] = settings.tape_weight
    fraction = survivor.storage.free_fraction
    free_tb = min(settings.free_disk_cutoff_tb, survivor.storage.free_tb)
    weight *= fraction * free_tb
    text += f" x free fraction {fraction:.3g} x free {free_tb:.4g} TB"
    numbers.update(free_fraction=fraction, free_tb=free_tb)
    return weight, numbers, text


def _draw(survivors: Sequence[_Survivor], weights: Mapping[str, float], rng: random.Random) -> _Survivor | None:
    """Weighted random draw (uniform in [0, total]); uniform when no nucleus weighs anything."""
    if not survivors:
        return None
    total = sum(weights[s.nucleus.name] for s in survivors)
    if total <= 0:
        return rng.choice(list(survivors))
    point = rng.random() * total
    for survivor in survivors:
        point -= weights[survivor.nucleus.name]
        if point <= 0:
            return survivor
    return survivors[-1]
