"""The Contents Feeder's pure rules (jedi-inventory.md §4.2-4.3): which catalog files a dataset takes,
how they become file records (whole files or event ranges), how many are released, and what happens
to the task.

Records are streamed: filtering and expansion are generators over catalog batches, so a 1,000,000-file
dataset is fed in constant memory apart from the keys needed to skip records that already exist.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple

from jedictl.engine.catalogs.data import CatalogFile


class Record(NamedTuple):
    """One row for the `files` table (the columns the feeder sets).

    `n_events` is the whole file's count even on an event-range record (JEDI's convention: the
    splitter needs it to share the file's size among its ranges); the events a record stands for are
    `end_event - start_event + 1` when it is a range (see `record_events`).
    """

    lfn: str
    guid: str | None
    scope: str | None
    size: int | None
    checksum: str | None
    n_events: int | None
    start_event: int | None
    end_event: int | None
    first_event: int | None
    lumi_block_nr: int | None


@dataclass(frozen=True)
class FeedSpec:
    """How one dataset of a task is fed; built from the task's options and the dataset's attributes."""

    is_master: bool
    keep_track: bool = True
    max_attempt: int | None = 3
    max_failure: int | None = None
    n_events_per_file: int | None = None  # nEventsPerInputFile: every file's count, unless use_real_num_events
    use_real_num_events: bool = False  # useRealNumEvents: the catalog's count wins (nEventsPerInputFile only when it has none)
    n_events_per_job: int | None = None  # event-level splitting: records of this many events
    tgt_num_events_per_job: int | None = None  # split each file into ~equal ranges near this
    first_event_base: int = 1  # ${FIRSTEVENT} of the first record: 1 + firstEvent offset
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # an explicit file list: only these, in this order
    offset: int = 0  # skip the first n files
    max_files: int | None = None  # nFiles cap (unique file names)
    max_events: int | None = None  # nEvents cap
    random_order: bool = False
    order_by_lb: bool = False
    respect_lb: bool = False
    skip_short_input: bool = False
    shuffle_seed: int = 0
    events_alignment: bool = False  # orderInputBy=eventsAlignment: files whose events fill whole jobs first
    #: skipFilesUsedBy: files (and event ranges) other tasks already processed
    skip_lfns: frozenset[str] = frozenset()
    skip_ranges: frozenset[tuple[str, int, int]] = frozenset()

    def events_of(self, file: CatalogFile) -> int | None:
        """A file's events as JEDI's feeder takes them: nEventsPerInputFile when the task gives it (the
        catalog's count only with useRealNumEvents), else the catalog's."""
        if self.n_events_per_file and not (self.use_real_num_events and file.n_events is not None):
            return self.n_events_per_file
        return file.n_events

    @property
    def event_level(self) -> bool:
        return bool(self.n_events_per_job or self.tgt_num_events_per_job)

    @property
    def needs_whole_list(self) -> bool:
        """Orderings that cannot be streamed: the file list is materialised first."""
        return self.random_order or self.order_by_lb or self.events_alignment or bool(self.files)


def select_files(batches: Iterable[list[CatalogFile]], spec: FeedSpec) -> Iterator[CatalogFile]:
    """Catalog files after include/exclude, the explicit list, ordering and the offset (LFN order by default)."""
    include = [re.compile(p) for p in spec.include]
    exclude = [re.compile(p) for p in spec.exclude]

    def wanted(file: CatalogFile) -> bool:
        if file.lfn in spec.skip_lfns:
            return False
        if include and not any(p.search(file.lfn) for p in include):
            return False
        return not any(p.search(file.lfn) for p in exclude)

    stream: Iterable[CatalogFile] = (f for batch in batches for f in batch if wanted(f))
    if spec.needs_whole_list:
        files = list(stream)
        if spec.files:
            by_name = {f.lfn: f for f in files}
            files = [by_name[lfn] for lfn in spec.files if lfn in by_name]
        elif spec.order_by_lb:
            files.sort(key=lambda f: (min(f.lumi_blocks) if f.lumi_blocks else -1, f.lfn))
        elif spec.events_alignment:
            files.sort(key=lambda f: events_alignment_key(f, spec))
        if spec.random_order:
            random.Random(spec.shuffle_seed).shuffle(files)
        stream = files
    skipped = 0
    for file in stream:
        if skipped < spec.offset:
            skipped += 1
            continue
        yield file


def copyable(spec: FeedSpec) -> bool:
    """Whether `expand(select_files(...))` makes one record per catalog file, in LFN order, with nothing
    but the file's own values, nEventsPerInputFile, the running ${FIRSTEVENT} and the nFiles cap: then a
    catalog inside the store can write the records itself (StoreDataCatalog.copy_records)."""
    return not (spec.event_level or spec.needs_whole_list or spec.include or spec.exclude or spec.offset or spec.skip_lfns
                or spec.skip_ranges or spec.max_events is not None or spec.skip_short_input)


def events_alignment_key(file: CatalogFile, spec: FeedSpec) -> tuple[int, int, str]:
    """JEDI's eventsAlignment order (insertFilesForDataset_JEDI): files whose event count is a multiple of
    nEventsPerJob first, then by descending events, then by name -- so whole jobs come before short ones."""
    events = spec.events_of(file) or 0
    per_job = spec.n_events_per_job or 0
    aligned = bool(per_job) and events > 0 and events % per_job == 0
    return (0 if aligned else 1, -events, file.lfn)


def expand(files: Iterable[CatalogFile], spec: FeedSpec, next_first_event: int) -> Iterator[Record]:
    """File records: one per file, or one per event range when splitting at event level.

    `next_first_event` continues the task-wide ${FIRSTEVENT} numbering (it starts at
    `spec.first_event_base`). Stops at the nFiles / nEvents caps.
    """
    first_event = next_first_event
    n_files = 0
    n_events_total = 0
    for file in files:
        if spec.max_files is not None and n_files >= spec.max_files:
            return
        events = spec.events_of(file)
        lumi = file.lumi_blocks[0] if file.lumi_blocks else None
        if spec.max_events is not None and events:
            room = spec.max_events - n_events_total
            if room <= 0:
                return
            events = min(events, room)
        if spec.event_level and events:
            ranges = event_ranges(events, spec.n_events_per_job, spec.tgt_num_events_per_job, spec.skip_short_input)
            if not ranges:
                continue
            for start, end in ranges:
                if (file.lfn, start, end) in spec.skip_ranges:
                    continue  # skipFilesUsedBy: another task processed this range
                # As in JEDI, n_events stays the whole file's count; the range is start..end.
                yield Record(file.lfn, file.guid, file.scope, file.size, file.checksum, events, start, end, first_event, lumi)
                first_event += end - start + 1
        else:
            if spec.skip_short_input and spec.n_events_per_file and (events or 0) < spec.n_events_per_file:
                continue
            yield Record(file.lfn, file.guid, file.scope, file.size, file.checksum, events, None, None,
                         first_event if events is not None else None, lumi)
            first_event += events or 0
        n_files += 1
        n_events_total += events or 0


def record_events(n_events: int | None, start_event: int | None, end_event: int | None) -> int:
    """The events one record stands for: its range, or the whole file."""
    if start_event is not None and end_event is not None:
        return end_event - start_event + 1
    return n_events or 0


def event_ranges(n_events: int, per_job: int | None, target: int | None, skip_short: bool) -> list[tuple[int, int]]:
    """Consecutive inclusive ranges [start, end] (0-based within the file).

    With a target size JEDI cuts the file into ceil(n/target) near-equal ranges; otherwise into ranges of
    `per_job` events with a short last one (dropped with skipShortInput).
    """
    if target:
        pieces = max(1, math.ceil(n_events / target))
        size = math.ceil(n_events / pieces)
    else:
        size = per_job or n_events
    ranges = [(start, min(start + size, n_events) - 1) for start in range(0, n_events, size)]
    if skip_short and not target and ranges and ranges[-1][1] - ranges[-1][0] + 1 < size:
        ranges.pop()
    return ranges


def pseudo_records(n_events: int | None, n_jobs: int | None, spec: FeedSpec) -> list[Record]:
    """The master of a no-input task: one logical file of nEvents events, split like a real one, or
    nFiles single-unit records when only the number of jobs is known."""
    if n_events:
        # The pseudo file holds nEvents whatever nEventsPerInputFile says (that is about real input files).
        whole = dataclasses.replace(spec, n_events_per_file=None, use_real_num_events=False)
        return list(expand([CatalogFile("pseudo_lfn", n_events=n_events)], whole, spec.first_event_base))
    return [Record("pseudo_lfn", None, None, None, None, 1, index, index, spec.first_event_base + index, None) for index in range(n_jobs or 1)]


def seq_number_count(num_records: int | None, n_files: int | None, n_events: int | None, n_events_per_job: int | None,
                     n_events_per_file: int | None, n_files_per_job: int | None, master_files: int, default: int) -> int:
    """How many sequence numbers a seq_number dataset holds (jedi-inventory §4.2)."""
    if num_records:
        return num_records
    if n_files:
        return n_files
    if n_events and n_events_per_job:
        return math.ceil(n_events / n_events_per_job)
    if n_events and n_events_per_file and n_files_per_job:
        return math.ceil(n_events / n_events_per_file / n_files_per_job)
    return max(default, master_files)


def seq_records(count: int, offset: int) -> list[Record]:
    return [Record(str(number), None, None, None, None, None, None, None, None, None) for number in range(offset + 1, offset + count + 1)]


def scout_budget(n_chunks: int, files_per_chunk: int | None) -> int:
    """Records released while a task scouts: 10 chunks' worth (one record per chunk by default)."""
    return n_chunks * (files_per_chunk or 1)


def release_count(usable: int, budget: int | None, bunch: int | None, closed: bool) -> int:
    """nFilesToBeUsed: everything usable, at most `budget` while scouting; for a growing (mutable)
    input only whole bunches of `bunch` records until the input is closed."""
    count = usable if budget is None else min(usable, budget)
    if bunch and not closed:
        count = (count // bunch) * bunch
    return count


@dataclass(frozen=True)
class DatasetFeed:
    """What feeding one dataset found, for the task-level decision."""

    name: str
    is_master: bool
    missing: bool = False
    state: str = "closed"  # the catalog's: open | closed (pseudo datasets are closed)
    mutable: bool = False
    usable: int = 0  # records not lost


@dataclass(frozen=True)
class TaskOutcome:
    status: str  # ready | assigning | pending | defined | broken | finishing
    reason: str | None = None
    times_out: bool = True  # pending that the watchdog may time out (frozen); a wait for a parent does not


def task_outcome(feeds: list[DatasetFeed], needs_nucleus: bool, allow_empty_input: bool, parent_running: bool,
                 wait_input: bool = False) -> TaskOutcome:
    """jedi-inventory §4.3: where the task goes once its datasets are fed.

    An input the catalog does not know is JEDI's UnknownDatasetError (§3.2 step 6, seed 000 "Broken
    tasks"): the task waits only for a running parent or when the user asked to (`waitInput`/`noWaitParent`);
    with `allowEmptyInput` it finishes; otherwise it is broken -- waiting would only exhaust it after 7 days.
    """
    for feed in feeds:
        if feed.missing:
            if parent_running:
                return TaskOutcome("pending", f"waiting for input dataset {feed.name} from the running parent task", times_out=False)
            if wait_input:
                return TaskOutcome("pending", f"input dataset {feed.name} is not in the data catalog (waiting for it: waitInput)")
            if allow_empty_input:
                return TaskOutcome("finishing", f"input dataset {feed.name} is not in the data catalog (allowEmptyInput)")
            return TaskOutcome("broken", f"input dataset {feed.name} is unknown to the data catalog")
    masters = [f for f in feeds if f.is_master]
    for feed in masters:
        if feed.state == "open" and not feed.mutable:
            return TaskOutcome("defined", f"waiting for input dataset {feed.name} to be closed")
    if masters and sum(f.usable for f in masters) == 0:
        if any(f.mutable for f in masters):
            return TaskOutcome("pending", "waiting for files in the growing input", times_out=False)
        if allow_empty_input:
            return TaskOutcome("finishing", "the input is empty (allowEmptyInput)")
        return TaskOutcome("broken", "primary input dataset is empty or all files are excluded")
    return TaskOutcome("assigning" if needs_nucleus else "ready")
