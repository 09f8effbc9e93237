"""Turning a submitted document into a TaskDefinition, whichever format it is in, and registering it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.options import skip_task_ids
from jedictl.store import wmcore as wmcore_store
from jedictl.engine.task.resubmission import RESUBMITTABLE, refusal
from jedictl.engine.task.panda_params import ANALYSIS_LABELS, is_panda_params, parse_panda_params
from jedictl.engine.task.privileges import NOBODY, Privileges, queue_priority
from jedictl.engine.task.spec import parse_task_spec
from jedictl.engine.task.definition import PRIORITY_RANGE, USER_RE, TaskDefinition
from jedictl.errors import BadInput, NotFound
from jedictl.model import TaskStatus
from jedictl.store import datasets as dataset_store
from jedictl.store import tasks as task_store
from jedictl.store.tasks import NameTaken, unique_key

@dataclass(frozen=True)
class PriorityPolicy:
    """Who may raise an analysis task's priority (PanDA: only production roles and privileged users,
    engine.task.privileges), and the priority privileged tasks jump to."""

    analysis_cap: int = 1000
    privileges: Privileges = NOBODY
    express_priority: int = 1500

    def privileged(self, definition: TaskDefinition) -> bool:
        return definition.prod_source_label in ANALYSIS_LABELS and \
            self.privileges.privileged(definition.user_name, definition.working_group) is not None


#: For re-parsing a stored task: its priority was capped when it was submitted.
UNCAPPED = PriorityPolicy(analysis_cap=PRIORITY_RANGE[1])


def capped_priority(definition: TaskDefinition, policy: PriorityPolicy) -> int:
    """The priority an analysis task may have. PanDA's server gives every non-production submission
    taskPriority 1000 (insertTaskParamsPanda); only super users/groups jump the queue (seed 000 "Special
    permission"; express lane at 1500). A plain user may still lower his own task's priority."""
    if definition.prod_source_label not in ANALYSIS_LABELS or policy.privileged(definition):
        return definition.task_priority
    return min(definition.task_priority, policy.analysis_cap)


def parse_definition(
    document: dict[str, Any],
    *,
    user: str | None,
    default_user: str,
    priority: int | None = None,
    parent_id: int | None = None,
    analysis_priority: int = 1000,
    policy: PriorityPolicy | None = None,
    allow_task_duplication: bool = False,
) -> TaskDefinition:
    """Detect the format and parse. The owner is `user` (--user), else the document's, else `default_user`.
    Analysis priorities are capped by `policy` (default: at `analysis_priority`, nobody privileged).
    `allow_task_duplication` (submit --allow-task-duplication) sets the option the document may lack."""
    if user and not USER_RE.match(user):
        raise BadInput("must be letters, digits and . _ @ -", "--user")
    fields.integer(priority, "--priority", *PRIORITY_RANGE)
    fields.check_storable(document, "")  # the document is stored as submitted, unknown keys and all
    parse = parse_panda_params if is_panda_params(document) else parse_task_spec
    definition = parse(document, user=user or "", priority=priority, parent_id=parent_id, analysis_priority=analysis_priority)
    if not definition.user_name:
        definition = dataclasses.replace(definition, user_name=default_user)
    if allow_task_duplication and not definition.options.allow_task_duplication:
        definition = dataclasses.replace(definition, options=dataclasses.replace(definition.options, allow_task_duplication=True))
    if not USER_RE.match(definition.user_name):
        raise BadInput("the task's user must be letters, digits and . _ @ -", "user")
    policy = policy or PriorityPolicy(analysis_cap=analysis_priority)
    allowed = capped_priority(definition, policy)
    if allowed != definition.task_priority:
        definition = dataclasses.replace(definition, task_priority=allowed, priority_capped_from=definition.task_priority)
    current = queue_priority(definition.task_priority, policy.privileged(definition), policy.express_priority)
    return dataclasses.replace(definition, current_priority=current)


def task_row(definition: TaskDefinition) -> dict[str, Any]:
    """Column values of a newly submitted task (resource model and queues are the refiner's job)."""
    return {
        "name": definition.name, "user_name": definition.user_name,
        # A duplicate of a task with this name (allowTaskDuplication) shares the name: the key is PanDA's
        # uniqueTaskName, which its client leaves out for a duplicate.
        "unique_name_key": unique_key(definition.user_name, definition.name) if unique(definition) else None,
        "vo": definition.vo, "prod_source_label": definition.prod_source_label, "task_type": definition.task_type,
        "processing_type": definition.processing_type, "working_group": definition.working_group,
        "country_group": definition.country_group, "campaign": definition.campaign, "req_id": definition.req_id,
        "task_priority": definition.task_priority,
        "current_priority": definition.task_priority if definition.current_priority is None else definition.current_priority,
        "parent_id": definition.parent_id, "cloud": definition.cloud, "site": definition.site, "nucleus": definition.nucleus,
        "trans_path": definition.trans_path, "trans_home": definition.trans_home, "trans_uses": definition.trans_uses,
        "architecture": definition.architecture, "container_name": definition.container_name,
        "source_url": definition.source_url, "options": definition.options.as_dict(), "attempt_nr": 0,
    }


def unique(definition: TaskDefinition) -> bool:
    """The task's name (PanDA's outDS) is one task's: a new submission of it continues that task."""
    return definition.unique_name and not definition.options.allow_task_duplication


def name_path(definition: TaskDefinition) -> str:
    return "taskName" if definition.format == "panda" else "name"


#: The statuses in which a task counts against MAX_ACTIVE_TASKS_PER_USER_<label> (insertTaskParamsPanda's
#: list), with the two jedictl passes a task through on its way between them (assigning, scouted).
ACTIVE_TASK_STATUSES = (TaskStatus.REGISTERED, TaskStatus.DEFINED, TaskStatus.ASSIGNING, TaskStatus.READY, TaskStatus.SCOUTING,
                        TaskStatus.SCOUTED, TaskStatus.RUNNING, TaskStatus.PAUSED, TaskStatus.THROTTLED)


def active_task_refusal(active: int, cap: int | None, user_name: str, label: str) -> str | None:
    """Why a new task of a user who has `active` active tasks of `label` is refused, or None. PanDA
    refuses the submission ("Too many active tasks"); it counts the existing tasks with `>`, letting
    one more in than the cap says -- jedictl holds the cap exactly."""
    if cap is None or active < cap:
        return None
    return (f"too many active tasks for {user_name}: {active} {label} tasks are active (user_caps.max_active_tasks.{label} = {cap}); "
            "wait until some end, or kill some")


def register_task(conn, definition: TaskDefinition, document: dict[str, Any], now: datetime, by: str,  # noqa: ANN001
                  max_active_tasks: dict[str, int] | None = None, links: dict[str, Any] | None = None) -> int:
    """Store a validated definition as a `registered` task (JEDI's task-parameter insertion), unless its
    user has reached the cap on active tasks of its label (`max_active_tasks`: label -> cap). The caller
    has made sure no task of the user has its unique name (or turned the submission into a
    resubmission: engine/commando/submit.py); one that appeared since is refused as PanDA refuses a
    task already queued. `links`: further columns of the task row (a periodic instance's template and
    due time)."""
    cap = (max_active_tasks or {}).get(definition.prod_source_label)
    if cap is not None:
        active = task_store.active_tasks_of(conn, definition.user_name, definition.prod_source_label, ACTIVE_TASK_STATUSES)
        too_many = active_task_refusal(active, cap, definition.user_name, definition.prod_source_label)
        if too_many:
            raise BadInput(too_many, "user")
    if definition.parent_id is not None and task_store.parent_status(conn, definition.parent_id) is None:
        raise NotFound(f"parent task {definition.parent_id} does not exist", "parent")
    for used_by in skip_task_ids(definition.options.skip_files_used_by):
        if task_store.parent_status(conn, used_by) is None:
            raise NotFound(f"task {used_by} does not exist", "skip_files_used_by")
    refuse_shared_outputs(conn, definition)
    try:
        task_id = task_store.insert_task(conn, {**task_row(definition), **(links or {})}, document, definition.format, definition.unknown_keys,
                                         now, by, output_names=[dataset.name for dataset in definition.outputs()])
    except NameTaken as taken:
        raise BadInput(refusal(taken.task_id, taken.status, definition.name) or str(taken), name_path(definition)) from taken
    if definition.splitting is not None:
        wmcore_store.save_splitting(conn, task_id, definition.splitting.algorithm, definition.splitting.params)
    return task_id


def refuse_shared_outputs(conn, definition: TaskDefinition, task_id: int | None = None) -> None:  # noqa: ANN001
    """An output dataset belongs to one task (seed 000 "Task retry and resubmission": each task has a
    unique outDS; file usage is recorded per task). Another task writing the same dataset would be told
    to write the same file names, so the new one is refused -- the owner is continued by resubmitting it
    under its own name -- unless it sets allowTaskDuplication, the explicit opt-out.

    At submission (`task_id` None) every registered task counts, refined or not (`task_outputs`). The
    refiner (`task_id`: the task it refines) looks at refined tasks only, so of two submissions that
    raced past each other's check the first refined keeps the dataset."""
    # Held until the caller commits, also by a task that may share: a check never misses a writer
    # that has not committed yet.
    dataset_store.lock_output_names(conn, [dataset.name for dataset in definition.outputs()])
    if definition.options.allow_task_duplication:
        return
    owner = output_owner(conn, definition, task_id)
    if owner is not None:
        dataset, row = owner
        if row.user_name == definition.user_name and row.task_name == definition.name and unique(definition):
            # the same outDS, registered by a submission that committed after this one looked for it
            raise BadInput(refusal(row.task_id, row.status, definition.name) or f"jediTaskID={row.task_id} has this outDS",
                           name_path(definition))
        other = f"task {row.task_id} ({row.status})"
        if row.user_name != definition.user_name:
            hint = "another user's outDS is not yours to continue: choose another name, or set allowTaskDuplication to write to it from a new task"
            raise BadInput(f"output dataset {dataset.name} belongs to {other} of user {row.user_name}; {hint}", dataset.path or "outDS")
        if row.status == TaskStatus.BROKEN:  # a broken task is not resubmitted
            hint = "a broken task cannot be continued: set allowTaskDuplication to write to it from a new task"
        else:
            when = "" if row.status in RESUBMITTABLE else " once it has ended"
            # without a unique name a submission never continues a task: PanDA resubmits only with uniqueTaskName
            unique_flag = "" if definition.unique_name else f" with {'uniqueTaskName' if definition.format == 'panda' else 'unique_name'} set"
            hint = (f"resubmit it under its name {row.task_name}{unique_flag} to continue it{when}, or set allowTaskDuplication to "
                    "write to it from a new task")
        raise BadInput(f"output dataset {dataset.name} belongs to {other}; {hint}", dataset.path or "outDS")


def output_owner(conn, definition: TaskDefinition, task_id: int | None = None) -> tuple[Any, Any] | None:  # noqa: ANN001
    """(the dataset definition, the other task's row: task_id, status, user_name, task_name) for the first
    output or log dataset of `definition` (in its order) that another task writes, else None: at
    submission (`task_id` None) any registered task, at refinement the refined ones."""
    outputs = definition.outputs()
    names = [d.name for d in outputs]
    rows = dataset_store.output_writers(conn, names) if task_id is None else dataset_store.output_owners(conn, names)
    owners: dict[str, Any] = {}
    for row in rows:
        if row.task_id != task_id:
            owners.setdefault(row.name, row)
    for dataset in outputs:
        if dataset.name in owners:
            return dataset, owners[dataset.name]
    return None
