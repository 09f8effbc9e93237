"""The `files` and `job_files` rows, and the changes to them and to dataset counters, as the engine
decides them and the store applies them (jobs.results, jobs.outcomes, commando; store.job_outcomes)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from jedictl.model import FileStatus


def is_many_time(attributes: Mapping[str, Any] | None) -> bool:
    """Whether a secondary with these stored dataset attributes (DatasetAttributes.as_dict) is a many-time
    input -- marked `many_time`, else sharing its files among jobs (nosplit, repeat, reusable) -- whose
    records are read by many jobs, kept untracked and consumed by none. One rule for the engine (the
    feeder, the generator) and the store (`check`)."""
    values = attributes or {}
    marked = values.get("many_time")
    if marked is not None:
        return bool(marked)
    return bool(values.get("nosplit") or values.get("repeat") or values.get("reusable"))


class JobFileRecord(NamedTuple):
    """A `job_files` row: attempt_nr is the file's attemptNr when the job was generated."""

    file_id: int | None
    dataset_id: int
    lfn: str
    type: str  # input | pseudo_input | output | log
    attempt_nr: int


class FileRecord(NamedTuple):
    """A `files` row (JEDI dataset contents)."""

    id: int
    dataset_id: int
    type: str
    status: str
    attempt_nr: int = 0
    max_attempt: int | None = None
    failed_attempt: int = 0
    max_failure: int | None = None
    keep_track: bool = True
    n_events: int | None = None
    start_event: int | None = None
    end_event: int | None = None
    ram_count: int | None = None  # per-file RAM set by the retry module

    @property
    def exhausted(self) -> bool:
        """No attempt left: `failed` (jedictl's job results) or, as JEDI keeps them, `ready` but out of
        attempts or failures."""
        if self.status == FileStatus.FAILED:
            return True
        if self.status != FileStatus.READY:
            return False
        out_of_attempts = self.max_attempt is not None and self.attempt_nr >= self.max_attempt
        out_of_failures = self.max_failure is not None and self.failed_attempt >= self.max_failure
        return out_of_attempts or out_of_failures


class DatasetDelta(NamedTuple):
    """Relative changes to one `datasets` row's counters."""

    dataset_id: int
    n_files_used: int = 0
    n_files_finished: int = 0
    n_files_failed: int = 0
    n_files_on_hold: int = 0
    n_events_used: int = 0
    n_events: int = 0
    n_files_to_be_used: int = 0  # unmerged outputs released to merge jobs (JEDI raises the trn dataset's watermark)
    n_files: int = 0  # outputs: files registered; unmerged outputs: files released to merge jobs

    def __add__(self, other: DatasetDelta) -> DatasetDelta:
        return DatasetDelta(self.dataset_id, *(getattr(self, name) + getattr(other, name) for name in COUNTERS))

    def is_zero(self) -> bool:
        return not any(getattr(self, name) for name in COUNTERS)


COUNTERS = ("n_files_used", "n_files_finished", "n_files_failed", "n_files_on_hold", "n_events_used", "n_events", "n_files_to_be_used",
            "n_files")


#: The values of a FileUpdate that sets no other columns (shared, so read-only).
NO_VALUES: Mapping[str, Any] = MappingProxyType({})


class FileUpdate(NamedTuple):
    """New values for one `files` row, valid only if the row is still as the job left it."""

    file_id: int
    expected_attempt_nr: int
    expected_statuses: tuple[str, ...]
    status: str
    attempt_nr: int
    failed_attempt: int
    values: Mapping[str, Any] = NO_VALUES  # other columns: size, checksum, guid, n_events, keep_track ...
    delta: DatasetDelta | None = None

