"""Analysis brokerage follows the data (seed 000 "Input data transfer"; jedi-inventory.md §6.5, ATLAS analysis).

Analysis jobs go where their input already is: for a `user` (or `panda`) task, the candidates of a
chunk are the sites that hold every input file of the chunk on a disk endpoint they read (complete
replicas, containers resolved to their datasets by the data catalog). The others are dropped, with the
number of files they hold, so `explain` can say why. Files read from cvmfs need no replica; many-time
inputs (pile-up, conditions) count by availability, not as files each job moves (`_many_time`).

Sites without the data are used only in the seed's two cases:
- no candidate site holds the data -- the jobs go where the weights say, and their input is transferred;
- every site holding the data closed a job of this task within the last `analysis_busy_hours` (6 h),
  i.e. jobs there waited ANALY_TIMEOUT hours without a CPU and the watchdog closed them -- the sites
  are busy, and new jobs go to the idle sites instead, together with their input.
A job sent to a site that lacks its input waits in `assigned` until the catalog records the replica at
an endpoint the site reads (`engine.watch.activation`).

The weights stay JEDI's: seed 000 gives analysis no formula of its own; a site with all input local is
weighed (running+1)/(activated+starting+defined+10), a site that needs a transfer by the formula with
assigned jobs and the data-locality factor (`job_brokerage.site_weight`). A pre-assigned site (the
task's `site`) is never dropped for lacking data: its jobs wait for the transfer, as PanDA does.
Pure: `place_analysis` decides from plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from jedictl.engine.brokerage.filters import NO_LOCALITY, SiteLocality
from jedictl.engine.brokerage.model import ChunkInput, Drop, Site, StorageEndpoint, TaskRequirements
from jedictl.engine.task.spec import ANALYSIS_LABELS

RULE = "data_locality"
HOLDS = "holds the data"


def is_analysis(task: TaskRequirements) -> bool:
    return task.prod_source_label in ANALYSIS_LABELS


@dataclass(frozen=True)
class DataPlacement:
    """The data-locality verdict on one analysis chunk.

    mode: `data` (only sites with the data), `no_data` (no candidate holds it: any site, with a
    transfer), `timeout` (every data site is busy: the idle sites, with a transfer), `preassigned`
    (the task's own site, with a transfer if it lacks the data), `unknown` (the catalog knows no replica
    of the input: nothing to follow, the rule does not apply)."""

    mode: str
    holders: frozenset[str] = frozenset()
    transfer: frozenset[str] = frozenset()  # kept sites whose jobs wait `assigned` for their input
    notes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # site -> data-locality reason
    drops: Mapping[str, Drop] = field(default_factory=lambda: MappingProxyType({}))
    many_time_at: frozenset[str] = frozenset()  # data sites preferred for having every many-time input too

    @property
    def applies(self) -> bool:
        return self.mode != "unknown"


def place_analysis(
    sites: Sequence[Site],
    locality: Mapping[str, SiteLocality],
    n_files: int,
    has_replicas: bool,
    closed_recently: Mapping[str, int],
    busy_hours: float,
    *,
    preassigned: bool = False,
    many_time: frozenset[str] = frozenset(),
) -> DataPlacement:
    """Which of `sites` (the candidates that passed every other filter) an analysis chunk may use.

    `locality` is the chunk's input per site (disk files count; tape needs staging, so it does not),
    `n_files` the one-time files that must be on storage (files read from cvmfs need no replica),
    `closed_recently` the task's jobs closed per site within the last `busy_hours`.
    `many_time` names the chunk's many-time inputs: they count by availability, not as files to hold
    (`_many_time`)."""
    placement = _follow_one_time(sites, locality, n_files, has_replicas, closed_recently, busy_hours, preassigned)
    return _many_time(placement, sites, locality, many_time)


def _follow_one_time(sites: Sequence[Site], locality: Mapping[str, SiteLocality], n_files: int, has_replicas: bool,
                     closed_recently: Mapping[str, int], busy_hours: float, preassigned: bool) -> DataPlacement:
    """The rule on the chunk's one-time input: the files each job reads once."""
    if n_files == 0 or not has_replicas:
        return DataPlacement("unknown")
    held = {site.name: len(locality.get(site.name, NO_LOCALITY).disk_files) for site in sites}
    holders = frozenset(name for name, count in held.items() if count >= n_files)
    lacking = [site.name for site in sites if site.name not in holders]
    notes: dict[str, str] = {name: f"{HOLDS} ({n_files} input files on disk)" for name in holders}

    def partial(name: str) -> str:
        return f"no replica: holds {held[name]} of {n_files} input files on disk"

    if preassigned:
        notes.update({name: f"{partial(name)}; the task's own site: input to be transferred" for name in lacking})
        return _placement("preassigned", holders, lacking, notes, {})
    if not holders:
        notes.update({name: f"{partial(name)}; no candidate holds the data: input to be transferred" for name in lacking})
        return _placement("no_data", holders, lacking, notes, {})
    busy = {name: closed_recently.get(name, 0) for name in holders if closed_recently.get(name, 0) > 0}
    if len(busy) == len(holders) and lacking:
        drops = {name: Drop(f"busy: {count} jobs of this task closed here in the last {busy_hours:g}h (ANALY_TIMEOUT)",
                            MappingProxyType({"closed_jobs": count, "busy_hours": busy_hours})) for name, count in busy.items()}
        notes.update({name: f"{HOLDS}, but busy" for name in holders})
        notes.update({name: f"{partial(name)}; chosen after ANALY_TIMEOUT (every data site busy): input to be transferred"
                      for name in lacking})
        return _placement("timeout", holders, lacking, notes, drops)
    drops = {name: Drop(f"{RULE}: {partial(name)} (analysis jobs go to the data)",
                        MappingProxyType({"files_here": held[name], "files": n_files})) for name in lacking}
    notes.update({name: partial(name) for name in lacking})
    return _placement("data", holders, (), notes, drops)


def _many_time(placement: DataPlacement, sites: Sequence[Site], locality: Mapping[str, SiteLocality],
               many_time: frozenset[str]) -> DataPlacement:
    """Many-time inputs (pile-up, conditions) count by availability, not as files each job moves.

    Among the data sites, those that have every many-time input available are preferred: the others
    are dropped while one does. When none does, the many-time input is placed once where the jobs go
    and kept there: the jobs of a kept site that lacks it wait `assigned` for that placement, as for
    one-time input. Without one-time data to follow (mode `unknown`) the rule does not apply."""
    if not many_time or not placement.applies:
        return placement
    lacking = {site.name: many_time - locality.get(site.name, NO_LOCALITY).many_time_held for site in sites}
    lacking = {name: missing for name, missing in lacking.items() if missing and name not in placement.drops}
    if not lacking:
        return placement
    notes, drops = dict(placement.notes), dict(placement.drops)
    kept = [site.name for site in sites if site.name not in drops]
    complete = [name for name in kept if name in placement.holders and name not in lacking]
    transfer = set(placement.transfer)
    preferred = frozenset()
    for name, missing in lacking.items():
        names = ", ".join(sorted(missing))
        if complete and name in placement.holders:
            preferred = frozenset(complete)
            drops[name] = Drop(f"{RULE}: many-time input {names} not available here ({', '.join(complete)} "
                               f"{'has' if len(complete) == 1 else 'have'} the data and it)",
                               MappingProxyType({"many_time_missing": names}))
            notes[name] = f"{notes.get(name, '')}; many-time {names} not available here"
        else:
            transfer.add(name)
            notes[name] = f"{notes.get(name, '')}; many-time {names} to be placed here once"
    return replace(_placement(placement.mode, placement.holders, sorted(transfer), notes, drops), many_time_at=preferred)


def _placement(mode: str, holders: frozenset[str], transfer: Sequence[str], notes: dict[str, str],
               drops: Mapping[str, Drop]) -> DataPlacement:
    return DataPlacement(mode, holders, frozenset(transfer), MappingProxyType(notes), MappingProxyType(dict(drops)))


def first_location_group(chunk: ChunkInput) -> tuple[int, ...]:
    """The files of a chunk stored where its first file is (the same set of endpoints), in order.

    JEDI brokers analysis input a dataset at a time (seed 000, "Workflow for analysis", step 4); a
    chunk claimed across the datasets of a container may mix files that live at different sites, and
    then no site holds all of it. Brokering the first file's group -- a dataset's files share their
    replicas -- keeps "holds the data" meaningful; the generator returns the other files for the next
    chunk."""
    signatures = [frozenset(name for name, held in chunk.replicas.items() if index in held) for index in range(chunk.n_files)]
    if not signatures:
        return ()
    return tuple(index for index, signature in enumerate(signatures) if signature == signatures[0])


def transfer_endpoint(site: Site, endpoints: Mapping[str, StorageEndpoint]) -> str | None:
    """Where a site's missing input is transferred to: the first disk endpoint it reads (not blacklisted
    for reading), else the first it writes -- the endpoint whose replica later activates the job."""
    for name in site.read_endpoints or site.write_endpoints:
        endpoint = endpoints.get(name)
        if endpoint is None or (not endpoint.is_tape and not endpoint.blacklisted_read):
            return name
    return None
