"""The output check at the end of a task (docs/post-processing.md): JEDI's post processor removes from
an output dataset every file its records do not hold as finished ("remove wrong files") and stops a
task whose outputs are duplicated (checkDuplication_JEDI: `paused`, the error dialog says why); seed
000 asks for the outputs to be checked against the catalog ("Validation in post-processing phase")
and for incomplete log datasets to be cleaned. Pure: the store gathers the facts
(store.post_checks), this decides.

- A finished output or log record the catalog does not hold, or holds with another size or checksum,
  is a **problem**: the task does not end; it is `paused`, remembering the status it was finalized
  from, with the problems in its error dialog, until an operator repairs the catalog and resumes it
  (or kills it).
- A file of an output dataset that no finished record accounts for is **removed** from the catalog:
  a **duplicate** when a job of the task wrote it for an input that another (retried) job finished --
  two files for one input --, else a **stray** (a job that did not finish, or no job of the task).
- A file of a log dataset that no finished record accounts for is removed only when no replica of it
  exists anywhere (**incomplete_log**: its transfer never completed); a failed attempt's log that
  reached storage stays, as JEDI keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jedictl.model import TaskStatus

#: Final statuses whose outputs are checked (JEDI checks duplication for these two only): a failed,
#: broken or aborted task's datasets end `failed` whatever they hold.
CHECKED_FINAL = frozenset({TaskStatus.DONE.value, TaskStatus.FINISHED.value})
DUPLICATE, STRAY, INCOMPLETE_LOG = "duplicate", "stray", "incomplete_log"
REMOVAL_KINDS = (DUPLICATE, STRAY, INCOMPLETE_LOG)
#: Problems named in the error dialog; the rest are counted.
DIALOG_PROBLEMS = 3
#: How the dialog of a task the check paused begins: a later pass that ends it clears that dialog.
DIALOG_PREFIX = "post-processing: "


@dataclass(frozen=True)
class Disagreement:
    """A finished output or log record and the catalog's file of its name (entry_* None: no such file)."""

    dataset: str
    lfn: str
    size: int | None
    checksum: str | None
    job_id: int | None
    entry_id: int | None
    entry_size: int | None
    entry_checksum: str | None


@dataclass(frozen=True)
class Problem:
    dataset: str
    lfn: str
    what: str  # missing | size | checksum
    detail: str


@dataclass(frozen=True)
class Unaccounted:
    """A catalog file of one of the task's output or log datasets that no finished record accounts for,
    with what the task knows of it: the record of that name (an attempt that did not finish) and, for
    that attempt's inputs, the outputs of the finished jobs that processed them in the same dataset."""

    dataset: str
    dataset_type: str  # output | log
    entry_id: int
    lfn: str
    guid: str | None
    size: int | None
    checksum: str | None
    has_replica: bool
    record_status: str | None = None  # the task's record of this name; None: the task has none
    job_id: int | None = None  # the job (attempt) that was to write it
    input_lfn: str | None = None  # that job's (first) input
    kept_lfn: str | None = None  # the finished output written for the same input
    kept_job_id: int | None = None


@dataclass(frozen=True)
class Removal:
    entry_id: int
    dataset: str
    lfn: str
    kind: str  # duplicate | stray | incomplete_log
    guid: str | None
    size: int | None
    checksum: str | None
    job_id: int | None
    kept_lfn: str | None
    reason: str


@dataclass(frozen=True)
class PostCheck:
    """The check's verdict for one task: what to remove, and what stops it from ending."""

    removals: tuple[Removal, ...] = ()
    problems: tuple[Problem, ...] = ()
    n_problems: int = 0  # all of them (`problems` holds the first few the store read back)

    @property
    def passed(self) -> bool:
        return self.n_problems == 0

    def dialog(self) -> str | None:
        """The error dialog of a task the check stops, None when it passed."""
        if self.passed:
            return None
        named = "; ".join(problem.detail for problem in self.problems[:DIALOG_PROBLEMS])
        more = self.n_problems - min(len(self.problems), DIALOG_PROBLEMS)
        noun = "output disagrees" if self.n_problems == 1 else "outputs disagree"
        return (f"{DIALOG_PREFIX}{self.n_problems} {noun} with the data catalog: {named}"
                + (f"; and {more} more" if more > 0 else "") + " (repair the catalog, then `task resume`)")

    def summary(self) -> str:
        """What the check did, for the pass report ('' when nothing)."""
        parts = []
        for kind in REMOVAL_KINDS:
            count = sum(1 for removal in self.removals if removal.kind == kind)
            if count:
                parts.append(f"{count} {kind.replace('_', ' ')} {'file' if count == 1 else 'files'} removed")
        if not self.passed:
            parts.append(f"{self.n_problems} outputs disagree with the data catalog")
        return ", ".join(parts)


def problem(row: Disagreement) -> Problem:
    where = f"{row.lfn} of {row.dataset}"
    if row.entry_id is None:
        return Problem(row.dataset, row.lfn, "missing", f"{where} is not in the data catalog")
    if row.entry_size != row.size:
        return Problem(row.dataset, row.lfn, "size", f"{where} has size {row.entry_size} in the catalog, {row.size} reported by its job")
    return Problem(row.dataset, row.lfn, "checksum",
                   f"{where} has checksum {row.entry_checksum} in the catalog, {row.checksum} reported by its job")


def removal(entry: Unaccounted) -> Removal | None:
    """What becomes of one unaccounted catalog file: removed (and why), or None (kept)."""
    def removed(kind: str, reason: str, kept: str | None = None) -> Removal:
        return Removal(entry.entry_id, entry.dataset, entry.lfn, kind, entry.guid, entry.size, entry.checksum, entry.job_id, kept, reason)

    if entry.dataset_type == "log":
        if entry.has_replica:
            return None  # a failed attempt's log that reached storage: kept for whoever debugs it
        return removed(INCOMPLETE_LOG, "log file with no replica anywhere: its transfer never completed")
    if entry.job_id is not None and entry.kept_lfn is not None:
        return removed(DUPLICATE, f"written by job {entry.job_id} (its record is {entry.record_status}) for input {entry.input_lfn}, "
                                  f"which job {entry.kept_job_id} processed: {entry.kept_lfn} is kept", entry.kept_lfn)
    if entry.job_id is not None:
        return removed(STRAY, f"written by job {entry.job_id}, which did not finish (its record is {entry.record_status})")
    return removed(STRAY, "no finished job of the task produced it")


def post_check(disagreements: Iterable[Disagreement], n_disagreements: int, unaccounted: Iterable[Unaccounted]) -> PostCheck:
    removals = tuple(found for found in (removal(entry) for entry in unaccounted) if found is not None)
    return PostCheck(removals, tuple(problem(row) for row in disagreements), n_disagreements)


def stale_dialog(error_dialog: str | None) -> bool:
    """A dialog the check wrote when it paused the task: cleared once the task ends after all."""
    return bool(error_dialog) and str(error_dialog).startswith(DIALOG_PREFIX)


def checked(final_status: str) -> bool:
    """Whether a task ending in `final_status` has its outputs checked."""
    return str(final_status) in CHECKED_FINAL


def kept_output(outputs: Sequence[tuple[int, str, str]], dataset: str, job_id: int) -> tuple[int, str] | None:
    """Of the finished jobs' outputs for one input -- (job id, lfn, dataset name) -- the one in `dataset`
    written by a job other than `job_id`, if any: the file a retried job kept."""
    for other_job, lfn, name in outputs:
        if name == dataset and other_job != job_id:
            return other_job, lfn
    return None
