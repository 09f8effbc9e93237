"""The queue layers' rules as pure functions (seed 002; WMCore WorkQueue's freeSlots and availableWork):
the slots of an agent's sites at each level, the jobs counted against them, and the matching of elements
to sites. No store here: the queue pass (engine.workqueue.queue) loads the values and writes the outcome.

- **Slots.** Per (site, job type) of an agent: `pending + running` thresholds. At the *global* level
  (global queue -> agent) running jobs are not subtracted and drained sites are left out; at the *local*
  level (agent -> `generate`) the site's running jobs are subtracted and drained sites are included.
  A site that is `down` takes nothing at either level.
- **Counting.** A site's slots are used by the work charged to it at the element's priority or higher:
  lower-priority work never keeps higher-priority work out (WMCore counts "only jobs with higher or same
  priority").
- **Matching.** Elements by priority (highest first), then age (oldest first), then id. For each, its
  possible sites that the agent serves at that level are shuffled and the first with a free slot takes the
  element: all of its estimated jobs are charged there at its priority. An element whose owner has
  `max_jobs_per_owner` jobs or more at the agent is not pulled (the schedd's MAX_JOBS_PER_OWNER).
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from jedictl.model import ElementStatus, SiteState


class Level(StrEnum):
    GLOBAL = "global"  # global queue -> agent (WMCore GQ -> LQ)
    LOCAL = "local"  # agent -> generate (WMCore LQ -> WMBS)


@dataclass(frozen=True)
class Threshold:
    """One `agent_sites` row."""

    site: str
    job_type: str
    pending: int
    running: int
    state: str = SiteState.NORMAL.value


@dataclass(frozen=True)
class Charge:
    """Jobs counted against a site's slots: queued jobs, or an element's estimated jobs not made yet."""

    site: str
    job_type: str
    priority: int
    jobs: int


@dataclass(frozen=True)
class Element:
    """An element as the matching sees it; priority, job type and owner are its task's."""

    id: int
    priority: int
    created_at: datetime
    job_type: str
    owner: str
    n_jobs: int
    possible_sites: tuple[str, ...]


@dataclass(frozen=True)
class Match:
    element_id: int
    site: str


@dataclass
class Matching:
    matches: list[Match] = field(default_factory=list)
    #: element id -> why it was not matched (no site of the agent holds its data, every site full, owner cap)
    left: dict[int, str] = field(default_factory=dict)


def estimate_jobs(n_files: int, files_per_job: int | None) -> int:
    """WMCore's Block policy: `Jobs = max(1, ceil(files / SliceSize))`, the slice being the task's files per job."""
    return max(1, math.ceil(n_files / max(1, files_per_job or 1)))


def slot_limits(thresholds: Iterable[Threshold], level: Level, running_jobs: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """(site, job type) -> the slots the level may fill. Global: pending + running thresholds, drained and
    down sites left out, running jobs not subtracted. Local: pending + running thresholds less the site's
    running jobs of that type (never below 0), drained sites included, down sites left out."""
    limits: dict[tuple[str, str], int] = {}
    for row in thresholds:
        if row.state == SiteState.DOWN.value or (level is Level.GLOBAL and row.state == SiteState.DRAIN.value):
            continue
        total = row.pending + row.running
        if level is Level.LOCAL:
            total -= running_jobs.get((row.site, row.job_type), 0)
        limits[(row.site, row.job_type)] = max(0, total)
    return limits


def used_slots(charges: Iterable[Charge], site: str, job_type: str, priority: int) -> int:
    """The jobs charged to (site, job type) at `priority` or higher."""
    return sum(c.jobs for c in charges if c.site == site and c.job_type == job_type and c.priority >= priority)


def order_elements(elements: Iterable[Element]) -> list[Element]:
    """Highest priority first; then the oldest; then the lowest id."""
    return sorted(elements, key=lambda e: (-e.priority, e.created_at, e.id))


def match_elements(elements: Sequence[Element], limits: Mapping[tuple[str, str], int], charges: Sequence[Charge], rng: random.Random, *,
                   owner_jobs: Mapping[str, int] | None = None, max_jobs_per_owner: int | None = None,
                   max_elements: int | None = None, served: Collection[tuple[str, str]] = ()) -> Matching:
    """Match elements to sites (module docstring). `charges` are what the sites already hold; each match
    adds its element's jobs to them (and to its owner's). At most `max_elements` matches (WorkPerCycle).
    `served`: every (site, job type) the agent has thresholds for, so that an element whose sites the level
    leaves out (drained, down) is told apart from one the agent cannot serve at all."""
    result = Matching()
    held = list(charges)
    owners = dict(owner_jobs or {})
    for element in order_elements(elements):
        if max_elements is not None and len(result.matches) >= max_elements:
            result.left[element.id] = f"the pass took its {max_elements} elements"
            continue
        if max_jobs_per_owner is not None and owners.get(element.owner, 0) >= max_jobs_per_owner:
            result.left[element.id] = (f"owner {element.owner} has {owners.get(element.owner, 0)} jobs at the agent, "
                                       f"its max_jobs_per_owner is {max_jobs_per_owner}")
            continue
        sites = [site for site in element.possible_sites if (site, element.job_type) in limits]
        if not sites:
            if any((site, element.job_type) in served for site in element.possible_sites):
                result.left[element.id] = "its sites at the agent take no new work here (drained or down)"
            else:
                result.left[element.id] = "no site of the agent holds its data" if element.possible_sites else "its data is at no site"
            continue
        rng.shuffle(sites)
        chosen = next((site for site in sites
                       if used_slots(held, site, element.job_type, element.priority) < limits[(site, element.job_type)]), None)
        if chosen is None:
            result.left[element.id] = f"no free slot at priority {element.priority} ({', '.join(sorted(sites))})"
            continue
        result.matches.append(Match(element.id, chosen))
        held.append(Charge(chosen, element.job_type, element.priority, element.n_jobs))
        owners[element.owner] = owners.get(element.owner, 0) + element.n_jobs
    return result


def possible_sites(data_sites: Iterable[str], pileup_sites: Sequence[Iterable[str]], included: Sequence[str], excluded: Sequence[str]) -> tuple[str, ...]:
    """An element's possible sites: the sites holding its block, within each pile-up's sites, within the
    task's site white list (patterns; none: every site), outside its black list."""
    from fnmatch import fnmatchcase

    sites = set(data_sites)
    for pileup in pileup_sites:
        sites &= set(pileup)
    return tuple(sorted(site for site in sites
                        if (not included or any(fnmatchcase(site, p) for p in included)) and not any(fnmatchcase(site, p) for p in excluded)))


def ended_status(n_records: int, n_finished: int, n_failed: int) -> str | None:
    """A released element's end from its block's records: Done once every record ended with at least one
    finished, Failed once every record failed; None while any is left to process."""
    if n_records == 0 or n_finished + n_failed < n_records:
        return None
    return ElementStatus.DONE.value if n_finished else ElementStatus.FAILED.value
