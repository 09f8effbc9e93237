"""The values JEDI's splitter works on: file records, the claimed input chunk, the effective limits of
one job, and the sub-chunks (future jobs) it returns.

These are the shapes of jedi-inventory.md §2 (dataset contents rows), §6.3 (the input chunk a generator
claims: one master dataset plus its secondaries) and §6.6 (the limits `getSubChunk` stops before).
Agents load rows into them; `jedi.py` decides; nothing here touches a store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from jedictl.engine.task.definition import DatasetAttributes

MB = 1024 * 1024
GB = 1024 * MB

#: Split-rule GB=1/2: a job never mixes two boundaryIDs; every other limit still applies.
BOUNDARY_SPLIT = "split"
#: Split-rule GB=3/4: one boundaryID per job and only a boundary change ends a job.
BOUNDARY_WHOLE = "whole"
#: Merge jobs: many boundaryIDs per job (secondaries still follow the masters' boundaryIDs).
BOUNDARY_MANY = "many"
BOUNDARY_MODES = (BOUNDARY_SPLIT, BOUNDARY_WHOLE, BOUNDARY_MANY)


class InputFile(NamedTuple):
    """One file record (a `JEDI_Dataset_Contents` row). An event-split file is several records with
    the same `lfn` and consecutive `start_event`/`end_event` (inclusive, 0-based within the file).

    `n_events` is the number of events of the *whole file* (JEDI's nEvents), also on range records:
    the effective size of a range is size x range / n_events, and a range ending at n_events - 1 lets
    the next file's range starting at 0 continue the same job (§6.6, contiguous event ranges).

    An immutable NamedTuple rather than a frozen dataclass: the generator builds one per claimed file
    (a million in the benchmark) and a frozen dataclass costs more than twice as much to construct.
    """

    file_id: int
    lfn: str
    size: int = 0  # bytes of the whole file
    n_events: int | None = None
    start_event: int | None = None
    end_event: int | None = None
    first_event: int | None = None  # task-wide ${FIRSTEVENT} numbering, carried for the generator
    boundary_id: int | None = None
    lumi_block: int | None = None
    dataset_id: int | None = None
    locations: tuple[str, ...] = ()

    @property
    def is_range(self) -> bool:
        return self.start_event is not None and self.end_event is not None

    @property
    def effective_events(self) -> int:
        """Events this record stands for: its range, else the file's events, else 0."""
        if self.start_event is not None and self.end_event is not None:
            return max(self.end_event - self.start_event + 1, 0)
        return self.n_events or 0


@dataclass(frozen=True)
class SecondaryInput:
    """A secondary dataset of the chunk and the attributes that say how its files join a job (§2 tokens)."""

    dataset_id: int
    files: tuple[InputFile, ...]
    ratio: float = 1  # secondary files per master file; a float ratio is rounded up (JEDI getNumMultByRatio)
    nosplit: bool = False  # every job gets all files
    repeat: bool = False  # the cursor wraps around after each job
    n_files_per_job: int | None = None  # np=: this many files per job, taken with the first master group
    reusable: bool = False  # ru: rewind to the first file when too few are left
    event_ratio: float | None = None  # er=: secondary events per master event

    @classmethod
    def from_attributes(cls, dataset_id: int, files: tuple[InputFile, ...], attributes: DatasetAttributes) -> SecondaryInput:
        return cls(
            dataset_id=dataset_id,
            files=files,
            ratio=attributes.ratio if attributes.ratio is not None else 1,
            nosplit=attributes.nosplit,
            repeat=attributes.repeat,
            n_files_per_job=attributes.n_files_per_job,
            # A many-time input whose files join by ratio is read over and over: rewound like a reusable one.
            reusable=attributes.reusable or (attributes.is_many_time and not (attributes.nosplit or attributes.repeat)),
            event_ratio=attributes.event_ratio,
        )


@dataclass(frozen=True)
class InputChunk:
    """What the generator claimed for one task and one RAM group: the master's records in read order
    (fileID, or lumiblock+LFN with respectLB/orderByLB) and the secondaries' records (§6.3)."""

    master: tuple[InputFile, ...]
    secondaries: tuple[SecondaryInput, ...] = ()


@dataclass(frozen=True)
class JobLimits:
    """The effective limits of one job at one site: what `getSubChunk` stops before (§6.6).

    Sizes are bytes, walltimes seconds; None means "no limit". Build it with
    `jedi_limits.job_limits()` from the task options, the site and the JEDI defaults.
    """

    site: str | None = None
    n_files_per_job: int | None = None  # NF: exactly this many master records (one group) per job
    n_events_per_job: int | None = None  # NE: a job with fewer events is "short"
    max_files: int | None = 200  # MF (or NF/ZM)
    max_events: int | None = None  # NE, or maxEventsPerJob when NE is not given
    max_size: int | None = None  # input + output estimate + intercept (NG, scratch disk, direct-IO caps)
    max_disk: int | None = None  # site scratch disk: input (unless direct IO) + output estimate
    max_walltime: int | None = None  # maxWalltime hours or the site's maxtime
    max_out_size: int | None = None  # largest estimated output of one dataset (10 GB; merge ZG / 5 GB)
    hard_max_files: int = 1000  # all input records of a job, secondaries included
    min_out_size: int = 1500 * MB  # default output reserved inside max_size when the estimate is smaller
    size_gradient: float = 0.0  # output bytes per input byte (or per event, see gradient_per_event)
    gradient_per_event: bool = False  # outDiskUnit ...PerEvent
    size_gradient_per_in_size: float | None = None  # merge jobs: 1.2 x input
    size_intercept: int = 0  # work disk + 300 MB margin (merge: at least 500 MB), once per job
    walltime_gradient: float = 0.0  # s per MB of input, or HS06 s per event with use_hs06
    use_hs06: bool = False
    base_walltime: int = 0
    cpu_efficiency: int = 100  # percent
    core_count: int = 1
    core_power: float | None = None
    direct_io: bool = False
    boundary_mode: str | None = None  # BOUNDARY_SPLIT | BOUNDARY_WHOLE | BOUNDARY_MANY
    respect_lb: bool = False
    split_by_fields: tuple[int, ...] | None = None  # AN+UF: LFN fields (1-based) a job must share
    skip_short_output: bool = False


@dataclass(frozen=True)
class SplitCursor:
    """How far the chunk has been split: records used of the master and of each secondary."""

    master: int = 0
    secondaries: tuple[int, ...] = ()


START = SplitCursor()


@dataclass(frozen=True)
class SubChunk:
    """The input of one future job and what it is expected to need."""

    master: tuple[InputFile, ...]
    secondaries: tuple[tuple[InputFile, ...], ...]  # by position in InputChunk.secondaries
    short: bool  # fewer events than NE or fewer files than NF
    n_events: int
    input_bytes: int  # distinct master files + secondary files
    estimated_bytes: int  # what max_size is compared with: input + output estimate + intercept
    disk_bytes: int  # what max_disk is compared with
    out_bytes: int  # largest estimated output of one dataset
    walltime: int  # expected seconds
    site: str | None = None

    @property
    def lfns(self) -> tuple[str, ...]:
        """Distinct master LFNs in order (the ranges of one file count once)."""
        seen: dict[str, None] = {}
        for record in self.master:
            seen.setdefault(record.lfn, None)
        return tuple(seen)

    @property
    def skip_events(self) -> int | None:
        """${SKIPEVENTS}: the first range's start, None when the job takes whole files."""
        first = self.master[0] if self.master else None
        return first.start_event if first is not None and first.is_range else None


@dataclass(frozen=True)
class SplitResult:
    sub_chunks: tuple[SubChunk, ...]
    cursor: SplitCursor
    #: a short sub-chunk was dropped (skipShortOutput); its records and all later ones stay unused
    short_dropped: bool = False
    #: why the site refused the next sub-chunk (split_at_site's `refuse`); it and later ones stay unused
    refused: str | None = None
