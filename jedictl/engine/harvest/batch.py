"""The batch-system interface harvest submits pilots through: submit, status, cancel.

A submission is one or more pilots of one site running the same command; each gets its own
`JEDICTL_PILOT_ID` (its pilots row) and comes back as its own batch id, in order. `status` answers
only for the ids the batch system still knows: a missing id is the caller's to interpret (policy.reconcile).
Implementations: `LocalBatch` (detached processes on this host) and `SlurmBatch` (sbatch, job arrays).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from jedictl.engine.harvest.policy import BatchView

#: The environment variable that names a pilot's row (read by `jedictl pilot`).
PILOT_ID_ENV = "JEDICTL_PILOT_ID"


class BatchError(Exception):
    """The batch system refused or could not be reached; the message is one line for the operator."""


@dataclass(frozen=True)
class Submission:
    """What to run: `argv` once per pilot id, with `env` added to the environment."""

    site: str
    argv: Sequence[str]
    env: Mapping[str, str]
    pilot_ids: Sequence[int]
    log_dir: Path  # the batch jobs' stdout/stderr (and the local wrapper's exit codes)
    workdir: Path | None = None  # where the pilot process starts (default: log_dir)
    options: Mapping[str, object] = field(default_factory=dict)  # sites.batch: partition, walltime, cores, ...


class Batch(Protocol):
    name: str

    def submit(self, submission: Submission) -> list[str]:
        """Start the pilots; their batch ids in the order of `submission.pilot_ids`."""
        ...

    def status(self, batch_ids: Sequence[str]) -> dict[str, BatchView]:
        """The state of each id the batch system knows; unknown ids are left out."""
        ...

    def cancel(self, batch_ids: Sequence[str]) -> None:
        ...


def decode_wait_status(status: int) -> int:
    """A wait(2) status as a shell reports it: the exit code, or 128 + the signal that killed it."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return status


def batch_for(system: str, *, log_root: Path) -> Batch:
    """The implementation of `system` (slurm | local)."""
    if system == "local":
        from jedictl.engine.harvest.local import LocalBatch

        return LocalBatch(log_root / "local")
    if system == "slurm":
        from jedictl.engine.harvest.slurm import SlurmBatch

        return SlurmBatch()
    raise BatchError(f"unknown batch system {system!r} (use slurm or local)")
