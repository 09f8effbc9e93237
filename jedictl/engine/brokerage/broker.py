"""The Task Broker pass (jedi-inventory.md §5): a nucleus -- the output destination -- for every task
in `assigning`, then `ready`.

The choice itself is engine.brokerage.task_brokerage.choose_nucleus (filters, weights, a seeded weighted draw);
this module loads what it needs once per pass, commits each choice under the task's lease (nucleus,
output destinations, status), and adds the task's remaining work to its nucleus so the next task in
the same pass sees that load. A task no nucleus fits keeps `assigning` with the reasons in its error
dialog and is brokered again after `task_broker.retry_minutes`.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta
from typing import Any, Callable

from jedictl.config import Settings
from jedictl.engine.agent import PassReport, leased_pass
from jedictl.engine.brokerage.loading import chunk_of, load_catalog, load_site_loads, load_task_works, next_chunk_files, task_secondaries
from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.brokerage.model import task_requirements_from_row
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.brokerage.task_brokerage import RemainingWork, TaskWork, choose_nucleus
from jedictl.errors import LeaseLost
from jedictl.model import TaskStatus
from jedictl.store import brokerage as brokerage_store
from jedictl.store import task_leases
from jedictl.store import tasks as task_store
from jedictl.store.data_catalog import StoreDataCatalog

# Final outputs go to the nucleus; unmerged twins (trn_*, token TOMERGE) stay where their jobs ran
# until merge jobs there read them, so they play no part in choosing a nucleus.
OUTPUT_TYPES = ("output", "log")


def broker_pass(store: Any, settings: Settings, owner: str, now: datetime, limit: int | None = None, seed: int | None = None,
                catalog_factory: Callable[[Any], DataCatalog] | None = None) -> PassReport:
    rng = random.Random(seed)
    factory = catalog_factory or StoreDataCatalog
    with store.read() as conn:
        catalog, loads = load_catalog(conn), load_site_loads(conn)
        works = RemainingWork(load_task_works(conn), settings.task_broker.default_cpu_time)

    def handle(task_id: int) -> tuple[str, str | None]:
        with store.begin() as conn:
            return _broker_one(conn, task_id, catalog, loads, works, factory(conn), settings, owner, now, rng)

    return leased_pass(store, PassReport("broker"), task_leases.broker_candidates(now), task_leases.BY_PRIORITY, handle,
                       owner=owner, now=now, lease_seconds=settings.lease.seconds, limit=limit or settings.task_broker.limit,
                       claim_batch=settings.task_broker.claim_batch)


def _broker_one(conn: Any, task_id: int, catalog: Any, loads: Any, works: RemainingWork, data: DataCatalog,
                settings: Settings, owner: str, now: datetime, rng: random.Random) -> tuple[str, str | None]:
    task = task_store.get_task(conn, task_id)
    options = options_from_dict(task.options)
    requirements = task_requirements_from_row(task._mapping, options)
    outputs = brokerage_store.dataset_tokens(conn, task_id, OUTPUT_TYPES)
    tokens = sorted({row.storage_token or "" for row in outputs})
    records = next_chunk_files(conn, task_id, settings.task_broker.input_files)
    chunk = chunk_of(records, data, files_per_job=options.n_files_per_job, events_per_job=options.n_events_per_job)
    secondaries = task_secondaries(conn, task_id, len(records), settings.generate.hard_max_files_per_job)
    if secondaries:  # the nucleus is weighed on the master's locality; the secondaries say whether cvmfs is needed
        needed = chunk_of(records, data, secondaries=secondaries).cvmfs_datasets
        chunk = dataclasses.replace(chunk, cvmfs_datasets=tuple(dict.fromkeys(chunk.cvmfs_datasets + needed)))
    result = choose_nucleus(
        requirements, chunk, catalog, works, loads, settings.task_broker, settings.brokerage, rng,
        output_tokens=tokens, assigning_days=(now - task.state_changed_at).total_seconds() / 86400,
        queued_output_files=catalog.network.queued_to(),  # the network matrix's files queued into each nucleus
    )
    release = {"lease_owner": None, "lease_expires_at": None}
    if not result.ok:
        dialog = result.error_dialog()
        done = task_store.update_leased(conn, task_id, owner, [TaskStatus.ASSIGNING], error_dialog=dialog,
                                        wait_until=now + timedelta(minutes=settings.task_broker.retry_minutes), modified_at=now, **release)
        if not done:
            raise LeaseLost(f"task {task_id} changed while being brokered")
        return "waiting", dialog
    for row in outputs:
        destination = result.destinations.get(row.storage_token or "")
        if destination:
            brokerage_store.set_destination(conn, row.id, destination, now)
    moved = task_store.change_status(conn, task_id, TaskStatus.READY, [TaskStatus.ASSIGNING], f"nucleus {result.nucleus}", owner, now,
                                     owner=owner, nucleus=result.nucleus, error_dialog=None, wait_until=None, **release)
    if not moved:
        raise LeaseLost(f"task {task_id} changed while being brokered")
    master_events = sum(chunk.file_events)
    works.add(TaskWork(task_id=task_id, nucleus=result.nucleus, status=TaskStatus.READY.value, priority=task.current_priority,
                       n_events=master_events, n_events_used=0, cpu_time=task.cpu_time, cpu_time_unit=task.cpu_time_unit,
                       work_queue=task.work_queue))
    return "ready", f"nucleus {result.nucleus}"
