"""The Job Generator pass (jedi-inventory.md §6): released input becomes jobs.

Per pass: load the catalogs and the sites' live load once; order the candidate tasks (round-robin
across users and groups, express lane with the privileged, group shares); for each task check its
user's caps (engine.shares.user_caps) and ask the throttler about its share x resource type, lease
the task, and then, one chunk of input per transaction: read the next ready files under lock, broker
sites for the chunk, split it site by site (a weighted draw per round of sub-chunks), build the jobs
(engine.generate.job_builder) and write them in bulk, and move the used records `ready -> running`
with their job in one guarded write each (the rest stay `ready`). A chunk either commits whole or not
at all; a failure in one task (an unresolved placeholder, no site) leaves it `pending` with the reason
and the pass goes on with the next task.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from datetime import datetime, timedelta
from typing import Any, Callable

from jedictl.clock import PassClock
from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.brokerage.analysis import first_location_group, is_analysis
from jedictl.engine.brokerage.loading import (
    chunk_of,
    load_catalog,
    load_site_loads,
    load_throttle_input,
    locked_slot_loads,
    recently_closed,
)
from jedictl.engine.catalogs.data import DataCatalog
from jedictl.engine.brokerage.job_brokerage import broker_job_sites, pick_site, start_picking
from jedictl.engine.brokerage import site_slots
from jedictl.engine.brokerage.model import SecondaryRecords, SiteLoad
from jedictl.engine.generate.input_transfers import cvmfs_lfns, input_transfers
from jedictl.engine.generate import wmcore_tasks
from jedictl.engine.generate.job_builder import JobBuilder, TaskContext, TaskOutline
from jedictl.engine.generate.merge_jobs import MergeConflict, make_merge_jobs
from jedictl.engine.jobs.resources import job_priority
from jedictl.engine.shares.usage import load_generation_order, task_ranks
from jedictl.engine.shares.user_caps import ANALYSIS_LABELS, Load, account_of, generation_block
from jedictl.engine.shares.user_usage import group_usage, load_accounts
from jedictl.engine.task.privileges import Privileges
from jedictl.engine.generate.splitters import START, InputChunk, InputFile, SecondaryInput, SplitDefaults, job_limits, site_limits, split_at_site, sub_chunks_per_site
from jedictl.engine.generate.task_order import Candidate, order_tasks
from jedictl.engine.task.definition import DatasetAttributes
from jedictl.engine.task.templates import TemplateError
from jedictl.engine.shares.throttler import throttle_decision
from jedictl.errors import LeaseLost, StoreUnavailable
from jedictl.model import TaskStatus
from jedictl.store import jobs as job_store
from jedictl.store import task_leases
from jedictl.store import tasks as task_store
from jedictl.store import workqueue as workqueue_store
from jedictl.store.data_catalog import StoreDataCatalog
from jedictl.store.site_datasets import NotAContainer

GENERATOR_STATUSES = (TaskStatus.READY.value, TaskStatus.RUNNING.value, TaskStatus.SCOUTING.value,
                      # a task waiting for its preprocess job: the job is made from its pp_input master (engine.task.preprocess)
                      TaskStatus.TOPREPROCESS.value, TaskStatus.PREPROCESSING.value)
INPUT_TYPES = ("input", "pseudo_input", "pp_input")
#: Master inputs that are blocks of the work queue (a pp_input master is not).
BLOCK_TYPES = ("input", "pseudo_input")


class NoSite(Exception):
    """No site can take the chunk; the message is the brokerage summary."""


def generate_pass(store: Any, settings: Settings, owner: str, now: datetime, limit: int | None = None, seed: int | None = None,
                  catalog_factory: Callable[[Any], DataCatalog] | None = None) -> PassReport:
    rng = random.Random(seed)
    factory = catalog_factory or StoreDataCatalog
    report = PassReport("generate")
    pass_clock = PassClock(now)
    privileges = Privileges.from_settings(settings.privileges)
    with store.read() as conn:
        catalog = load_catalog(conn)
        loads = load_site_loads(conn)
        candidates = _candidates(conn, now, privileges)
        share_order = load_generation_order(conn, settings)  # most under-served queues first (engine.shares.usage)
        share_ranks = task_ranks(conn, share_order, [c.task_id for c, _ in candidates])
        accounts = load_accounts(conn) if any(queue[2] in ANALYSIS_LABELS for _, queue in candidates) else {}
        groups = group_usage(conn, privileges.group_shares)
    start_loads = dict(loads)  # the site caps' "count at cycle start" (WMCore bounds the overflow with it)
    budgets: dict[tuple[str | None, str | None], Any] = {}  # queue -> [decision, jobs left]
    order = order_tasks([dataclasses.replace(c, share_rank=share_ranks[c.task_id], group_usage=groups.get(c.working_group or ""))
                         for c, _ in candidates], rng, settings.generate.express_priority, settings.generate.express_ratio)
    owners = {c.task_id: account_of(c.user, c.working_group) for c, _ in candidates}
    queues = {c.task_id: queue for c, queue in candidates}
    merging = {c.task_id: c.merge for c, _ in candidates}
    visited = 0
    for task_id in order:
        if visited >= (limit or settings.generate.n_tasks):
            break
        queue = queues[task_id]
        account = owners[task_id]
        if queue[2] in ANALYSIS_LABELS:
            blocked = generation_block(account, accounts.get(account, Load()), settings.user_caps)
            if blocked:  # its user (or group) has enough running or queued: AtlasAnalJobBroker's user throttle
                report.add("throttled", task_id=task_id, reason=blocked)
                continue
        budget = budgets.get(queue[:3])  # one throttle decision and budget per share x resource type x label
        if budget is None and settings.generate.throttle:
            with store.read() as conn:
                decision = throttle_decision(dataclasses.replace(
                    load_throttle_input(conn, queue[0] or "", queue[1], queue[2], settings.throttle.limits),
                    share_throttled=queue[0] not in share_order.unthrottled), settings.throttle)
            budget = budgets[queue[:3]] = [decision, None if not decision.throttled else 0]
            if not decision.throttled:
                budget[1] = decision.max_num_jobs
        # A throttled queue still gets merge jobs (JEDI's merge-only mode).
        merge_only = False
        if budget is not None and (budget[0].throttled or budget[1] <= 0):
            if not merging[task_id]:
                report.add("throttled", task_id=task_id, reason=f"{queue[0]}/{queue[1]}: {budget[0].message}")
                continue
            merge_only = True
        if budget is not None and budget[0].min_priority is not None and queues[task_id][3] < budget[0].min_priority:
            if not merging[task_id]:
                report.add("throttled", task_id=task_id, reason=f"below the priority {budget[0].min_priority} let through")
                continue
            merge_only = True
        with store.begin() as conn:
            # Guarded by the candidate condition too: the list was read at the start of the pass, and
            # another process may since have handled the task, moved it on (pending, finished ...) and
            # released it -- free, but no longer ours to generate for.
            if not task_leases.claim_for_generation(conn, task_id, owner, pass_clock.current(), settings.lease.seconds, GENERATOR_STATUSES):
                continue  # another generator has it, or it moved on
        visited += 1
        try:
            generator = TaskGenerator(store, task_id, settings, owner, now, rng, catalog, loads, factory, pass_clock=pass_clock,
                                      start_loads=start_loads)
            made, outcome, reason = generator.run(None if budget is None or merge_only else budget[1], merge_only=merge_only)
            if budget is not None and budget[1] is not None and not merge_only:
                budget[1] -= made
            if made and queue[2] in ANALYSIS_LABELS:  # what this pass queued counts against the user's caps too
                cores = getattr(generator.context.task, "core_count", None) or 1
                accounts[account] = accounts.get(account, Load()).plus_queued(made, made * max(int(cores), 1))
            if outcome == "nothing":
                visited -= 1  # held-back merges or nothing released: the task does not use up a slot of the pass
                if merge_only:
                    outcome, reason = "throttled", f"{queue[0]}/{queue[1]}: {budget[0].message} (no merge job ready)"
            report.add(outcome, task_id=task_id, jobs=made, reason=reason)
        except LeaseLost as exc:
            with store.begin() as conn:  # the task moved under our lease (a command): let go of it if it is still ours
                task_leases.release(conn, task_id, owner)
            report.add("skipped", task_id=task_id, jobs=0, reason=str(exc))
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - one task's failure must not stop the pass
            with store.begin() as conn:  # the chunk's transaction rolled back: nothing is left claimed
                task_leases.release(conn, task_id, owner)
            report.add_failure(exc, task_id=task_id, jobs=0)
    report.counts["jobs"] = sum(item.get("jobs", 0) for item in report.items)
    return report


def _candidates(conn: Any, now: datetime, privileges: Privileges) -> list[tuple[Candidate, tuple[str | None, str | None, str, int]]]:
    """Tasks with released input left to make jobs from, and the queue each belongs to."""
    rows = task_leases.generation_candidates(conn, now, GENERATOR_STATUSES, INPUT_TYPES)
    return [(Candidate(r.id, r.user_name, r.current_priority, scouting=r.status == TaskStatus.SCOUTING.value, merge=bool(r.merge_left),
                       working_group=r.working_group, jumps=privileges.jumps_queue(r.prod_source_label, r.user_name, r.working_group)),
             (r.gshare, r.resource_type, r.prod_source_label, r.current_priority)) for r in rows]


class TaskGenerator:
    """Makes the jobs of one leased task, chunk by chunk."""

    def __init__(self, store: Any, task_id: int, settings: Settings, owner: str, now: datetime, rng: random.Random,
                 catalog: Any, loads: dict[str, SiteLoad], factory: Callable[[Any], DataCatalog], pass_clock: PassClock | None = None,
                 start_loads: dict[str, SiteLoad] | None = None):
        self.store, self.task_id, self.settings, self.owner, self.now, self.rng = store, task_id, settings, owner, now, rng
        self.pass_clock = pass_clock or PassClock(now)
        self.catalog, self.loads, self.factory = catalog, loads, factory
        self.start_loads = start_loads if start_loads is not None else dict(loads)
        self.sites = {site.name: site for site in catalog.sites}
        # Per master dataset: every ready record up to this id was read by an earlier chunk of this run and
        # is now in a job (store.jobs.claim_files reads on after it).
        self.claimed_up_to: dict[int, int] = {}
        # Work-queue blocks this run is done with: none of their records could be claimed (another
        # transaction holds them, or none may be attempted), or their chunk made no job (a WMCore algorithm
        # waiting for more work). The next chunk goes on to the task's next released block.
        self.blocks_done: set[int] = set()
        self.block: int | None = None  # the block of the current chunk, None for a task not in the work queue
        self.context: TaskContext | None = None  # loaded by each chunk (and merge) inside its transaction

    def run(self, max_jobs: int | None, merge_only: bool = False) -> tuple[int, str, str | None]:
        with self.store.read() as conn:
            outline = TaskOutline.load(conn, self.task_id)  # each chunk loads the whole context in its transaction
        self.status_now = outline.status  # as this pass last wrote or read it
        made, files_left = 0, self.settings.generate.n_files
        # A WMCore algorithm sees all the released input at once, as WMCore's JobFactory hands a subscription's
        # whole available fileset to its splitter: a part would make Harvest's end-of-run job and the merges'
        # forced merges on a closed input too early.
        whole_input = outline.wmcore
        if whole_input:
            files_left = sys.maxsize
        merge_note = None
        if outline.merge:
            made, merge_note = self._merges(max_jobs)
        if merge_only:
            return self._finish(made, merge_note)
        try:
            while files_left > 0 and (max_jobs is None or made < max_jobs):
                with self.store.begin() as conn:
                    self._renew(conn)
                    count, taken = self._chunk(conn, files_left if whole_input else min(files_left, self.settings.generate.batch_size),
                                               None if max_jobs is None else max_jobs - made)
                    if count:
                        self._started(conn, count)
                made += count
                files_left -= taken
                if count == 0 and self.block is not None:
                    # This block makes nothing more in this pass: the task's next released block may.
                    self.blocks_done.add(self.block)
                    continue
                if taken == 0 or count == 0:
                    break
        except (NoSite, TemplateError, NotAContainer, wmcore_tasks.SplitRefused) as exc:
            reason = f"no site can run the jobs: {exc}" if isinstance(exc, NoSite) else str(exc)
            if made:  # some jobs exist: keep the task going, say why the rest waits
                return self._finish(made, reason)
            return self._pending(reason)
        return self._finish(made, merge_note)

    def _merges(self, max_jobs: int | None) -> tuple[int, str | None]:
        """Merge jobs first (JEDI prefers merge chunks), in one transaction of their own; a failure
        writes nothing, is reported, and the task's normal jobs still go ahead."""
        try:
            with self.store.begin() as conn:
                self._renew(conn)
                ctx = self.context = TaskContext.load(conn, self.task_id, self.settings)
                made, _ = make_merge_jobs(conn, ctx, self.settings, self.sites, self.now, max_jobs)
                if made:
                    self._started(conn, made)
        except (MergeConflict, TemplateError, NotAContainer) as exc:
            return 0, f"merge jobs: {exc}"
        return made, None

    # --------------------------------------------------------------------------- one chunk

    def _chunk(self, conn: Any, n_files: int, max_jobs: int | None) -> tuple[int, int]:
        """Claim, broker, split and write one chunk; returns (jobs made, master records taken)."""
        # Counters and serial numbers moved with the previous chunk: read them inside this transaction.
        ctx = self.context = TaskContext.load(conn, self.task_id, self.settings)
        claimed = []
        masters, requirements = ctx.masters, ctx.requirements
        released = workqueue_store.released_blocks(conn, self.task_id)
        self.block = None
        if released is not None:
            # A task in the work queue (docs/queue-layers.md, decision 47): only blocks an agent released,
            # one block per chunk, its jobs at that agent's sites that hold the block. A block whose records
            # cannot be claimed now is passed over for the next one with records left.
            blocks = [m for m in masters if m.type in BLOCK_TYPES and released.get(m.id) and m.n_files_to_be_used > m.n_files_used
                      and m.id not in self.blocks_done]
            masters = [m for m in masters if m.type not in BLOCK_TYPES]
            for block in blocks:
                claimed = job_store.claim_files(conn, block.id, min(block.n_files_to_be_used - block.n_files_used, n_files),
                                                self.claimed_up_to.get(block.id, 0))
                if claimed:
                    masters, self.block = [], block.id
                    requirements = dataclasses.replace(requirements, included_sites=released[block.id])
                    break
                self.blocks_done.add(block.id)
        for master in masters:
            left = master.n_files_to_be_used - master.n_files_used
            # JEDI reads more than it needs only for whole chunks; jedictl claims what is released.
            rows = job_store.claim_files(conn, master.id, min(left, n_files - len(claimed)), self.claimed_up_to.get(master.id, 0))
            claimed.extend(rows)
            if len(claimed) >= n_files:
                break
        if not claimed:
            return 0, 0
        all_claimed = claimed
        if ctx.group_boundary_id is not None and len(claimed) >= n_files:
            # A recovery task re-runs each original job whole (docs/recovery.md): the last boundary a full
            # chunk read may go on past it, so its records wait for the next chunk, which starts with them.
            claimed = whole_boundaries(claimed)
        data = self.factory(conn)

        def brokerage_chunk(rows: list[Any]) -> Any:
            return chunk_of(_brokerage_records(rows, ctx), data, is_scout=ctx.scout,
                            files_per_job=ctx.live_options.n_files_per_job, events_per_job=ctx.live_options.n_events_per_job)

        brokerage_input = brokerage_chunk(claimed)
        closed = None
        if is_analysis(ctx.requirements):  # analysis follows the data unless its data sites kept jobs waiting
            closed = recently_closed(conn, self.task_id, self.now - timedelta(hours=self.settings.brokerage.analysis_busy_hours))
            group = first_location_group(brokerage_input)
            if len(group) < brokerage_input.n_files:  # files stored elsewhere wait for the next chunk
                lfns = list(dict.fromkeys(row[1] for row in claimed))
                kept = {lfns[index] for index in group}
                claimed = [row for row in claimed if row[1] in kept]
                brokerage_input = brokerage_chunk(claimed)
        master_files = tuple(_input_file(row) for row in claimed)
        secondaries = tuple(self._secondary(conn, dataset, len(master_files)) for dataset in ctx.secondaries)
        chunk = InputChunk(master=master_files, secondaries=tuple(s for s, _, _ in secondaries))
        read_by_jobs = [SecondaryRecords(dataset.name, not was_claimed, tuple((row[1], row[2], row[3], dataset.name) for row in rows))
                        for dataset, (_, rows, was_claimed) in zip(ctx.secondaries, secondaries, strict=True)]
        if read_by_jobs:  # one-time secondaries are charged like the master, many-time ones count by availability
            brokerage_input = chunk_of(_brokerage_records(claimed, ctx), data, secondaries=read_by_jobs, is_scout=ctx.scout,
                                       files_per_job=ctx.live_options.n_files_per_job, events_per_job=ctx.live_options.n_events_per_job)

        def broker() -> Any:
            return broker_job_sites(requirements, brokerage_input, self.catalog, self.loads, self.settings.brokerage,
                                    throttle=self.settings.throttle, start_loads=self.start_loads, closed_recently=closed)

        brokerage = broker()
        capped = sorted(candidate.site for candidate in brokerage.candidates if candidate.n_free is not None)
        if capped:
            # The caps of the pass's snapshot may be stale: other generators write jobs too. Count the
            # capped candidates' jobs again with their rows locked until this chunk commits, and broker
            # on those counts -- so concurrent generators never fill a site past its caps together.
            for name, slots in locked_slot_loads(conn, capped).items():
                self.loads[name] = dataclasses.replace(self.loads.get(name, SiteLoad()), slots=slots)
            brokerage = broker()
        if not brokerage.ok:
            raise NoSite(brokerage.summary())
        master_lfns = [row[1] for row in claimed]
        builder = JobBuilder(ctx, self.settings, self.now, cvmfs_lfns(brokerage_input, master_lfns, read_by_jobs))
        by_id = {row.id: row for row in claimed}
        if ctx.splitting is not None:  # a WMCore algorithm cuts the jobs (engine.generate.wmcore_tasks)
            transfers_of = lambda: input_transfers(brokerage, brokerage_input, master_lfns, read_by_jobs, self.sites,  # noqa: E731
                                                   self.catalog.endpoints)
            # The algorithm sees the input as final only when the dataset is closed AND this chunk holds all of
            # its released records: a chunk cut at n_files is a part, on which Harvest would make its end-of-run
            # job and the merges would force undersized merges.
            whole = len(all_claimed) < n_files
            return self._wmcore_chunk(conn, ctx, claimed, all_claimed, brokerage.candidates, builder, by_id, transfers_of, whole,
                                      max_jobs)
        plan, excluded, refused, full = self._split(chunk, brokerage.candidates, max_jobs,
                                                    lambda site, sub: builder.refusal(site, sub, by_id))
        if not plan:
            if full:
                # The sites' own caps filled up during this pass: say which cap stopped each.
                raise NoSite("candidates became full (" + "; ".join(f"{site}: {why}" for site, why in sorted(full.items())) + ")")
            if len(excluded) < len(brokerage.candidates):
                # Every candidate filled up during this pass (queued cap): JEDI's "candidates became full".
                raise NoSite(f"candidates became full ({len(brokerage.candidates)} sites at their queued cap)")
            why = "; ".join(f"{site}: {reason}" for site, reason in sorted(refused.items()))
            raise NoSite("the input fits no candidate site's limits" + (f" ({why})" if why else ""))
        secondary_rows = {row.id: row for _, rows, _ in secondaries for row in rows}
        claimed_secondaries = {row.id for _, rows, was_claimed in secondaries if was_claimed for row in rows}
        transfers = input_transfers(brokerage, brokerage_input, master_lfns, read_by_jobs, self.sites, self.catalog.endpoints)
        written = builder.write(conn, plan, by_id, secondary_rows, claimed_secondaries, transfers)
        for site, count in written.per_site.items():
            self._count(site, count, self._job_priority(), written.assigned.get(site, 0))
        # Records read but put in no job were never written: they are still `ready` (store.jobs). The next
        # chunk reads on from the first of them, or from the last record read when every one was used --
        # those an analysis chunk left for another location included (all that was read, not only kept).
        for master in ctx.masters:
            ids = [row[0] for row in all_claimed if row[9] == master.id]
            if ids:
                unused = [record_id for record_id in ids if record_id not in written.used]
                self.claimed_up_to[master.id] = min(unused) - 1 if unused else ids[-1]
        used_masters = sum(len(sub.master) for _, sub in plan)
        return len(plan), max(used_masters, 1)

    def _wmcore_chunk(self, conn: Any, ctx: TaskContext, claimed: list[Any], all_claimed: list[Any], candidates: Any,
                      builder: JobBuilder, by_id: dict[int, Any], transfers_of: Callable[[], Any], whole: bool,
                      max_jobs: int | None) -> tuple[int, int]:
        """The chunk split by the task's WMCore algorithm: planned jobs written with their masks, parents
        and created-failed jobs, as many as the throttle's budget lets through; records the algorithm left
        (waiting for more work) or the budget cut off stay ready."""
        wm = wmcore_tasks.within_budget(wmcore_tasks.plan_jobs(conn, ctx, claimed, candidates, self.sites, self.rng, self.now, whole),
                                        max_jobs)
        used: frozenset[int] = frozenset()
        if wm.plan:
            written = builder.write(conn, wm.plan, by_id, {}, set(), transfers_of(), references=wm.references)
            wmcore_tasks.after_write(conn, ctx, wm, written.job_ids, self.settings, self.now)
            for site, count in written.per_site.items():
                self._count(site, count, self._job_priority(), written.assigned.get(site, 0))
            used = written.used
        for master in ctx.masters:
            ids = [row[0] for row in all_claimed if row[9] == master.id]
            if ids:
                unused = [record_id for record_id in ids if record_id not in used]
                self.claimed_up_to[master.id] = min(unused) - 1 if unused else ids[-1]
        return len(wm.plan), len(all_claimed)

    def _secondary(self, conn: Any, dataset: Any, n_master: int) -> tuple[SecondaryInput, list[Any], bool]:
        """A secondary's records for the chunk: claimed when each file serves one job (a one-time input); read
        when it is a many-time input, whose files many jobs share (nosplit: every job gets them all; repeat:
        reused cyclically; reusable or marked many_time: rewound when too few are left)."""
        attributes = DatasetAttributes.from_dict(dataset.attributes or {})
        shared = attributes.is_many_time
        if shared:
            rows = job_store.read_files(conn, dataset.id, self.settings.generate.hard_max_files_per_job)
        else:
            per_master = attributes.n_files_per_job or max(1, math.ceil(attributes.ratio or 1))
            rows = job_store.claim_files(conn, dataset.id, per_master * n_master)
        records = tuple(_input_file(row) for row in rows)
        return SecondaryInput.from_attributes(dataset.id, records, attributes), rows, not shared

    def _split(self, chunk: InputChunk, candidates: Any, max_jobs: int | None, refuse: Callable[[Any, Any], str | None]
               ) -> tuple[list[tuple[Any, Any]], list[str], dict[str, str], dict[str, str]]:
        """Sub-chunks site by site: a weighted draw, then up to 25 (scouts: 2) jobs there, and again.
        Returns the plan, the sites excluded because the input does not fit their limits, why a site
        refused a job (`refuse(site, sub_chunk)`: a job is never written with needs its site refuses;
        the next job goes to another site, or waits), and the sites whose caps filled up (the cap)."""
        ctx = self.context
        defaults = SplitDefaults.from_settings(self.settings)
        per_site = sub_chunks_per_site(ctx.scout, defaults)
        state = start_picking(candidates)
        cursor, plan, excluded, refused, full = START, [], [], {}, {}
        taken: dict[str, int] = {}  # jobs of this chunk per site: they count against the site's caps
        while cursor.master < len(chunk.master) and (max_jobs is None or len(plan) < max_jobs):
            site, state = pick_site(candidates, state, self.rng, n_sub_chunks=per_site, excluded=excluded)
            if site is None:
                break
            target = self.sites[site.site]
            limits = job_limits(ctx.live_options, site_limits(target), scout=ctx.scout, group_boundary_id=ctx.group_boundary_id,
                                defaults=defaults)
            room = per_site if max_jobs is None else min(per_site, max_jobs - len(plan))
            if site.n_free is not None:
                room = min(room, site.n_free - taken.get(site.site, 0))
                if room <= 0:
                    excluded.append(site.site)
                    full[site.site] = self._cap_reason(target, taken.get(site.site, 0))
                    continue
            result = split_at_site(chunk, limits, cursor, max_sub_chunks=room, refuse=lambda sub: refuse(target, sub))
            if result.refused is not None:
                excluded.append(site.site)
                refused[site.site] = result.refused
            if not result.sub_chunks:
                if result.refused is None:
                    excluded.append(site.site)
                if result.short_dropped:
                    break
                continue
            plan.extend((target, sub) for sub in result.sub_chunks)
            taken[site.site] = taken.get(site.site, 0) + len(result.sub_chunks)
            cursor = result.cursor
            if result.short_dropped:
                break
        return plan, excluded, refused, full

    def _job_priority(self) -> int:
        """The priority the generator gives this task's jobs (scouts: max(901, task priority + 1))."""
        return job_priority(self.context.requirements.priority, self.context.scout, False, self.settings.brokerage.scout_priority_floor, 0)

    def _cap_reason(self, site: Any, taken: int) -> str:
        """The cap that stops `site` once `taken` more jobs of this chunk are counted (for the reason)."""
        label, priority = self.context.requirements.prod_source_label, self._job_priority()
        now = self.loads.get(site.name, SiteLoad()).slots.with_pending(label, taken, priority)
        decision = site_slots.slot_decision(site, label, priority, merge=False, settings=self.settings.throttle, now=now,
                                            at_start=self.start_loads.get(site.name, SiteLoad()).slots)
        return site_slots.cap_message(decision) if not decision.allowed else f"site caps: {taken} jobs filled its free slots"

    def _count(self, site: str, n_jobs: int, priority: int, n_assigned: int = 0) -> None:
        """Jobs made in this pass count as activated (or assigned, when they wait for input) at their site
        for the next brokerage, and as pending jobs of the task's type against the site's caps."""
        load = self.loads.get(site, SiteLoad())
        slots = load.slots.with_pending(self.context.requirements.prod_source_label, n_jobs, priority)
        counts = dataclasses.replace(load.counts, activated=load.counts.activated + n_jobs - n_assigned,
                                     assigned=load.counts.assigned + n_assigned)
        self.loads[site] = dataclasses.replace(load, counts=counts, slots=slots)

    # --------------------------------------------------------------------------- the task

    def _renew(self, conn: Any) -> None:
        """Before each chunk: still ours and still a generator's task (a command may have moved it),
        the lease extended from the current moment of the pass."""
        task_leases.renew(conn, self.task_id, self.owner, self.pass_clock.current(), self.settings.lease.seconds, GENERATOR_STATUSES)

    def _started(self, conn: Any, count: int) -> None:
        """Jobs just written in this transaction move the task on (`scouting` or `running`) in the same
        transaction. A generator killed between a chunk's commit and its final write must not leave a
        `ready` task with jobs: nothing would ever move it to scouting, so no avalanche would release the
        rest of its input, and finalize would end it at the scouts' release (the chaos test found a task
        `finished` at 10/20 that way)."""
        new = self._target()
        if self.status_now == new.value:
            return
        if not task_store.change_status(conn, self.task_id, new, GENERATOR_STATUSES, f"{count} jobs generated", self.owner, self.now,
                                        owner=self.owner, frozen_at=None):
            raise LeaseLost(f"task {self.task_id} changed while generating")
        self.status_now = new.value

    def _target(self) -> TaskStatus:
        """Where jobs take the task: `scouting` while its scouts are being made, `preprocessing` once its
        preprocess job is made, else `running`."""
        if self.context.preprocess:
            return TaskStatus.PREPROCESSING
        return TaskStatus.SCOUTING if self.context.scout else TaskStatus.RUNNING

    def _finish(self, made: int, reason: str | None) -> tuple[int, str, str | None]:
        with self.store.begin() as conn:
            release = {"lease_owner": None, "lease_expires_at": None}
            if made:
                new = self._target()
                if not task_store.change_status(conn, self.task_id, new, GENERATOR_STATUSES,
                                                f"{made} jobs generated" if new.value != self.status_now else None,
                                                self.owner, self.now, owner=self.owner, error_dialog=reason, frozen_at=None, **release):
                    # Not ours any more, or moved on: the caller releases the lease if we still hold it.
                    raise LeaseLost(f"task {self.task_id} changed while generating ({made} jobs made)")
            else:
                task_leases.release(conn, self.task_id, self.owner)
        return made, ("generated" if made else "nothing"), reason

    def _pending(self, reason: str) -> tuple[int, str, str | None]:
        with self.store.begin() as conn:
            moved = task_store.change_status(
                conn, self.task_id, TaskStatus.PENDING, GENERATOR_STATUSES, reason, self.owner, self.now, owner=self.owner,
                # "pending since" survives a re-pend: the 7-day timeout counts from the first time.
                old_status=self.context.status, error_dialog=reason, frozen_at=self.context.task.frozen_at or self.now,
                wait_until=self.now + timedelta(minutes=self.settings.watchdog.wait_for_pending_minutes),
                lease_owner=None, lease_expires_at=None)
        if not moved:
            raise LeaseLost(f"task {self.task_id} changed while generating")
        return 0, "pending", reason


def whole_boundaries(rows: list[Any]) -> list[Any]:
    """Claimed rows without the run of the last boundary (CLAIM_COLUMNS[7]), unless it is every row."""
    last = rows[-1][7]
    end = len(rows)
    while end > 0 and rows[end - 1][7] == last:
        end -= 1
    return rows[:end] if end else rows


def _input_file(row: Any) -> InputFile:
    """A splitter record from a claimed row (CLAIM_COLUMNS starts with InputFile's first ten fields)."""
    if row[2] is None:
        return InputFile(row[0], row[1], 0, *row[3:10])
    return InputFile(*row[:10])


def _brokerage_records(rows: list[Any], ctx: TaskContext) -> list[tuple[Any, ...]]:
    names = {d.id: d.name for d in ctx.masters}
    return [(row[1], row[2], row[3], names[row[9]]) for row in rows]

