"""Resubmission with the same outDS (pure): a task submitted under the name of an existing task of the
same user continues that task, as PanDA's server turns such a submission into an `incexec` command
(seed 000 "Task retry and resubmission", "Broken tasks"; jedi-inventory.md §3.1 insertTaskParamsPanda,
§9.3 incexec; panda-server.md §5.4).

This module decides, from plain values: whether the existing task may be continued (`refusal`: PanDA's
statuses), which parameters the new submission changes (PanDA's list, `RESUBMIT_OPTIONS`), which it
cannot (`Kept`: PanDA's lenient format keeps them and says so, jedictl's strict spec is refused), the
input datasets it adds ("you can add or use a new input"), and its new code (`--use-new-code`, PanDA's
`fixedSandbox`). Retrying the failed and unused files and feeding the inputs again is incexec's
(engine/commando/submit.py applies the plan through it).

What the new submission leaves out: in PanDA's format a key it does not give keeps its old value, as
JEDI merges only the keys given (`nFiles` too: JEDI keeps it on incexec); `null` removes one. A jedictl
spec describes the whole task, so an option it leaves out takes its default -- except `parent` and
`priority`, which the command line may have set the first time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.definition import SANDBOX_RE, DatasetDef, TaskDefinition, effective_options, payload_identity, sandbox_of
from jedictl.engine.task.incexec import IncexecChange, incexec_change
from jedictl.engine.task.options import BY_NAME, SPECS
from jedictl.errors import BadInput
from jedictl.model import DatasetType, TaskStatus

#: Statuses a task is continued from (PanDA's insertTaskParamsPanda; incexec's own set).
RESUBMITTABLE = frozenset({TaskStatus.FINISHED, TaskStatus.FAILED, TaskStatus.ABORTED, TaskStatus.DONE, TaskStatus.EXHAUSTED})

#: Options a resubmission changes: the keys PanDA's server passes on to the incexec (ramCount,
#: forceStaged, nFiles, nEvents and the changeable split rules NF, NG, MF, AI, AV, IL, LI, CC, TW, IM, NP)
#: that jedictl models; site, cloud, includedSite, excludedSite and the priority are the others.
RESUBMIT_OPTIONS = (
    "n_files_per_job", "n_gb_per_job", "n_max_files_per_job", "n_files", "n_events", "included_sites", "excluded_sites",
    "ignore_missing_in_ds", "allow_incomplete_in_ds", "avoid_vp", "t1_weight", "allow_input_lan", "use_local_io",
    "max_core_count", "no_auto_pause", "ram_count",
)
#: Options of the submission itself, not of the task it continues.
SUBMISSION_OPTIONS = frozenset({"allow_task_duplication"})
#: A job's size is given by one of these: a new one replaces the other (prun writes one of them).
SPLIT_SIZE = ("n_files_per_job", "n_gb_per_job")
#: Attributes fixed at submission: (definition attribute, spec path, PanDA key).
FIXED_FIELDS = (
    ("vo", "vo", "vo"), ("prod_source_label", "label", "prodSourceLabel"), ("task_type", "task_type", "taskType"),
    ("processing_type", "processing_type", "processingType"), ("working_group", "working_group", "workingGroup"),
    ("country_group", "country_group", "countryGroup"), ("campaign", "campaign", "campaign"), ("req_id", "req_id", "reqID"),
    ("parent_id", "parent", "parent_tid"), ("trans_path", "transformation", "transPath"), ("trans_home", "cache", "transHome"),
    ("trans_uses", "release", "transUses"), ("architecture", "architecture", "architecture"),
    ("container_name", "container", "container_name"), ("nucleus", "placement.nucleus", "nucleus"),
    ("work_queue", "work_queue", "workQueueName"), ("gshare", "gshare", "gshare"), ("no_input", "no_input", "noInput"),
)
_FORMATS = {"panda": "PanDA task parameters", "spec": "a jedictl task spec"}


def refusal(task_id: int, status: str, name: str) -> str | None:
    """None when a task in `status` may be continued by a submission with its outDS `name`, else the
    one-line reason, in PanDA's words."""
    if status in RESUBMITTABLE:
        return None
    if status == TaskStatus.BROKEN:
        return (f"jediTaskID={task_id} is broken for outDS={name}: a broken task cannot be resubmitted; submit the fixed task "
                "with allowTaskDuplication (submit --allow-task-duplication) to make a new task with this outDS")
    if status == TaskStatus.REGISTERED:
        return f"jediTaskID={task_id} is already queued for outDS={name}: you cannot submit duplicated tasks"
    return f"jediTaskID={task_id} is in the {status} state for outDS={name}: resubmit it once it is finished, failed or done"


@dataclass(frozen=True)
class StoredInput:
    """One input dataset row of the task: its name, stream, and the container it was expanded from."""

    name: str
    stream: str
    container: str | None = None


@dataclass(frozen=True)
class StoredTask:
    """The task a submission would continue, as the store holds it now."""

    id: int
    status: str
    definition: TaskDefinition  # its submitted parameters, parsed again
    options: Mapping[str, Any]  # tasks.options now (incexec, the retry module may have changed them)
    site: str | None
    cloud: str | None
    task_priority: int
    source_url: str | None
    inputs: tuple[StoredInput, ...]
    templates: Mapping[str, str]  # job-parameter templates by kind ("job", "merge")


@dataclass(frozen=True)
class Kept:
    """A parameter the new submission gives another value that a resubmission does not change."""

    path: str
    kept: Any
    asked: Any
    hint: str = ""

    def refusal(self, task_id: int) -> str:
        advice = self.hint or "submit a new task under another name to change it"
        return f"task {task_id} keeps {_short(self.kept)}, a resubmission does not change it ({_short(self.asked)} asked); {advice}"

    def warning(self, task_id: int) -> str:
        return (f"jedictl: warning: {self.path}: not changed by the resubmission: task {task_id} keeps {_short(self.kept)} "
                f"({_short(self.asked)} asked)" + (f"; {self.hint}" if self.hint else ""))


@dataclass(frozen=True)
class NewInput:
    name: str
    stream: str


@dataclass(frozen=True)
class Resubmission:
    """What continuing the task does, before incexec retries its files and feeds its inputs again."""

    task_id: int
    previous: str
    change: IncexecChange  # the task's options after the merge, and task columns to write
    changes: dict[str, Any]  # what changes, by the key as the submission writes it (recorded, printed)
    kept: tuple[Kept, ...] = ()
    inputs_added: tuple[NewInput, ...] = ()
    templates: dict[str, str] = field(default_factory=dict)  # new job-parameter templates (new code)


@dataclass(frozen=True)
class _Given:
    """Which parameters the new submission gives (PanDA's format: the keys present)."""

    document: Mapping[str, Any]
    panda: bool
    parent: bool
    priority: bool

    def key(self, *keys: str) -> str | None:
        """The first of `keys` present in a PanDA document; None when none is (or for a spec)."""
        return next((key for key in keys if key and key in self.document), None) if self.panda else None


def plan(stored: StoredTask, new: TaskDefinition, document: Mapping[str, Any], *, use_new_code: bool = False,
         parent_given: bool = False, priority_given: bool = False) -> Resubmission:
    """The resubmission of `stored` by the submission `new` (parsed from `document`). BadInput when the
    task cannot be continued, or (a jedictl spec) when the spec changes what a resubmission keeps."""
    name_path = "taskName" if new.format == "panda" else "name"
    reason = refusal(stored.id, stored.status, new.name)
    if reason:
        raise BadInput(reason, name_path)
    old = stored.definition
    if old.format != new.format:
        raise BadInput(f"task {stored.id} was submitted as {_FORMATS[old.format]}: resubmit it in that format", name_path)
    panda = new.format == "panda"
    given = _Given(document, panda, parent=parent_given or ("parent_tid" if panda else "parent") in document,
                   priority=priority_given or ("taskPriority" if panda else "priority") in document)

    parameters, written = _changeable(stored, new, given)
    kept = _fixed(old, new, given)
    added, input_kept = _inputs(stored, old, new)
    templates, code_columns, code_changes, code_kept = _code(stored, new, document, use_new_code)
    kept += input_kept + code_kept
    if not panda and kept:  # jedictl's own spec is strict (docs/architecture.md, decision 9)
        raise BadInput(kept[0].refusal(stored.id), kept[0].path)

    change = (incexec_change(stored.options, parameters, changeable=RESUBMIT_OPTIONS, command="a resubmission")
              if parameters else IncexecChange(dict(stored.options), {}, {}))
    columns: dict[str, Any] = {**change.columns, **code_columns}
    changes = {written.get(name, change.keys.get(name, name)): value for name, value in change.changed.items()}
    if given.priority and new.task_priority != stored.task_priority:
        columns.update(task_priority=new.task_priority, current_priority=new.task_priority)
        changes["taskPriority" if panda else "priority"] = new.task_priority
    if "job" in templates:  # the payload's identity follows its code
        columns["request_type"] = payload_identity(old.trans_uses, old.trans_home, old.trans_path, templates["job"])
    changes.update(code_changes)
    return Resubmission(stored.id, stored.status, dataclasses.replace(change, columns=columns), changes, tuple(kept),
                        tuple(added), templates)


def _changeable(stored: StoredTask, new: TaskDefinition, given: _Given) -> tuple[dict[str, Any], dict[str, str]]:
    """The changeable parameters whose new value differs from the task's: (parameters for incexec_change,
    how each is written in the submission by jedictl name)."""
    parameters: dict[str, Any] = {}
    written: dict[str, str] = {}
    options = effective_options(new)  # what the refiner would store, so a derived value is no change
    for name in RESUBMIT_OPTIONS:
        spec = BY_NAME[name]
        key = given.key(spec.panda, *spec.aliases)
        if given.panda and key is None:
            continue  # PanDA merges only the keys given
        value = getattr(options, name)
        if value != stored.options.get(name):
            parameters[key or name] = value
            written[name] = key or f"{spec.section}.{name}"
    if given.panda:
        for size, other in (SPLIT_SIZE, SPLIT_SIZE[::-1]):
            other_key = BY_NAME[other].panda
            if written.get(size) and parameters[written[size]] is not None and other_key not in given.document \
                    and stored.options.get(other) is not None:
                parameters[other_key] = None  # the new split size replaces the old one
                written[other] = other_key
    for column in ("site", "cloud"):
        if given.panda and column not in given.document:
            continue
        value = getattr(new, column)
        if value != getattr(stored, column):
            parameters[column] = value
            written[column] = column if given.panda else f"placement.{column}"
    return parameters, written


def _fixed(old: TaskDefinition, new: TaskDefinition, given: _Given) -> list[Kept]:
    """Parameters fixed at submission that the new submission gives other values."""
    kept: list[Kept] = []
    for spec in SPECS:
        if spec.name in RESUBMIT_OPTIONS or spec.name in SUBMISSION_OPTIONS:
            continue
        path = (given.key(spec.panda, *spec.aliases) or ("jobParameters" if not spec.panda else None)) if given.panda \
            else f"{spec.section}.{spec.name}"
        before, after = getattr(old.options, spec.name), getattr(new.options, spec.name)
        if path and before != after:
            kept.append(Kept(path, before, after))
    for attribute, spec_path, panda_key in FIXED_FIELDS:
        if (given.panda and panda_key not in given.document) or (attribute == "parent_id" and not given.parent):
            continue
        before, after = getattr(old, attribute), getattr(new, attribute)
        if before != after:
            kept.append(Kept(panda_key if given.panda else spec_path, before, after))
    old_outputs, new_outputs = _by_stream(old.outputs()), _by_stream(new.outputs())
    for stream in sorted(set(old_outputs) | set(new_outputs)):
        before, after = old_outputs.get(stream, []), new_outputs.get(stream, [])
        if [_shape(d) for d in before] != [_shape(d) for d in after]:
            path = (after or before)[0].path or ("jobParameters" if given.panda else "outputs")
            kept.append(Kept(path, _output_text(before), _output_text(after), "a task's output datasets and file names never change"))
    if old.merge is not None and new.merge is not None:
        before_merge, after_merge = (dataclasses.replace(m, job_parameters="") for m in (old.merge, new.merge))
        if before_merge != after_merge and (not given.panda or "mergeSpec" in given.document):
            kept.append(Kept("mergeSpec" if given.panda else "merge", before_merge, after_merge))
    return kept


def _inputs(stored: StoredTask, old: TaskDefinition, new: TaskDefinition) -> tuple[list[NewInput], list[Kept]]:
    """Input datasets the new submission adds to a stream the task reads (PanDA: dsForIN and the like),
    and what it asks that a resubmission cannot do: a new stream, other attributes, an input dropped."""
    added: list[NewInput] = []
    kept: list[Kept] = []
    before, after = _by_stream(old.inputs()), _by_stream(new.inputs())
    for stream, datasets in after.items():
        names = [d.name for d in datasets]
        if stream not in before:
            kept.append(Kept(datasets[0].path, None, f"input stream {stream} ({', '.join(names)})",
                             "a resubmission adds datasets to the task's inputs, not new inputs"))
            continue
        if _input_shape(before[stream][0]) != _input_shape(datasets[0]):
            kept.append(Kept(datasets[0].path, _input_shape(before[stream][0]), _input_shape(datasets[0])))
            continue
        known = {d.name for d in before[stream]} | {i.name for i in stored.inputs if i.stream == stream} | {
            i.container for i in stored.inputs if i.stream == stream and i.container}
        if datasets[0].type == DatasetType.INPUT:
            added.extend(NewInput(name, stream) for name in names if name not in known)
    for stream, datasets in before.items():
        dropped = [d.name for d in datasets if d.name not in {n.name for n in after.get(stream, [])}]
        if dropped and stream in after:
            kept.append(Kept(after[stream][0].path, f"input {', '.join(dropped)}", "without it",
                             "an input stays in the task: its failed and unused files are processed with the rest"))
        elif dropped:
            kept.append(Kept(datasets[0].path, f"input stream {stream} ({', '.join(dropped)})", None,
                             "an input stays in the task: its failed and unused files are processed with the rest"))
    return added, kept


def _code(stored: StoredTask, new: TaskDefinition, document: Mapping[str, Any],
          use_new_code: bool) -> tuple[dict[str, str], dict[str, Any], dict[str, Any], list[Kept]]:
    """The new code: (job-parameter templates to write, task columns, changes to record, what is kept).

    PanDA's format (JEDI's incexec with fixedSandbox): the sandbox `-a ARCHIVE` of the job parameters
    -- and of the merge job's -- becomes the new one, with the new sourceURL; the rest of the job
    parameters stays. A jedictl spec: its command, merge command and source_url are the code."""
    templates: dict[str, str] = {}
    columns: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    kept: list[Kept] = []
    if new.format != "panda":
        code = {"job": new.job_parameters, **({"merge": new.merge.job_parameters} if new.merge and "merge" in stored.templates else {})}
        differs = {kind: text for kind, text in code.items() if text != stored.templates.get(kind)}
        if use_new_code:
            templates = differs
            changes.update({("command" if kind == "job" else "merge.command"): text for kind, text in differs.items()})
            if new.source_url != stored.source_url:
                columns["source_url"] = changes["source_url"] = new.source_url
        else:
            hint = "--use-new-code replaces the code of the task"
            kept += [Kept("command" if kind == "job" else "merge.command", stored.templates.get(kind), text, hint)
                     for kind, text in differs.items()]
            if new.source_url != stored.source_url:
                kept.append(Kept("source_url", stored.source_url, new.source_url, hint))
        return templates, columns, changes, kept

    current = sandbox_of(stored.templates.get("job"))
    offered = sandbox_of(new.job_parameters)
    fixed = fields.text(document.get("fixedSandbox"), "fixedSandbox", max_length=512)
    asked = fixed or (offered if use_new_code else None)
    if fixed or use_new_code:
        where = "fixedSandbox" if fixed else "--use-new-code"
        if current is None:
            raise BadInput(f"task {stored.id}'s job parameters name no sandbox (-a ARCHIVE) to replace", where)
        if asked is None:
            raise BadInput("the job parameters name no sandbox (-a ARCHIVE) to use as the new code", "jobParameters")
        if asked != current:
            templates = {kind: _with_sandbox(text, asked) for kind, text in stored.templates.items() if sandbox_of(text)}
            changes["fixedSandbox"] = asked
        if new.source_url != stored.source_url:
            columns["source_url"] = changes["sourceURL"] = new.source_url
    else:
        hint = "--use-new-code (prun's --useNewCode) makes the task use the new code"
        if offered and current and offered != current:
            kept.append(Kept("jobParameters", f"sandbox {current}", f"sandbox {offered}", hint))
        if "sourceURL" in document and new.source_url != stored.source_url:
            kept.append(Kept("sourceURL", stored.source_url, new.source_url, hint))
    if _with_sandbox(stored.templates.get("job", ""), "") != _with_sandbox(new.job_parameters, ""):
        kept.append(Kept("jobParameters", stored.templates.get("job"), new.job_parameters))
    if new.merge is not None and "merge" in stored.templates and "mergeSpec" in document and \
            _with_sandbox(stored.templates["merge"], "") != _with_sandbox(new.merge.job_parameters, ""):
        kept.append(Kept("mergeSpec.jobParameters", stored.templates["merge"], new.merge.job_parameters))
    return templates, columns, changes, kept


def _with_sandbox(text: str, sandbox: str) -> str:
    """`text` with every `-a ARCHIVE` naming `sandbox` (JEDI rewrites each such item and the merge's)."""
    return SANDBOX_RE.sub(lambda found: found.group(0)[: found.start(1) - found.start(0)] + sandbox, text)


def _by_stream(datasets: list[DatasetDef]) -> dict[str, list[DatasetDef]]:
    grouped: dict[str, list[DatasetDef]] = {}
    for dataset in datasets:
        grouped.setdefault(dataset.stream, []).append(dataset)
    return grouped


def _shape(dataset: DatasetDef) -> DatasetDef:
    return dataclasses.replace(dataset, path="")


def _input_shape(dataset: DatasetDef) -> tuple[Any, ...]:
    """What an input stream is, apart from its dataset names."""
    return dataset.type.value, dataset.is_master, dataset.attributes.as_dict(), dataset.container


def _output_text(datasets: list[DatasetDef]) -> str | None:
    return ", ".join(f"{d.name} ({d.file_template})" for d in datasets) or None


def _short(value: Any, width: int = 80) -> str:
    text = "no value" if value is None else (value if isinstance(value, str) else repr(value))
    return text if len(text) <= width else text[: width - 3] + "..."
