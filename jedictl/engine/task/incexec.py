"""What `incexec` may change in a task, and the task's options once the changes are merged (pure).

JEDI's incexec merges new task parameters into the stored ones before the retry (a value of None
deletes a key). Only parameters that do not shape the records already written may change: the ones
pbook's `retry(newOpts=...)` and prun's resubmission accept (panda-server.md §5.2, seed 000 "Task
retry and resubmission") -- splitting by files or size, how many inputs, where the task may run, RAM
and cores. Parameters evaluated when the records were written (nEventsPerJob, event ranges, merge
settings, ...) are refused: changing them needs a new task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jedictl.engine.task.options import BY_NAME, BY_PANDA_KEY, build_options, coerce, options_from_dict
from jedictl.errors import BadInput
from jedictl.model.choices import closest

#: Options incexec may change (jedictl names); PanDA keys and jedictl names are both accepted.
CHANGEABLE_OPTIONS = (
    "n_files_per_job", "n_max_files_per_job", "n_gb_per_job", "n_files", "n_events", "max_walltime_hours",
    "included_sites", "excluded_sites", "avoid_vp", "use_local_io", "ignore_missing_in_ds", "allow_input_wan",
    "ram_count", "max_core_count",
)
#: Task columns incexec may change: the task's site and cloud (PanDA's `site`, `cloud`).
CHANGEABLE_COLUMNS = ("site", "cloud")
#: pbook's names for two of them.
PBOOK_ALIASES = {"memory": "ramCount", "maxCore": "maxCoreCount", "maxNFilesPerJob": "nMaxFilesPerJob"}


@dataclass(frozen=True)
class IncexecChange:
    options: dict[str, Any]  # the task's options after the merge (TaskOptions.as_dict)
    columns: dict[str, Any]  # task columns to write (site, cloud)
    changed: dict[str, Any]  # what changed, by jedictl name (None: removed) -- recorded with the command
    keys: dict[str, str] = field(default_factory=dict)  # jedictl name -> the key as the operator wrote it


def incexec_change(current: Mapping[str, Any], parameters: Any, *, changeable: tuple[str, ...] = CHANGEABLE_OPTIONS,
                    command: str = "incexec") -> IncexecChange:
    """Merge `parameters` (a mapping of PanDA keys or jedictl option names; None removes) into the
    task's stored options `current`; validated as at submission. `changeable` names the options the
    `command` may change (a resubmission with the same outDS has PanDA's own list)."""
    if not isinstance(parameters, Mapping) or not parameters:
        raise BadInput("must be a mapping of task parameters to change, e.g. {nFilesPerJob: 5}")
    values = dict(options_from_dict(current).as_dict())
    columns: dict[str, Any] = {}
    changed: dict[str, Any] = {}
    path_of: dict[str, str] = {}
    for key, value in parameters.items():
        key = str(key)
        if key in CHANGEABLE_COLUMNS:
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise BadInput("must be a name", key)
            columns[key] = value.strip() if isinstance(value, str) else None
            changed[key] = columns[key]
            path_of[key] = key
            continue
        spec = BY_NAME.get(key) or BY_PANDA_KEY.get(PBOOK_ALIASES.get(key, key))
        if spec is None:
            guess = closest(key, [*CHANGEABLE_COLUMNS, *(BY_NAME[name].panda or name for name in changeable)])
            raise BadInput("unknown task parameter" + (f"; did you mean {guess}?" if guess else ""), key)
        if spec.name not in changeable:
            raise BadInput(f"cannot be changed by {command} (the records written at submission depend on it); submit a new task", key)
        coerced = coerce(spec, value, key)
        if coerced is None:
            values.pop(spec.name, None)
        else:
            values[spec.name] = coerced
        changed[spec.name] = coerced
        path_of[spec.name] = key
    options = build_options(values, {**{name: name for name in values}, **path_of})
    return IncexecChange(options.as_dict(), columns, changed, path_of)
