"""Read models for inspection commands: what `task list` and `task show` print."""

from __future__ import annotations

from typing import Any, Sequence

from jedictl.engine.commando import recovery
from jedictl.engine.task import split_rule
from jedictl.engine.task.definition import input_role
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.views.job_summary import summarise
from jedictl.store import datasets as dataset_store
from jedictl.errors import NotFound
from jedictl.store import jobs as job_store
from jedictl.store import periodic as periodic_store
from jedictl.store import post_checks as post_check_store
from jedictl.store import task_commands as command_store
from jedictl.store import tasks as task_store
from jedictl.store import views as view_store

COUNTERS = ("n_files", "n_files_to_be_used", "n_files_used", "n_files_finished", "n_files_failed",
            "n_files_on_hold", "n_files_missing", "n_events", "n_events_to_be_used", "n_events_used")
RESOURCES = ("core_count", "ram_count", "ram_unit", "base_ram_count", "walltime", "walltime_unit", "base_walltime",
             "cpu_time", "cpu_time_unit", "cpu_efficiency", "out_disk_count", "out_disk_unit", "work_disk_count",
             "work_disk_unit", "io_intensity", "io_intensity_unit")


def task_summary(row: Any, templates: dict[int, str] | None = None) -> dict[str, Any]:
    return {
        "task_id": row.id, "name": row.name, "user": row.user_name, "status": row.status,
        "priority": row.current_priority, "work_queue": row.work_queue, "gshare": row.gshare,
        "modified_at": row.modified_at,
        # The periodic template it is an instance of (docs/periodic-tasks.md): its name, null for other tasks
        # (and for an instance whose template was removed: `task show` keeps the id).
        "template": (templates or {}).get(row.periodic_id) if row.periodic_id is not None else None,
    }


def list_tasks(conn, status: Sequence[str] = (), user: str | None = None, limit: int = 100,  # noqa: ANN001
               template: str | None = None) -> list[dict[str, Any]]:
    """The newest tasks; with `template`, only the instances of that periodic template."""
    template_id = None
    if template is not None:
        found = periodic_store.get_template(conn, template)
        if found is None:
            raise NotFound(f"no periodic template named {template}", "--template")
        template_id = found.id
    rows = task_store.list_tasks(conn, status, user, limit, periodic_id=template_id)
    names = periodic_store.names_of(conn, (row.periodic_id for row in rows))
    return [task_summary(row, names) for row in rows]


def periodic_link(conn, row: Any) -> dict[str, Any] | None:  # noqa: ANN001
    """The periodic template a task is an instance of and the due time it was made for, or None."""
    if row.periodic_id is None:
        return None
    return {"template_id": row.periodic_id, "template": periodic_store.names_of(conn, [row.periodic_id]).get(row.periodic_id),
            "due_at": row.periodic_due_at}


def task_details(conn, task_id: int) -> dict[str, Any]:  # noqa: ANN001
    """Everything about one task: identity, status, options, resources, datasets, templates, its jobs
    per status with their aggregate state (job_summary), history and the commands given to it."""

    row = task_store.get_task(conn, task_id)
    params = task_store.get_params(conn, task_id)
    templates = dataset_store.templates_of(conn, task_id)
    by_dataset: dict[int, list[dict[str, Any]]] = {}
    for template in templates:
        by_dataset.setdefault(template.dataset_id, []).append({"template": template.filename_template, "next_serial": template.serial_nr})
    options = options_from_dict(row.options)
    details: dict[str, Any] = {
        "task_id": row.id, "name": row.name, "user": row.user_name, "status": row.status, "old_status": row.old_status,
        "error_dialog": row.error_dialog, "vo": row.vo, "prod_source_label": row.prod_source_label,
        "task_type": row.task_type, "processing_type": row.processing_type, "working_group": row.working_group,
        "campaign": row.campaign, "task_priority": row.task_priority, "current_priority": row.current_priority,
        "parent_id": row.parent_id, "periodic": periodic_link(conn, row), "work_queue": row.work_queue, "gshare": row.gshare, "resource_type": row.resource_type,
        "cloud": row.cloud, "site": row.site, "nucleus": row.nucleus, "attempt_nr": row.attempt_nr,
        "transformation": row.trans_path, "release": row.trans_uses, "cache": row.trans_home,
        "architecture": row.architecture, "container": row.container_name,
        "format": params.format, "options": options.as_dict(), "split_rule": split_rule.encode(options),
        "resources": {name: getattr(row, name) for name in RESOURCES},
        "job_parameters": dataset_store.job_templates_of(conn, task_id),
        "lease_owner": row.lease_owner, "lease_expires_at": row.lease_expires_at,
        # The owner told of the end `for` (docs/notifications.md): channels that succeeded, failed attempts, last error.
        "notified": {"for": row.notified_for, "channels": row.notify_channels.split(",") if row.notify_channels else [],
                     "attempts": row.notify_attempts, "error": row.notify_error},
        "created_at": row.created_at, "modified_at": row.modified_at, "state_changed_at": row.state_changed_at,
        "unknown_keys": list(params.unknown_keys or []),
        "datasets": _datasets(conn, task_id, by_dataset),
        "jobs": summarise(job_store.count_by_status(conn, task_id)).as_dict(),
        "status_history": [
            {"status": h.status, "previous": h.previous_status, "reason": h.reason, "at": h.changed_at, "by": h.changed_by}
            for h in task_store.status_history(conn, task_id)
        ],
        "commands": [
            {"command": c.command, "qualifier": c.qualifier, "by": c.requested_by, "at": c.requested_at, "comment": c.comment,
             "status": c.status, "outcome": c.outcome, "parameters": c.parameters}
            for c in command_store.commands_of(conn, task_id)
        ],
        # Lost-file recovery (docs/recovery.md): what this task recovers, and the tasks that recover it.
        "recovery": recovery.relation(conn, task_id),
        # What the output check at the task's end removed from its datasets in the catalog (docs/post-processing.md).
        "removed_outputs": [
            {"dataset": r.dataset_name, "lfn": r.lfn, "kind": r.kind, "job_id": r.job_id, "kept_lfn": r.kept_lfn, "size": r.size,
             "checksum": r.checksum, "guid": r.guid, "reason": r.reason, "at": r.removed_at, "by": r.removed_by}
            for r in post_check_store.removed_of(conn, task_id)[1]
        ],
    }
    return details


def _datasets(conn, task_id: int, templates: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:  # noqa: ANN001
    """The task's datasets with their counters; an input says how it is read (`input`: master, one-time or
    many-time). A many-time input is read by many jobs and consumed by none -- its used and finished
    counters stay 0 -- so `reads` says how often jobs have read its files and `jobs_reading` by how many jobs."""
    rows = dataset_store.datasets_of(conn, task_id)
    roles = {d.id: input_role(d.type, d.master_id is None, d.attributes) for d in rows}
    reads = view_store.reads_of(conn, [d.id for d in rows if roles[d.id] == "many-time"])
    return [
        {"dataset_id": d.id, "name": d.name, "type": d.type, "input": roles[d.id], "stream": d.stream_name, "status": d.status,
         "state": d.state, "master_id": d.master_id, "provenance_id": d.provenance_id, "container": d.container_name,
         "template_id": d.template_id, "site": d.site, "attributes": d.attributes, "destination": d.destination,
         "storage_token": d.storage_token, "file_templates": templates.get(d.id, []),
         **{name: getattr(d, name) for name in COUNTERS},
         "reads": reads.get(d.id, (0, 0))[0] if roles[d.id] == "many-time" else None,
         "jobs_reading": reads.get(d.id, (0, 0))[1] if roles[d.id] == "many-time" else None}
        for d in rows
    ]
