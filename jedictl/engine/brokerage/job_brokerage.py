"""Job brokerage: which sites (PanDA queues) may run the jobs of one input chunk, how much each is
wanted, and the splitter's weighted random pick among them.

`broker_job_sites` builds the candidate list from the task's site, cloud, included and excluded sites,
runs the filters of `filters` in JEDI's order, weighs the survivors
(running+1)/(queued+10) x data locality x T1 weight x network weight (`network_rule`: the link a site's
outputs or missing input cross, whose rules may drop it too), bootstraps empty sites for low-priority
tasks, and keeps the best `max_candidates`. Every site of the catalog gets one `Fate` in the trail: kept with its
weight, or dropped by the first rule that refused it, with the values behind the refusal.
`pick_site` is JEDI's getOneSiteCandidate. Reference: jedi-inventory.md §6.5 and §6.6 (first paragraph),
seed 000 "Job brokerage explained", "T1 weight" and "Network weight".
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from types import MappingProxyType

from jedictl.config import BrokerageSettings, ThrottleSettings
from jedictl.engine.brokerage import site_slots
from jedictl.engine.brokerage.analysis import RULE as DATA_RULE
from jedictl.engine.brokerage.analysis import DataPlacement, is_analysis, place_analysis
from jedictl.engine.brokerage.filters import (
    DEFAULT_TUNING,
    INPUT_FILTERS,
    SITE_FILTERS,
    BrokerContext,
    JobBrokerTuning,
    SiteFilter,
    SiteLocality,
)
from jedictl.engine.brokerage.network_rule import RULE as NETWORK_RULE
from jedictl.engine.brokerage.network_rule import apply_link_rules, network_terms
from jedictl.engine.brokerage.model import (
    BrokerageCatalog,
    ChunkInput,
    Fate,
    Site,
    SiteLoad,
    TaskRequirements,
)
from jedictl.engine.brokerage.site_needs import task_cores

_WILDCARDS = set("*?[")


@dataclass(frozen=True)
class SiteCandidate:
    """A site the chunk may go to, with what the splitter needs (JEDI's SiteCandidate)."""

    site: str
    weight: float
    n_running: int
    n_queued: int
    n_running_cap: float | None  # None: express chunks are not capped
    bootstrap: bool = False
    n_free: int | None = None  # jobs the site's caps still let in (None: no caps)
    local_disk_files: frozenset[int] = frozenset()
    local_tape_files: frozenset[int] = frozenset()
    many_time_held: frozenset[str] = frozenset()  # the chunk's many-time inputs available at the site


@dataclass(frozen=True)
class BrokerageResult:
    candidates: tuple[SiteCandidate, ...]  # best first; bootstrap sites first of all
    trail: tuple[Fate, ...]  # one per catalog site, in catalog order
    t1_weight: float
    # Analysis tasks (engine.brokerage.analysis): how the data rule placed the chunk, None otherwise.
    placement: DataPlacement | None = None
    # The network term of each site that has one, as `explain` prints it (engine.brokerage.network).
    network: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def transfer_sites(self) -> frozenset[str]:
        """Candidates chosen without the chunk's input: their jobs wait `assigned` for a transfer."""
        return self.placement.transfer if self.placement is not None else frozenset()

    @property
    def ok(self) -> bool:
        return bool(self.candidates)

    def rules_by_site(self) -> dict[str, str]:
        return {fate.name: fate.rule for fate in self.trail}

    def summary(self) -> str:
        """One line for a task's error dialog: how many sites each rule dropped."""
        counts: dict[str, int] = {}
        for fate in self.trail:
            if not fate.kept:
                counts[fate.rule] = counts.get(fate.rule, 0) + 1
        dropped = ", ".join(f"{rule} {n}" for rule, n in counts.items())
        # A full site is the one drop an operator acts on (raise the cap, wait): say which cap.
        full = [f"{fate.name}: {fate.message}" for fate in self.trail if fate.rule == "site_caps"]
        return (f"{len(self.candidates)} candidates" + (f"; dropped: {dropped}" if dropped else "")
                + (f"; {'; '.join(full[:3])}" + (f" (+{len(full) - 3} more)" if len(full) > 3 else "") if full else ""))

    def rows(self) -> list[dict]:
        """One row per site; `data` is the data-locality reason of analysis tasks, `network` the network
        term of a site that has one (None otherwise)."""
        notes = self.placement.notes if self.placement is not None else {}
        return [fate.as_dict("site") | {"data": notes.get(fate.name), "network": self.network.get(fate.name)}
                for fate in self.trail]


# ------------------------------------------------------------------------------------ candidates

def _is_pattern(text: str) -> bool:
    return any(char in _WILDCARDS for char in text)


def _names(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def initial_candidates(task: TaskRequirements, catalog: BrokerageCatalog) -> tuple[list[Site], dict[str, Fate], bool]:
    """Sites to consider (task site, else cloud, then included and excluded patterns), the fates of
    the others, and whether a single site was pre-assigned (JEDI's sitePreAssigned)."""
    fates: dict[str, Fate] = {}
    kept: list[Site] = []
    preassigned_names = _names(task.site)
    preassigned = len(preassigned_names) == 1 and not _is_pattern(preassigned_names[0])
    world = not task.cloud or task.cloud == "WORLD"
    for site in catalog.sites:
        reason = None
        if preassigned_names:
            if not any(fnmatchcase(site.name, name) for name in preassigned_names):
                reason = f"candidates: not the task's site {task.site}"
        else:
            if not world and site.cloud != task.cloud:
                reason = f"candidates: not in cloud {task.cloud}"
            elif task.included_sites and not any(fnmatchcase(site.name, p) for p in task.included_sites):
                reason = "candidates: not among the included sites"
        if reason is None:
            excluded_by = next((p for p in task.excluded_sites if fnmatchcase(site.name, p)), None)
            if excluded_by is not None:
                reason = f"candidates: excluded by {excluded_by!r}"
        if reason is None:
            kept.append(site)
        else:
            fates[site.name] = Fate(site.name, False, "candidates", reason)
    return kept, fates, preassigned


def effective_t1_weight(task: TaskRequirements, chunk: ChunkInput, tuning: JobBrokerTuning) -> tuple[float, bool]:
    """The weight of the nucleus' own sites and whether only they may run the jobs (seed 000 "T1 weight")."""
    weight = float(task.t1_weight or 0)
    if weight == 0:
        io_intensive = task.io_intensity is not None and task.io_intensity >= tuning.io_intensive_t1
        weight = tuning.io_intensive_t1_weight if io_intensive else 1.0
    nucleus_only = weight < 0 and not chunk.is_merge
    if weight < 0:
        weight = 1.0
    if task.priority >= tuning.t1_weight_priority or chunk.is_scout:
        weight = max(weight, tuning.t1_weight_floor)
    return weight, nucleus_only


def make_context(
    task: TaskRequirements, chunk: ChunkInput, catalog: BrokerageCatalog, loads: Mapping[str, SiteLoad],
    settings: BrokerageSettings, tuning: JobBrokerTuning, preassigned: bool,
    nucleus_sites: frozenset[str] | None = None, throttle: ThrottleSettings | None = None,
    start_loads: Mapping[str, SiteLoad] | None = None,
) -> BrokerContext:
    if nucleus_sites is None:
        nucleus_sites = frozenset(s.name for s in catalog.sites if task.nucleus and s.nucleus == task.nucleus)
    t1_weight, nucleus_only = effective_t1_weight(task, chunk, tuning)
    express = task.processing_type == "urgent" or task.priority >= tuning.express_priority
    return BrokerContext(
        task=task, chunk=chunk, catalog=catalog, loads=loads, settings=settings, tuning=tuning,
        cores=task_cores(task, chunk), nucleus_sites=nucleus_sites, t1_weight=t1_weight,
        nucleus_only=nucleus_only, express=express, preassigned=preassigned,
        throttle=throttle or ThrottleSettings(), start_loads=start_loads,
    )


def run_filters(filters: Sequence[SiteFilter], sites: list[Site], ctx: BrokerContext, fates: dict[str, Fate]) -> list[Site]:
    """Apply filters in order; a dropped site's fate names the first filter that refused it."""
    for site_filter in filters:
        if not sites:
            break
        if ctx.preassigned and site_filter.skip_when_preassigned:
            continue
        sites, dropped = site_filter.apply(sites, ctx)
        for site, drop in dropped:
            fates[site.name] = Fate(site.name, False, site_filter.name, drop.message, drop.numbers)
    return sites


# -------------------------------------------------------------------------------------- locality

def site_locality(sites: Sequence[Site], chunk: ChunkInput, catalog: BrokerageCatalog) -> dict[str, SiteLocality]:
    """Input already at each site, as unions of per-endpoint sets; sites reading the same endpoints
    share one computation. A many-time input is available at a site when one disk endpoint the site
    reads holds all of it, or when it is on cvmfs and the site mounts cvmfs."""
    if not chunk.replicas and not chunk.many_time:
        return {}
    cache: dict[tuple[tuple[str, ...], tuple[str, ...], bool], SiteLocality] = {}
    result: dict[str, SiteLocality] = {}
    for site in sites:
        disk: list[str] = []
        tape: list[str] = []
        for name in site.read_endpoints or site.write_endpoints:
            endpoint = catalog.endpoints.get(name)
            if endpoint is not None and endpoint.blacklisted_read:
                continue
            (tape if endpoint is not None and endpoint.is_tape else disk).append(name)
        key = (tuple(disk), tuple(tape), site.cvmfs)
        locality = cache.get(key)
        if locality is None:
            disk_files = frozenset().union(*(chunk.replicas[name] for name in disk if name in chunk.replicas))
            tape_files = frozenset().union(*(chunk.replicas[name] for name in tape if name in chunk.replicas)) - disk_files
            held = frozenset(item.name for item in chunk.many_time
                             if (item.cvmfs and site.cvmfs) or not item.endpoints.isdisjoint(disk))
            locality = SiteLocality(disk_files, tape_files, chunk.bytes_of(disk_files), held)
            cache[key] = locality
        result[site.name] = locality
    return result


def with_locality(ctx: BrokerContext, sites: Sequence[Site]) -> BrokerContext:
    locality = site_locality(sites, ctx.chunk, ctx.catalog)
    # JEDI measures what a site lacks against the best-placed candidate (its "totalSize"), so data
    # that no candidate holds neither drops nor penalises anyone. Many-time inputs are not part of the
    # sizes: they count by availability (ChunkInput).
    reference_bytes = max((item.disk_bytes for item in locality.values()), default=0)
    reference_files = max((len(item.disk_files) for item in locality.values()), default=0)
    many_time_reference = frozenset().union(*(item.many_time_held for item in locality.values()))
    return replace(ctx, locality=locality, reference_bytes=reference_bytes, reference_files=reference_files,
                   many_time_reference=many_time_reference)


# ---------------------------------------------------------------------------------------- weight

def site_weight(site: Site, ctx: BrokerContext) -> tuple[float, dict[str, float | int], str]:
    """JEDI's brokerage weight of a site, its inputs, and the formula as text."""
    c = ctx.load(site).counts
    local = ctx.local(site)
    numbers: dict[str, float | int] = {"running": c.running, "activated": c.activated, "assigned": c.assigned,
                                       "starting": c.starting, "defined": c.defined}
    if ctx.all_input_local(site):
        weight = (c.running + 1) / (c.activated + c.starting + c.defined + 10)
        text = f"(running {c.running}+1)/(activated {c.activated}+starting {c.starting}+defined {c.defined}+10)"
    else:
        # many assigned jobs (waiting for their input) make a site less attractive, by up to x 2
        many_assigned = min(2.0, max(1.0, (c.assigned + 1) / (c.activated + 1)))
        weight = (c.running + 1) / (c.activated + c.assigned + c.starting + c.defined + 10) / many_assigned
        text = (f"(running {c.running}+1)/(activated {c.activated}+assigned {c.assigned}+starting {c.starting}"
                f"+defined {c.defined}+10)/{many_assigned:g}")
        numbers["many_assigned"] = many_assigned
    if ctx.reference_bytes > 0:
        files_to_move = ctx.reference_files - len(local.disk_files)
        locality = (ctx.reference_bytes + local.disk_bytes) / ctx.reference_bytes / (files_to_move / 100 + 1)
        weight *= locality
        text += f" x locality {locality:.3g}"
        numbers.update(local_bytes=local.disk_bytes, files_to_move=files_to_move, locality=locality)
    if site.name in ctx.nucleus_sites:
        weight *= ctx.t1_weight
        text += f" x t1 {ctx.t1_weight:g}"
        numbers["t1_weight"] = ctx.t1_weight
    missing = ctx.many_time_missing(site)
    if missing:
        # Not a size: the many-time input is placed here once and kept (seed 000), so it only makes
        # the site count its queue as one whose jobs wait for input (the assigned variant above).
        text += f"; many-time {', '.join(sorted(missing))} to be placed here once"
        numbers["many_time_missing"] = len(missing)
    return weight, numbers, text


def _is_bootstrap(site: Site, ctx: BrokerContext) -> bool:
    """A site with no jobs at all is bootstrapped (weight 0, tried first) by low-priority tasks."""
    return (ctx.load(site).counts.total == 0 and ctx.task.priority <= ctx.settings.bootstrap_max_priority
            and not ctx.chunk.is_merge and not ctx.express)


def _candidate(site: Site, ctx: BrokerContext, weight: float, bootstrap: bool) -> SiteCandidate:
    counts = ctx.load(site).counts
    if ctx.all_input_local(site):
        queued = counts.activated + counts.starting
    else:
        queued = counts.activated + counts.assigned + counts.starting
    cap = None if ctx.express else max(ctx.settings.queue_limit_site, ctx.tuning.queue_cap_factor * counts.running)
    local = ctx.local(site)
    free = ctx.slot_decision(site).free if site_slots.has_caps(site, preassigned=ctx.preassigned) else None
    return SiteCandidate(site=site.name, weight=weight, n_running=counts.running, n_queued=queued,
                         n_running_cap=cap, bootstrap=bootstrap, local_disk_files=local.disk_files,
                         local_tape_files=local.tape_files, n_free=free, many_time_held=local.many_time_held)


# ------------------------------------------------------------------------------------- brokerage

def broker_job_sites(
    task: TaskRequirements,
    chunk: ChunkInput,
    catalog: BrokerageCatalog,
    loads: Mapping[str, SiteLoad],
    settings: BrokerageSettings,
    *,
    tuning: JobBrokerTuning = DEFAULT_TUNING,
    throttle: ThrottleSettings | None = None,
    start_loads: Mapping[str, SiteLoad] | None = None,
    closed_recently: Mapping[str, int] | None = None,
) -> BrokerageResult:
    """The site candidates of one chunk, best first, and every site's fate. `start_loads` are the
    loads at the start of the pass when `loads` count the jobs made since (the caps' overflow);
    `closed_recently` the task's jobs closed per site within `settings.analysis_busy_hours` (analysis
    tasks: a data site with such a job is busy)."""
    sites, fates, preassigned = initial_candidates(task, catalog)
    ctx = make_context(task, chunk, catalog, loads, settings, tuning, preassigned, throttle=throttle, start_loads=start_loads)
    sites = run_filters(SITE_FILTERS, sites, ctx, fates)
    ctx = with_locality(ctx, sites)
    sites = run_filters(INPUT_FILTERS, sites, ctx, fates)
    placement = None
    if is_analysis(task) and not chunk.is_merge and sites:
        placement = place_analysis(sites, ctx.locality, chunk.n_files_on_storage, bool(chunk.replicas), closed_recently or {},
                                   settings.analysis_busy_hours, preassigned=preassigned,
                                   many_time=frozenset(item.name for item in chunk.many_time))
        for site in sites:
            drop = placement.drops.get(site.name)
            if drop is not None:
                fates[site.name] = Fate(site.name, False, DATA_RULE, drop.message, drop.numbers)
        sites = [site for site in sites if site.name not in placement.drops]
    terms = network_terms(sites, task, chunk, catalog, ctx.locality, ctx.nucleus_sites,
                          placement.transfer if placement is not None else (), settings)
    if terms and settings.nw_active and not preassigned:
        # JEDI checks the express threshold for WORLD tasks only (engine.brokerage.network_rule)
        sites, dropped = apply_link_rules(sites, terms, settings, express=ctx.express and bool(task.nucleus))
        for site, drop in dropped:
            fates[site.name] = Fate(site.name, False, NETWORK_RULE, drop.message, drop.numbers)

    ranked: list[tuple[bool, float, Site, str, dict]] = []
    for site in sites:
        weight, numbers, text = site_weight(site, ctx)
        term = terms.get(site.name)
        if term is not None:
            numbers.update(term.numbers())
            if settings.nw_active:
                weight *= term.weight
                text += f" x network {term.weight:.3g}"
        bootstrap = _is_bootstrap(site, ctx)
        if bootstrap:
            text, weight = "bootstrap: no running or queued jobs (weight 0, tried first)", 0.0
        ranked.append((bootstrap, weight, site, text, numbers))
    # bootstrap sites first, then by weight; the name breaks ties so runs repeat
    ranked.sort(key=lambda item: (not item[0], -item[1], item[2].name))
    candidates: list[SiteCandidate] = []
    for bootstrap, weight, site, text, numbers in ranked:
        if len(candidates) < settings.max_candidates:
            candidates.append(_candidate(site, ctx, weight, bootstrap))
            fates[site.name] = Fate(site.name, True, "kept", f"weight {weight:.4g} = {text}",
                                    MappingProxyType(numbers), weight)
        else:
            fates[site.name] = Fate(site.name, False, "rank",
                                    f"rank: weight {weight:.4g} not among the {settings.max_candidates} best",
                                    MappingProxyType(numbers), weight)
    trail = tuple(fates[site.name] for site in catalog.sites)
    passive = "" if settings.nw_active else " (passive: brokerage.nw_active is off)"
    network = MappingProxyType({name: term.text(settings) + passive for name, term in terms.items()})
    return BrokerageResult(candidates=tuple(candidates), trail=trail, t1_weight=ctx.t1_weight, placement=placement, network=network)


def runnable_sites(
    task: TaskRequirements,
    chunk: ChunkInput,
    catalog: BrokerageCatalog,
    loads: Mapping[str, SiteLoad],
    settings: BrokerageSettings,
    *,
    nucleus_sites: frozenset[str] | None = None,
    tuning: JobBrokerTuning = DEFAULT_TUNING,
) -> tuple[frozenset[str], dict[str, Fate]]:
    """JEDI's "hint" mode for the task brokerage: the sites that pass every filter up to the pilot
    check (no locality, weights or caps), and the fates of the others."""
    sites, fates, preassigned = initial_candidates(task, catalog)
    if nucleus_sites is None:  # no nucleus chosen yet: every nucleus' sites count as T1 sites
        nucleus_sites = frozenset(site.name for site in catalog.sites if site.nucleus)
    ctx = make_context(task, chunk, catalog, loads, settings, tuning, preassigned, nucleus_sites)
    sites = run_filters(SITE_FILTERS, sites, ctx, fates)
    return frozenset(site.name for site in sites), fates


# ------------------------------------------------------------------------------ the splitter's pick

@dataclass(frozen=True)
class PickState:
    """What successive picks change: weights, queued counts and the sites already bootstrapped."""

    weights: Mapping[str, float]
    queued: Mapping[str, int]
    bootstrapped: frozenset[str] = field(default_factory=frozenset)


def start_picking(candidates: Sequence[SiteCandidate]) -> PickState:
    return PickState(weights={c.site: c.weight for c in candidates}, queued={c.site: c.n_queued for c in candidates})


def pick_site(
    candidates: Sequence[SiteCandidate],
    state: PickState,
    rng: random.Random,
    *,
    n_sub_chunks: int = 0,
    excluded: Sequence[str] = (),
) -> tuple[SiteCandidate | None, PickState]:
    """JEDI's getOneSiteCandidate: a zero-weight site not bootstrapped yet is taken first (at random);
    otherwise a weighted draw among sites not excluded and still accepting jobs (queued below the
    cap). The chosen site's queued count grows by `n_sub_chunks` and its weight is scaled by
    (oldQueued+1)/(newQueued+1), so the next draws spread the jobs. (JEDI scales the wrong object
    here -- the loop variable, not the pick; jedictl scales the pick.)"""
    skip = set(excluded)
    fresh = [c for c in candidates
             if state.weights[c.site] == 0 and c.site not in state.bootstrapped and c.site not in skip]
    if fresh:
        chosen = rng.choice(fresh)
        return chosen, replace(state, bootstrapped=state.bootstrapped | {chosen.site})
    eligible = [c for c in candidates
                if c.site not in skip
                and not (state.weights[c.site] == 0 and c.site in state.bootstrapped)
                and (c.n_running_cap is None or state.queued[c.site] < c.n_running_cap)]
    if not eligible:
        return None, state
    total = sum(state.weights[c.site] for c in eligible)
    chosen = None
    if total > 0:
        point = rng.random() * total
        for candidate in eligible:
            point -= state.weights[candidate.site]
            if point <= 0:
                chosen = candidate
                break
    if chosen is None:  # float rounding, or nothing weighs anything
        chosen = rng.choice(eligible)
    old_queued = state.queued[chosen.site]
    new_queued = old_queued + n_sub_chunks
    weights = dict(state.weights)
    weights[chosen.site] = weights[chosen.site] * (old_queued + 1) / (new_queued + 1)
    queued = dict(state.queued)
    queued[chosen.site] = new_queued
    return chosen, replace(state, weights=weights, queued=queued)
