"""`jedictl explain task ID`: why a task is, or is not, progressing.

Everything an operator would otherwise piece together from several tables: status and the reason in
its error dialog, who holds its lease and until when, what it waits for, its files by status, the
throttle decision for its queue, and the brokerage trail of its next chunk -- every site, kept with
its weight or dropped by the first rule that failed, with the numbers, its data locality (analysis) and
its network term (the link its outputs or missing input cross, once a network matrix is imported). Read only.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta
from typing import Any

from jedictl.config import Settings
from jedictl.engine.brokerage.analysis import first_location_group, is_analysis
from jedictl.engine.brokerage.loading import (
    chunk_of,
    load_catalog,
    load_site_loads,
    load_task_works,
    load_throttle_input,
    next_chunk_files,
    recently_closed,
    task_secondaries,
)
from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.brokerage.job_brokerage import broker_job_sites
from jedictl.engine.brokerage.model import task_requirements_from_row
from jedictl.engine.task.definition import input_role
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.brokerage.task_brokerage import choose_nucleus
from jedictl.engine.shares.throttler import throttle_decision
from jedictl.engine.shares.user_caps import ANALYSIS_LABELS, Load, account_of, caps_of, generation_block, job_cap_action
from jedictl.engine.shares.user_usage import load_accounts
from jedictl.engine.task.privileges import Privileges
from jedictl.model import TASK_FINAL, TaskStatus
from jedictl.store import datasets as dataset_store
from jedictl.store import tasks as task_store
from jedictl.store import user_caps as cap_store
from jedictl.store import views as view_store


def explain_task(conn: Any, task_id: int, settings: Settings, now: datetime, data: DataCatalog, seed: int | None = None) -> dict[str, Any]:
    task = task_store.get_task(conn, task_id)
    options = options_from_dict(task.options)
    report: dict[str, Any] = {
        "task_id": task.id, "name": task.name, "status": task.status, "old_status": task.old_status,
        "reason": task.error_dialog, "work_queue": task.work_queue, "gshare": task.gshare, "resource_type": task.resource_type,
        "nucleus": task.nucleus, "priority": task.current_priority,
        "lease_owner": task.lease_owner, "lease_expires_at": task.lease_expires_at,
        "lease_expired": bool(task.lease_owner and task.lease_expires_at and task.lease_expires_at < now),
        "wait_until": task.wait_until, "pending_since": task.frozen_at,
        "files": _files_by_status(conn, task_id),
        # Always present (null when they do not apply): the answer has one shape whatever the task's state.
        "nucleus_brokerage": None, "throttle": None, "user_caps": None, "brokerage": None,
    }
    summary: list[str] = []
    if task.status in {s.value for s in TASK_FINAL}:
        summary.append(f"the task is final ({task.status})")
    elif task.lease_owner and not report["lease_expired"]:
        summary.append(f"leased by {task.lease_owner} until {task.lease_expires_at:%Y-%m-%d %H:%M:%S}")
    if task.status == TaskStatus.PENDING.value:
        summary.append(f"pending: {task.error_dialog}" + (f" (re-checked after {task.wait_until:%Y-%m-%d %H:%M})" if task.wait_until else ""))
    elif task.status in (TaskStatus.REGISTERED.value, TaskStatus.DEFINED.value):
        step = "refine" if task.status == TaskStatus.REGISTERED.value else "feed"
        summary.append(f"waits for `jedictl {step}`" + (f": {task.error_dialog}" if task.error_dialog else ""))

    catalog = load_catalog(conn)
    loads = load_site_loads(conn)
    requirements = task_requirements_from_row(task._mapping, options)
    records = next_chunk_files(conn, task_id, settings.task_broker.input_files)

    def chunk_from(rows: Any, secondaries: Any = ()) -> Any:
        return chunk_of(rows, data, secondaries=secondaries,
                        is_scout=task.status in (TaskStatus.READY.value, TaskStatus.SCOUTING.value) and not options.skip_scout and not task.scouts_done,
                        files_per_job=options.n_files_per_job, events_per_job=options.n_events_per_job)

    chunk = chunk_from(records)
    job_records = records
    if is_analysis(requirements) and chunk.n_files:  # as the generator does: the files stored where the first one is
        lfns = list(dict.fromkeys(record[0] for record in records))
        kept = {lfns[index] for index in first_location_group(chunk)}
        if len(kept) < chunk.n_files:
            job_records = [record for record in records if record[0] in kept]
    # The secondaries its jobs read: one-time ones charged like the master, many-time ones by availability.
    secondaries = task_secondaries(conn, task_id, len(job_records), settings.generate.hard_max_files_per_job)
    job_chunk = chunk_from(job_records, secondaries)
    # The Task Broker weighs the master's locality; the secondaries only say whether cvmfs is needed.
    chunk = dataclasses.replace(chunk, cvmfs_datasets=tuple(dict.fromkeys(chunk.cvmfs_datasets + job_chunk.cvmfs_datasets)))
    if task.status == TaskStatus.ASSIGNING.value:
        tokens = view_store.output_storage_tokens(conn, task_id)
        nuclei = choose_nucleus(requirements, chunk, catalog, load_task_works(conn), loads, settings.task_broker, settings.brokerage,
                                random.Random(seed), output_tokens=tokens, queued_output_files=catalog.network.queued_to())
        report["nucleus_brokerage"] = nuclei.rows()
        summary.append(f"task brokerage would choose {nuclei.nucleus}" if nuclei.ok else nuclei.error_dialog())
    if task.prod_source_label in ANALYSIS_LABELS and task.status not in {s.value for s in TASK_FINAL}:
        report["user_caps"] = _user_caps(conn, task, settings, summary)
    if task.gshare and task.status not in {s.value for s in TASK_FINAL}:
        decision = throttle_decision(load_throttle_input(conn, task.gshare, task.resource_type, task.prod_source_label, settings.throttle.limits),
                                     settings.throttle)
        report["throttle"] = decision.as_dict()
        if decision.throttled:
            summary.append(f"its queue {task.gshare}/{task.resource_type} is throttled: {decision.message}")
    if chunk.n_files:
        closed = None
        if is_analysis(requirements):
            closed = recently_closed(conn, task_id, now - timedelta(hours=settings.brokerage.analysis_busy_hours))
        sites = broker_job_sites(requirements, job_chunk, catalog, loads, settings.brokerage, throttle=settings.throttle, closed_recently=closed)
        report["brokerage"] = [_fate_row(row) for row in sites.rows()]
        summary.append(f"{len(sites.candidates)} sites can run its next jobs" if sites.ok else f"no site can run its next jobs ({sites.summary()})")
        if sites.placement is not None and sites.placement.applies:
            summary.append(_data_summary(sites.placement))
    elif task.status in ("ready", "running", "scouting"):
        summary.append("no released input is left to make jobs from")
    report["summary"] = "; ".join(summary) or "nothing holds it back"
    return report


def _user_caps(conn: Any, task: Any, settings: Settings, summary: list[str]) -> dict[str, Any]:
    """Where the task's account stands against the per-user caps (docs/analysis.md), and what holds
    the task back because of them: its jobs throttled by the running cap, no new jobs, or the task
    throttled for its account's backlog of input to stage or transfer."""
    account = account_of(task.user_name, task.working_group)
    load = load_accounts(conn).get(account, Load())
    caps = caps_of(account, settings.user_caps)
    capped = cap_store.capped_jobs_of_task(conn, task.id)
    privilege = Privileges.from_settings(settings.privileges).privileged(task.user_name, task.working_group)
    blocked = generation_block(account, load, settings.user_caps)
    if capped:
        action = job_cap_action(account, load, settings.user_caps)
        if action is not None and action.action == "release_jobs":
            summary.append(f"{capped} of its jobs are throttled by the user cap; the next `jedictl watch` activates them ({action.reason})")
        else:
            summary.append(f"{capped} of its jobs are throttled by the user cap: {_capped_reason(account, load, caps, settings)}")
    if blocked and task.status in (TaskStatus.READY.value, TaskStatus.SCOUTING.value, TaskStatus.RUNNING.value):
        summary.append(f"no new jobs: {blocked}")
    if task.status == TaskStatus.THROTTLED.value and task.throttle_reason:
        summary.append(f"throttled until the input its user waits for ({task.throttle_reason}) is back within the limit: {task.error_dialog}")
    return {"account": str(account), "privilege": privilege, "running_jobs": load.running_jobs, "running_cores": load.running_cores,
            "queued_jobs": load.queued_jobs, "queued_cores": load.queued_cores, "caps": {caps.jobs_key: caps.jobs, caps.cores_key: caps.cores},
            "capped_jobs": capped, "generation": blocked or "open"}


def _capped_reason(account: Any, load: Load, caps: Any, settings: Settings) -> str:
    """Why a capped job stays throttled: its account runs too much, jobs or cores (released below the
    release fraction of both caps)."""
    return (f"{account} runs {load.running_jobs} jobs on {load.running_cores} cores; released below "
            f"{settings.user_caps.release_fraction:g} x user_caps.{caps.jobs_key} {caps.jobs} and .{caps.cores_key} {caps.cores}")


def _data_summary(placement: Any) -> str:
    """One clause on where an analysis task's next jobs go relative to their data."""
    holders = ", ".join(sorted(placement.holders)) or "none"
    many_time = f"; with the many-time input at {', '.join(sorted(placement.many_time_at))}" if placement.many_time_at else ""
    return {
        "data": f"analysis: jobs go to the data (held at {holders}{many_time})",
        "no_data": "analysis: no candidate site holds the input; jobs go with a transfer of their input",
        "timeout": f"analysis: every site with the data ({holders}) closed jobs of the task after ANALY_TIMEOUT; "
                   "jobs go to idle sites with a transfer of their input",
        "preassigned": f"analysis: the task's own site; the data is held at {holders}",
    }[placement.mode]


def _files_by_status(conn: Any, task_id: int) -> list[dict[str, Any]]:
    """The task's files by dataset and status, each dataset with how it is read: a many-time input's
    records stay `ready` for good -- they are read by many jobs, consumed by none."""
    roles = {d.id: input_role(d.type, d.master_id is None, d.attributes) for d in dataset_store.datasets_of(conn, task_id)}
    return [{"dataset": r[0], "type": r[1], "input": roles.get(r[4]), "status": r[2], "files": r[3]}
            for r in view_store.files_by_status(conn, task_id)]


def _fate_row(row: dict[str, Any]) -> dict[str, Any]:
    numbers = row.get("numbers") or {}
    return {"site": row["site"], "kept": row["kept"], "rule": row["rule"], "message": row["message"],
            "weight": round(row["weight"], 4) if row.get("weight") is not None else None,
            "values": ", ".join(f"{k}={v}" for k, v in numbers.items()), "data": row.get("data"), "network": row.get("network")}


