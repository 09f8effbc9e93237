"""The queue layers' passes (docs/queue-layers.md; seed 002): elements made from a task's input blocks,
one agent's acquire pass (the global level, then the local release to `generate`), and the location
update. The rules are engine.workqueue.policy's; every read and write is a named operation of
store.workqueue; every claim from the global queue is its one guarded statement.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jedictl.engine.agent import PassReport
from jedictl.engine.task.options import options_from_dict
from jedictl.engine.workqueue.policy import (
    Charge, Element, ElementStatus, Level, Threshold, ended_status, estimate_jobs, match_elements, possible_sites, slot_limits, used_slots,
)
from jedictl.errors import BadInput
from jedictl.model import SLOT_RUNNING
from jedictl.store import workqueue as wq

#: A task in one of these makes no element and ends those it has (task status -> element end).
TASK_END = {"aborted": ElementStatus.CANCELED, "aborting": ElementStatus.CANCELED, "failed": ElementStatus.FAILED,
            "broken": ElementStatus.FAILED, "done": ElementStatus.DONE, "finished": ElementStatus.DONE}
#: How many Available rows one pass scans per element it may take (WMCore's RowsPerSlice over WorkPerCycle).
SCAN_FACTOR = 20


# --------------------------------------------------------------------------------------- creation

def _locations(conn: Any, options: Any, block: str, pileups: Sequence[str]) -> tuple[str, ...]:
    found = wq.replica_sites(conn, [block, *pileups])
    return possible_sites(found.get(block, ()), [found.get(name, set()) for name in pileups],
                          tuple(options.included_sites or ()), tuple(options.excluded_sites or ()))

#: The reason an element without a possible site shows until a location update finds one.
NO_LOCATION = "its data is at no site the task may use: waiting for the location update"


def create_elements(conn: Any, task_id: int, owner: str, now: datetime) -> list[dict[str, Any]]:
    """One Available element per fed master input dataset of the task that has none yet: a dataset of an
    expanded container is a block (WMCore's Block start policy), a container read whole one element
    (its Dataset policy); a dataset added later -- a container's new member -- gets its element the next
    time. A line per dataset."""
    task = wq.task_for_elements(conn, task_id)
    if task.status in TASK_END:
        raise BadInput(f"task {task_id} is {task.status}: it takes no new work-queue element")
    blocks, pileups = wq.task_blocks(conn, task_id)
    if not blocks:
        raise BadInput(f"task {task_id} has no input dataset yet ({task.status}): `jedictl refine` and `jedictl feed` make them, "
                       "then create its elements")
    known = wq.existing_blocks(conn, task_id)
    if not known and wq.task_has_jobs(conn, task_id):
        raise BadInput(f"task {task_id} already has jobs: the work queue takes a task before its first job")
    options = options_from_dict(task.options or {})
    rows, report = [], []
    for block in blocks:
        if block.id in known:
            report.append({"task_id": task_id, "block": block.name, "action": "exists"})
            continue
        if block.status == "defined":  # not fed: a container to expand has not become its datasets yet
            report.append({"task_id": task_id, "block": block.name, "action": "not fed yet"})
            continue
        n_files = block.n_files
        sites = _locations(conn, options, block.name, pileups)
        rows.append({"task_id": task_id, "dataset_id": block.id, "block": block.name, "n_files": n_files,
                     "n_jobs": estimate_jobs(n_files, options.n_files_per_job), "possible_sites": list(sites), "agent": None, "site": None,
                     "reason": None if sites else NO_LOCATION})
        report.append({"task_id": task_id, "block": block.name, "action": "created"})
    ids = iter(wq.insert_elements(conn, rows, owner, now))
    for line in report:
        line["element"] = next(ids) if line["action"] == "created" else None
    return report


def update_locations(store: Any, owner: str, now: datetime, task_id: int | None = None) -> PassReport:
    """WMCore's location refresh: every Available element's possible sites again from the catalog's
    replicas (its block's and its pile-up's), within its task's site lists."""
    report = PassReport("locations")
    sync_elements(store, owner, now, report)  # the elements of ended tasks first: they need no location
    with store.read() as conn:
        rows = wq.elements_for_locations(conn, task_id)
    for row in rows:
        with store.begin() as conn:
            _, pileups = wq.task_blocks(conn, row.task_id)
            sites = list(_locations(conn, options_from_dict(row.options or {}), row.block, pileups))
            before = list(row.possible_sites or ())
            if sites == before:
                report.add("unchanged", element=row.id, task_id=row.task_id, sites=sites)
            elif wq.set_locations(conn, row.id, sites, None if sites else NO_LOCATION, now):
                report.add("updated", element=row.id, task_id=row.task_id, sites=sites, before=before)
            else:
                report.add("skipped", element=row.id, task_id=row.task_id, reason="no longer Available")
    return report


# ------------------------------------------------------------------------------------- the acquire pass

def _element(row: Any) -> Element:
    return Element(row.id, row.priority, row.created_at, row.job_type or "", row.owner, row.n_jobs, tuple(row.possible_sites or ()))


def _outstanding(row: Any, ready: dict[int, int]) -> int:
    """The jobs an element still holds slots for: all of its estimate until it is released, then the share
    of its block not made into jobs yet."""
    if row.status != ElementStatus.RUNNING.value:
        return row.n_jobs
    return math.ceil(row.n_jobs * ready.get(row.dataset_id, 0) / max(row.n_files, 1))


class _Load:
    """What an agent's sites hold: queued jobs and its elements' outstanding jobs by priority, running jobs,
    and each owner's jobs."""

    def __init__(self, conn: Any, agent: str, thresholds: Sequence[Threshold]):
        self.pending: list[Charge] = []
        self.running: dict[tuple[str, str], int] = {}
        self.owners: dict[str, int] = {}
        for row in wq.site_jobs(conn, sorted({t.site for t in thresholds})):
            self.owners[row.owner] = self.owners.get(row.owner, 0) + row.n
            if row.status in SLOT_RUNNING:
                self.running[(row.site, row.job_type)] = self.running.get((row.site, row.job_type), 0) + row.n
            else:
                self.pending.append(Charge(row.site, row.job_type, row.priority, row.n))
        self.held = wq.agent_elements(conn, agent, (ElementStatus.NEGOTIATING, ElementStatus.ACQUIRED, ElementStatus.RUNNING))
        ready = wq.ready_records(conn, [r.dataset_id for r in self.held if r.status == ElementStatus.RUNNING.value])
        self.outstanding = {r.id: _outstanding(r, ready) for r in self.held}
        for r in self.held:
            self.owners[r.owner] = self.owners.get(r.owner, 0) + self.outstanding[r.id]

    def charges(self, statuses: Sequence[str]) -> list[Charge]:
        return self.pending + [Charge(r.site, r.job_type or "", r.priority, self.outstanding[r.id]) for r in self.held
                               if r.status in statuses and r.site]


def _thresholds(conn: Any, agent: str) -> list[Threshold]:
    return [Threshold(r.site, r.job_type, r.pending_threshold, r.running_threshold, r.state) for r in wq.agent_thresholds(conn, agent)]


def acquire_pass(store: Any, agent: str, owner: str, now: datetime, limit: int = 100, seed: int | None = None) -> PassReport:
    """One pass of agent `agent`: end its elements whose block or task ended; take up to `limit` elements
    from the global queue by its global slots (one guarded claim each) into its local queue; release its
    local queue's elements to `generate` by its local slots."""
    rng = random.Random(seed)
    report = PassReport("acquire")
    with store.read() as conn:
        cap = wq.get_agent(conn, agent).max_jobs_per_owner
    sync_elements(store, owner, now, report, agent)
    with store.read() as conn:
        thresholds = _thresholds(conn, agent)
        load = _Load(conn, agent, thresholds)
        candidates = [_element(row) for row in wq.available_elements(conn, limit * SCAN_FACTOR)]
    # The global level: pending + running thresholds, drained sites left out, running jobs not subtracted;
    # counted against it: queued jobs and everything the agent holds.
    limits = slot_limits(thresholds, Level.GLOBAL, {})
    served = {(t.site, t.job_type) for t in thresholds}
    matching = match_elements(candidates, limits, load.charges(wq.HELD), rng, owner_jobs=load.owners, max_jobs_per_owner=cap,
                              max_elements=limit, served=served)
    for match in matching.matches:
        with store.begin() as conn:
            taken = wq.claim_element(conn, match.element_id, agent, match.site, owner, now)
        if taken:
            report.add("acquired", element=match.element_id, agent=agent, site=match.site)
        else:
            report.add("taken", element=match.element_id, agent=agent, reason="another agent took it first")
    for element_id, reason in matching.left.items():
        report.add("left", element=element_id, agent=agent, reason=reason)
    # The agent's local queue accepts what it negotiated (also what a pass that stopped early left Negotiating).
    with store.read() as conn:
        negotiating = wq.agent_elements(conn, agent, (ElementStatus.NEGOTIATING,))
    for row in negotiating:
        with store.begin() as conn:
            wq.move_held(conn, row.id, agent, ElementStatus.NEGOTIATING, ElementStatus.ACQUIRED, owner, now)
    release_local(store, agent, owner, now, rng, report, thresholds)
    return report


def release_local(store: Any, agent: str, owner: str, now: datetime, rng: random.Random, report: PassReport,
                  thresholds: Sequence[Threshold]) -> None:
    """The local level (WMCore LQ -> WMBS): the agent's Acquired elements become Running -- their blocks
    released to `generate` -- while their sites have local slots: thresholds less running jobs, drained
    sites included; counted against it: queued jobs and the released elements' jobs not made yet."""
    with store.read() as conn:
        load = _Load(conn, agent, thresholds)
    acquired = [r for r in load.held if r.status == ElementStatus.ACQUIRED.value]
    if not acquired:
        return
    limits = slot_limits(thresholds, Level.LOCAL, load.running)
    matching = match_elements([_element(r) for r in acquired], limits, load.charges((ElementStatus.RUNNING,)), rng,
                              served={(t.site, t.job_type) for t in thresholds})
    for match in matching.matches:
        with store.begin() as conn:
            if wq.move_held(conn, match.element_id, agent, ElementStatus.ACQUIRED, ElementStatus.RUNNING, owner, now, site=match.site):
                report.add("released", element=match.element_id, agent=agent, site=match.site)
    for element_id, reason in matching.left.items():
        report.add("held", element=element_id, agent=agent, reason=reason)


def sync_elements(store: Any, owner: str, now: datetime, report: PassReport, agent: str | None = None) -> None:
    """Element status follows its jobs: a Running element whose block's records all ended is Done (Failed
    when none finished); an element of an ended task ends with it (killed or aborted: Canceled); an ended
    element of a live task whose block has records to process again is Available again
    (store.workqueue.requeue_ended)."""
    with store.read() as conn:
        rows = wq.ending_elements(conn, agent)
    for row in rows:
        target, reason = None, None
        if row.task_status in TASK_END:
            target = TASK_END[row.task_status].value
            if target == ElementStatus.DONE.value and row.status != ElementStatus.RUNNING.value:
                target = ElementStatus.CANCELED.value  # the task ended before the element was released
            reason = f"task {row.task_status}"
        elif row.status == ElementStatus.RUNNING.value:
            target = ended_status(row.n_records, row.n_finished, row.n_failed)
            reason = f"{row.n_finished} of {row.n_records} records finished, {row.n_failed} failed" if target else None
        if target is None:
            continue
        with store.begin() as conn:
            if wq.end_element(conn, row.id, row.status, target, reason, owner, now):
                report.add(target.lower(), element=row.id, agent=row.agent, reason=reason)
    with store.begin() as conn:
        for line in wq.requeue_ended(conn, owner, now):
            report.add("requeued", **line)


def agent_slots(conn: Any, agent: str) -> dict[str, Any]:
    """`agents show`: the agent, and per site and job type its thresholds, the jobs there now and the slots
    each level has left counting all work (the lowest priority's view)."""
    row = wq.get_agent(conn, agent)
    thresholds = _thresholds(conn, agent)
    load = _Load(conn, agent, thresholds)
    lowest = -(10 ** 9)
    global_limits = slot_limits(thresholds, Level.GLOBAL, {})
    local_limits = slot_limits(thresholds, Level.LOCAL, load.running)
    global_charges, local_charges = load.charges(wq.HELD), load.charges((ElementStatus.RUNNING,))
    lines = []
    for t in thresholds:
        key = (t.site, t.job_type)
        lines.append({"site": t.site, "job_type": t.job_type, "state": t.state, "pending_threshold": t.pending, "running_threshold": t.running,
                      "pending_jobs": sum(c.jobs for c in load.pending if (c.site, c.job_type) == key),
                      "running_jobs": load.running.get(key, 0),
                      "global_slots": (max(0, global_limits[key] - used_slots(global_charges, t.site, t.job_type, lowest))
                                       if key in global_limits else None),
                      "local_slots": (max(0, local_limits[key] - used_slots(local_charges, t.site, t.job_type, lowest))
                                      if key in local_limits else None)})
    held = {status: sum(1 for r in load.held if r.status == status) for status in wq.HELD}
    return {"agent": row.name, "max_jobs_per_owner": row.max_jobs_per_owner, **held, "owner_jobs": dict(sorted(load.owners.items())),
            "created_at": row.created_at, "modified_at": row.modified_at, "sites": lines}
