"""What one pilot's jobs share (`PilotContext`) and what became of a job (`JobOutcome`).

Apart from engine/pilot/job.py so that the pilot reaches its first dispatch without importing what
only a job needs -- stage-in and stage-out, the payload's process, the report and the job-outcome
rules behind it (engine/jobs/outcomes.py): a slot imports the job module once it has a job, and a
pilot that finds no work never does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from jedictl.engine.pilot.codes import Failure
    from jedictl.engine.pilot.heartbeat import Heartbeater


@dataclass
class PilotContext:
    """What every job of one pilot shares."""

    store: Any
    settings: Any
    now: Callable[[], datetime]
    site: str
    direct_io: bool
    container_runtime: str | None
    workdir: Path
    keep_workdir: bool
    heartbeater: Heartbeater
    environ: Mapping[str, str]
    write_endpoint: str | None = None  # the site's, for outputs whose payload names no destination
    stopping: threading.Event = field(default_factory=threading.Event)
    stop_failure: Failure | None = None  # why the pilot is stopping (its signal), for jobs it is still starting


@dataclass(frozen=True)
class JobOutcome:
    job_id: int
    task_job: str
    outcome: str  # the job's status after the report (finished, failed, cancelled, closed), dropped, refused, unreported
    error: str | None = None  # "source:code"
    reason: str | None = None
    wall_time: float | None = None
