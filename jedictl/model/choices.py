"""The fixed sets of values that options and fields take, in one place: the commands refuse anything
else (in the words of `refusal`, which also suggests the closest value) and shell completion offers
them. A filter given a value outside its set would match nothing, forever (`jobs dispatch
--resource-type NOPE` is an executor that never gets work), so it is refused, never run.

Which option takes which set (`OPTION_CHOICES`) is listed at the end, for completion and the docs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from jedictl.model import ElementStatus, JobStatus, ResourceType, SiteState, TaskStatus

#: Every status a task row can hold: `TaskStatus`, and the "doing" statuses of the operator commands
#: (`kill` waits in toabort; `reassign` passes through reassigning/toreassign).
TASK_STATUSES: tuple[str, ...] = tuple(s.value for s in TaskStatus) + ("toabort", "toreassign", "reassigning")
JOB_STATUSES: tuple[str, ...] = tuple(s.value for s in JobStatus)
#: What a heartbeat may say a job is doing (its end goes through `jobs report`).
HEARTBEAT_STATUSES: tuple[str, ...] = ("starting", "running", "holding", "transferring", "merging")
#: The built-in resource types; `resource_types` in the settings may define others, and what a command
#: accepts is the settings' list.
RESOURCE_TYPES: tuple[str, ...] = tuple(s.value for s in ResourceType)
#: The data catalog: what a name is, and whether files may still be added.
CATALOG_KINDS: tuple[str, ...] = ("dataset", "container")
CATALOG_STATES: tuple[str, ...] = ("open", "closed")
#: The resource catalog (docs/sites.md).
SITE_STATUSES: tuple[str, ...] = ("online", "brokeroff", "offline", "test")
NUCLEUS_STATUSES: tuple[str, ...] = ("active", "inactive")
ENDPOINT_KINDS: tuple[str, ...] = ("disk", "tape")
BATCH_SYSTEMS: tuple[str, ...] = ("slurm", "local")
#: What a retry rule does (docs/retry-rules.md).
RETRY_ACTIONS: tuple[str, ...] = ("no_retry", "limit_retry", "increase_memory", "increase_cputime", "reduce_input_per_job")
#: Where a pilot is in its life (`pilots list --state`).
PILOT_STATES: tuple[str, ...] = ("submitted", "running", "finished", "failed", "cancelled", "lost")
#: `data import --scan --transfer`.
TRANSFER_MODES: tuple[str, ...] = ("copy", "move", "link", "none")
#: The agents `run --agents` takes, in pipeline order (periodic first: the tasks it makes are refined,
#: fed and given jobs in the same run).
AGENTS: tuple[str, ...] = ("periodic", "refine", "feed", "broker", "generate", "harvest", "finalize", "watch")
LOG_FORMATS: tuple[str, ...] = ("text", "json")
#: A periodic template (docs/periodic-tasks.md).
PERIODIC_STATUSES: tuple[str, ...] = ("active", "paused")
OUTPUT_FORMATS: tuple[str, ...] = ("table", "json", "yaml", "tsv")
#: The queue layers (docs/queue-layers.md): a work-queue element's status, a site's state for an agent.
ELEMENT_STATUSES: tuple[str, ...] = tuple(s.value for s in ElementStatus)
AGENT_SITE_STATES: tuple[str, ...] = tuple(s.value for s in SiteState)
#: The units of a task's ramCount.
RAM_UNITS: tuple[str, ...] = ("MB", "MBPerCore", "MBPerCoreFixed")


def closest(value: str, allowed: Iterable[str]) -> str | None:
    """The allowed value `value` most likely meant: the same but for case, else the nearest spelling."""
    options = list(allowed)
    folded = {option.lower(): option for option in options}
    if value.lower() in folded:
        return folded[value.lower()]
    match = difflib.get_close_matches(value.lower(), list(folded), n=1, cutoff=0.6)
    return folded[match[0]] if match else None


def refusal(value: str, allowed: Iterable[str], noun: str) -> str:
    """Why `value` is refused, in one line: `'runing' is not a task status (allowed: registered, ...;
    did you mean 'running'?)`."""
    options = list(allowed)
    guess = closest(value, options)
    hint = f"; did you mean {guess!r}?" if guess is not None and guess != value else ""
    return f"{value!r} is not {noun} (allowed: {', '.join(options)}{hint})"


#: (command path, option) -> the values it takes. Completion offers them; the commands refuse others.
#: `jobs dispatch --resource-type` takes the names in the settings' `resource_types` (these by default).
OPTION_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("task list", "--status"): TASK_STATUSES,
    ("jobs list", "--status"): JOB_STATUSES,
    ("jobs heartbeat", "--status"): HEARTBEAT_STATUSES,
    ("jobs dispatch", "--resource-type"): RESOURCE_TYPES,
    ("data list", "--kind"): CATALOG_KINDS,
    ("data list", "--state"): CATALOG_STATES,
    ("data import", "--transfer"): TRANSFER_MODES,
    ("sites list", "--status"): SITE_STATUSES,
    ("sites set-status", "STATUS"): SITE_STATUSES,
    ("retry-rules list", "--action"): RETRY_ACTIONS,
    ("pilots list", "--state"): PILOT_STATES,
    ("harvest", "--batch"): BATCH_SYSTEMS,
    ("run", "--agents"): AGENTS,
    ("run", "--log-format"): LOG_FORMATS,
    ("periodic list", "--status"): PERIODIC_STATUSES,
    ("agents add", "--state"): AGENT_SITE_STATES,
    ("agents set-state", "STATE"): AGENT_SITE_STATES,
    ("workqueue list", "--status"): ELEMENT_STATUSES,
}
