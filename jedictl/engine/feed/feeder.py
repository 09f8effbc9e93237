"""The Contents Feeder (jedi-inventory.md §4): turns a task's input datasets into file records.

A pass leases tasks that are `defined` with datasets to (re)scan, tasks whose open or growing inputs
are due for a re-scan, and tasks pending on a missing input whose wait is over. Each input dataset is
fed in its own transaction (renewing the lease), so a killed feeder leaves whole datasets behind and
the next pass continues; the database's unique file key makes a duplicate record impossible. Then the
task moves on: `ready`, `assigning` (its output destination must be chosen), `pending`, `broken`,
`finishing`, or it stays `defined` while its input is still open.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import Any, Callable, Collection, Iterable, Iterator

from jedictl.clock import PassClock
from jedictl.config import Settings
from jedictl.engine.agent import PassReport, leased_pass
from jedictl.engine.catalogs.data import CatalogFile, DataCatalog
from jedictl.engine.feed.records import (
    DatasetFeed,
    FeedSpec,
    Record,
    copyable,
    expand,
    pseudo_records,
    release_count,
    scout_budget,
    select_files,
    seq_number_count,
    seq_records,
    task_outcome,
)
from jedictl.engine.task.options import options_from_dict, skip_task_ids
from jedictl.engine.task.definition import DatasetAttributes
from jedictl.errors import LeaseLost
from jedictl.model import DatasetStatus, DatasetType, TaskStatus
from jedictl.store import datasets as dataset_store
from jedictl.store import files as file_store
from jedictl.store import task_leases
from jedictl.store import tasks as task_store
from jedictl.store import wmcore as wmcore_store
from jedictl.store.data_catalog import CopyTarget, StoreDataCatalog

FEEDABLE = (DatasetType.INPUT.value, DatasetType.PSEUDO_INPUT.value)
RESCANNED_STATES = ("open", "mutable")
RESCANNED_TASKS = (TaskStatus.DEFINED.value, TaskStatus.READY.value, TaskStatus.SCOUTING.value, TaskStatus.RUNNING.value)
NUCLEUS_LABELS = ("managed", "test")


def feed_pass(store: Any, settings: Settings, owner: str, now: datetime, limit: int | None = None,
              catalog_factory: Callable[[Any], DataCatalog] | None = None, task_ids: Collection[int] | None = None) -> PassReport:
    """One pass of the Contents Feeder. `catalog_factory(conn)` gives the DataCatalog (default: the store's);
    `task_ids` limits the pass to those of these tasks that are due (a message asked for them now)."""
    factory = catalog_factory or StoreDataCatalog
    due = now - timedelta(minutes=settings.feed.check_interval_minutes)
    candidates = task_leases.feed_candidates(now, due, FEEDABLE, RESCANNED_STATES, RESCANNED_TASKS)
    if task_ids is not None:
        candidates = task_leases.among(candidates, task_ids)
    pass_clock = PassClock(now)
    return leased_pass(
        store, PassReport("feed"), candidates, task_leases.BY_PRIORITY,
        lambda task_id: TaskFeeder(store, task_id, settings, owner, now, factory, pass_clock).run(),
        owner=owner, now=now, lease_seconds=settings.lease.seconds, limit=limit or settings.feed.limit,
        claim_batch=settings.feed.claim_batch,
    )


@dataclass
class _Budget:
    """Records the master datasets may still release while the task scouts (shared, as in JEDI)."""

    left: int | None


class TaskFeeder:
    """Feeds one leased task: every input dataset, then the task-level decision."""

    def __init__(self, store: Any, task_id: int, settings: Settings, owner: str, now: datetime, factory: Callable[[Any], DataCatalog],
                 pass_clock: PassClock | None = None):
        self.store, self.task_id, self.settings, self.owner, self.now, self.factory = store, task_id, settings, owner, now, factory
        self.pass_clock = pass_clock or PassClock(now)

    def run(self) -> tuple[str, str | None]:
        with self.store.begin() as conn:
            self.task = task_store.get_task(conn, self.task_id)
            rows = dataset_store.datasets_of(conn, self.task_id)
            self.parent_status = task_store.parent_status(conn, self.task.parent_id) if self.task.parent_id else None
            self.options = options_from_dict(self.task.options)
            # A WMCore-split task's algorithm decides itself what waits for a growing input (engine.generate.wmcore_tasks).
            self.wmcore = wmcore_store.splitting_of(conn, self.task_id) is not None
            used_by = skip_task_ids(self.options.skip_files_used_by)
            self.skip = file_store.processed_keys(conn, used_by) if used_by else (frozenset(), frozenset())
        rows = self._join_new_members(rows)
        inputs = sorted((d for d in rows if d.type in FEEDABLE), key=lambda d: (d.master_id is not None, d.stream_name == "SEQNUMBER", d.id))
        # Scouting happens once per task: a task sent back to `defined` after its avalanche (incexec, a
        # growing input) gets its whole input released, not the scouts' few chunks again.
        scouting = not self.options.skip_scout and not self.task.scouts_done and self.task.status != TaskStatus.RUNNING.value
        chunk = self.options.n_files_per_job or 1
        budget = _Budget(scout_budget(self.settings.feed.n_chunks_for_scout, chunk) if scouting else None)
        feeds: list[DatasetFeed] = []
        for dataset in inputs:
            with self.store.begin() as conn:
                # Still ours and still in the status read above (an operator's command may have moved it).
                task_leases.renew(conn, self.task_id, self.owner, self.pass_clock.current(), self.settings.lease.seconds,
                                  [self.task.status])
                feeds.extend(self._feed_dataset(conn, self.factory(conn), dataset, budget, feeds))
        needs_nucleus = self.task.prod_source_label in NUCLEUS_LABELS and not self.task.nucleus and any(
            d.type in (DatasetType.OUTPUT.value, DatasetType.LOG.value) and not d.destination for d in rows)
        outcome = task_outcome(feeds, needs_nucleus, bool(self.options.allow_empty_input), self._parent_running(),
                               wait_input=bool(self.options.wait_input or self.options.no_wait_parent))
        with self.store.begin() as conn:
            # Random seeds have no records until jobs draw them (generate); the dataset is ready now.
            for dataset in rows:
                if dataset.type == DatasetType.RANDOM_SEED.value and dataset.status == DatasetStatus.DEFINED.value:
                    self._update(conn, dataset.id, status=DatasetStatus.READY.value, state="closed", modified_at=self.now)
            return self._apply(conn, outcome)

    def _join_new_members(self, rows: list[Any]) -> list[Any]:
        """Datasets that joined an expanded container since it was expanded become rows of their own
        when its rows are to be read again (`toupdate`: incexec, a resubmission with the same outDS, a
        growing input), as JEDI's incexec expands the container again and appends the new datasets.
        Returns the task's datasets, those included."""
        containers: dict[str, Any] = {}
        for row in rows:
            if row.type in FEEDABLE and row.container_name and row.status == DatasetStatus.TOUPDATE.value:
                containers.setdefault(row.container_name, row)
        if not containers:
            return rows
        known = {row.name for row in rows}
        with self.store.begin() as conn:
            task_leases.renew(conn, self.task_id, self.owner, self.pass_clock.current(), self.settings.lease.seconds, [self.task.status])
            catalog = self.factory(conn)
            added = 0
            for container, like in sorted(containers.items()):
                info = catalog.dataset(container)
                if info is None or info.kind != "container":
                    continue
                for name in catalog.constituents(container):
                    if name not in known:
                        dataset_store.add_input_like(conn, like.id, name, self.now, container_name=container)
                        known.add(name)
                        added += 1
            return dataset_store.datasets_of(conn, self.task_id) if added else rows

    # ------------------------------------------------------------------------------ one dataset

    def _feed_dataset(self, conn: Any, catalog: DataCatalog, dataset: Any, budget: _Budget, fed: list[DatasetFeed]) -> list[DatasetFeed]:
        is_master = dataset.master_id is None
        if dataset.status not in (DatasetStatus.DEFINED.value, DatasetStatus.TOUPDATE.value) and dataset.state not in RESCANNED_STATES:
            return [DatasetFeed(dataset.name, is_master, state=dataset.state or "closed", usable=dataset.n_files)]
        spec = self._spec(dataset, is_master)
        if self.options.pfn_list and is_master:
            return [self._write(conn, dataset, spec, _pfn_records(self.options.pfn_list, spec), "closed", budget)]
        if dataset.type == DatasetType.PSEUDO_INPUT.value:
            return [self._write(conn, dataset, spec, self._pseudo(dataset, spec, fed), "closed", budget)]
        info = catalog.dataset(dataset.name)
        if info is None:
            self._update(conn, dataset.id, state="missing", state_checked_at=self.now)
            return [DatasetFeed(dataset.name, is_master, missing=True)]
        mutable = bool(self.options.run_until_closed) or (bool(self.options.no_wait_parent) and self._parent_running())
        results = []
        expanded = info.kind == "container" and DatasetAttributes.from_dict(dataset.attributes or {}).expand
        for row, names in self._resolve(conn, catalog, dataset, info):
            members = [catalog.dataset(name) for name in names]
            closed = all(m is not None and m.state == "closed" for m in members)
            if info.kind == "container" and not expanded:  # new datasets may still join an open container
                closed = closed and info.state == "closed"
            state = "closed" if closed else ("mutable" if mutable else "open")
            if self._copy_in_store(conn, catalog, row, spec, names):
                results.append(self._settle(conn, row, spec, state, budget))
                continue
            batches = chain.from_iterable(catalog.iter_files(name, self.settings.feed.batch_size) for name in names)
            results.append(self._write(conn, row, spec, batches, state, budget, from_catalog=True))
        return results

    def _spec(self, dataset: Any, is_master: bool) -> FeedSpec:
        o = self.options
        attributes = DatasetAttributes.from_dict(dataset.attributes or {})
        # A many-time secondary is read by many jobs, never consumed by one: its records are not tracked
        # (JEDI's toKeepTrack is false for reusable and nosplit+repeat; jedictl: every many-time input).
        untracked = not is_master and attributes.is_many_time
        max_attempt = None if untracked else (1 if o.disable_auto_retry else o.max_attempt or self.settings.feed.default_max_attempt)
        return FeedSpec(
            is_master=is_master, keep_track=not untracked, max_attempt=max_attempt, max_failure=None if untracked else o.max_failure,
            n_events_per_file=o.n_events_per_input_file, use_real_num_events=bool(o.use_real_num_events),
            n_events_per_job=o.n_events_per_job if is_master else None,
            tgt_num_events_per_job=o.tgt_num_events_per_job if is_master else None,
            first_event_base=1 + (o.first_event_offset or 0),
            include=attributes.include, exclude=attributes.exclude, files=attributes.files, offset=attributes.offset or 0,
            max_files=o.n_files if is_master else None, max_events=o.n_events if is_master else None,
            random_order=attributes.random_order, order_by_lb=bool(o.order_by_lb), respect_lb=bool(o.respect_lb),
            skip_short_input=bool(o.skip_short_input), shuffle_seed=self.task_id,
            events_alignment=is_master and o.order_input_by == "eventsAlignment",
            skip_lfns=self.skip[0] if is_master else frozenset(), skip_ranges=self.skip[1] if is_master else frozenset(),
        )

    def _pseudo(self, dataset: Any, spec: FeedSpec, fed: list[DatasetFeed]) -> list[Record]:
        o = self.options
        if dataset.stream_name == "SEQNUMBER" or dataset.name == "seq_number":
            attributes = DatasetAttributes.from_dict(dataset.attributes or {})
            master_records = sum(f.usable for f in fed if f.is_master)
            count = seq_number_count(attributes.num_records, o.n_files, o.n_events, o.n_events_per_job, o.n_events_per_input_file,
                                     o.n_files_per_job, master_records, self.settings.feed.seq_number_default)
            return seq_records(count, attributes.offset or 0)
        events_spec = replace(spec, n_events_per_job=o.n_events_per_job or o.n_events, max_events=None)
        return pseudo_records(o.n_events, o.n_files, events_spec)

    def _resolve(self, conn: Any, catalog: DataCatalog, dataset: Any, info: Any) -> list[tuple[Any, list[str]]]:
        """(dataset row, catalog datasets to read): a container is read whole, or expanded into rows."""
        if info.kind != "container":
            return [(dataset, [dataset.name])]
        members = catalog.constituents(dataset.name)
        attributes = DatasetAttributes.from_dict(dataset.attributes or {})
        if not attributes.expand:
            return [(dataset, members)]
        return [(row, [row.name]) for row in self._expand(conn, dataset, members)]

    def _expand(self, conn: Any, container: Any, members: list[str]) -> list[Any]:
        """Replace the container's row by one row per constituent dataset (JEDI's `expand`)."""
        siblings = {row.name: row for row in dataset_store.container_members(conn, self.task_id, container.name)}
        rows = []
        for name in members:
            if name in siblings:
                rows.append(siblings[name])
                continue
            values = {k: v for k, v in container._mapping.items() if k != "id"}
            values.update(name=name, container_name=container.name, status=DatasetStatus.DEFINED.value, created_at=self.now, modified_at=self.now)
            if not siblings and not rows:  # the container's own row becomes the first constituent
                self._update(conn, container.id, name=name, container_name=container.name)
                row = dataset_store.get_dataset(conn, container.id)
            else:
                row = dataset_store.insert_dataset(conn, values)
            rows.append(row)
        return rows

    def _write(self, conn: Any, dataset: Any, spec: FeedSpec, source: Iterable[Any], state: str, budget: _Budget,
               from_catalog: bool = False) -> DatasetFeed:
        """Insert the new records of one dataset, mark vanished ones lost, and set its counters."""
        has_rows = bool(dataset.n_files or dataset.n_files_missing)
        existing = file_store.existing_keys(conn, dataset.id) if has_rows else {}
        listed: set[str] | None = set() if (has_rows and from_catalog) else None
        if from_catalog:
            batches = _recording(source, listed) if listed is not None else source
            first_event = file_store.next_first_event(conn, dataset.id, spec.first_event_base) if has_rows else spec.first_event_base
            records: Iterator[Record] = expand(select_files(batches, spec), spec, first_event)
        else:
            records = iter(source)
        fresh = (r for r in records if (r.lfn, r.start_event, r.end_event) not in existing)
        while True:
            batch = list(islice(fresh, self.settings.feed.batch_size))
            if not batch:
                break
            file_store.insert_records(conn, self.task_id, dataset.id, dataset.type, batch, "ready", spec.max_attempt,
                                      spec.max_failure, spec.keep_track, self.now)
        if listed is not None:
            vanished = sorted({key[0] for key, status in existing.items() if status in file_store.UNUSED and key[0] not in listed})
            file_store.mark_lost(conn, dataset.id, vanished)
        return self._settle(conn, dataset, spec, state, budget)

    def _copy_in_store(self, conn: Any, catalog: DataCatalog, dataset: Any, spec: FeedSpec, names: list[str]) -> bool:
        """The first feed of a dataset from a catalog inside the store, for a spec whose records are the
        catalog's files one for one (records.copyable): one `INSERT ... SELECT` per catalog dataset, no
        row through Python (issue 18: the streamed path spent as long in Python as in the database).
        False when it does not apply; the streamed path then does the work."""
        copy = getattr(catalog, "copy_records", None)
        if copy is None or dataset.n_files or dataset.n_files_missing or not copyable(spec):
            return False
        first_event, left = spec.first_event_base, spec.max_files
        for index, name in enumerate(names):
            written = copy(name, CopyTarget(
                task_id=self.task_id, dataset_id=dataset.id, type=dataset.type, status="ready", max_attempt=spec.max_attempt,
                max_failure=spec.max_failure, keep_track=spec.keep_track, first_event=first_event, created_at=self.now,
                events_per_file=spec.n_events_per_file, use_real_num_events=spec.use_real_num_events, max_files=left))
            if left is not None:
                left -= written
                if left <= 0:
                    break
            if written and index + 1 < len(names):  # the ${FIRSTEVENT} numbering runs on across a container's datasets
                first_event = file_store.next_first_event(conn, dataset.id, spec.first_event_base)
        return True

    def _settle(self, conn: Any, dataset: Any, spec: FeedSpec, state: str, budget: _Budget) -> DatasetFeed:
        """A dataset's counters and release once its records are written."""
        counts = file_store.count_records(conn, dataset.id)
        released = self._released(spec, counts.records, dataset.n_files_used, state, budget)
        self._update(conn, dataset.id, status=DatasetStatus.READY.value, state=state, state_checked_at=self.now,
                     n_files=counts.records, n_files_missing=counts.lost, n_events=counts.events,
                     n_files_to_be_used=max(released, dataset.n_files_used), n_events_to_be_used=_events_of_first(conn, dataset.id, released, counts),
                     modified_at=self.now)
        return DatasetFeed(dataset.name, spec.is_master, state="closed" if state == "closed" else "open", mutable=state == "mutable", usable=counts.records)

    def _released(self, spec: FeedSpec, usable: int, used: int, state: str, budget: _Budget) -> int:
        """nFilesToBeUsed: secondaries release everything; masters follow scouts and growing inputs.

        Scouts are released on top of the records already used: a task asked to scout again (`incexec
        --rescout`) gets its scouts' chunks of the records it has not processed yet."""
        if not spec.is_master:
            return usable
        if state == "open":
            return 0  # a task waits while its input is still open (unless it runs until the input closes)
        chunk = self.options.n_files_per_job or 1
        # A growing input is released in whole bunches: 10 chunks while scouting, else nChunksToWait.
        chunks = self.settings.feed.n_chunks_for_scout if budget.left is not None else self.settings.feed.n_chunks_to_wait
        bunch = chunks * chunk if state == "mutable" and not self.wmcore else None
        if budget.left is None:
            return release_count(usable, None, bunch, closed=state == "closed")
        scouts = release_count(max(usable - used, 0), budget.left, bunch, closed=state == "closed")
        budget.left = max(0, budget.left - scouts)
        return used + scouts

    # ------------------------------------------------------------------------------ the task

    def _parent_running(self) -> bool:
        return self.parent_status is not None and self.parent_status not in (
            TaskStatus.DONE.value, TaskStatus.FINISHED.value, TaskStatus.FAILED.value, TaskStatus.BROKEN.value, TaskStatus.ABORTED.value)

    def _apply(self, conn: Any, outcome: Any) -> tuple[str, str | None]:
        task, now, release = self.task, self.now, {"lease_owner": None, "lease_expires_at": None}
        if task.status not in (TaskStatus.DEFINED.value, TaskStatus.PENDING.value):
            task_leases.release(conn, self.task_id, self.owner)  # a running task was only re-scanned
            return "rescanned", None
        expected = [TaskStatus.DEFINED, TaskStatus.PENDING]
        if outcome.status in (TaskStatus.READY.value, TaskStatus.ASSIGNING.value):
            moved = task_store.change_status(conn, self.task_id, outcome.status, expected, "contents fed", self.owner, now, owner=self.owner,
                                             old_status=None, error_dialog=None, frozen_at=None, wait_until=None, **release)
        elif outcome.status == TaskStatus.PENDING.value:
            wait_until = now + timedelta(minutes=self.settings.watchdog.wait_for_pending_minutes)
            frozen = (task.frozen_at or now) if outcome.times_out else None
            if task.status == TaskStatus.PENDING.value and task.error_dialog == outcome.reason:
                moved = task_store.update_leased(conn, self.task_id, self.owner, [task.status], wait_until=wait_until, modified_at=now,
                                                 **release)
            else:
                moved = task_store.change_status(conn, self.task_id, TaskStatus.PENDING, expected, outcome.reason, self.owner, now, owner=self.owner,
                                                 old_status=TaskStatus.DEFINED.value, error_dialog=outcome.reason, frozen_at=frozen,
                                                 wait_until=wait_until, **release)
        elif outcome.status == TaskStatus.DEFINED.value:  # waiting for an open input: no history line per scan
            moved = task_store.update_leased(conn, self.task_id, self.owner, [task.status], status=TaskStatus.DEFINED.value,
                                             error_dialog=outcome.reason, modified_at=now, **release)
            if moved and task.status != TaskStatus.DEFINED.value:
                task_store.record_status(conn, self.task_id, TaskStatus.DEFINED, task.status, outcome.reason, self.owner, now)
        else:  # broken | finishing
            moved = task_store.change_status(conn, self.task_id, outcome.status, expected, outcome.reason, self.owner, now, owner=self.owner,
                                             error_dialog=outcome.reason, **release)
        if not moved:
            raise LeaseLost(f"task {self.task_id} changed while being fed")
        return outcome.status, outcome.reason

    def _update(self, conn: Any, dataset_id: int, **values: Any) -> None:
        file_store.update_dataset(conn, dataset_id, **values)


def _recording(batches: Iterable[list[CatalogFile]], listed: set[str]) -> Iterator[list[CatalogFile]]:
    """Pass catalog batches through, remembering every listed LFN (to find files that vanished)."""
    for batch in batches:
        listed.update(f.lfn for f in batch)
        yield batch


def _pfn_records(pfns: list[str], spec: FeedSpec) -> list[Record]:
    """pfnList inputs: one record per URL named NNNNNN:basename; a `^N` suffix gives N events."""
    records = []
    first_event = spec.first_event_base
    for index, pfn in enumerate(pfns[: spec.max_files] if spec.max_files else pfns, start=1):
        url, _, events_text = pfn.partition("^")
        events = int(events_text) if events_text.isdigit() else None
        records.append(Record(f"{index:06d}:{url.rstrip('/').rsplit('/', 1)[-1]}", None, None, None, None, events, None, None,
                              first_event if events else None, None))
        first_event += events or 0
    return records


def _events_of_first(conn: Any, dataset_id: int, released: int, counts: Any) -> int:
    """Events of the first `released` usable records (what nEventsToBeUsed counts)."""
    if released >= counts.records:
        return counts.events
    if released == 0:
        return 0
    return file_store.events_of_first(conn, dataset_id, released)
