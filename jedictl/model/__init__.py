"""Value types shared by the engine and the store: the status vocabularies and their fixed sets here,
the rows both layers pass each other in the modules beside this one (`files`, `catalog`, `retry`).

Names follow JEDI's vocabulary (reference/jedi-inventory.md §2, panda-server.md §1.2-1.4). They live here
so that `engine` and `store` can both import them without importing each other; this package imports
nothing else of jedictl (an import-linter contract keeps it so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class TaskStatus(StrEnum):
    REGISTERED = "registered"
    DEFINED = "defined"
    ASSIGNING = "assigning"
    READY = "ready"
    PENDING = "pending"
    SCOUTING = "scouting"
    SCOUTED = "scouted"
    RUNNING = "running"
    PREPARED = "prepared"
    DONE = "done"
    FINISHED = "finished"
    FAILED = "failed"
    ABORTING = "aborting"
    ABORTED = "aborted"
    FINISHING = "finishing"
    PASSED = "passed"
    TOBROKEN = "tobroken"
    BROKEN = "broken"
    TORETRY = "toretry"
    TOINCEXEC = "toincexec"
    REREFINE = "rerefine"
    PAUSED = "paused"
    THROTTLED = "throttled"
    EXHAUSTED = "exhausted"
    #: a task whose parameters ask for a preprocess job: it waits for it (docs/preprocessing.md)
    TOPREPROCESS = "topreprocess"
    PREPROCESSING = "preprocessing"


#: Final statuses: nothing moves a task out of them except an operator command (retry, incexec).
TASK_FINAL = frozenset(
    {TaskStatus.DONE, TaskStatus.FINISHED, TaskStatus.FAILED, TaskStatus.BROKEN, TaskStatus.ABORTED}
)
#: A parent in one of these lets its children run (JEDI checkParentTask "completed").
TASK_PARENT_COMPLETED = frozenset({TaskStatus.DONE, TaskStatus.FINISHED})
#: A parent in one of these makes its waiting children unrunnable (JEDI "corrupted").
TASK_PARENT_CORRUPTED = frozenset({TaskStatus.BROKEN, TaskStatus.ABORTED, TaskStatus.FAILED})
#: Statuses the Job Generator works on (JediTaskSpec.statusForJobGenerator).
TASK_FOR_JOB_GENERATOR = frozenset({TaskStatus.READY, TaskStatus.RUNNING, TaskStatus.SCOUTING})


class DatasetType(StrEnum):
    INPUT = "input"
    PSEUDO_INPUT = "pseudo_input"
    RANDOM_SEED = "random_seed"
    OUTPUT = "output"
    LOG = "log"
    #: unmerged (pre-merge) twins written by jobs of a mergeOutput task and read by merge jobs
    TRN_OUTPUT = "trn_output"
    TRN_LOG = "trn_log"
    #: a build job's output: the lib file (lib.tgz) the run jobs at its site read (one lib dataset per site)
    LIB = "lib"
    #: the one pseudo record a preprocess job takes (JEDI's pp_input master, a `pseudo_lfn` file)
    PP_INPUT = "pp_input"


DATASET_INPUT_TYPES = frozenset({DatasetType.INPUT, DatasetType.PSEUDO_INPUT, DatasetType.RANDOM_SEED})
DATASET_OUTPUT_TYPES = frozenset(
    {DatasetType.OUTPUT, DatasetType.LOG, DatasetType.TRN_OUTPUT, DatasetType.TRN_LOG}
)


#: jobs.kind of a build job, and job_files.type of a run job's reference to its site's lib file (issue 20, build jobs).
BUILD_JOB_KIND = "build"
PREPROCESS_JOB_KIND = "preprocess"
LIB_JOB_FILE_TYPE = "lib"
#: A parent file attached to a job of a WMCore-split task with include_parents: read by the job, never consumed.
PARENT_JOB_FILE_TYPE = "parent"


class DatasetStatus(StrEnum):
    DEFINED = "defined"
    TOUPDATE = "toupdate"
    READY = "ready"
    PENDING = "pending"
    RUNNING = "running"
    PREPARED = "prepared"
    DONE = "done"
    FINISHED = "finished"
    FAILED = "failed"
    BROKEN = "broken"
    REMOVED = "removed"


class DatasetState(StrEnum):
    """The data catalog's view of a dataset (JEDI's `state` column), distinct from its processing status."""

    OPEN = "open"
    CLOSED = "closed"
    MUTABLE = "mutable"
    MISSING = "missing"


class FileStatus(StrEnum):
    READY = "ready"
    PENDING = "pending"
    PICKED = "picked"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    LOST = "lost"
    MISSING = "missing"
    CANCELLED = "cancelled"
    DEFINED = "defined"  # output rows at generation
    MERGING = "merging"
    NOTMERGED = "notmerged"
    NOOUTPUT = "nooutput"
    #: an event-service input whose ranges ended, some done and merged, the others failed for good (seed 000)
    PARTIAL = "partial"


class JobStatus(StrEnum):
    DEFINED = "defined"
    ASSIGNED = "assigned"
    ACTIVATED = "activated"
    SENT = "sent"
    STARTING = "starting"
    RUNNING = "running"
    HOLDING = "holding"
    TRANSFERRING = "transferring"
    MERGING = "merging"
    THROTTLED = "throttled"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CLOSED = "closed"


JOB_FINAL = frozenset({JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.CLOSED})
#: A site's slots (its caps: max_queued, max_running, job_caps; WMCore's pending and running thresholds):
#: jobs made for the site and not executing yet hold a pending slot, jobs handed to a pilot a running one.
SLOT_PENDING = ("defined", "assigned", "activated", "throttled")
SLOT_RUNNING = ("sent", "starting", "running")
#: sub_status of a job throttled by its user's running-jobs cap (PanDA's relocation flag 3): the watch
#: pass releases it, not `task resume` alone (engine.shares.user_caps).
USER_CAP = "user_cap"
#: tasks.throttle_reason of a task throttled for its user's backlog of input to stage from tape or transfer.
THROTTLED_FOR_PRESTAGING, THROTTLED_FOR_TRANSFER = "prestaging", "transfer"


class ElementStatus(StrEnum):
    """A work-queue element's status (WMCore's, with the same names; docs/queue-layers.md)."""

    AVAILABLE = "Available"  # in the global queue
    NEGOTIATING = "Negotiating"  # taken by an agent at the global level, on its way to the agent's local queue
    ACQUIRED = "Acquired"  # in the agent's local queue, not released to generate yet
    RUNNING = "Running"  # released: generate makes its jobs at the agent's sites
    DONE = "Done"  # every record of its block ended, some finished
    FAILED = "Failed"  # every record failed, or its task failed or broke
    CANCELED = "Canceled"  # its task was killed or aborted before the element ended


#: Work-queue elements held by an agent: the element names its agent, which must exist.
ELEMENT_HELD = (ElementStatus.NEGOTIATING.value, ElementStatus.ACQUIRED.value, ElementStatus.RUNNING.value)
#: Ended: only records of its block to process again (a retried task's) move an element out of them,
#: back to Available (store.workqueue.requeue_element; WMCore's ResubmitBlock re-queues such work).
ELEMENT_ENDED = (ElementStatus.DONE.value, ElementStatus.FAILED.value, ElementStatus.CANCELED.value)
#: Not released to generate: its block has no job yet.
ELEMENT_UNRELEASED = (ElementStatus.AVAILABLE.value, ElementStatus.NEGOTIATING.value, ElementStatus.ACQUIRED.value)


class SiteState(StrEnum):
    """A site's state for one agent (wmagent-resource-control --normal/--drain/--down)."""

    NORMAL = "normal"
    DRAIN = "drain"  # no new work from the global queue; the local queue still releases what it holds
    DOWN = "down"  # nothing at either level


class EventStatus(StrEnum):
    """An event range's status (seed 000 "Transition of event status"; PanDA's JEDI_Events codes 0-10)."""

    READY = "ready"  # waiting for an event-service job's executor
    SENT = "sent"  # handed to an executor with its job
    RUNNING = "running"  # the executor says it is processing it
    FINISHED = "finished"  # processed; its job is still live
    CANCELLED = "cancelled"  # its job was killed before the range was processed (then ready again)
    DISCARDED = "discarded"  # its job was killed while merging, after the range had finished
    DONE = "done"  # processed, and its job ended: waiting for the ES merge
    FAILED = "failed"  # the executor failed it; ready again at its job's end while attempts remain
    FATAL = "fatal"  # failed with no attempt left, or its file gave up
    MERGED = "merged"  # its ES merge job finished
    CORRUPTED = "corrupted"  # its pre-merged output is unusable: to be processed again


#: jobs.kind of event-service jobs (seed 000; PanDA's eventService job flags 1, 2, 4, 5).
JOB_KIND_ES, JOB_KIND_ES_MERGE, JOB_KIND_JUMBO = "es", "esmerge", "jumbo"
#: Ranges an executor holds: they belong to a live job that was dispatched.
EVENTS_HELD = (EventStatus.SENT.value, EventStatus.RUNNING.value)
#: Ranges processed successfully (waiting for their job to end, for the merge, or merged).
EVENTS_PROCESSED = (EventStatus.FINISHED.value, EventStatus.DONE.value, EventStatus.MERGED.value)


class CommandStatus(StrEnum):
    """Outcome of an operator command in the task-command inbox/audit table."""

    QUEUED = "queued"
    DONE = "done"
    REFUSED = "refused"
    FAILED = "failed"


class ResourceType(StrEnum):
    SCORE = "SCORE"
    MCORE = "MCORE"
    SCORE_HIMEM = "SCORE_HIMEM"
    MCORE_HIMEM = "MCORE_HIMEM"


@dataclass(frozen=True)
class NewDataset:
    """A dataset row the refiner wants written; `key` links masters and provenance before ids exist."""

    key: int
    name: str
    type: str
    stream_name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    container_name: str | None = None
    master_key: int | None = None
    provenance_key: int | None = None
    destination: str | None = None
    storage_token: str | None = None
    file_template: str | None = None  # outputs and logs: one output-template row
    serial_nr: int = 1
