"""The job brokerage's site filters: each a small pure function that keeps a site or drops it with a
reason and the numbers behind it, applied in JEDI's order by `job_brokerage`.

Order and rules follow AtlasProdJobBroker as described in jedi-inventory.md §6.5 and seed 000 "Job
brokerage explained" (step 3, then the caps of step 5): status, the scout/high-priority rules
(opportunistic and inactive sites), zero share, core count, software, cvmfs, memory, scratch disk, output
storage, walltime, transferring jobs, negative T1 weight, pilots, input to move for IO-intensive tasks,
the site's own caps (`site_slots`), queue length. A pre-assigned site skips the filters JEDI skips for it (`skip_when_preassigned`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from jedictl.config import BrokerageSettings, ThrottleSettings
from jedictl.engine.brokerage import site_needs as res
from jedictl.engine.brokerage import site_slots
from jedictl.engine.jobs.resources import job_priority
from jedictl.engine.brokerage.model import (
    NO_LOAD,
    BrokerageCatalog,
    ChunkInput,
    Drop,
    JobCounts,
    Site,
    SiteLoad,
    TaskRequirements,
)

MIB = res.MIB
GIB = 1024 * MIB
_RELEASE_VERSION = re.compile(r"-(\d+\.\d+\.\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class JobBrokerTuning:
    """JEDI constants of the job brokerage that jedictl.config does not (yet) hold; reference defaults."""

    memory_compensation: float = 0.9  # JobUtils.MEMORY_COMPENSATION
    merge_ram_mb: int = 2000  # merge jobs without mergeRamCount (§6.7)
    high_priority: int = 800  # >= this (or scouts): avoid opportunistic and inactive sites
    inactive_hours: float = 2.0  # "no job started in the last 2 hours"
    t1_weight_priority: int = 900  # >= this (or scouts): T1 weight at least t1_weight_floor
    t1_weight_floor: float = 100.0
    io_intensive_t1: float = 500.0  # t1Weight 0 and ioIntensity above this -> the cloud's weight
    io_intensive_t1_weight: float = 4.0  # that weight (cloudconfig.weight, §6.5 "0 -> 4")
    express_priority: int = 1000  # express chunks (or processingType urgent) skip the queue caps
    long_job_hours: float = 24.0  # scouts/merge/undefined walltime need 24 h ...
    long_job_core_power: float = 10.0  # ... x 10 HS06 per core (24 h when the site gives no core power)
    default_core_power: float = 1.0  # a site without core power does not scale walltime (as JEDI)
    queue_cap_factor: float = 2.0  # queued > max(queue_limit_site, 2 x running)


DEFAULT_TUNING = JobBrokerTuning()


@dataclass(frozen=True)
class SiteLocality:
    """Input of the chunk already at a site (disk and tape endpoints the site reads from): its one-time
    files, and the many-time inputs available there (whole on a disk endpoint it reads, or on cvmfs)."""

    disk_files: frozenset[int] = frozenset()
    tape_files: frozenset[int] = frozenset()
    disk_bytes: int = 0
    many_time_held: frozenset[str] = frozenset()


NO_LOCALITY = SiteLocality()


@dataclass(frozen=True)
class BrokerContext:
    """Everything a filter may look at, computed once per brokerage."""

    task: TaskRequirements
    chunk: ChunkInput
    catalog: BrokerageCatalog
    loads: Mapping[str, SiteLoad]
    settings: BrokerageSettings
    tuning: JobBrokerTuning
    cores: int  # cores the task asks for (0 = any)
    nucleus_sites: frozenset[str]
    t1_weight: float
    nucleus_only: bool  # negative T1 weight: only sites of the nucleus
    express: bool
    preassigned: bool
    locality: Mapping[str, SiteLocality] = field(default_factory=dict)
    reference_bytes: int = 0  # the most input any surviving candidate holds (JEDI's totalSize)
    reference_files: int = 0
    # The many-time inputs some surviving candidate has available: one no candidate has is placed
    # wherever the jobs go, so, like one-time data no candidate holds, it favours nobody.
    many_time_reference: frozenset[str] = frozenset()
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)  # the slot model's overflow
    start_loads: Mapping[str, SiteLoad] | None = None  # loads at the start of the pass (None: `loads`)

    def load(self, site: Site) -> SiteLoad:
        return self.loads.get(site.name, NO_LOAD)

    def local(self, site: Site) -> SiteLocality:
        return self.locality.get(site.name, NO_LOCALITY)

    def many_time_missing(self, site: Site) -> frozenset[str]:
        """Many-time inputs available at other candidates but not here: placed here once before the jobs read them."""
        return self.many_time_reference - self.local(site).many_time_held

    def all_input_local(self, site: Site) -> bool:
        """Nothing to move before the jobs can run: the one-time input is here, and every many-time input
        some candidate has is available here too."""
        one_time = self.reference_bytes <= 0 or self.local(site).disk_bytes >= self.reference_bytes
        return one_time and not self.many_time_missing(site)

    @property
    def high_priority(self) -> bool:
        return self.task.priority >= self.tuning.high_priority or self.chunk.is_scout

    @property
    def job_priority(self) -> int:
        """The priority the chunk's jobs get (scouts: max(901, task priority + 1)); what the caps' overflow compares."""
        return job_priority(self.task.priority, self.chunk.is_scout, False, self.settings.scout_priority_floor, 0)

    def slot_decision(self, site: Site) -> site_slots.SiteSlotDecision:
        """The site's caps (WMCore's slot model) for one more job of this chunk."""
        start = (self.start_loads or self.loads).get(site.name, NO_LOAD)
        return site_slots.slot_decision(site, self.task.prod_source_label, self.job_priority, merge=self.chunk.is_merge,
                                        settings=self.throttle, now=self.load(site).slots, at_start=start.slots,
                                        preassigned=self.preassigned)


FilterResult = tuple[list[Site], list[tuple[Site, Drop]]]
Check = Callable[[Site, BrokerContext], "Drop | None"]


@dataclass(frozen=True)
class SiteFilter:
    name: str
    apply: Callable[[Sequence[Site], BrokerContext], FilterResult]
    reference: str
    skip_when_preassigned: bool = False


def per_site(check: Check) -> Callable[[Sequence[Site], BrokerContext], FilterResult]:
    """Lift a one-site check into a filter over the candidate list."""
    def apply(sites: Sequence[Site], ctx: BrokerContext) -> FilterResult:
        kept: list[Site] = []
        dropped: list[tuple[Site, Drop]] = []
        for site in sites:
            drop = check(site, ctx)
            if drop is None:
                kept.append(site)
            else:
                dropped.append((site, drop))
        return kept, dropped
    return apply


# ------------------------------------------------------------------------------------ the checks

def check_status(site: Site, ctx: BrokerContext) -> Drop | None:
    if site.status not in ("online", "test"):
        return Drop(f"status: site is {site.status}", {"status": site.status})
    if site.is_test_queue and not ctx.task.is_test:
        return Drop(f"status: test queue, only for test tasks (task label {ctx.task.prod_source_label})",
                    {"status": site.status, "label": ctx.task.prod_source_label})
    return None


def check_opportunistic(site: Site, ctx: BrokerContext) -> Drop | None:
    if ctx.high_priority and site.opportunistic:
        why = "scout jobs" if ctx.chunk.is_scout else f"priority {ctx.task.priority} >= {ctx.tuning.high_priority}"
        return Drop(f"high priority: opportunistic site avoided for {why}",
                    {"priority": ctx.task.priority, "scout": ctx.chunk.is_scout})
    return None


def _inactive(site: Site, ctx: BrokerContext) -> Drop | None:
    load = ctx.load(site)
    hours = load.hours_since_last_start
    waiting = load.counts.activated + load.counts.starting
    if hours is not None and hours > ctx.tuning.inactive_hours and waiting > 0:
        return Drop(f"inactive: no job started for {hours:.1f} h (limit {ctx.tuning.inactive_hours:g} h) "
                    f"with {waiting} jobs activated or starting",
                    {"hours_since_last_start": round(hours, 2), "activated_starting": waiting})
    return None


def filter_inactive(sites: Sequence[Site], ctx: BrokerContext) -> FilterResult:
    """High-priority, scout and merge jobs avoid sites where nothing started lately -- unless that
    would leave no site at all, in which case JEDI keeps them all."""
    if not (ctx.high_priority or ctx.chunk.is_merge or ctx.task.merge_output):
        return list(sites), []
    kept, dropped = per_site(_inactive)(sites, ctx)
    return (kept, dropped) if kept else (list(sites), [])


def _matches(value: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(value, pattern) for pattern in patterns)


def check_zero_share(site: Site, ctx: BrokerContext) -> Drop | None:
    ptype = ctx.task.processing_type or ""
    if site.processing_types is not None and not _matches(ptype, site.processing_types):
        return Drop(f"zero share: processing type {ptype or '(none)'} not among {', '.join(site.processing_types)}",
                    {"processing_type": ptype})
    if site.excluded_processing_types and _matches(ptype, site.excluded_processing_types):
        return Drop(f"zero share: processing type {ptype} is excluded at the site", {"processing_type": ptype})
    return None


def check_core_count(site: Site, ctx: BrokerContext) -> Drop | None:
    """JEDI's generic rule: a multi-core job needs dynamic slots (0 or -1) or slots with at least as
    many cores; a single-core job needs single-core or dynamic slots."""
    wanted, offered = ctx.cores, site.core_count
    dynamic = offered in (-1, 0)
    if wanted > 1 and not (dynamic or (offered is not None and offered >= wanted)):
        return Drop(f"core count: task needs {wanted} cores, site slots have {offered or 1}",
                    {"task_cores": wanted, "site_cores": offered})
    if wanted == 1 and not (dynamic or offered in (None, 0, 1)):
        return Drop(f"core count: single-core task, site slots have {offered} cores",
                    {"task_cores": wanted, "site_cores": offered})
    limit = ctx.task.max_core_count
    if limit and not ctx.chunk.is_merge and offered is not None and offered > limit:
        # JEDI's "max core count" check: a job takes the whole slot, more cores than the task can use.
        return Drop(f"core count: site slots have {offered} cores, above the task's max_core_count {limit}",
                    {"site_cores": offered, "max_core_count": limit})
    return None


def check_direct_io(site: Site, ctx: BrokerContext) -> Drop | None:
    """allowInputLAN=only (split rule IL=2): only sites whose jobs read their input directly."""
    if ctx.task.direct_io_only and not site.direct_io:
        return Drop("direct input: allow_input_lan=only and the site has no direct IO", {"direct_io": False})
    return None


def check_software(site: Site, ctx: BrokerContext) -> Drop | None:
    task = ctx.task
    if task.container_name:
        offered = site.containers
        if offered is None or "ANY" in offered or _matches(task.container_name, offered):
            return None
        return Drop(f"software: container {task.container_name} not available", {"container": task.container_name})
    if task.release:
        offered = site.releases
        if offered is None or "ANY" in offered:
            return None
        version = _RELEASE_VERSION.search(task.release)
        names = [task.release] + ([version.group(1)] if version else [])
        if any(_matches(name, offered) for name in names):
            return None
        return Drop(f"software: release {task.release} not installed", {"release": task.release})
    return None


def check_cvmfs(site: Site, ctx: BrokerContext) -> Drop | None:
    """Input resident on cvmfs is read in place at its cvmfs path: no replica and no stage-in, but only
    where the worker nodes mount cvmfs (the site's `cvmfs`; PanDA's is_cvmfs)."""
    if ctx.chunk.cvmfs_datasets and not site.cvmfs:
        names = ", ".join(ctx.chunk.cvmfs_datasets)
        return Drop(f"cvmfs: input {names} is read from cvmfs and the site does not mount cvmfs",
                    {"cvmfs_datasets": names, "site_cvmfs": False})
    return None


def check_memory(site: Site, ctx: BrokerContext) -> Drop | None:
    needed = res.needed_memory_mb(ctx.task, ctx.chunk, site, ctx.tuning.memory_compensation, ctx.tuning.merge_ram_mb)
    if needed <= 0:
        return None
    if site.max_memory and needed > site.max_memory:
        return Drop(f"memory: needs {needed} MB, site max {site.max_memory} MB",
                    {"needed_mb": needed, "site_max_mb": site.max_memory})
    if site.min_memory and needed < site.min_memory:
        return Drop(f"memory: needs {needed} MB, site min {site.min_memory} MB",
                    {"needed_mb": needed, "site_min_mb": site.min_memory})
    return None


def check_scratch_disk(site: Site, ctx: BrokerContext) -> Drop | None:
    if not site.max_scratch_mb:
        return None
    needed = res.needed_scratch_mb(ctx.task, ctx.chunk, site, ctx.settings.default_output_size_mb)
    if needed > site.max_scratch_mb:
        return Drop(f"scratch disk: needs {needed:.0f} MB, site has {site.max_scratch_mb} MB",
                    {"needed_mb": round(needed), "site_max_mb": site.max_scratch_mb})
    return None


def check_storage(site: Site, ctx: BrokerContext) -> Drop | None:
    # Sites of the task's nucleus write to the nucleus, whose space the task brokerage checked.
    if site.name in ctx.nucleus_sites or not site.write_endpoints:
        return None
    endpoints = [ctx.catalog.endpoints[name] for name in site.write_endpoints if name in ctx.catalog.endpoints]
    if not endpoints:
        return None
    usable = [endpoint for endpoint in endpoints if not endpoint.blacklisted_write]
    if not usable:
        names = ", ".join(endpoint.name for endpoint in endpoints)
        return Drop(f"storage: write endpoint {names} is blacklisted", {"endpoint": names})
    best = max(usable, key=lambda endpoint: endpoint.free_gb)
    if best.free_gb < ctx.settings.storage_min_free_gb:
        return Drop(f"storage: endpoint {best.name} has {best.free_gb:g} GB free, needs "
                    f"{ctx.settings.storage_min_free_gb:g} GB",
                    {"endpoint": best.name, "free_gb": best.free_gb, "min_free_gb": ctx.settings.storage_min_free_gb})
    return None


def check_walltime(site: Site, ctx: BrokerContext) -> Drop | None:
    task, chunk, tuning = ctx.task, ctx.chunk, ctx.tuning
    # Scouts, merges and tasks without a walltime estimate go only to long queues.
    needs_long_queue = (chunk.is_scout and not ctx.preassigned) or chunk.is_merge or not res.walltime_defined(task)
    if needs_long_queue and site.max_walltime:
        needed_hs06_s = tuning.long_job_hours * 3600 * tuning.long_job_core_power
        offered_hs06_s = site.max_walltime * (site.core_power or tuning.long_job_core_power)
        if offered_hs06_s < needed_hs06_s:
            kind = "scout" if chunk.is_scout else "merge" if chunk.is_merge else "undefined-walltime"
            return Drop(f"walltime: {kind} jobs need {tuning.long_job_hours:g} h x {tuning.long_job_core_power:g} HS06, "
                        f"site offers {site.max_walltime} s x {site.core_power or tuning.long_job_core_power:g} HS06",
                        {"site_max_s": site.max_walltime, "core_power": site.core_power,
                         "needed_hs06_s": needed_hs06_s, "offered_hs06_s": offered_hs06_s})
    if chunk.is_merge:
        return None
    power = site.core_power or tuning.default_core_power
    expected = res.expected_walltime_s(task, chunk, res.job_cores(ctx.cores, site), power)
    if expected is None:
        return None
    if site.max_walltime and expected > site.max_walltime:
        return Drop(f"walltime: needs {expected:.0f} s, site max {site.max_walltime} s",
                    {"expected_s": round(expected), "site_max_s": site.max_walltime})
    if site.min_walltime and expected < site.min_walltime:
        return Drop(f"walltime: needs {expected:.0f} s, site min {site.min_walltime} s",
                    {"expected_s": round(expected), "site_min_s": site.min_walltime})
    return None


def check_transferring(site: Site, ctx: BrokerContext) -> Drop | None:
    if site.name in ctx.nucleus_sites:  # outputs of nucleus sites need no transfer
        return None
    counts = ctx.load(site).counts
    limit = site.transferring_limit or ctx.settings.transferring_limit
    allowed = max(limit, 2 * counts.running)
    if counts.transferring > allowed:
        return Drop(f"transferring: {counts.transferring} jobs > max({limit}, 2 x {counts.running} running)",
                    {"transferring": counts.transferring, "limit": limit, "running": counts.running})
    return None


def check_t1_weight(site: Site, ctx: BrokerContext) -> Drop | None:
    if ctx.nucleus_only and not ctx.chunk.is_merge and site.name not in ctx.nucleus_sites:
        return Drop(f"t1 weight: negative T1 weight sends all jobs to nucleus {ctx.task.nucleus}",
                    {"t1_weight": ctx.task.t1_weight, "nucleus": ctx.task.nucleus})
    return None


def check_pilots(site: Site, ctx: BrokerContext) -> Drop | None:
    if not site.pilots_active and not ctx.task.is_test:
        if site.pilots_reason:  # harvest turned it off: say why, so `explain` shows what to fix
            return Drop(f"pilots: no pilot activity at the site ({site.pilots_reason})", {"pilots_active": False})
        return Drop("pilots: no pilot activity at the site", {"pilots_active": False})
    return None


def check_input_to_move(site: Site, ctx: BrokerContext) -> Drop | None:
    """IO-intensive tasks do not go where too much input would have to be moved (seed 000 step 3)."""
    task, settings = ctx.task, ctx.settings
    io = task.io_intensity
    if ctx.chunk.is_merge or ctx.reference_bytes <= 0 or io is None or io <= settings.io_intensity_cutoff:
        return None
    local = ctx.local(site)
    move_gb = (ctx.reference_bytes - local.disk_bytes) / GIB
    move_files = ctx.reference_files - len(local.disk_files)
    numbers = {"move_gb": round(move_gb, 3), "move_files": move_files, "io_intensity": io}
    if move_gb > settings.size_cutoff_to_move_input_gb:
        return Drop(f"input: would move {move_gb:.1f} GB > {settings.size_cutoff_to_move_input_gb:g} GB "
                    f"(io intensity {io:g} kB/s > {settings.io_intensity_cutoff:g})", numbers)
    if move_files > settings.num_cutoff_to_move_input:
        return Drop(f"input: would move {move_files} files > {settings.num_cutoff_to_move_input} "
                    f"(io intensity {io:g} kB/s > {settings.io_intensity_cutoff:g})", numbers)
    return None


def check_site_caps(site: Site, ctx: BrokerContext) -> Drop | None:
    """The site's caps (max_queued, max_running, job_caps; WMCore's slot model with its priority
    overflow): a full site gets no more jobs; the drop names the cap."""
    if not site_slots.has_caps(site, preassigned=ctx.preassigned):
        return None
    decision = ctx.slot_decision(site)
    if decision.allowed:
        return None
    return Drop(site_slots.cap_message(decision), {
        "rule": decision.rule, "job_type": decision.job_type, "overflow": decision.overflow,
        "pending_limit": decision.pending_limit, "type_pending_limit": decision.type_pending_limit,
        "running_limit": decision.running_limit, "type_running_limit": decision.type_running_limit})


def queued_at(site: Site, ctx: BrokerContext, counts: JobCounts) -> tuple[int, str]:
    """JEDI's queue measure: jobs waiting to start; assigned and defined jobs count too when the
    input must first be moved there (seed 000 step 5)."""
    if ctx.all_input_local(site):
        return counts.activated + counts.starting, "activated+starting"
    return counts.defined + counts.activated + counts.assigned + counts.starting, "defined+activated+assigned+starting"


def check_queue_length(site: Site, ctx: BrokerContext) -> Drop | None:
    if ctx.express:
        return None
    counts = ctx.load(site).counts
    queued, what = queued_at(site, ctx, counts)
    cap = max(ctx.settings.queue_limit_site, ctx.tuning.queue_cap_factor * counts.running)
    if queued > cap:
        return Drop(f"queue: {queued} {what} > max({ctx.settings.queue_limit_site}, "
                    f"{ctx.tuning.queue_cap_factor:g} x {counts.running} running)",
                    {"queued": queued, "running": counts.running, "cap": cap})
    return None


def check_queue_length_rt(site: Site, ctx: BrokerContext) -> Drop | None:
    load = ctx.load(site)
    rt_counts = load.by_resource_type.get(ctx.task.resource_type or "")
    if ctx.express or rt_counts is None:
        return None
    running = max(rt_counts.running, load.counts.running)
    queued = rt_counts.defined + rt_counts.activated + rt_counts.starting
    if not ctx.all_input_local(site):
        queued += rt_counts.assigned
    cap = max(ctx.settings.queue_limit_site, ctx.tuning.queue_cap_factor * running)
    if queued > cap:
        return Drop(f"queue ({ctx.task.resource_type}): {queued} queued > max({ctx.settings.queue_limit_site}, "
                    f"{ctx.tuning.queue_cap_factor:g} x {running} running)",
                    {"queued": queued, "running": running, "cap": cap, "resource_type": ctx.task.resource_type})
    return None


#: The filters every candidate passes before input locality is looked at -- also what the task
#: brokerage runs ("hint mode") to know whether a nucleus can run the work.
SITE_FILTERS: tuple[SiteFilter, ...] = (
    SiteFilter("status", per_site(check_status), "seed 000 step 3 'Offline queues'; step 1 test queues", True),
    SiteFilter("high_priority", per_site(check_opportunistic), "§6.5 opportunistic sites for prio >= 800 or scouts", True),
    SiteFilter("inactive", filter_inactive, "seed 000 step 3 inactive queues (2 h) for prio > 800/scout/merge", True),
    SiteFilter("zero_share", per_site(check_zero_share), "seed 000 step 3 'Zero Share'", True),
    SiteFilter("core_count", per_site(check_core_count), "§6.5 core count (site cores >= task cores, or dynamic)", True),
    SiteFilter("direct_io", per_site(check_direct_io), "split rule IL=2 (allowInputLAN only): direct-IO sites only"),
    SiteFilter("software", per_site(check_software), "seed 000 'ATLAS Release'; §6.5 software/container"),
    SiteFilter("cvmfs", per_site(check_cvmfs), "seed 000 'Dataset attributes: cvmfs'; PanDA queue is_cvmfs"),
    SiteFilter("memory", per_site(check_memory), "seed 000 'Memory probe and brokerage'; §6.5 memory x 0.9"),
    SiteFilter("scratch_disk", per_site(check_scratch_disk), "§6.5 scratch disk"),
    SiteFilter("storage", per_site(check_storage), "seed 000 'DISK size check 200GB', 'Blacklisted DDM endpoints'"),
    SiteFilter("walltime", per_site(check_walltime), "seed 000 'HS06sPerEvent'; §6.5 walltime"),
    SiteFilter("transferring", per_site(check_transferring), "seed 000 'Too many transferring jobs'"),
    SiteFilter("t1_weight", per_site(check_t1_weight), "seed 000 'T1 weight' (-1: nucleus only)"),
    SiteFilter("pilots", per_site(check_pilots), "seed 000 'Queues without pilots'", True),
)

#: Filters that need the chunk's locality, then the caps of seed 000 step 5.
INPUT_FILTERS: tuple[SiteFilter, ...] = (
    SiteFilter("input", per_site(check_input_to_move), "seed 000 step 3 IO intensity > 200 kB/s: 10 GB / 100 files", True),
    SiteFilter("site_caps", per_site(check_site_caps), "site max_queued/max_running/job_caps: WMCore slots, peers.md §1.5, seed 002"),
    SiteFilter("queue_length", per_site(check_queue_length), "seed 000 step 5; §6.5 caps max(20, 2 x running)"),
    SiteFilter("queue_length_rt", per_site(check_queue_length_rt), "§6.5 per-resource-type queued > max(20, 2 x running_rt)"),
)
