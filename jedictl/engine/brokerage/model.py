"""Value types of brokerage: the resource catalog (sites, nuclei, storage endpoints), live site loads,
a task's requirements, a chunk's input with its replicas, and the trail record every decision leaves.

Nothing here decides anything; `job_brokerage`, `task_brokerage` and `shares.throttler` do. The `*_from_row`
loaders take plain mappings keyed by the column names of `store/schema.py` (`sites`, `site_storage`,
`storage_endpoints`, `nuclei`, `tasks`), so an agent can pass SQLAlchemy `RowMapping`s straight in.
Reference: jedi-inventory.md §5 and §6.5 (what JEDI's brokers read), seed 000 "Job brokerage explained".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from jedictl.engine.brokerage.network import NO_NETWORK, NetworkMatrix, matrix_from_rows
from jedictl.engine.task.options import TaskOptions
from jedictl.model import SLOT_PENDING, SLOT_RUNNING


def _no_mapping() -> Mapping[str, Any]:
    return MappingProxyType({})


#: Labels whose tasks may use test queues and need no pilots (JEDI: `'test' in prodSourceLabel`).
TEST_LABEL_RE = re.compile(r"test", re.IGNORECASE)


# ------------------------------------------------------------------------------- resource catalog

@dataclass(frozen=True)
class StorageEndpoint:
    """A `storage_endpoints` row (JEDI's DDM endpoint)."""

    name: str
    kind: str = "disk"  # disk | tape
    nucleus: str | None = None
    free_gb: float = 0.0
    total_gb: float = 0.0
    blacklisted_read: bool = False
    blacklisted_write: bool = False

    @property
    def is_tape(self) -> bool:
        return self.kind == "tape"


@dataclass(frozen=True)
class Site:
    """A `sites` row (a PanDA queue) with its `site_storage` endpoints by role."""

    name: str
    status: str = "online"  # online | brokeroff | offline | test
    cloud: str | None = None
    tier: int | None = None
    nucleus: str | None = None
    core_count: int | None = None  # cores per slot; -1 = dynamic, 0/None = unset
    core_power: float | None = None  # HS06 per core
    min_memory: int | None = None  # MB per slot
    max_memory: int | None = None
    min_walltime: int | None = None  # s
    max_walltime: int | None = None
    max_scratch_mb: int | None = None
    processing_types: tuple[str, ...] | None = None  # allowed (patterns); None = any
    excluded_processing_types: tuple[str, ...] = ()
    releases: tuple[str, ...] | None = None  # None or "ANY" = no release check
    containers: tuple[str, ...] | None = None
    max_running: int | None = None
    max_queued: int | None = None
    job_caps: Mapping[str, Mapping[str, int]] = field(default_factory=_no_mapping)
    pilots_active: bool = True
    pilots_reason: str | None = None  # why `jedictl harvest` turned pilots_active off
    direct_io: bool = False
    cvmfs: bool = False  # its worker nodes mount /cvmfs: it reads cvmfs-resident datasets in place
    transferring_limit: int | None = None
    read_endpoints: tuple[str, ...] = ()
    write_endpoints: tuple[str, ...] = ()
    opportunistic: bool = False  # sites.attributes["opportunistic"]
    attributes: Mapping[str, Any] = field(default_factory=_no_mapping)

    @property
    def is_test_queue(self) -> bool:
        # seed 000 step 1: queues with 'test' in the name (any case) are test queues too
        return self.status == "test" or "test" in self.name.lower()


@dataclass(frozen=True)
class Nucleus:
    """A `nuclei` row: an output destination of WORLD tasks."""

    name: str
    status: str = "active"
    cloud: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=_no_mapping)


@dataclass(frozen=True)
class BrokerageCatalog:
    """Everything the brokers know about where work can run and data can live, and the network between."""

    sites: tuple[Site, ...]
    endpoints: Mapping[str, StorageEndpoint] = field(default_factory=_no_mapping)
    nuclei: Mapping[str, Nucleus] = field(default_factory=_no_mapping)
    network: NetworkMatrix = NO_NETWORK

    def endpoints_of_nucleus(self, nucleus: str) -> list[StorageEndpoint]:
        return [endpoint for endpoint in self.endpoints.values() if endpoint.nucleus == nucleus]


def _tuple_or_none(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return tuple(str(item) for item in value)


def endpoint_from_row(row: Mapping[str, Any]) -> StorageEndpoint:
    return StorageEndpoint(
        name=row["name"], kind=row.get("kind") or "disk", nucleus=row.get("nucleus"),
        free_gb=float(row.get("free_gb") or 0), total_gb=float(row.get("total_gb") or 0),
        blacklisted_read=bool(row.get("blacklisted_read")), blacklisted_write=bool(row.get("blacklisted_write")),
    )


def site_from_row(row: Mapping[str, Any], storage_rows: Iterable[Mapping[str, Any]] = ()) -> Site:
    """A site from its `sites` row and its `site_storage` rows (site, endpoint, role)."""
    read, write = [], []
    for link in storage_rows:
        (write if link["role"] == "write" else read).append(link["endpoint"])
    attributes = dict(row.get("attributes") or {})
    return Site(
        name=row["name"], status=row.get("status") or "online", cloud=row.get("cloud"), tier=row.get("tier"),
        nucleus=row.get("nucleus"), core_count=row.get("core_count"), core_power=row.get("core_power"),
        min_memory=row.get("min_memory"), max_memory=row.get("max_memory"),
        min_walltime=row.get("min_walltime"), max_walltime=row.get("max_walltime"),
        max_scratch_mb=row.get("max_scratch_mb"),
        processing_types=_tuple_or_none(row.get("processing_types")),
        excluded_processing_types=_tuple_or_none(row.get("excluded_processing_types")) or (),
        releases=_tuple_or_none(row.get("releases")), containers=_tuple_or_none(row.get("containers")),
        max_running=row.get("max_running"), max_queued=row.get("max_queued"),
        job_caps=MappingProxyType(dict(row.get("job_caps") or {})),
        pilots_active=bool(row.get("pilots_active", True)), pilots_reason=row.get("pilots_reason"),
        direct_io=bool(row.get("direct_io")), cvmfs=bool(row.get("cvmfs")),
        transferring_limit=row.get("transferring_limit"),
        read_endpoints=tuple(read), write_endpoints=tuple(write),
        opportunistic=bool(attributes.get("opportunistic")), attributes=MappingProxyType(attributes),
    )


def nucleus_from_row(row: Mapping[str, Any]) -> Nucleus:
    return Nucleus(name=row["name"], status=row.get("status") or "active", cloud=row.get("cloud"),
                   attributes=MappingProxyType(dict(row.get("attributes") or {})))


def catalog_from_rows(
    site_rows: Iterable[Mapping[str, Any]],
    site_storage_rows: Iterable[Mapping[str, Any]],
    endpoint_rows: Iterable[Mapping[str, Any]],
    nucleus_rows: Iterable[Mapping[str, Any]] = (),
    network_rows: Iterable[Mapping[str, Any]] = (),
) -> BrokerageCatalog:
    """The whole resource catalog from its tables' rows (one query each), the network matrix with it."""
    links: dict[str, list[Mapping[str, Any]]] = {}
    for link in site_storage_rows:
        links.setdefault(link["site"], []).append(link)
    sites = tuple(site_from_row(row, links.get(row["name"], ())) for row in site_rows)
    endpoints = {row["name"]: endpoint_from_row(row) for row in endpoint_rows}
    nuclei = {row["name"]: nucleus_from_row(row) for row in nucleus_rows}
    return BrokerageCatalog(sites=sites, endpoints=MappingProxyType(endpoints), nuclei=MappingProxyType(nuclei),
                            network=matrix_from_rows(network_rows))


# ------------------------------------------------------------------------------------ site load

@dataclass(frozen=True)
class JobCounts:
    """Jobs at a site by status (JEDI's job statistics per site)."""

    running: int = 0
    activated: int = 0
    assigned: int = 0
    starting: int = 0
    defined: int = 0
    transferring: int = 0

    @property
    def total(self) -> int:
        return self.running + self.activated + self.assigned + self.starting + self.defined


@dataclass(frozen=True)
class SlotLoad:
    """A site's jobs per job type (prodSourceLabel) for its caps: pending, running, and the highest
    priority pending or running (WMCore's priority overflow compares with it)."""

    pending: Mapping[str, int] = field(default_factory=_no_mapping)
    running: Mapping[str, int] = field(default_factory=_no_mapping)
    highest_priority: Mapping[str, int] = field(default_factory=_no_mapping)

    def with_pending(self, label: str, n_jobs: int, priority: int) -> SlotLoad:
        """The load after `n_jobs` more pending jobs of `label` at `priority` (made during a pass)."""
        pending = dict(self.pending)
        pending[label] = pending.get(label, 0) + n_jobs
        highest = dict(self.highest_priority)
        highest[label] = max(highest.get(label, priority), priority)
        return SlotLoad(MappingProxyType(pending), self.running, MappingProxyType(highest))


NO_SLOTS = SlotLoad()


@dataclass(frozen=True)
class SiteLoad:
    """Live figures of one site: job counts (all resource types and per resource type)."""

    counts: JobCounts = field(default_factory=JobCounts)
    by_resource_type: Mapping[str, JobCounts] = field(default_factory=_no_mapping)
    hours_since_last_start: float | None = None  # None = unknown (never treated as inactive)
    slots: SlotLoad = NO_SLOTS  # per job type, for the site's caps


NO_LOAD = SiteLoad()
_COUNTED = ("running", "activated", "assigned", "starting", "defined", "transferring")


def slot_loads_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, SlotLoad]:
    """Slot loads from `SELECT site, prod_source_label, status, count(*) AS n, max(current_priority) AS
    priority FROM jobs GROUP BY site, prod_source_label, status` rows."""
    pending: dict[str, dict[str, int]] = {}
    running: dict[str, dict[str, int]] = {}
    highest: dict[str, dict[str, int]] = {}
    for row in rows:
        site, label, status = row["site"], row["prod_source_label"] or "", row["status"]
        if site is None:
            continue
        target = pending if status in SLOT_PENDING else running if status in SLOT_RUNNING else None
        if target is None:
            continue
        bucket = target.setdefault(site, {})
        bucket[label] = bucket.get(label, 0) + int(row["n"])
        if row.get("priority") is not None:
            best = highest.setdefault(site, {})
            best[label] = max(best.get(label, int(row["priority"])), int(row["priority"]))
    return {site: SlotLoad(MappingProxyType(pending.get(site, {})), MappingProxyType(running.get(site, {})),
                           MappingProxyType(highest.get(site, {})))
            for site in pending.keys() | running.keys()}


def site_loads_from_rows(rows: Iterable[Mapping[str, Any]],
                         last_start_hours: Mapping[str, float] | None = None,
                         slots: Mapping[str, SlotLoad] | None = None) -> dict[str, SiteLoad]:
    """Loads from `SELECT site, status, resource_type, count(*) AS n FROM jobs GROUP BY ...` rows."""
    totals: dict[str, dict[str, int]] = {}
    per_type: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        status = row["status"]
        if status not in _COUNTED or row["site"] is None:
            continue
        site_totals = totals.setdefault(row["site"], {})
        site_totals[status] = site_totals.get(status, 0) + int(row["n"])
        if row.get("resource_type"):
            bucket = per_type.setdefault(row["site"], {}).setdefault(row["resource_type"], {})
            bucket[status] = bucket.get(status, 0) + int(row["n"])
    hours = last_start_hours or {}
    slots = slots or {}
    return {
        site: SiteLoad(
            counts=JobCounts(**totals.get(site, {})),
            by_resource_type=MappingProxyType({rt: JobCounts(**c) for rt, c in per_type.get(site, {}).items()}),
            hours_since_last_start=hours.get(site),
            slots=slots.get(site, NO_SLOTS),
        )
        for site in totals.keys() | slots.keys()
    }


# ------------------------------------------------------------------------------ task and chunk

@dataclass(frozen=True)
class TaskRequirements:
    """What a task asks of a site: the `tasks` resource columns plus the placement options."""

    task_id: int = 0
    prod_source_label: str = "managed"
    processing_type: str | None = None
    priority: int = 0  # current_priority
    resource_type: str | None = None
    work_queue: str | None = None
    core_count: int | None = 1  # 0 = any
    ram_count: int | None = None
    ram_unit: str | None = None  # MB | MBPerCore | MBPerCoreFixed
    base_ram_count: int | None = None
    walltime: int | None = None  # s per MB of input (or per job with a *Fixed unit)
    walltime_unit: str | None = None
    base_walltime: int | None = None
    cpu_time: float | None = None  # HS06 s per event (see cpu_time_unit)
    cpu_time_unit: str | None = None
    cpu_efficiency: int | None = None  # %
    out_disk_count: float | None = None  # output per input byte (or per event with *PerEvent)
    out_disk_unit: str | None = None
    work_disk_count: int | None = None
    work_disk_unit: str | None = None  # default MB
    io_intensity: float | None = None  # kB/s per core
    io_intensity_unit: str | None = None
    release: str | None = None  # trans_uses (else trans_home), e.g. Athena,24.0.40
    architecture: str | None = None
    container_name: str | None = None
    site: str | None = None  # pre-assigned site(s): a name, a comma list or patterns
    cloud: str | None = None
    nucleus: str | None = None
    included_sites: tuple[str, ...] = ()
    excluded_sites: tuple[str, ...] = ()
    t1_weight: int | None = None
    merge_output: bool = False
    merge_core_count: int | None = None
    merge_ram_count: int | None = None
    use_local_io: bool = False  # always copy input to scratch, even at direct-IO sites
    max_core_count: int | None = None  # maxCoreCount: slots with more cores are not used
    direct_io_only: bool = False  # allowInputLAN=only: only sites that read input directly (direct_io)

    @property
    def is_test(self) -> bool:
        return bool(TEST_LABEL_RE.search(self.prod_source_label or ""))


def task_requirements_from_row(row: Mapping[str, Any], options: TaskOptions | None = None) -> TaskRequirements:
    """Requirements from a `tasks` row and its validated options (`options_from_dict(row["options"])`)."""
    o = options or TaskOptions()
    return TaskRequirements(
        task_id=row.get("id") or 0, prod_source_label=row.get("prod_source_label") or "managed",
        processing_type=row.get("processing_type"), priority=row.get("current_priority") or 0,
        resource_type=row.get("resource_type"), work_queue=row.get("work_queue"), core_count=row.get("core_count"),
        ram_count=row.get("ram_count"), ram_unit=row.get("ram_unit"), base_ram_count=row.get("base_ram_count"),
        walltime=row.get("walltime"), walltime_unit=row.get("walltime_unit"), base_walltime=row.get("base_walltime"),
        cpu_time=row.get("cpu_time"), cpu_time_unit=row.get("cpu_time_unit"), cpu_efficiency=row.get("cpu_efficiency"),
        out_disk_count=row.get("out_disk_count"), out_disk_unit=row.get("out_disk_unit"),
        work_disk_count=row.get("work_disk_count"), work_disk_unit=row.get("work_disk_unit"),
        io_intensity=row.get("io_intensity"), io_intensity_unit=row.get("io_intensity_unit"),
        release=row.get("trans_uses") or row.get("trans_home"), architecture=row.get("architecture"), container_name=row.get("container_name"),
        site=row.get("site"), cloud=row.get("cloud"), nucleus=row.get("nucleus"),
        included_sites=tuple(o.included_sites or ()), excluded_sites=tuple(o.excluded_sites or ()),
        t1_weight=o.t1_weight, merge_output=bool(o.merge_output),
        merge_core_count=o.merge_core_count, merge_ram_count=o.merge_ram_count, use_local_io=bool(o.use_local_io),
        max_core_count=o.max_core_count, direct_io_only=o.allow_input_lan == "only",
    )


@dataclass(frozen=True)
class ManyTimeInput:
    """A many-time input of a chunk (seed 000, "Different treatment of input datasets"): pile-up or
    conditions that many jobs read. What matters at a site is whether it is available there -- every
    file of it on one disk endpoint the site reads, or on cvmfs at a site that mounts it -- not its
    size per job: it is placed once and kept, never transferred for each job as one-time input is."""

    name: str
    n_files: int = 0
    total_bytes: int = 0
    endpoints: frozenset[str] = frozenset()  # endpoints that hold every file of it
    cvmfs: bool = False  # resident on cvmfs: available at every site that mounts it


@dataclass(frozen=True)
class SecondaryRecords:
    """The records of one secondary dataset a chunk's jobs read: (lfn, size, n_events, dataset name)
    like the master's, and whether it is a many-time input (read by many jobs) or a one-time one."""

    name: str
    many_time: bool
    records: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class ChunkInput:
    """The input of one chunk: file sizes and which endpoints hold a replica of which file.

    `replicas` maps an endpoint name to the indexes (into `file_sizes`) of the files it holds; disk or
    tape comes from the catalog. Sets per endpoint keep brokerage over thousands of sites cheap: a site's
    local data is a union of a few sets, never a per-site x per-file loop.

    The files are the chunk's one-time input -- its master files, then the one-time secondaries' files
    its jobs consume -- each read by one job and charged as a transfer where it is missing. Files read
    from cvmfs (`cvmfs_files`) need no replica: only a site that mounts cvmfs. Many-time inputs are not
    among the files; they count as availability (`many_time`).
    """

    file_sizes: tuple[int, ...] = ()
    replicas: Mapping[str, frozenset[int]] = field(default_factory=_no_mapping)
    file_events: tuple[int, ...] = ()
    max_atom_bytes: int | None = None  # largest input one job cannot split (None: the largest file)
    max_atom_events: int | None = None
    is_scout: bool = False
    is_merge: bool = False
    ram_count: int | None = None  # per-file RAM override of the chunk (retry module)
    cvmfs_files: frozenset[int] = frozenset()  # indexes of files read from cvmfs: no replica, no transfer
    many_time: tuple[ManyTimeInput, ...] = ()
    cvmfs_datasets: tuple[str, ...] = ()  # the input datasets read from cvmfs (one-time or many-time)

    @property
    def n_files_on_storage(self) -> int:
        """Files that must be on a storage endpoint the site reads (every file not read from cvmfs)."""
        return len(self.file_sizes) - len(self.cvmfs_files)

    @cached_property
    def total_bytes(self) -> int:
        return sum(self.file_sizes)

    @property
    def n_files(self) -> int:
        return len(self.file_sizes)

    @cached_property
    def atom_bytes(self) -> int:
        if self.max_atom_bytes is not None:
            return self.max_atom_bytes
        return max(self.file_sizes, default=0)

    @cached_property
    def atom_events(self) -> int:
        if self.max_atom_events is not None:
            return self.max_atom_events
        return max(self.file_events, default=0)

    def bytes_of(self, indexes: Iterable[int]) -> int:
        sizes = self.file_sizes
        return sum(sizes[i] for i in indexes)


def chunk_input(
    files: Sequence[tuple[str, int, int | None]],
    replicas: Iterable[tuple[str, str]],
    cvmfs: Iterable[str] = (),
    **flags: Any,
) -> ChunkInput:
    """A ChunkInput from (lfn, size, events) triples, (lfn, endpoint) replica pairs and the LFNs read from cvmfs."""
    index = {lfn: i for i, (lfn, _, _) in enumerate(files)}
    by_endpoint: dict[str, set[int]] = {}
    for lfn, endpoint in replicas:
        position = index.get(lfn)
        if position is not None:
            by_endpoint.setdefault(endpoint, set()).add(position)
    return chunk_input_held(files, by_endpoint, frozenset(index[lfn] for lfn in cvmfs if lfn in index), **flags)


def chunk_input_held(files: Sequence[tuple[str, int, int | None]], held: Mapping[str, Iterable[int]], cvmfs_files: Iterable[int] = (),
                     **flags: Any) -> ChunkInput:
    """A ChunkInput from (lfn, size, events) triples and, per endpoint, the positions of the files it holds
    (and the positions of those read from cvmfs)."""
    return ChunkInput(
        file_sizes=tuple(int(size or 0) for _, size, _ in files),
        file_events=tuple(int(events or 0) for _, _, events in files),
        replicas=MappingProxyType({name: frozenset(found) for name, found in held.items()}),
        cvmfs_files=frozenset(cvmfs_files),
        **flags,
    )


def job_atom(sizes: Sequence[int], events: Sequence[int], files_per_job: int | None = None,
             events_per_job: int | None = None) -> tuple[int | None, int | None]:
    """(bytes, events) of the largest job the splitter will build from these files, in their order: JEDI
    makes the atom of `nFilesPerJob` consecutive files (the first group is always taken, whatever its
    walltime or disk), or of `nEventsPerJob` events (the files that cover them); (None, None) when
    neither is set -- the splitter then stops at any limit and one file is the atom."""
    if not sizes:
        return None, None
    if files_per_job and files_per_job > 1:
        group_bytes = [sum(sizes[i:i + files_per_job]) for i in range(0, len(sizes), files_per_job)]
        group_events = [sum(events[i:i + files_per_job]) for i in range(0, len(events), files_per_job)]
        return max(group_bytes), max(group_events, default=0)
    if events_per_job and events_per_job > 0:
        # A job of NE events reads whole files until it has them; a file of more events is read in ranges.
        fewest = min((n for n in events if n > 0), default=0)
        n_files = min(len(sizes), math.ceil(events_per_job / fewest)) if fewest else 1
        return sum(sorted(sizes, reverse=True)[:max(n_files, 1)]), events_per_job
    return None, None


# ---------------------------------------------------------------------------------------- trail

Number = int | float | str | bool | None


@dataclass(frozen=True)
class Drop:
    """Why a filter dropped a site or nucleus: one line for the operator and the values behind it."""

    message: str
    numbers: Mapping[str, Number] = field(default_factory=_no_mapping)


@dataclass(frozen=True)
class Fate:
    """One site's (or nucleus') fate in a brokerage: kept with a weight, or dropped by a named rule."""

    name: str
    kept: bool
    rule: str  # the filter that dropped it, or "kept"
    message: str
    numbers: Mapping[str, Number] = field(default_factory=_no_mapping)
    weight: float | None = None

    def as_dict(self, key: str = "site") -> dict[str, Any]:
        return {key: self.name, "kept": self.kept, "rule": self.rule, "message": self.message,
                "weight": self.weight, "numbers": dict(self.numbers)}
