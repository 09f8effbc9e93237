"""What WMCore's splitting algorithms share: the fileset, the planned job, grouping by location set,
the run/lumi mask, and the JobFactory's site lists (peers.md §1.4 "common behaviour", seed 004).

A job's possible sites are its first file's locations intersected with the site whitelist and minus
the blacklist (with `trustSitelists`, every file counts as being in one place and the sites are the
whitelist minus the blacklist). A job with no possible site is failed on creation, as JobCreator's
`createfailed` jobs are, with WMCore's error code 71101 and its text (JobFactory.commit); that
overrides any other reason the algorithm gave the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from jedictl.errors import BadInput


def param(default: Any, help: str, wmcore: str = "", minimum: float | None = None, separator: str = ",") -> Any:
    """A splitter parameter: its WMCore default, one line of help, WMCore's spelling when the field
    name differs from it, a lower bound, and what separates list items given as text."""
    return field(default=default, metadata={"help": help, "wmcore": wmcore, "minimum": minimum, "separator": separator})


RunLumis = tuple[tuple[int, tuple[int, ...]], ...]  # ((run, (lumi, ...)), ...) sorted by run, lumis sorted
LumiRanges = tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # ((run, ((first, last), ...)), ...)
LumiMask = dict[int, list[tuple[int, int]]]  # good (run, lumi ranges) of a `runs` + `lumis` mask


@dataclass(frozen=True)
class WMFile:
    """One available file of the fileset (WMBS file with its runs and lumis)."""

    lfn: str
    size: int = 0
    events: int = 0
    locations: tuple[str, ...] = ()
    runs: RunLumis = ()
    first_event: int = 0
    insert_time: float | None = None  # epoch seconds it joined the fileset (merge max_wait_time)
    boundary_id: int | None = None  # only read by the `jedi` algorithm
    lumi_block: int | None = None  # only read by the `jedi` algorithm
    parents: tuple[str, ...] = ()  # parent LFNs (WMCore findParent: the merged ancestors), for include_parents

    @property
    def min_run(self) -> int | None:
        return self.runs[0][0] if self.runs else None

    @property
    def lumi_count(self) -> int:
        return sum(len(lumis) for _run, lumis in self.runs)

    @property
    def avg_events_per_lumi(self) -> int:
        """round(events / lumis), as WMCore computes it per file (0 without lumis)."""
        count = self.lumi_count
        return round(self.events / count) if count else 0


def wm_file(lfn: str, size: int = 0, events: int = 0, locations: Iterable[str] = (),
            runs: Mapping[int, Iterable[int]] | None = None, **extra: object) -> WMFile:
    """A WMFile with its runs sorted by run number and each run's lumis sorted (WMCore sorts both)."""
    normalised = tuple((run, tuple(sorted(lumis))) for run, lumis in sorted((runs or {}).items()))
    return WMFile(lfn, size, events, tuple(locations), normalised, **extra)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Fileset:
    files: tuple[WMFile, ...]
    closed: bool = True


@dataclass(frozen=True)
class PlannedJob:
    """One job as `jedictl split` prints it (the fixed JSON contract) plus what a human wants to see."""

    files: tuple[str, ...]
    first_event: int | None = None  # inclusive; None when the job takes whole files
    last_event: int | None = None
    lumis: LumiRanges | None = None  # inclusive lumi ranges per run; None without a run/lumi mask
    locations: tuple[str, ...] = ()
    failed: bool = False  # failed on creation
    failed_reason: str | None = None
    short: bool = False  # jedi: fewer files/events than asked
    failed_code: int | None = None  # WMCore's failedErrCode of a job failed on creation (71101, 99305)
    parents: tuple[str, ...] = ()  # include_parents: the parent LFNs of the job's files, in file order
    group: int | None = None  # WMCore's job group, numbered from 1 in the order made; None for `jedi` (JEDI has none)

    def as_contract(self) -> dict[str, object]:
        return {
            "files": list(self.files),
            "first_event": self.first_event,
            "last_event": self.last_event,
            "lumis": None if self.lumis is None else {str(run): [list(r) for r in ranges] for run, ranges in self.lumis},
            "locations": list(self.locations),
            "failed": self.failed,
            "short": self.short,
            "failed_reason": self.failed_reason,
            "failed_code": self.failed_code,
            "parents": list(self.parents),
            "group": self.group,
        }


@dataclass(frozen=True)
class JobFactoryParams:
    """Arguments every WMCore splitter receives from JobCreator, and the clock for time-based rules."""

    site_whitelist: tuple[str, ...] = param((), "jobs may run only at these sites", wmcore="siteWhitelist")
    site_blacklist: tuple[str, ...] = param((), "jobs never run at these sites", wmcore="siteBlacklist")
    trust_sitelists: bool = param(False, "ignore file locations: all files in one group, sites = whitelist - blacklist",
                                  wmcore="trustSitelists")
    file_load_limit: int = param(0, "files handed to the splitter per call, as JobCreator's 500 (0 = all at once)", minimum=0)
    now: float = 0.0  # epoch seconds (from --now), not a parameter


class JobDraft:
    """A job being filled by an algorithm; frozen into a PlannedJob at the end (local to one call)."""

    __slots__ = ("_lfns", "failed", "failed_code", "failed_reason", "files", "first_event", "group", "last_event", "mask", "sites")

    def __init__(self, failed: bool = False, failed_reason: str | None = None, failed_code: int | None = None, group: int = 0) -> None:
        self.files: list[WMFile] = []
        self._lfns: set[str] = set()
        self.mask: dict[int, list[tuple[int, int]]] = {}
        self.first_event: int | None = None
        self.last_event: int | None = None
        self.failed = failed
        self.failed_reason = failed_reason
        self.failed_code = failed_code
        self.sites: tuple[str, ...] | None = None  # merge/sibling jobs run where the file's storage is
        self.group = group  # the algorithm's count of WMCore's newGroup() calls when the job was made

    def add_file(self, file: WMFile) -> None:
        if file.lfn not in self._lfns:
            self._lfns.add(file.lfn)
            self.files.append(file)

    def has_file(self, file: WMFile) -> bool:
        return file.lfn in self._lfns

    def add_lumis(self, run: int, first: int, last: int) -> None:
        # WMCore's Mask.addRunAndLumis appends a range without merging it with its neighbours.
        self.mask.setdefault(run, []).append((first, last))

    def lumi_pairs(self) -> Iterator[tuple[int, int]]:
        for run, ranges in self.mask.items():
            for first, last in ranges:
                for lumi in range(first, last + 1):
                    yield run, lumi

    def freeze(self, factory: JobFactoryParams, include_parents: bool = False, group: int | None = None) -> PlannedJob:
        locations = self.sites if self.sites is not None else (self.files[0].locations if self.files else ())
        sites = possible_sites(locations, factory)
        failed, failed_reason, failed_code = self.failed, self.failed_reason, self.failed_code
        if not sites:
            # JobFactory.commit marks the job whatever the algorithm said before.
            failed, failed_reason, failed_code = True, NO_SITE_REASON, NO_SITE_CODE
        parents = tuple(dict.fromkeys(lfn for f in self.files for lfn in f.parents)) if include_parents else ()
        return PlannedJob(
            files=tuple(f.lfn for f in self.files),
            first_event=self.first_event,
            last_event=self.last_event,
            lumis=tuple((run, tuple(ranges)) for run, ranges in self.mask.items()) if self.mask else None,
            locations=sites,
            failed=failed,
            failed_reason=failed_reason,
            failed_code=failed_code,
            parents=parents,
            group=group,
        )


# WMCore's failedErrCode and failedReason (WM_JOB_ERROR_CODES) for a job without a possible site.
NO_SITE_CODE = 71101
NO_SITE_REASON = ("No sites are available to submit the job because the location of its input(s) do not pass "
                  "the site whitelist/blacklist restrictions (WMAgent).")
# WMCore's failedErrCode for a single-lumi file too long to process (EventAwareLumiBased).
TOO_MANY_EVENTS_CODE = 99305


def possible_sites(locations: Sequence[str], factory: JobFactoryParams) -> tuple[str, ...]:
    """The job's sites from its first file's locations and the site lists (JobFactory.commit)."""
    if factory.trust_sitelists:
        sites = set(factory.site_whitelist) - set(factory.site_blacklist)
    else:
        sites = set(locations)
        if factory.site_whitelist:
            sites &= set(factory.site_whitelist)
        sites -= set(factory.site_blacklist)
    return tuple(sorted(sites))


def freeze_all(drafts: Iterable[JobDraft], factory: JobFactoryParams, include_parents: bool = False) -> list[PlannedJob]:
    """The jobs with files, each with its job group numbered 1, 2, ... in the order the groups were made.

    An algorithm counts WMCore's newGroup() calls in `JobDraft.group`; a group that got no job is not
    one of the JobFactory's result (appendJobGroup keeps only a non-empty group), so the numbers are
    made consecutive over the groups that hold jobs."""
    kept = [draft for draft in drafts if draft.files]
    numbers: dict[int, int] = {}
    for draft in kept:
        numbers.setdefault(draft.group, len(numbers) + 1)
    return [draft.freeze(factory, include_parents, numbers[draft.group]) for draft in kept]


def extend_groups(drafts: list[JobDraft], batch: Iterable[JobDraft]) -> None:
    """Append one JobFactory call's drafts (one `load_batches` batch) to `drafts`: a call starts groups of
    its own, so its group counts move past those already there."""
    offset = max((draft.group for draft in drafts), default=-1) + 1
    for draft in batch:
        draft.group += offset
        drafts.append(draft)


def location_groups(files: Iterable[WMFile], trust_sitelists: bool = False) -> list[list[WMFile]]:
    """Files grouped by their exact set of locations, groups in order of first appearance (JobFactory
    sortByLocation; with trustSitelists all files form one group)."""
    groups: dict[frozenset[str], list[WMFile]] = {}
    for file in files:
        key = frozenset() if trust_sitelists else frozenset(file.locations)
        groups.setdefault(key, []).append(file)
    return list(groups.values())


def load_batches(files: Sequence[WMFile], file_load_limit: int) -> list[Sequence[WMFile]]:
    """JobCreator hands a splitter at most `file_load_limit` files per call; jobs never span two calls."""
    if file_load_limit <= 0 or len(files) <= file_load_limit:
        return [files]
    return [files[start:start + file_load_limit] for start in range(0, len(files), file_load_limit)]


def build_lumi_mask(runs: Sequence[int] | None, lumis: Sequence[str] | None, path: str = "--param lumis") -> LumiMask:
    """WMCore's `runs` + `lumis` (one string of first,last,first,last... per run) as a mask; {} = none."""
    if not runs or not lumis:
        return {}
    if len(runs) != len(lumis):
        raise BadInput("runs and lumis must have the same length", path)
    mask: LumiMask = {}
    for run, text in zip(runs, lumis, strict=True):
        try:
            numbers = [int(part) for part in str(text).split(",")]
        except ValueError as exc:
            raise BadInput(f"{text!r} is not a comma list of lumi numbers", path) from exc
        if len(numbers) % 2:
            raise BadInput("needs an even number of lumis (first,last pairs) for each run", path)
        mask[int(run)] = [(numbers[k], numbers[k + 1]) for k in range(0, len(numbers), 2)]
    return mask


def is_good_run(mask: LumiMask, run: int) -> bool:
    return not mask or run in mask


def is_good_lumi(mask: LumiMask, run: int, lumi: int) -> bool:
    if not mask:
        return True
    return any(first <= lumi <= last for first, last in mask.get(run, ()))


@dataclass(frozen=True)
class Performance:
    """The task's performance section (JobFactory.getPerformanceParameters)."""

    time_per_event: float = 0.0
    size_per_event: float = 0.0
    memory_requirement: float = 0.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, object] | None) -> Performance:
        values = values or {}
        return cls(
            float(values.get("timePerEvent") or 0),  # type: ignore[arg-type]
            float(values.get("sizePerEvent") or 0),  # type: ignore[arg-type]
            float(values.get("memoryRequirement") or 0),  # type: ignore[arg-type]
        )
