"""The job dispatcher (PanDA's getJob): an executor asks for work at a site and gets activated jobs.

One transaction per call: the global-share order is computed from what executes now (over the tree in
force: the store's once `queue-shares import` wrote one, else the settings'), up to `count`
jobs are claimed `activated -> sent` by one statement (store.dispatch.claim_jobs) and their payloads
-- everything an executor needs to run the job: parameters, resources, inputs with their replicas,
outputs with their destinations -- are loaded with a few set-based queries before the commit.

Order (panda-server.md §3.5): the most under-served global share first (share "Test" always leads,
unknown shares last), then current priority, then the oldest job. With probability
`dispatch.sloppy_ratio` the shares are ignored and the oldest jobs go first, as PanDA's
SLOPPY_DISPATCH_RATIO does, so a share starved by the order still drains.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Mapping, Sequence

from jedictl.config import Settings
from jedictl.engine.input import fields
from jedictl.engine.shares import usage as queue_shares
from jedictl.engine.shares import definitions as share_definitions
from jedictl.engine.shares import fair_share as share_math
from jedictl.engine.shares import global_shares as shares
from jedictl.engine.shares.resource_types import load_resource_types
from jedictl.errors import BadInput, NotFound
from jedictl.model import JOB_KIND_ES, JOB_KIND_ES_MERGE, JOB_KIND_JUMBO, PARENT_JOB_FILE_TYPE, DatasetType
from jedictl.model.choices import RESOURCE_TYPES, refusal
from jedictl.store import dispatch as dispatch_store
from jedictl.store import events as event_store
from jedictl.store import wmcore as wmcore_store

#: PanDA's label families (construct_where_clause): what an executor of each kind may run.
LABEL_FAMILIES: dict[str, tuple[str, ...]] = {
    "user": ("user", "panda", "install"),
    "managed": ("managed", "test", "prod_test", "install"),
}
LABEL_FAMILIES["unified"] = tuple(dict.fromkeys(LABEL_FAMILIES["user"] + LABEL_FAMILIES["managed"]))

OUTPUT_TYPES = frozenset({DatasetType.OUTPUT.value, DatasetType.LOG.value, DatasetType.TRN_OUTPUT.value, DatasetType.TRN_LOG.value})
PARENT_FILE_TYPE = PARENT_JOB_FILE_TYPE  # a parent file attached to a WMCore job (include_parents)
#: Job files whose replicas are looked up in the data catalog (seeds and pseudo inputs have none).
CATALOG_INPUT_TYPES = frozenset({DatasetType.INPUT.value, DatasetType.LIB.value})  # lib: a run job reads its site's lib file


@dataclass(frozen=True)
class DispatchFilters:
    """What the executor's slot offers (PanDA's getJob arguments); None: no limit."""

    memory_mb: int | None = None
    disk_mb: int | None = None
    walltime_s: int | None = None
    resource_type: str | None = None
    label: str | None = None  # user | managed | unified
    task_id: int | None = None

    def __post_init__(self) -> None:
        if self.label is not None and self.label not in LABEL_FAMILIES:
            raise BadInput(f"must be one of {', '.join(LABEL_FAMILIES)}", "--label")
        for name, flag in (("memory_mb", "--memory"), ("disk_mb", "--disk"), ("walltime_s", "--walltime")):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise BadInput("must not be negative", flag)
            if value is not None and value > fields.INT32_MAX:  # compared with INTEGER columns
                raise BadInput(f"must be at most {fields.INT32_MAX}", flag)

    @property
    def prod_source_labels(self) -> tuple[str, ...] | None:
        return LABEL_FAMILIES[self.label] if self.label is not None else None


@dataclass(frozen=True)
class DispatchRequest:
    site: str
    count: int = 1
    executor: str = ""
    filters: DispatchFilters = field(default_factory=DispatchFilters)


def check_request(request: DispatchRequest, max_count: int, resource_types: Sequence[str] = RESOURCE_TYPES) -> None:
    """Refuse a request no job could ever answer; `resource_types`: the names the settings define."""
    if request.count < 1 or request.count > max_count:
        raise BadInput(f"must be between 1 and {max_count} (dispatch.max_count)", "--count")
    if not request.site:
        raise BadInput("a site is required", "--site")
    if not request.executor:
        raise BadInput("an executor name is required", "--executor")
    wanted = request.filters.resource_type
    if wanted is not None and wanted not in resource_types:
        # No job is ever made with a type the settings do not define: an executor asking for one
        # would get no work, forever.
        raise BadInput(refusal(wanted, resource_types, "a resource type"), "--resource-type")


def running_room(max_running: int | None, job_caps: Mapping[str, Any] | None,
                 running: Mapping[str, int]) -> tuple[int | None, dict[str, int]]:
    """How many more jobs a site's running caps let start: in total (None: no cap) and per job type
    with a cap (`job_caps.<label>.max_running`), from the jobs holding a running slot now."""
    total = None if max_running is None else max(max_running - sum(running.values()), 0)
    per_label = {label: max(int(caps["max_running"]) - running.get(label, 0), 0)
                 for label, caps in (job_caps or {}).items() if isinstance(caps, Mapping) and caps.get("max_running") is not None}
    return total, per_label


def share_ranks(root: shares.Share, executing: Mapping[str, float]) -> dict[str, int]:
    """Dispatch position of every leaf share: most under-served first, "Test" always first."""
    return queue_shares.share_order(root, executing)


def is_sloppy(sloppy_ratio: float, rng: random.Random) -> bool:
    return rng.random() < sloppy_ratio


def order_key(job: Any, ranks: Mapping[str, int] | None) -> tuple[Any, ...]:
    """Where a claimed job goes in the answer: the order the claim took them in."""
    if ranks is None:
        return (job.id,)
    return share_math.dispatch_key(job.gshare, job.current_priority or 0, job.id, ranks)


def dispatch_jobs(store: Any, settings: Settings, request: DispatchRequest, now: datetime, rng: random.Random) -> list[dict[str, Any]]:
    """Hand up to `request.count` activated jobs of `request.site` to the executor; their payloads, in order."""
    # The executor's name is free text from the command line: kept with its control characters escaped.
    request = replace(request, executor=fields.free_text(request.executor, "--executor", 128) or "")
    check_request(request, settings.dispatch.max_count, [rt.name for rt in load_resource_types(settings.resource_types)])
    # Drawn before the transaction: a seeded run makes the same choice whatever the store holds.
    sloppy = is_sloppy(settings.dispatch.sloppy_ratio, rng)
    with store.begin() as conn:
        caps = dispatch_store.site_caps(conn, request.site)
        if caps is None:
            raise NotFound(f"unknown site {request.site}")
        count, label_room = request.count, None
        if dispatch_store.has_running_caps(caps):
            # The site's running caps (max_running, job_caps): its row is locked until commit, so a
            # concurrent dispatcher of this site counts the jobs handed out here before it claims.
            # A site without caps keeps the lock-free claim.
            caps = dispatch_store.site_caps(conn, request.site, lock=True)
            total, label_room = running_room(caps.max_running, caps.job_caps, dispatch_store.running_at(conn, request.site))
            count = count if total is None else min(count, total)
            if count <= 0:
                return []
        ranks = None if sloppy else share_ranks(share_definitions.current_definitions(conn, settings).definitions.share_tree,
                                                dispatch_store.executing_hs06(conn))
        job_ids = dispatch_store.claim_jobs(conn, request.site, count, request.executor, now, ranks, request.filters, label_room)
        if not job_ids:
            return []
        rows = dispatch_store.load_jobs(conn, job_ids)
        files = dispatch_store.load_files(conn, job_ids)
        wanted = wanted_replicas(files.values())
        replicas = dispatch_store.input_replicas(conn, wanted)
        cvmfs = dispatch_store.input_cvmfs(conn, wanted)
        ranges = event_ranges_of(conn, rows, now, settings.jumbo.ranges_per_dispatch)
        masks = wmcore_store.masks_of(conn, job_ids)
        parents = {(row.dataset, row.lfn) for listed in files.values() for row in listed if row.type == PARENT_FILE_TYPE}
        if parents:  # parents (include_parents) live in other catalog datasets: found by name
            held = wmcore_store.replicas_by_lfn(conn, [lfn for _, lfn in parents])
            replicas = {**replicas, **{(dataset, lfn): held[lfn] for dataset, lfn in parents if lfn in held}}
    rows.sort(key=lambda job: order_key(job, ranks))
    return [job_payload(job, files.get(job.id, []), replicas, cvmfs, ranges.get(job.id), masks.get(job.id)) for job in rows]


def event_ranges_of(conn: Any, rows: Sequence[Any], now: datetime, per_jumbo: int = 100) -> dict[int, list[tuple]]:
    """The event ranges handed out with the dispatched jobs (docs/event-service.md): an event-service
    job's ready ranges, now `sent`; a jumbo job's: up to `per_jumbo` ready ranges of its task's queued
    co-jumbo jobs (which wait meanwhile); an ES merge job's done ranges, with the pre-merged files to merge."""
    for job in rows:
        if job.kind == JOB_KIND_JUMBO:
            event_store.hand_to_jumbo(conn, job.id, job.task_id, per_jumbo, now)
    es = [job.id for job in rows if job.kind in (JOB_KIND_ES, JOB_KIND_JUMBO)]
    merges = [job.id for job in rows if job.kind == JOB_KIND_ES_MERGE]
    found = event_store.hand_out(conn, es, now) if es else {}
    if merges:
        found.update(event_store.merge_inputs(conn, merges))
    return found


def wanted_replicas(files_per_job: Any) -> dict[str, list[str]]:
    """Catalog inputs of a batch grouped by task dataset: one replica look-up per dataset."""
    wanted: dict[str, set[str]] = {}
    for files in files_per_job:
        for row in files:
            if row.type in CATALOG_INPUT_TYPES and row.dataset:
                wanted.setdefault(row.dataset, set()).add(row.lfn)
    return {dataset: sorted(lfns) for dataset, lfns in wanted.items()}


def job_payload(job: Any, files: Sequence[Any], replicas: Mapping[tuple[str, str], Sequence[str]],
                cvmfs: Mapping[tuple[str, str], str] | None = None, ranges: Sequence[tuple] | None = None,
                mask: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What an executor receives for one job (docs/executor-protocol.md): a plain dict of plain values.

    `job` is a jobs row (attribute access), `files` its job files with `dataset` (the task dataset's
    name), `replicas` the endpoints per (dataset, lfn) of catalog inputs, sorted, `cvmfs` the path of those
    read in place from cvmfs (no stage-in), `mask` the job's WMCore mask (store.wmcore.masks_of).
    """
    cvmfs = cvmfs or {}
    inputs, outputs = [], []
    for row in files:
        if row.type in OUTPUT_TYPES:
            outputs.append({"lfn": row.lfn, "dataset": row.dataset, "type": row.type, "destination": row.destination})
        else:
            inputs.append({"lfn": row.lfn, "scope": row.scope, "guid": row.guid, "size": row.size, "checksum": row.checksum,
                           "dataset": row.dataset, "type": row.type, "attempt_nr": row.attempt_nr,
                           "replicas": list(replicas.get((row.dataset, row.lfn), ())), "cvmfs": cvmfs.get((row.dataset, row.lfn))})
    return {
        "job_id": job.id,
        "task_id": job.task_id,
        "task_job": f"{job.task_id}.{job.task_job_index}",
        "attempt_nr": job.attempt_nr,
        "site": job.site,
        "status": job.status,
        "prod_source_label": job.prod_source_label,
        "processing_type": job.processing_type,
        "transformation": job.transformation,
        "job_parameters": job.job_parameters,
        "architecture": job.architecture,
        "release": job.trans_uses,
        "trans_home": job.trans_home,
        "container_name": job.container_name,
        "core_count": job.core_count,
        "min_ram_count": job.min_ram_count,
        "max_walltime": job.max_walltime,
        "max_disk_count": job.max_disk_count,
        "max_cpu_count": job.max_cpu_count,
        "priority": job.current_priority,
        "gshare": job.gshare,
        "resource_type": job.resource_type,
        "is_scout": bool(job.is_scout),
        "kind": job.kind,
        "inputs": inputs,
        "outputs": outputs,
        "event_service": job.kind in ES_KINDS,
        "event_ranges": [dict(zip(EVENT_RANGE_KEYS, values)) for values in ranges or ()],
        "mask": {key: mask[key] for key in MASK_KEYS} if mask else None,
    }


#: Keys of one job's payload, in order (the executor contract; docs/executor-protocol.md lists each).
PAYLOAD_KEYS = ("job_id", "task_id", "task_job", "attempt_nr", "site", "status", "prod_source_label", "processing_type",
                "transformation", "job_parameters", "architecture", "release", "trans_home", "container_name", "core_count",
                "min_ram_count", "max_walltime", "max_disk_count", "max_cpu_count", "priority", "gshare", "resource_type",
                "is_scout", "kind", "inputs", "outputs", "event_service", "event_ranges", "mask")
#: Keys of a WMCore job's mask (null for other jobs): the events and the runs/lumis it processes.
MASK_KEYS = ("first_event", "last_event", "first_run", "last_run", "first_lumi", "last_lumi", "lumis")
INPUT_KEYS = ("lfn", "scope", "guid", "size", "checksum", "dataset", "type", "attempt_nr", "replicas", "cvmfs")
OUTPUT_KEYS = ("lfn", "dataset", "type", "destination")
#: Keys of one event range of a payload: output_lfn/output_size are the pre-merged file (ES merge jobs only).
EVENT_RANGE_KEYS = ("event_id", "lfn", "start_event", "end_event", "attempt_nr", "output_lfn", "output_size")
ES_KINDS = frozenset({JOB_KIND_ES, JOB_KIND_ES_MERGE, JOB_KIND_JUMBO})
