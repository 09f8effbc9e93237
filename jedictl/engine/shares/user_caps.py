"""Per-user caps of analysis (seed 000 "Throttled jobs and tasks"; docs/analysis.md): the decisions.

Who is counted: the *account* of an analysis task (labels user, panda) -- its working group when it
has one (group analysis counts against the group and its caps, as PanDA's analysis brokerage and
watchdog count it), else its user.

1. **Running jobs** (CAP_RUNNING_USER_JOBS and CAP_RUNNING_USER_CORES; for a group CAP_RUNNING_GROUP_*):
   an account with at least the cap of running jobs, or of running cores, has its activated jobs
   turned `throttled`, so that free slots go to other users; once both its running jobs and cores
   are below `release_fraction` (90 %) of the caps, its throttled jobs are activated again
   (AtlasAnalWatchDog). Jobs throttled this way carry `sub_status = user_cap` (jedictl.model.USER_CAP;
   PanDA's relocation flag 3), which keeps them apart from the jobs of a paused task; one never released is closed
   after `job_timeouts.throttled_days` (7 days).
2. **Generation**: no new jobs for an account whose running jobs (cores) exceed the cap or whose queued
   jobs (cores) exceed `queued_factor` (2) times it (AtlasAnalJobBroker's throttle).
3. **Prestage and transfer limits** (PRESTAGE_LIMIT; USER_PRESTAGE_LIMIT / USER_TRANSFER_LIMIT): the
   input an account's `assigned` jobs still wait for is summed per kind -- files with no disk replica
   anywhere must be staged from tape (`prestaging`), the others are copied from disk (`transfer`). Over
   the limit of a kind, the account's tasks that wait for such input are throttled (the task status)
   until the total is back under it; their jobs already made still run.

Only the analysis labels (ANALYSIS_LABELS) are counted and capped. Pure: the figures come from store.user_caps, the writes are engine.watch.user_caps's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jedictl.config import UserCapSettings
from jedictl.engine.task.spec import ANALYSIS_LABELS
from jedictl.model import THROTTLED_FOR_PRESTAGING, THROTTLED_FOR_TRANSFER

#: How a task throttled by the prestage or transfer limit is marked (tasks.throttle_reason).
PRESTAGING, TRANSFER = THROTTLED_FOR_PRESTAGING, THROTTLED_FOR_TRANSFER
GB = 1024**3


@dataclass(frozen=True, order=True)
class Account:
    """Who an analysis task's jobs count against: `kind` user or group."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def account_of(user_name: str, working_group: str | None) -> Account:
    return Account("group", working_group) if working_group else Account("user", user_name)


@dataclass(frozen=True)
class Load:
    """An account's analysis jobs now: executing (sent, starting, running) and queued (defined,
    assigned, activated, throttled), in jobs and cores; `activated` and `capped` (throttled by a user
    cap, of tasks that are not paused) are the jobs the cap acts on."""

    running_jobs: int = 0
    running_cores: int = 0
    queued_jobs: int = 0
    queued_cores: int = 0
    activated: int = 0
    capped: int = 0

    def plus_queued(self, jobs: int, cores: int) -> "Load":
        return Load(self.running_jobs, self.running_cores, self.queued_jobs + jobs, self.queued_cores + cores, self.activated, self.capped)


@dataclass(frozen=True)
class Caps:
    jobs: int
    cores: int
    jobs_key: str
    cores_key: str


def caps_of(account: Account, settings: UserCapSettings) -> Caps:
    if account.kind == "group":
        return Caps(settings.running_group_jobs, settings.running_group_cores, "running_group_jobs", "running_group_cores")
    return Caps(settings.running_user_jobs, settings.running_user_cores, "running_user_jobs", "running_user_cores")


@dataclass(frozen=True)
class CapAction:
    """Throttle the account's activated jobs, or release its capped ones; `reason` for the report."""

    account: Account
    action: str  # "throttle_jobs" | "release_jobs"
    reason: str


def job_cap_action(account: Account, load: Load, settings: UserCapSettings) -> CapAction | None:
    """What the running-jobs cap does to an account now (None: nothing)."""
    caps = caps_of(account, settings)
    if load.running_jobs >= caps.jobs or load.running_cores >= caps.cores:
        if not load.activated:
            return None
        return CapAction(account, "throttle_jobs", f"{account}: {_over(load, caps)}")
    if not load.capped:
        return None
    jobs_floor, cores_floor = settings.release_fraction * caps.jobs, settings.release_fraction * caps.cores
    if load.running_jobs < jobs_floor and load.running_cores < cores_floor:
        return CapAction(account, "release_jobs", f"{account}: {load.running_jobs} running jobs and {load.running_cores} cores, below "
                                                  f"{settings.release_fraction:g} x user_caps.{caps.jobs_key} {caps.jobs} and .{caps.cores_key} {caps.cores}")
    return None


def _over(load: Load, caps: Caps) -> str:
    if load.running_jobs >= caps.jobs:
        return f"{load.running_jobs} running jobs >= user_caps.{caps.jobs_key} {caps.jobs}"
    return f"{load.running_cores} running cores >= user_caps.{caps.cores_key} {caps.cores}"


def generation_block(account: Account, load: Load, settings: UserCapSettings) -> str | None:
    """Why no new jobs are made for the account now, or None (AtlasAnalJobBroker's user throttle)."""
    caps = caps_of(account, settings)
    factor = settings.queued_factor
    if load.running_jobs > caps.jobs:
        return f"{account}: {load.running_jobs} running jobs > user_caps.{caps.jobs_key} {caps.jobs}"
    if load.running_cores > caps.cores:
        return f"{account}: {load.running_cores} running cores > user_caps.{caps.cores_key} {caps.cores}"
    if load.queued_jobs > factor * caps.jobs:
        return f"{account}: {load.queued_jobs} queued jobs > {factor:g} x user_caps.{caps.jobs_key} {caps.jobs}"
    if load.queued_cores > factor * caps.cores:
        return f"{account}: {load.queued_cores} queued cores > {factor:g} x user_caps.{caps.cores_key} {caps.cores}"
    return None


# ------------------------------------------------------------------------------ prestage and transfer

@dataclass(frozen=True)
class AwaitedInput:
    """One input file an account's assigned job waits for, with where the catalog holds it."""

    account: Account
    task_id: int
    dataset: str
    lfn: str
    size: int
    on_disk: bool  # some disk endpoint holds it: a transfer; else it must be staged from tape


def transfer_kind(item: AwaitedInput) -> str:
    return TRANSFER if item.on_disk else PRESTAGING


@dataclass(frozen=True)
class Backlog:
    """What an account waits for, of one kind: bytes (each file once) and the tasks that wait."""

    size: int
    tasks: frozenset[int]


def backlogs(awaited: Iterable[AwaitedInput]) -> dict[tuple[Account, str], Backlog]:
    """Per (account, kind): the bytes still to move -- a file awaited by several jobs counts once, as
    one dispatch block moves it once -- and the tasks waiting for them."""
    sizes: dict[tuple[Account, str], dict[tuple[str, str], int]] = {}
    tasks: dict[tuple[Account, str], set[int]] = {}
    for item in awaited:
        key = (item.account, transfer_kind(item))
        sizes.setdefault(key, {})[(item.dataset, item.lfn)] = item.size
        tasks.setdefault(key, set()).add(item.task_id)
    return {key: Backlog(sum(files.values()), frozenset(tasks[key])) for key, files in sizes.items()}


def limit_of(kind: str, settings: UserCapSettings) -> tuple[float, str]:
    """The limit in GB of a kind and its setting's name."""
    if kind == PRESTAGING:
        return settings.prestage_limit_gb, "prestage_limit_gb"
    return settings.transfer_limit_gb, "transfer_limit_gb"


@dataclass(frozen=True)
class TaskThrottle:
    """Throttle a task for its account's backlog of `kind`, or release it."""

    task_id: int
    action: str  # "throttle_transfers" | "release_transfers"
    kind: str
    reason: str


def transfer_actions(totals: Mapping[tuple[Account, str], Backlog], throttled: Mapping[int, tuple[Account, str]],
                     runnable: Mapping[int, Account], settings: UserCapSettings) -> list[TaskThrottle]:
    """Tasks to throttle and to release. `throttled`: task -> (account, kind) of the tasks throttled for a
    backlog now; `runnable`: task -> account of the tasks that could be throttled (generator statuses,
    not leased). A runnable task of an account over a limit that waits for input of that kind is
    throttled; a throttled one is released once its account's backlog of its kind is within the limit."""
    actions: list[TaskThrottle] = []
    over: dict[tuple[Account, str], str] = {}
    for (account, kind), backlog in totals.items():
        limit, key = limit_of(kind, settings)
        if backlog.size > limit * GB:
            over[(account, kind)] = f"{account}: {_size(backlog.size)} of input waits for {kind} > user_caps.{key} {limit:g} GB"
    for task_id in sorted(runnable):
        if task_id in throttled:
            continue
        for kind in (PRESTAGING, TRANSFER):
            key = (runnable[task_id], kind)
            if key in over and task_id in totals[key].tasks:
                actions.append(TaskThrottle(task_id, "throttle_transfers", kind, over[key]))
                break
    for task_id, (account, kind) in sorted(throttled.items()):
        if (account, kind) not in over:
            size = totals[(account, kind)].size if (account, kind) in totals else 0
            limit, key = limit_of(kind, settings)
            actions.append(TaskThrottle(task_id, "release_transfers", kind,
                                        f"{account}: {_size(size)} of input waits for {kind}, within user_caps.{key} {limit:g} GB"))
    return actions


def _size(size: int) -> str:
    """Bytes for a reason: in GB from 1 GB on (one decimal), else whole MB."""
    if size >= GB:
        return f"{size / GB:.1f} GB"
    return f"{round(size / 1024**2)} MB"
