"""The Task Refiner (jedi-inventory.md §3): `registered -> defined`.

One pass leases registered tasks (and tasks pending on their parent), then for each: re-reads the
submitted parameters, checks the parent, and writes the typed task -- resource model, work queue,
global share, resource type, datasets, output templates, job-parameter templates -- in one transaction
guarded by the lease. A task that cannot be refined goes to `broken` with the reason; the pass goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jedictl.config import RefineSettings, Settings
from jedictl.engine.agent import PassReport, leased_pass
from jedictl.engine.commando import recovery
from jedictl.engine.shares import global_shares as shares
from jedictl.engine.shares import resource_types, work_queues
from jedictl.engine.shares.definitions import current_definitions
from jedictl.engine.task import split_rule
from jedictl.engine.task.definition import DatasetDef, TaskDefinition, effective_options, is_output_container, payload_identity
from jedictl.engine.task.preprocess import PREPROCESS_MAX_ATTEMPTS, PSEUDO_LFN
from jedictl.engine.task.submission import UNCAPPED, parse_definition, refuse_shared_outputs
from jedictl.errors import BadInput, JedictlError, LeaseLost
from jedictl.model import TASK_PARENT_COMPLETED, TASK_PARENT_CORRUPTED, DatasetType, NewDataset, TaskStatus
from jedictl.store import preprocess as preprocess_store
from jedictl.store import task_leases
from jedictl.store import tasks as task_store


class RefineError(JedictlError):
    """The task cannot be refined; the message becomes its error dialog."""


@dataclass(frozen=True)
class Catalog:
    """Work queues, the global-share tree and resource types, validated once per pass."""

    queues: list[work_queues.WorkQueue]
    share_tree: shares.Share
    rtypes: list[resource_types.ResourceTypeDef]

    @classmethod
    def from_settings(cls, settings: Settings) -> "Catalog":
        return cls(
            queues=work_queues.load_queues(settings.work_queues),
            share_tree=shares.load_shares(settings.global_shares),
            rtypes=resource_types.load_resource_types(settings.resource_types),
        )

    @classmethod
    def from_store(cls, store, settings: Settings) -> "Catalog":  # noqa: ANN001 - Store
        """Work queues and global shares in force (the store's once imported, else the settings')."""

        with store.read() as conn:
            definitions = current_definitions(conn, settings).definitions
        return cls(queues=list(definitions.queues), share_tree=definitions.share_tree,
                   rtypes=resource_types.load_resource_types(settings.resource_types))


@dataclass(frozen=True)
class Gate:
    action: str  # "proceed" | "wait" | "break"
    reason: str | None = None


def parent_gate(parent_id: int | None, status: str | None, no_wait_parent: bool) -> Gate:
    """JEDI's checkParentTask: go on when the parent completed, wait while it runs, break when it failed.

    With noWaitParent the child proceeds as soon as the parent has been refined (its outputs exist as
    datasets), reading them while they grow.
    """
    if parent_id is None:
        return Gate("proceed")
    if status is None:
        return Gate("break", f"parent task {parent_id} does not exist")
    if status in TASK_PARENT_CORRUPTED:
        return Gate("break", f"parent task {parent_id} is {status}")
    if status in TASK_PARENT_COMPLETED:
        return Gate("proceed")
    if no_wait_parent:
        if status == TaskStatus.REGISTERED:
            return Gate("wait", f"waiting for parent task {parent_id} to start")
        return Gate("proceed")
    return Gate("wait", f"pending until parent task {parent_id} is done")


def criteria_attributes(definition: TaskDefinition, rule: str) -> dict[str, Any]:
    """The task as work-queue criteria and global-share patterns see it."""
    options = definition.options
    return {
        "prodSourceLabel": definition.prod_source_label, "processingType": definition.processing_type,
        "workingGroup": definition.working_group, "coreCount": options.core_count if options.core_count is not None else 1,
        "site": definition.site, "eventService": 0, "splitRule": rule, "campaign": definition.campaign,
        "taskType": definition.task_type, "userName": definition.user_name, "vo": definition.vo,
        "cloud": definition.cloud, "taskPriority": definition.task_priority, "ramCount": options.ram_count,
        "transPath": definition.trans_path, "countryGroup": definition.country_group,
        # the same, as global-share patterns name them
        "prodsourcelabel": definition.prod_source_label, "workinggroup": definition.working_group,
        "processingtype": definition.processing_type, "transpath": definition.trans_path,
    }


def resource_columns(definition: TaskDefinition, settings: RefineSettings) -> dict[str, Any]:
    o = definition.options
    return {
        "core_count": o.core_count if o.core_count is not None else 1,
        "ram_count": o.ram_count if o.ram_count is not None else settings.default_ram_count,
        "ram_unit": o.ram_unit or (settings.default_ram_unit if o.ram_count is None else "MB"),
        "base_ram_count": base_ram_count(definition, settings),
        "walltime": o.walltime or 0,
        "walltime_unit": o.walltime_unit,
        "base_walltime": o.base_walltime if o.base_walltime is not None else settings.default_base_walltime,
        "cpu_time": o.cpu_time,
        "cpu_time_unit": o.cpu_time_unit,
        "cpu_efficiency": o.cpu_efficiency if o.cpu_efficiency is not None else settings.default_cpu_efficiency,
        "out_disk_count": o.out_disk_count or 0,
        "out_disk_unit": o.out_disk_unit,
        "work_disk_count": o.work_disk_count or 0,
        "work_disk_unit": o.work_disk_unit,
        "io_intensity": o.io_intensity,
        "io_intensity_unit": o.io_intensity_unit,
    }


def base_ram_count(definition: TaskDefinition, settings: RefineSettings) -> int:
    """The task's baseRamCount, else the one configured for its processingType (seed 000, "Memory probe
    and brokerage": fixed per processingType -- simul 1000, pile 1500, reco 1000 MB), else 0. It is the
    part of a job's memory that does not grow with its cores: brokerage asks base + ramCount x cores,
    and the scouts measure ramCount per core with it taken off."""
    if definition.options.base_ram_count is not None:
        return definition.options.base_ram_count
    return settings.base_ram_count.get(definition.processing_type or "", 0)


def request_type(definition: TaskDefinition) -> str:
    """JEDI's payload identity: the same program and arguments give the same hash."""
    return payload_identity(definition.trans_uses, definition.trans_home, definition.trans_path, definition.job_parameters)


#: The pp_input master of a task that asks for a preprocess job (JEDI's pseudo dataset of the prepro job).
PP_INPUT_NAME = "pseudo_pp_input"


@dataclass(frozen=True)
class Refinement:
    task_values: dict[str, Any]
    datasets: list[NewDataset]
    job_templates: dict[str, str]


def build_refinement(definition: TaskDefinition, catalog: Catalog, settings: RefineSettings) -> Refinement:
    """Everything the refiner writes for one task -- a pure function of the definition and catalogs."""
    options = effective_options(definition)
    rule = split_rule.encode(options)
    attributes = criteria_attributes(definition, rule)
    queue = work_queues.match_queue(catalog.queues, attributes, definition.vo, definition.prod_source_label, definition.work_queue)
    if queue is None:
        wanted = f" named {definition.work_queue!r}" if definition.work_queue else ""
        raise RefineError(f"no work queue{wanted} serves vo {definition.vo} and label {definition.prod_source_label} for this task")
    share = shares.match_share(catalog.share_tree, attributes, definition.gshare)
    if share is None:
        raise RefineError(f"no global share {'named ' + repr(definition.gshare) if definition.gshare else 'matches the task'}")
    columns = resource_columns(definition, settings)
    per_core = resource_types.ram_per_core(columns["ram_count"], columns["ram_unit"], columns["base_ram_count"], columns["core_count"], settings.memory_compensation)
    rtype = resource_types.match_resource_type(catalog.rtypes, columns["core_count"], per_core)
    if rtype is None:
        raise RefineError(f"no resource type fits {columns['core_count']} cores with {per_core} MB per core")
    task_values = {
        **columns,
        "status": TaskStatus.DEFINED.value, "old_status": None, "error_dialog": None, "frozen_at": None,
        "wait_until": None, "work_queue": queue.name, "gshare": share.name, "resource_type": rtype,
        "request_type": request_type(definition), "options": options.as_dict(),
        "num_throttled": None if options.no_throttle else 0,
        "lease_owner": None, "lease_expires_at": None,
    }
    job_templates = {"job": definition.job_parameters}
    if definition.merge is not None:
        job_templates["merge"] = definition.merge.job_parameters
    if definition.build is not None:  # a build job per site (engine.generate.build_jobs)
        job_templates["build"] = definition.build.job_parameters
    planned = plan_datasets(definition)
    if definition.preprocess is not None:  # one preprocess job first: the task waits `topreprocess` (engine.task.preprocess)
        job_templates["preprocess"] = definition.preprocess.job_parameters
        task_values["status"] = TaskStatus.TOPREPROCESS.value
        planned.append(NewDataset(key=max((d.key for d in planned), default=-1) + 1, name=PP_INPUT_NAME,
                                  type=DatasetType.PP_INPUT.value, stream_name="PP"))
    return Refinement(task_values=task_values, datasets=planned, job_templates=job_templates)


_WRITE_ORDER = {DatasetType.INPUT: 0, DatasetType.PSEUDO_INPUT: 0, DatasetType.RANDOM_SEED: 1, DatasetType.OUTPUT: 2, DatasetType.LOG: 3}


def plan_datasets(definition: TaskDefinition) -> list[NewDataset]:
    """Dataset rows: masters, secondaries pointing at the first master, outputs and their unmerged twins."""
    rows: list[NewDataset] = []
    twins: list[NewDataset] = []  # unmerged datasets of a mergeOutput task, written last
    # Written inputs first (masters, then secondaries), then outputs and logs, as JEDI registers them.
    ordered = sorted(definition.datasets, key=lambda d: (_WRITE_ORDER[d.type], not d.is_master))
    master_key = 0 if ordered and ordered[0].is_master else None
    merge = bool(definition.options.merge_output)
    unmerged_master_key: int | None = None
    next_key = len(ordered)
    if merge:
        # The unmerged log is the master of merge jobs; unmerged outputs are its secondaries.
        log = next((d for d in ordered if d.type == DatasetType.LOG and not d.attributes.merge_only), None)
        if log is not None:
            unmerged_master_key = next_key
            next_key += 1
            twins.append(_unmerged_twin(log, unmerged_master_key, None, definition.options.um_name_at_end))
    for index, dataset in enumerate(ordered):
        provenance = None
        if merge and dataset.type == DatasetType.OUTPUT and not dataset.attributes.merge_only:
            provenance = next_key
            next_key += 1
            twins.append(_unmerged_twin(dataset, provenance, unmerged_master_key, definition.options.um_name_at_end))
        elif merge and dataset.type == DatasetType.LOG and unmerged_master_key is not None and not dataset.attributes.merge_only:
            provenance = unmerged_master_key
        is_input = dataset.type in (DatasetType.INPUT, DatasetType.PSEUDO_INPUT, DatasetType.RANDOM_SEED)
        attributes, container = dataset.attributes.as_dict(), dataset.container
        if is_output_container(dataset.name, dataset.type):
            # Jobs write a dataset per site inside it (store.site_datasets); this row holds its templates.
            attributes["per_site"], container = True, container or dataset.name
        rows.append(NewDataset(
            key=index, name=dataset.name, type=dataset.type.value, stream_name=dataset.stream,
            attributes=attributes, container_name=container,
            master_key=master_key if is_input and not dataset.is_master else None,
            provenance_key=provenance, destination=dataset.destination, storage_token=dataset.storage_token,
            file_template=dataset.file_template, serial_nr=1 + dataset.serial_offset,
        ))
    return rows + twins


def _unmerged_twin(dataset: DatasetDef, key: int, master_key: int | None, name_at_end: bool | None) -> NewDataset:
    template = dataset.file_template or ""
    twin_template = f"{template}.panda.um" if name_at_end else f"panda.um.{template}"
    twin_type = DatasetType.TRN_LOG if dataset.type == DatasetType.LOG else DatasetType.TRN_OUTPUT
    return NewDataset(
        key=key, name=f"panda.um.{dataset.name}", type=twin_type.value, stream_name=dataset.stream,
        attributes={"transient": True}, master_key=master_key, storage_token="TOMERGE",
        file_template=twin_template, serial_nr=1 + dataset.serial_offset,
    )


def refine_pass(store, settings: Settings, owner: str, now: datetime, limit: int | None = None) -> PassReport:  # noqa: ANN001 - Store
    """One pass of the Task Refiner over the store."""
    catalog = Catalog.from_store(store, settings)  # bad configuration: exit 2 before touching anything
    return leased_pass(
        store, PassReport("refine"), task_leases.refine_candidates(), task_leases.BY_ID,
        lambda task_id: _refine_one(store, task_id, catalog, settings, owner, now),
        owner=owner, now=now, lease_seconds=settings.lease.seconds, limit=limit or settings.refine.limit,
        claim_batch=settings.refine.claim_batch,
    )


def _refine_one(store, task_id: int, catalog: Catalog, settings: Settings, owner: str, now: datetime) -> tuple[str, str | None]:  # noqa: ANN001
    with store.begin() as conn:
        task = task_store.get_task(conn, task_id)
        params = task_store.get_params(conn, task_id)
        try:
            if params.format == recovery.PARAMS_FORMAT:
                # A recovery task is written whole by `recover-lost`; it waits here for its lost inputs.
                gate = recovery.gate(conn, task_id)
                if gate.action == "proceed":
                    if not task_store.change_status(conn, task_id, TaskStatus.READY, [TaskStatus.REGISTERED, TaskStatus.PENDING],
                                                    gate.reason, owner, now, owner=owner, old_status=None, error_dialog=None,
                                                    lease_owner=None, lease_expires_at=None):
                        raise LeaseLost(f"task {task_id} changed while being refined")
                    return "ready", gate.reason
            else:
                definition = parse_definition(
                    params.document, user=task.user_name, default_user=task.user_name,
                    priority=task.task_priority, parent_id=task.parent_id,
                    analysis_priority=settings.refine.analysis_priority, policy=UNCAPPED,
                    allow_task_duplication=bool((task.options or {}).get("allow_task_duplication")),  # submit --allow-task-duplication
                )
                gate = parent_gate(task.parent_id, task_store.parent_status(conn, task.parent_id) if task.parent_id else None,
                                   bool(definition.options.no_wait_parent))
            if gate.action == "break":
                raise RefineError(gate.reason)
            if gate.action == "wait":
                if task.status == TaskStatus.PENDING and task.error_dialog == gate.reason:
                    task_leases.release(conn, task_id, owner)  # still waiting: nothing to record
                elif not task_store.change_status(conn, task_id, TaskStatus.PENDING, [TaskStatus.REGISTERED, TaskStatus.PENDING], gate.reason,
                                                  owner, now, owner=owner, old_status=TaskStatus.REGISTERED.value, error_dialog=gate.reason,
                                                  lease_owner=None, lease_expires_at=None):
                    raise LeaseLost(f"task {task_id} changed while being refined")
                return "pending", gate.reason
            # Two submissions of one output dataset that raced past each other's check: the first
            # refined keeps it, the other breaks here before writing anything.
            refuse_shared_outputs(conn, definition, task_id)
            refinement = build_refinement(definition, catalog, settings.refine)
            task_store.write_refinement(conn, task_id, owner, refinement.task_values, refinement.datasets, refinement.job_templates, now)
            status = refinement.task_values["status"]
            if status == TaskStatus.TOPREPROCESS.value:
                preprocess_store.add_record(conn, task_id, PSEUDO_LFN, PREPROCESS_MAX_ATTEMPTS, now)
            task_store.record_status(conn, task_id, status, task.status, "refined", owner, now)
            return status, None
        except (BadInput, RefineError) as exc:
            reason = str(exc)
    # A task that cannot be refined is broken; written in its own transaction so nothing above remains.
    with store.begin() as conn:
        moved = task_store.change_status(conn, task_id, TaskStatus.BROKEN, [TaskStatus.REGISTERED, TaskStatus.PENDING], reason, owner, now,
                                         owner=owner, error_dialog=reason[:2000], lease_owner=None, lease_expires_at=None)
    if not moved:
        raise LeaseLost(f"task {task_id} changed while being refined")
    return "broken", reason
