"""Submission: a new task is registered, or -- submitted under the name (outDS) of a task of the same
user -- that task is continued, as PanDA's server turns such a submission into an `incexec` command
(seed 000 "Task retry and resubmission"; jedi-inventory.md §3.1, §9.3; docs/analysis.md
"Resubmitting with the same outDS").

All in one transaction: the existing task's row is locked, the resubmission is planned from its
stored state (`engine.task.resubmission`, pure), its new input datasets and new code are written, and
incexec's own machinery retries its failed and unused files and sends it back to the feeder, which
records the files added to its inputs since. The command is recorded (who, when, what changed). A
refusal -- a task still running, a broken one, a spec that changes what a resubmission keeps --
writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from jedictl.config import Settings
from jedictl.engine.commando.commands import CommandConflict, Request, incexec_in
from jedictl.engine.jobs.outcomes import Conflict
from jedictl.engine.task import resubmission
from jedictl.engine.task.definition import TaskDefinition
from jedictl.engine.task.submission import UNCAPPED, parse_definition, register_task, unique
from jedictl.errors import BadInput
from jedictl.model import DatasetType
from jedictl.store import datasets as dataset_store
from jedictl.store import task_commands as command_store
from jedictl.store import tasks as task_store

_INPUTS = (DatasetType.INPUT.value, DatasetType.PSEUDO_INPUT.value)


@dataclass
class SubmitOutcome:
    """What a submission did: a new task, or the task it resubmitted."""

    task_id: int
    status: str
    resubmitted: bool = False
    previous: str | None = None  # the resubmitted task's status before
    message: str = ""
    changes: dict[str, Any] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)  # parameters given new values a resubmission does not change
    inputs_added: list[str] = field(default_factory=list)
    retried: int = 0  # input files back to ready
    warnings: list[str] = field(default_factory=list)  # one line per kept parameter, for stderr

    def as_dict(self) -> dict[str, Any]:
        # One shape for both answers (docs/json-output.md): every key always there.
        return {"task_id": self.task_id, "status": self.status, "resubmitted": self.resubmitted, "previous": self.previous,
                "message": self.message, "changes": dict(self.changes), "kept": list(self.kept),
                "inputs_added": list(self.inputs_added), "retried": self.retried}


def submit(store: Any, definition: TaskDefinition, document: Mapping[str, Any], settings: Settings, now: datetime, by: str, *,
           use_new_code: bool = False, parent_given: bool = False, priority_given: bool = False) -> SubmitOutcome:
    """Register `definition`, or resubmit the user's task of its name. BadInput (nothing written) on a refusal."""
    try:
        with store.begin() as conn:
            existing = task_store.find_same_name(conn, definition.user_name, definition.name) if unique(definition) else None
            if existing is None:
                task_id = register_task(conn, definition, document, now, by, max_active_tasks=settings.user_caps.max_active_tasks)
                return SubmitOutcome(task_id, "registered", message=f"succeeded. new jediTaskID={task_id}")
            return _resubmit(conn, existing.id, definition, document, settings, now, use_new_code=use_new_code,
                             parent_given=parent_given, priority_given=priority_given)
    except Conflict as exc:
        raise CommandConflict(f"task {definition.name} changed while it was resubmitted ({exc}); nothing was changed, "
                              "submit it again") from exc


def _resubmit(conn: Any, task_id: int, definition: TaskDefinition, document: Mapping[str, Any], settings: Settings, now: datetime, *,
              use_new_code: bool, parent_given: bool, priority_given: bool) -> SubmitOutcome:
    task = command_store.lock_task(conn, task_id)  # its status is read again under the lock
    rows = dataset_store.datasets_of(conn, task.id)
    stored = resubmission.StoredTask(
        id=task.id, status=task.status, definition=_stored_definition(conn, task), options=task.options or {}, site=task.site,
        cloud=task.cloud, task_priority=task.task_priority, source_url=task.source_url,
        inputs=tuple(resubmission.StoredInput(r.name, r.stream_name or "", r.container_name) for r in rows if r.type in _INPUTS),
        templates=dataset_store.job_templates_of(conn, task.id),
    )
    plan = resubmission.plan(stored, definition, document, use_new_code=use_new_code, parent_given=parent_given,
                             priority_given=priority_given)
    user = definition.user_name
    comment = f"resubmitted with the same outDS {definition.name} by {user}"
    for new_input in plan.inputs_added:
        like = min(r.id for r in rows if r.type in _INPUTS and r.stream_name == new_input.stream)
        dataset_store.add_input_like(conn, like, new_input.name, now)
    if plan.templates:
        dataset_store.set_job_templates(conn, task.id, plan.templates)
    outcome = incexec_in(conn, settings, now, task, Request("incexec", task.id, user, comment), plan.change)
    kept = list(dict.fromkeys(k.path for k in plan.kept))
    added = [i.name for i in plan.inputs_added]
    command_store.record_command(
        conn, task.id, "incexec", qualifier=None, comment=comment, by=user, now=now, outcome=outcome.message,
        parameters={"resubmission": True, "changes": plan.changes, "kept": kept, "inputs_added": added})
    return SubmitOutcome(
        task.id, outcome.status, True, plan.previous,
        f"resubmission accepted: jediTaskID={task.id} (was {plan.previous}) will be re-executed with old and/or new input; "
        f"{outcome.message}", plan.changes, kept, added, outcome.files.get("retried", 0),
        [k.warning(task.id) for k in plan.kept])


def _stored_definition(conn: Any, task: Any) -> TaskDefinition:
    """The task's submitted parameters parsed again, as the refiner read them."""
    params = task_store.get_params(conn, task.id)
    try:
        return parse_definition(params.document, user=task.user_name, default_user=task.user_name, priority=task.task_priority,
                                parent_id=task.parent_id, policy=UNCAPPED,
                                allow_task_duplication=bool((task.options or {}).get("allow_task_duplication")))
    except BadInput as exc:
        raise BadInput(f"the stored parameters of task {task.id} no longer parse ({exc}): it cannot be resubmitted; "
                       "submit with allowTaskDuplication to make a new task with this outDS") from exc
