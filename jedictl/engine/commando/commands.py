"""Operator commands on tasks, applied at once: kill, finish, retry, incexec, pause, resume, avalanche,
reassign (jedi-inventory.md §9, panda-server.md §1.2, §2.8, §2.9; seed 001 "Task Commando").

JEDI queues a command and its Task Commando applies it minutes later. jedictl applies it at once, in
one transaction per task: the task row is locked, the command is checked against the task's status
(`rules.refusal`; a refusal raises BadInput and writes nothing), the task passes through the
command's "doing" status, the jobs are killed, throttled or released, the file records and counters
are reset, the task reaches the command's "done" status, and an audit row goes to `task_commands`
(who, when, why, what came of it) -- all or nothing. Any agent holding the task's lease loses it:
its next guarded write fails and it lets the task go.

Only two things wait for jobs that are still on a worker: a `kill` leaves the task in `toabort`
(finalize makes it `aborted` once no job is live) and a soft `finish` leaves it in `finishing`
(`settle` makes it `passed` once no job is live; finalize then gives it its final status).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

from jedictl.config import Settings
from jedictl.engine.brokerage.loading import load_catalog
from jedictl.engine.brokerage.task_brokerage import output_endpoint
from jedictl.engine.commando import rules as commando
from jedictl.engine.input import fields
from jedictl.engine.commando.rules import CommandTask, FileRecord, children_to_retry, default_comment, plan_retry, refusal
from jedictl.engine.jobs.outcomes import Conflict, Ending, end_jobs
from jedictl.engine.jobs.states import plan_kill
from jedictl.engine.shares.resource_types import load_resource_types, match_resource_type, ram_per_core
from jedictl.engine.task.final_status import REJECT_EXTERNAL_CHANGE, DatasetRecord, final_dataset_statuses, from_row
from jedictl.engine.task.incexec import incexec_change
from jedictl.errors import BadInput, JedictlError
from jedictl.model.choices import closest
from jedictl.model import DATASET_INPUT_TYPES, CommandStatus, JobStatus, TaskStatus
from jedictl.store import recovery as recovery_store
from jedictl.store import completion
from jedictl.store import job_outcomes as job_store
from jedictl.store import task_commands as command_store
from jedictl.store import tasks as task_store
from jedictl.store import workqueue as workqueue_store

#: The commands jedictl applies (JEDI's `release`, for data carousel staging, has no use here).
COMMANDS = ("kill", "finish", "retry", "incexec", "pause", "resume", "avalanche", "reassign")
#: Who a command is recorded as when jedictl itself gives it (children of a killed or retried task).
SYSTEM = "jedictl"
_NO_LEASE = {"lease_owner": None, "lease_expires_at": None}
_NO_WAIT = {"frozen_at": None, "wait_until": None, "throttle_reason": None}


class CommandConflict(JedictlError):
    """A job or file changed under the command; nothing was written."""


@dataclass(frozen=True)
class Request:
    """One command for one task, as the operator gave it."""

    command: str
    task_id: int
    user: str
    comment: str | None = None
    soft: bool = False  # finish --soft
    max_attempt: int | None = None  # retry --max-attempt
    changes: Mapping[str, Any] | None = None  # incexec: task parameters to change
    rescout: bool = False  # incexec --rescout: the task scouts again (by default a task scouts once)
    site: str | None = None  # reassign targets
    cloud: str | None = None
    nucleus: str | None = None

    @property
    def qualifier(self) -> str | None:
        return "soft" if self.soft else None


@dataclass
class Outcome:
    """What a command did to one task (and, through it, to its children)."""

    task_id: int
    command: str
    previous: str
    status: str
    outcome: str = "applied"  # applied | waiting (jobs still on workers) | unchanged (nothing to do)
    message: str = ""
    jobs: dict[str, int] = field(default_factory=dict)  # e.g. {"cancelled": 3, "tobekilled": 1, "throttled": 2}
    files: dict[str, int] = field(default_factory=dict)
    children: list[Outcome] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        # Every key always present (docs/json-output.md): empty counts and no children are {} and [].
        return {"task_id": self.task_id, "command": self.command, "previous": self.previous, "status": self.status,
                "outcome": self.outcome, "message": self.message, "jobs": dict(self.jobs), "files": dict(self.files),
                "children": [child.as_dict() for child in self.children]}


#: The longest comment a command is recorded with (it also becomes the task's error_dialog).
MAX_COMMENT = 4000


def run_command(store: Any, request: Request, settings: Settings, now: datetime) -> Outcome:
    """Apply one command in one transaction; BadInput (nothing written) when the task's status refuses it.

    Who gave it and why are free text from the command line: stored with their control characters
    escaped (`fields.escaped`), so `task show` never prints a raw escape sequence to a terminal."""
    try:
        with store.begin() as conn:
            return apply_in(conn, request, settings, now)
    except Conflict as exc:
        raise CommandConflict(f"task {request.task_id} changed while the {request.command} was applied ({exc}); "
                              "nothing was changed, give the command again") from exc


def apply_in(conn: Any, request: Request, settings: Settings, now: datetime) -> Outcome:
    """`run_command`'s work in the caller's transaction, which may hold more (`jedictl listen` records the
    message that gave the command in it); BadInput when refused, Conflict when a job or file changed
    under it -- either way the caller rolls the whole transaction back."""
    request = dataclasses.replace(request, user=fields.free_text(request.user, "--user", 128) or "",
                                  comment=fields.free_text(request.comment, "--comment", MAX_COMMENT))
    return _Commando(conn, settings, now).apply(request)


def incexec_in(conn: Any, settings: Settings, now: datetime, task: Any, request: Request, change: Any) -> Outcome:
    """incexec of the locked `task` with its parameters already merged (`change`), in the caller's
    transaction, without the command's own record: a resubmission with the same outDS records itself."""
    return _Commando(conn, settings, now).incexec_with(task, request, request.comment or default_comment("incexec", request.user), change)


class _Commando:
    """The commands, in the caller's transaction."""

    def __init__(self, conn: Any, settings: Settings, now: datetime):
        self.conn, self.settings, self.now, self.store = conn, settings, now, command_store

    # ------------------------------------------------------------------------------------ common

    def apply(self, request: Request) -> Outcome:
        task = self.store.lock_task(self.conn, request.task_id)
        reason = refusal(request.command, task.status, task_id=task.id, qualifier=request.qualifier)
        if reason:
            raise BadInput(reason)
        handler = getattr(self, "_" + request.command, None) if request.command in COMMANDS else None
        if handler is None:
            raise BadInput(f"jedictl has no {request.command} command (commands: {', '.join(COMMANDS)})")
        comment = request.comment or default_comment(request.command, request.user, request.qualifier)
        outcome = handler(task, request, comment)
        self.store.record_command(self.conn, task.id, request.command, qualifier=request.qualifier,
                                  parameters=_parameters(request), comment=comment, by=request.user, now=self.now,
                                  outcome=outcome.message, status=CommandStatus.DONE.value)
        return outcome

    def _move(self, task_id: int, new: str, expected: str, reason: str | None, by: str, **values: Any) -> None:
        if not task_store.change_status(self.conn, task_id, new, [expected], reason, by, self.now, **_NO_LEASE, **values):
            raise Conflict(f"task {task_id} is no longer {expected}")

    def _kill_jobs(self, task_id: int, statuses: frozenset[str], code: int | None, by: str) -> dict[str, int]:
        """Kill the task's jobs in `statuses` (panda-server §2.8, `jobs.states.plan_kill`): queued ones end
        now and their inputs go back to the pool with an attempt used; a job on a worker is told to stop."""
        endings, stopping = [], {}
        for job_id, status in self.store.jobs_in(self.conn, task_id, statuses):
            plan = plan_kill(status, code, by)
            if plan is None:
                continue
            if plan.new is None:
                stopping.setdefault(plan.sub_status, []).append(job_id)
            else:
                endings.append(Ending(job_id, plan.new.value, sub_status=plan.sub_status, expected_status=status,
                                      error=("kill", code if code is not None else 0, plan.reason)))
        counts: dict[str, int] = {}
        for sub_status, ids in stopping.items():
            job_store.mark_to_be_killed(self.conn, ids, sub_status, self.now)
            counts["tobekilled"] = counts.get("tobekilled", 0) + len(ids)
        size = max(self.settings.report.batch_size, 1)
        for start in range(0, len(endings), size):
            for result in end_jobs(self.conn, endings[start:start + size], self.settings, self.now):
                if result.outcome != "applied":
                    raise Conflict(f"job {result.job_id}: {result.reason}")
                counts[result.status] = counts.get(result.status, 0) + 1
        return counts

    def _datasets(self, task_id: int) -> list[Any]:
        return self.store.datasets_of(self.conn, task_id)

    def _input_files(self, rows: Sequence[Any]) -> list[FileRecord]:
        inputs = [row.id for row in rows if row.type in DATASET_INPUT_TYPES]
        return [FileRecord(r.id, r.dataset_id, r.type, r.status, r.attempt_nr, r.max_attempt, r.failed_attempt, r.max_failure,
                           bool(r.keep_track), ram_count=r.ram_count) for r in self.store.input_files(self.conn, inputs)]

    # -------------------------------------------------------------------------------------- kill

    def _kill(self, task: Any, request: Request, comment: str) -> Outcome:
        start = commando.start("kill", CommandTask(task.id, task.status, task.old_status))
        self._move(task.id, start.status, task.status, comment, request.user, old_status=start.old_status, error_dialog=comment)
        jobs = self._kill_jobs(task.id, start.kill_job_statuses, start.kill_code, request.user)
        live = self.store.count_live_jobs(self.conn, task.id)
        if live:
            # finalize makes it aborted once the executors have stopped the rest
            self._move(task.id, commando.TOABORT, start.status, f"{live} jobs still on workers", request.user)
            return Outcome(task.id, "kill", task.status, commando.TOABORT, "waiting", _killed(jobs, live), jobs)
        children = self._abort(task.id, request.user)
        return Outcome(task.id, "kill", task.status, TaskStatus.ABORTED, "applied", _killed(jobs, 0), jobs, children=children)

    def _abort(self, task_id: int, by: str) -> list[Outcome]:
        """No job is live: the task is aborted as finalize would end a `toabort` task (every dataset
        failed, outputs closed in the data catalog) and its children are killed in turn."""
        rows = self._datasets(task_id)
        self._move(task_id, TaskStatus.ABORTED, TaskStatus.ABORTING, "no job left", by, ended_at=self.now)
        records = [from_row(DatasetRecord, row) for row in rows]
        self.store.set_dataset_statuses(self.conn, {u.dataset_id: u.status for u in final_dataset_statuses(TaskStatus.ABORTED, records)
                                                    if u.status}, self.now)
        completion.close_catalog_datasets(self.conn, [row.name for row in rows if row.type in ("output", "log")], self.now)
        outcomes = []
        for child_id, status in self.store.children_of(self.conn, task_id):
            if status in REJECT_EXTERNAL_CHANGE or refusal("kill", status) is not None:
                continue
            outcomes.append(self.apply(Request("kill", child_id, SYSTEM, f"parent task {task_id} was aborted")))
        return outcomes

    # ------------------------------------------------------------------------------------ finish

    def _finish(self, task: Any, request: Request, comment: str) -> Outcome:
        start = commando.start("finish", CommandTask(task.id, task.status, task.old_status), request.qualifier)
        if task.status != TaskStatus.FINISHING:
            self._move(task.id, start.status, task.status, comment, request.user, old_status=start.old_status, error_dialog=comment)
        jobs = self._kill_jobs(task.id, start.kill_job_statuses, start.kill_code, request.user)
        live = self.store.count_live_jobs(self.conn, task.id)
        if commando.done_status("finish", live) is None:
            return Outcome(task.id, "finish", task.status, TaskStatus.FINISHING, "waiting",
                           f"{_killed(jobs, live)}; the task becomes passed once they end (task settle)", jobs)
        files = self.complete_finish(task.id, request.user)
        return Outcome(task.id, "finish", task.status, TaskStatus.PASSED, "applied",
                       f"{_killed(jobs, 0)}; {files} unprocessed input files set failed", jobs, {"failed": files})

    def complete_finish(self, task_id: int, by: str) -> int:
        """`finishing` with no live job -> `passed` (JEDI updateDatasetsToFinishTask): every ready input
        becomes terminal, and the goal is no longer enforced (JEDI drops FG), so finalize ends the task
        with what it processed."""
        rows = self._datasets(task_id)
        updates, deltas = commando.finish_files([from_row(DatasetRecord, row) for row in rows], self._input_files(rows))
        self.store.update_files(self.conn, [(u.file_id, u.values) for u in updates])
        self.store.change_datasets(self.conn, [(d.dataset_id, d.deltas, d.status) for d in deltas], self.now)
        options = dict(task_store.get_task(self.conn, task_id).options or {})
        options.pop("fail_when_goal_unreached", None)
        self._move(task_id, TaskStatus.PASSED, TaskStatus.FINISHING, f"{len(updates)} unprocessed input files set failed", by,
                   options=options, **_NO_WAIT)
        return len(updates)

    # ------------------------------------------------------------------------------ pause, resume

    def _pause(self, task: Any, request: Request, comment: str) -> Outcome:
        start = commando.start("pause", CommandTask(task.id, task.status, task.old_status))
        self._move(task.id, start.status, task.status, comment, request.user, old_status=start.old_status, error_dialog=comment)
        flipped = self.store.flip_jobs(self.conn, task.id, JobStatus.ACTIVATED, JobStatus.THROTTLED, self.now)
        return Outcome(task.id, "pause", task.status, start.status, "applied",
                       f"no new jobs; {flipped} queued jobs throttled", {"throttled": flipped} if flipped else {})

    def _resume(self, task: Any, request: Request, comment: str) -> Outcome:
        start = commando.start("resume", CommandTask(task.id, task.status, task.old_status))
        self._move(task.id, start.status, task.status, comment, request.user, old_status=None, error_dialog=None, **_NO_WAIT)
        flipped = self.store.flip_jobs(self.conn, task.id, JobStatus.THROTTLED, JobStatus.ACTIVATED, self.now)
        return Outcome(task.id, "resume", task.status, start.status, "applied",
                       f"back to {start.status}; {flipped} throttled jobs activated", {"activated": flipped} if flipped else {})

    # --------------------------------------------------------------------------------- avalanche

    def _avalanche(self, task: Any, request: Request, comment: str) -> Outcome:
        start = commando.start("avalanche", CommandTask(task.id, task.status, task.old_status))
        self._move(task.id, start.status, task.status, comment, request.user, old_status=start.old_status)
        return Outcome(task.id, "avalanche", task.status, start.status, "applied",
                       "scouting ended; finalize releases every input file and the task runs on")

    # ----------------------------------------------------------------------------- retry, incexec

    def _retry(self, task: Any, request: Request, comment: str) -> Outcome:
        return self._retry_or_incexec(task, request, comment, None)

    def _incexec(self, task: Any, request: Request, comment: str) -> Outcome:
        if recovery_store.recovery_of(self.conn, task.id) is not None:
            # Its input records are the inputs of the jobs it re-runs: a feed would add the whole dataset.
            raise BadInput(f"task {task.id} is a recovery task (docs/recovery.md): it cannot be changed with incexec; "
                           "retry it, or recover its files again once it has ended")
        return self.incexec_with(task, request, comment, incexec_change(task.options or {}, request.changes))

    def incexec_with(self, task: Any, request: Request, comment: str, change: Any) -> Outcome:
        """incexec with the parameters already merged (`change`): the command's own, or those of a
        resubmission with the same outDS (engine/commando/submit.py). The caller holds the task's lock."""
        # The same check as reassign's: a site, cloud or site pattern the catalog does not know would leave
        # the task with nowhere to run (or exclude nothing) and nobody told.
        check_placement(load_catalog(self.conn), site=change.columns.get("site"), cloud=change.columns.get("cloud"),
                        patterns={change.keys.get(name, name): change.changed.get(name) or ()
                                  for name in ("included_sites", "excluded_sites") if name in change.changed},
                        site_key=change.keys.get("site", "site"), cloud_key=change.keys.get("cloud", "cloud"))
        return self._retry_or_incexec(task, request, comment, change)

    def _retry_or_incexec(self, task: Any, request: Request, comment: str, change: Any) -> Outcome:
        command = "incexec" if change is not None else "retry"
        start = commando.start(command, CommandTask(task.id, task.status, task.old_status, task.walltime_unit))
        if command == "retry" and start.status in (TaskStatus.RUNNING, TaskStatus.SCOUTING):
            # exhausted in the middle of processing: the work simply goes on
            self._move(task.id, start.status, task.status, comment, request.user, old_status=None, error_dialog=None, **_NO_WAIT)
            return Outcome(task.id, command, task.status, start.status, "applied", f"back to {start.status}: the work goes on")
        self._move(task.id, start.status, task.status, comment, request.user, old_status=start.old_status, error_dialog=comment)
        rows = self._datasets(task.id)
        plan = plan_retry(start.status, start.old_status, [from_row(DatasetRecord, row) for row in rows], self._input_files(rows),
                          attempt_increase=self.settings.retry.task_retry_attempt_increase, incexec=change is not None,
                          max_attempt=request.max_attempt, task_attempt_nr=task.attempt_nr, task_priority=task.task_priority)
        if plan.outcome != "retried":
            self._move(task.id, plan.status, start.status, plan.reason, request.user, old_status=task.old_status)
            return Outcome(task.id, command, task.status, plan.status, "unchanged" if plan.outcome == "unchanged" else plan.outcome,
                           plan.reason or "")
        self.store.update_files(self.conn, [(u.file_id, u.values) for u in plan.files])
        self.store.change_datasets(self.conn, [(d.dataset_id, d.deltas, d.status) for d in plan.datasets], self.now)
        retried = sum(1 for u in plan.files if u.values.get("status") == "ready")
        values = dict(plan.task_values)
        new_status = plan.status
        if change is not None:
            recovered = {d.dataset_id for d in plan.datasets if d.deltas.get("n_files")}
            self.store.recount_inputs(self.conn, recovered, self.now)  # lost files came back: their events count again
            values.update(options=change.options, **change.columns, **self._ram_columns(task, change))
            if request.rescout:
                values["scouts_done"] = False  # the feeder releases the scouts' chunks again, finalize measures them
            # the parameters are merged here, so the refiner has nothing left to do: the feeder looks
            # at the inputs again (datasets toupdate) and picks up new files
            new_status = TaskStatus.DEFINED
        message = f"{retried} input files back to ready"
        # Ended work-queue elements whose blocks have records to process again go back to the global queue in
        # the same transaction (WMCore's ResubmitBlock): else no agent would take them and `generate` make no job.
        requeued = workqueue_store.requeue_ended(self.conn, request.user or SYSTEM, self.now, task.id)
        if requeued:
            message += f"; {len(requeued)} work-queue elements back in the global queue"
        if change is not None:
            message += "; inputs to be fed again" + (f" with {_changes(change.changed)}" if change.changed else "")
        if change is not None and request.rescout:
            message += "; the task scouts again"
        self._move(task.id, new_status, start.status, message, request.user, error_dialog=None, **values)
        outcome = Outcome(task.id, command, task.status, new_status, "applied", message, files={"retried": retried})
        if plan.retry_children:
            for child_id in children_to_retry(self.store.children_of(self.conn, task.id)):
                outcome.children.append(self.apply(Request("retry", child_id, request.user, f"retried with parent task {task.id}",
                                                           max_attempt=request.max_attempt)))
        return outcome

    def _ram_columns(self, task: Any, change: Any) -> dict[str, Any]:
        """A new ramCount changes the task's RAM and so maybe its resource type (as at refinement)."""
        if "ram_count" not in change.changed:
            return {}

        refine = self.settings.refine
        ram = change.options.get("ram_count")
        unit = change.options.get("ram_unit") or (refine.default_ram_unit if ram is None else "MB")
        ram = ram if ram is not None else refine.default_ram_count
        cores = task.core_count or 1
        per_core = ram_per_core(ram, unit, task.base_ram_count, cores, refine.memory_compensation)
        rtype = match_resource_type(load_resource_types(self.settings.resource_types), cores, per_core)
        if rtype is None:
            raise BadInput(f"no resource type fits {cores} cores with {per_core:g} MB per core", "ramCount")
        return {"ram_count": ram, "ram_unit": unit, "resource_type": rtype}

    # ---------------------------------------------------------------------------------- reassign

    def _reassign(self, task: Any, request: Request, comment: str) -> Outcome:
        values, destinations = self._placement(task, request)
        start = commando.start("reassign", CommandTask(task.id, task.status, task.old_status))
        self._move(task.id, start.status, task.status, comment, request.user, old_status=start.old_status, error_dialog=comment)
        jobs = self._kill_jobs(task.id, start.kill_job_statuses, start.kill_code, request.user)
        self.store.set_destinations(self.conn, destinations, self.now)
        if request.nucleus:
            target = commando.reassign_target(request.nucleus, start.old_status)
        else:
            target = TaskStatus.READY if start.old_status in (None, TaskStatus.EXHAUSTED) else start.old_status
        where = ", ".join(f"{key} {value}" for key, value in (("site", request.site), ("cloud", request.cloud),
                                                               ("nucleus", request.nucleus)) if value)
        closed = jobs.get(JobStatus.CLOSED.value, 0)
        message = f"reassigned to {where}; {closed} queued jobs closed, to be generated again"
        self._move(task.id, target, start.status, message, request.user, old_status=None, **_NO_WAIT, **values)
        return Outcome(task.id, "reassign", task.status, target, "applied", message, jobs)

    def _placement(self, task: Any, request: Request) -> tuple[dict[str, Any], dict[int, str]]:
        """The new site/cloud/nucleus, checked against the resource catalog, and the output
        destinations at a new nucleus. Naming a cloud or nucleus without a site frees a pinned task."""

        if not (request.site or request.cloud or request.nucleus):
            raise BadInput("name where to: --site, --cloud or --nucleus", "reassign")
        catalog = load_catalog(self.conn)
        check_placement(catalog, site=request.site, cloud=request.cloud)
        values: dict[str, Any] = {"site": request.site}
        if request.cloud:
            values["cloud"] = request.cloud
        destinations: dict[int, str] = {}
        if request.nucleus:
            if request.nucleus not in catalog.nuclei:
                raise BadInput(f"unknown nucleus {request.nucleus!r}", "--nucleus")
            values["nucleus"] = request.nucleus
            endpoints = catalog.endpoints_of_nucleus(request.nucleus)
            for row in self._datasets(task.id):
                if row.type in ("output", "log"):
                    token = row.storage_token
                    endpoint = output_endpoint(endpoints, token or "")
                    if endpoint is None:
                        raise BadInput(f"nucleus {request.nucleus} has no endpoint for output {token or 'disk'} of dataset {row.name}",
                                       "--nucleus")
                    destinations[row.id] = endpoint.name
        return values, destinations


# ---------------------------------------------------------------------------------- placement

def check_placement(catalog: Any, *, site: str | None = None, cloud: str | None = None,
                    patterns: Mapping[str, Sequence[str]] | None = None, site_key: str = "--site",
                    cloud_key: str = "--cloud") -> None:
    """Where reassign and incexec send a task must exist: a known site, a known cloud (or WORLD), and
    included/excluded site patterns that each match some site. BadInput names the key at fault."""
    sites = sorted(s.name for s in catalog.sites)
    if site and site not in sites:
        raise BadInput(_unknown("site", site, sites), site_key)
    clouds = sorted({s.cloud for s in catalog.sites if s.cloud} | {"WORLD"})
    if cloud and cloud not in clouds:
        raise BadInput(_unknown("cloud", cloud, clouds), cloud_key)
    for key, listed in (patterns or {}).items():
        for index, pattern in enumerate(listed):
            if not any(fnmatchcase(name, pattern) for name in sites):
                raise BadInput(_unknown("site", pattern, sites) if not set(pattern) & set("*?[") else
                               f"{pattern!r} matches no site", f"{key}[{index}]")


def _unknown(what: str, value: str, known: Sequence[str]) -> str:
    guess = closest(value, known)
    return f"unknown {what} {value!r}" + (f"; did you mean {guess!r}?" if guess else "")


# ------------------------------------------------------------------------------------- settle

def settle_pass(store: Any, settings: Settings, now: datetime, by: str, task_ids: Sequence[int] = (), limit: int = 100) -> list[Outcome]:
    """Complete `finishing` tasks whose jobs have all ended (JEDI's commando revisits tasks left in a
    "doing" status): their ready inputs become terminal and they become `passed`. Without `task_ids`,
    up to `limit` such tasks; named tasks that are not finishing, or still have live jobs, are reported
    and left alone. One transaction per task."""
    if task_ids:
        candidates = list(task_ids)
    else:
        with store.read() as conn:
            candidates = command_store.settled_finishing_tasks(conn, limit)
    by = fields.free_text(by, "--user", 128) or ""
    outcomes = []
    for task_id in sorted(candidates):
        with store.begin() as conn:
            task = command_store.lock_task(conn, task_id)
            if task.status != TaskStatus.FINISHING:
                outcomes.append(Outcome(task_id, "settle", task.status, task.status, "unchanged", f"the task is {task.status}, not finishing"))
                continue
            live = command_store.count_live_jobs(conn, task_id)
            if live:
                outcomes.append(Outcome(task_id, "settle", task.status, task.status, "waiting", f"{live} jobs still live"))
                continue
            files = _Commando(conn, settings, now).complete_finish(task_id, by)
            outcomes.append(Outcome(task_id, "settle", task.status, TaskStatus.PASSED, "applied",
                                    f"{files} unprocessed input files set failed", files={"failed": files}))
    return outcomes


# ------------------------------------------------------------------------------------ helpers

def _killed(jobs: Mapping[str, int], live: int) -> str:
    ended = ", ".join(f"{n} {status}" for status, n in sorted(jobs.items()) if status != "tobekilled") or "no job ended"
    told = jobs.get("tobekilled", 0)
    text = f"jobs: {ended}"
    if told:
        text += f", {told} told to stop"
    if live:
        text += f"; {live} still live"
    return text


def _changes(changed: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={'(removed)' if value is None else value}" for key, value in changed.items())


def _parameters(request: Request) -> dict[str, Any] | None:
    values = {"max_attempt": request.max_attempt, "site": request.site, "cloud": request.cloud, "nucleus": request.nucleus}
    params = {key: value for key, value in values.items() if value is not None}
    if request.changes:
        params["changes"] = dict(request.changes)
    if request.rescout:
        params["rescout"] = True
    return params or None
