"""PanDA task parameters (the JSON `prun`/`pathena` write) -> TaskDefinition.

Follows JEDI's generic refiner (jedi-inventory.md §3.3, §3.6): the `jobParameters` items are
concatenated into the job-parameter template; template items with a `dataset` become datasets (the
first input item is the master, later ones secondaries); output and log items give file-name templates
(the text after the last `=`) and are rewritten to `${OUTPUTn}` / `${LOGn}`; `noInput` adds a
`pseudo_dataset` master; a `number` item using `${RNDMSEED}` adds the random-seed dataset. Keys jedictl
does not act on are kept in the stored parameters and reported as unknown.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.options import BY_PANDA_KEY, build_options, coerce
from jedictl.engine.task.definition import (
    DatasetAttributes,
    DatasetDef,
    PRIORITY_RANGE,
    MergeDef,
    TaskDefinition,
    check_datasets,
    check_file_template,
    check_name,
    check_placeholders,
    check_regexes,
    placeholder_names,
)
from jedictl.engine.task.build import parse_panda_build_spec
from jedictl.engine.task.preprocess import parse_panda_prepro_spec
from jedictl.errors import BadInput
from jedictl.model import DatasetType

ANALYSIS_LABELS = ("user", "panda")

#: Keys that shape the task itself (besides the typed options in engine.task.options).
STRUCTURE_KEYS = frozenset({
    "taskName", "userName", "vo", "prodSourceLabel", "taskType", "processingType", "workingGroup",
    "countryGroup", "campaign", "reqID", "taskPriority", "uniqueTaskName", "parent_tid", "transPath",
    "transHome", "transUses", "architecture", "container_name", "sourceURL", "cloud", "site", "nucleus",
    "workQueueName", "gshare", "noInput", "jobParameters", "log", "log_merge", "mergeSpec",
    # prun --useNewCode: the sandbox a resubmission puts in the task's job parameters (engine/task/resubmission.py)
    "fixedSandbox",
    # prun/pathena shipping sources: a build job per site makes the lib file the run jobs read (engine/task/build.py)
    "buildSpec",
    # a preprocess job before the task's normal jobs (engine/task/preprocess.py)
    "preproSpec",
})
#: Keys JEDI only records (shown by `task show`, no behaviour).
INFORMATIONAL_KEYS = frozenset({
    "cliParams", "osInfo", "ticketID", "ticketSystemType", "official", "noEmail", "framework", "system",
    "currentPriority",
})
_ITEM_KEYS = frozenset({
    "type", "param_type", "value", "dataset", "container", "token", "destination", "attributes", "ratio",
    "eventRatio", "check", "usedup", "random", "reusable", "indexConsistent", "mergeOnly", "offset",
    "allowNoOutput", "nFilesPerJob", "num_records", "transient", "pseudo", "expand", "consolidate", "files",
    "include", "exclude", "hidden", "es_only", "padding",
})
_PARAM_TYPES = ("input", "pseudo_input", "output", "log", "number", "random_seed")


def misspelt_keys(unknown_keys: Sequence[str]) -> list[tuple[str, str]]:
    """(unknown key, the known key it most likely means) for the unknown keys of PanDA task parameters
    that look like a typo (`nFilesPerjob` -> `nFilesPerJob`), item keys (`jobParameters[1].datset`)
    included. A key like no known one (a newer PanDA's) is left out: it is kept, not a mistake."""
    top = sorted(STRUCTURE_KEYS | INFORMATIONAL_KEYS | set(BY_PANDA_KEY))
    found = []
    for key in unknown_keys:
        head, dot, name = key.rpartition(".") if "]." in key else ("", "", key)
        folded = {known.lower(): known for known in (sorted(_ITEM_KEYS) if dot else top)}
        match = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.8)
        if match:
            found.append((key, f"{head}{dot}{folded[match[0]]}"))
    return found


def is_panda_params(document: dict[str, Any]) -> bool:
    """PanDA's format is recognised by its camelCase structure keys."""
    return "jobParameters" in document or "taskName" in document


def parse_panda_params(
    document: dict[str, Any],
    *,
    user: str,
    priority: int | None = None,
    parent_id: int | None = None,
    analysis_priority: int = 1000,
) -> TaskDefinition:
    name = check_name(fields.text(document.get("taskName"), "taskName", required=True), "taskName", "task name")
    vo = fields.text(document.get("vo"), "vo", required=True, max_length=32)
    label = fields.text(document.get("prodSourceLabel"), "prodSourceLabel", required=True, max_length=32)
    user_name = user or fields.text(document.get("userName"), "userName", max_length=128)
    task_type = fields.text(document.get("taskType"), "taskType", max_length=64) or ("anal" if label in ANALYSIS_LABELS else "prod")
    task_priority = priority if priority is not None else fields.integer(document.get("taskPriority"), "taskPriority", *PRIORITY_RANGE)
    if task_priority is None:
        task_priority = analysis_priority if label in ANALYSIS_LABELS else 0

    values: dict[str, Any] = {}
    path_of: dict[str, str] = {}
    for key, raw in document.items():
        spec = BY_PANDA_KEY.get(key)
        if spec is None:
            continue
        if spec.name == "max_attempt" and not raw:
            continue  # JEDI drops a falsy maxAttempt
        values[spec.name] = coerce(spec, raw, key)
        path_of[spec.name] = key

    builder = _ItemParser(document, task_type)
    items = fields.sequence(document.get("jobParameters"), "jobParameters")
    if not items:
        raise BadInput("is required and must list at least one item", "jobParameters")
    no_input = fields.flag(document.get("noInput"), "noInput")
    if no_input:
        builder.add_pseudo_master()
    for index, item in enumerate(items):
        builder.add_item(item, f"jobParameters[{index}]", in_job_parameters=True)
    for key in ("log", "log_merge"):
        raw_log = document.get(key)
        log_items = raw_log if isinstance(raw_log, list) else ([raw_log] if raw_log is not None else [])
        for index, item in enumerate(log_items):
            path = f"{key}[{index}]" if isinstance(raw_log, list) else key
            builder.add_item(item, path, in_job_parameters=False, merge_log=(key == "log_merge"))
    if builder.random_seed_offset is not None:
        values["random_seed_offset"] = builder.random_seed_offset
    if builder.first_event_offset is not None:
        values["first_event_offset"] = builder.first_event_offset
    options = build_options(values, path_of)

    merge = None
    if options.merge_output:
        spec = fields.mapping(document.get("mergeSpec"), "mergeSpec")
        if not spec:
            raise BadInput("mergeOutput needs a mergeSpec with the merge job's jobParameters", "mergeSpec")
        merge = MergeDef(
            trans_path=fields.text(spec.get("transPath"), "mergeSpec.transPath"),
            job_parameters=fields.text(spec.get("jobParameters"), "mergeSpec.jobParameters", required=True, max_length=65536) or "",
            use_local_io=fields.flag(spec.get("useLocalIO"), "mergeSpec.useLocalIO"),
        )
    build = parse_panda_build_spec(document["buildSpec"]) if document.get("buildSpec") is not None else None
    preprocess = parse_panda_prepro_spec(document["preproSpec"]) if document.get("preproSpec") is not None else None
    if no_input and options.n_events is None and options.n_files is None:
        raise BadInput("a no-input task needs nEvents (with nEventsPerJob) or nFiles to know how many jobs to make", "noInput")

    datasets = builder.datasets
    check_datasets(datasets, "jobParameters")
    job_parameters = builder.job_parameters()
    streams = {d.stream for d in datasets}
    check_placeholders(job_parameters, streams, "jobParameters", strict=False)

    architecture = document.get("architecture")
    if isinstance(architecture, dict):
        architecture = json.dumps(architecture, sort_keys=True)
    known = STRUCTURE_KEYS | INFORMATIONAL_KEYS | set(BY_PANDA_KEY)
    unknown = sorted(key for key in document if key not in known and not key.startswith("dsFor")) + builder.unknown
    parent = parent_id if parent_id is not None else fields.integer(document.get("parent_tid"), "parent_tid", minimum=1)
    return TaskDefinition(
        name=name,
        user_name=user_name or "",
        vo=vo or "",
        prod_source_label=label or "",
        task_type=task_type,
        task_priority=task_priority,
        unique_name=fields.flag(document.get("uniqueTaskName"), "uniqueTaskName"),
        job_parameters=job_parameters,
        datasets=tuple(datasets),
        options=options,
        processing_type=fields.text(document.get("processingType"), "processingType", max_length=64),
        working_group=fields.text(document.get("workingGroup"), "workingGroup", max_length=32),
        country_group=fields.text(document.get("countryGroup"), "countryGroup", max_length=32),
        campaign=fields.text(document.get("campaign"), "campaign", max_length=64),
        req_id=fields.integer(document.get("reqID"), "reqID", minimum=0),
        parent_id=parent,
        trans_path=fields.text(document.get("transPath"), "transPath", max_length=512),
        trans_home=fields.text(document.get("transHome"), "transHome", max_length=256),
        trans_uses=fields.text(document.get("transUses"), "transUses", max_length=256),
        architecture=fields.text(architecture, "architecture", max_length=256),
        container_name=fields.text(document.get("container_name"), "container_name", max_length=512),
        source_url=fields.text(document.get("sourceURL"), "sourceURL"),
        cloud=fields.text(document.get("cloud"), "cloud", max_length=64),
        site=fields.text(document.get("site"), "site", max_length=256),
        nucleus=fields.text(document.get("nucleus"), "nucleus", max_length=64),
        work_queue=fields.text(document.get("workQueueName"), "workQueueName", max_length=64),
        gshare=fields.text(document.get("gshare"), "gshare", max_length=64),
        no_input=no_input,
        merge=merge,
        build=build,
        preprocess=preprocess,
        format="panda",
        unknown_keys=tuple(unknown),
    )


class _ItemParser:
    """Walks the jobParameters/log items in order, collecting datasets and the template text."""

    def __init__(self, document: dict[str, Any], task_type: str):
        self.document = document
        self.task_type = task_type
        self.datasets: list[DatasetDef] = []
        self.pieces: list[tuple[str, bool]] = []  # (text, pad with a space)
        self.has_master = False
        self.n_outputs = 0
        self.n_logs = 0
        self.random_seed_offset: int | None = None
        self.first_event_offset: int | None = None
        self.unknown: list[str] = []  # item keys JEDI's generic refiner does not read

    def job_parameters(self) -> str:
        return "".join(text + (" " if pad else "") for text, pad in self.pieces).rstrip()

    def add_pseudo_master(self) -> None:
        self.datasets.append(DatasetDef(name="pseudo_dataset", type=DatasetType.PSEUDO_INPUT, stream="IN", is_master=True, path="noInput"))
        self.has_master = True

    def add_item(self, item: Any, path: str, in_job_parameters: bool, merge_log: bool = False) -> None:
        if not isinstance(item, dict):
            raise BadInput("must be a mapping", path)
        self.unknown.extend(f"{path}.{key}" for key in item if key not in _ITEM_KEYS)
        kind = fields.text(item.get("type"), f"{path}.type", required=True)
        if kind not in ("constant", "template"):
            raise BadInput("must be constant or template", f"{path}.type")
        value = fields.text(item.get("value"), f"{path}.value", max_length=65536) or ""
        if kind == "template":
            value = self._template(item, value, path, merge_log)
        if in_job_parameters and not fields.flag(item.get("hidden"), f"{path}.hidden"):
            if fields.flag(item.get("es_only"), f"{path}.es_only"):
                value = f"<PANDA_ES_ONLY>{value}</PANDA_ES_ONLY>"
            padding = item.get("padding", True)
            self.pieces.append((value, padding is not False))

    def _template(self, item: dict[str, Any], value: str, path: str, merge_log: bool) -> str:
        param_type = fields.text(item.get("param_type"), f"{path}.param_type", required=True)
        if param_type not in _PARAM_TYPES:
            raise BadInput(f"must be one of {', '.join(_PARAM_TYPES)}", f"{path}.param_type")
        if param_type in ("number", "random_seed"):
            offset = fields.integer(item.get("offset"), f"{path}.offset", minimum=0) or 0
            if "${RNDMSEED}" in value or param_type == "random_seed":
                self._add_random_seed()
                self.random_seed_offset = offset
            if "${FIRSTEVENT}" in value:
                self.first_event_offset = offset
            return value
        names = fields.names(item.get("dataset"), f"{path}.dataset")
        if not names:
            raise BadInput("is required for a template item", f"{path}.dataset")
        if param_type in ("input", "pseudo_input"):
            self._add_inputs(item, value, names, param_type, path)
            return value
        return self._add_output(item, value, names, param_type, path, merge_log)

    def _add_random_seed(self) -> None:
        if not any(d.type == DatasetType.RANDOM_SEED for d in self.datasets):
            self.datasets.append(DatasetDef(name="RNDMSEED", type=DatasetType.RANDOM_SEED, stream="RNDMSEED", path="jobParameters"))

    def _add_inputs(self, item: dict[str, Any], value: str, names: list[str], param_type: str, path: str) -> None:
        used = {d.stream for d in self.datasets}
        placeholders = placeholder_names(value)
        stream = placeholders[0] if placeholders else ("IN" if "IN" not in used else f"IN{len(used)}")
        names = names + [n for n in fields.names(self.document.get(f"dsFor{stream}"), f"dsFor{stream}") if n not in names]
        attributes = _attributes(item, path)
        is_master = not self.has_master
        self.has_master = True
        for dataset_name in dict.fromkeys(names):
            check_name(dataset_name, f"{path}.dataset", "dataset name")
            if any(d.name == dataset_name and d.stream == stream for d in self.datasets):
                continue  # JEDI skips duplicates
            dtype = DatasetType.PSEUDO_INPUT if param_type == "pseudo_input" else DatasetType.INPUT
            self.datasets.append(DatasetDef(
                name=dataset_name, type=dtype, stream=stream, is_master=is_master,
                container=fields.text(item.get("container"), f"{path}.container", max_length=512),
                attributes=attributes, path=path,
            ))

    def _add_output(self, item: dict[str, Any], value: str, names: list[str], param_type: str, path: str, merge_log: bool) -> str:
        if param_type == "output":
            stream = f"OUTPUT{self.n_outputs}"
            self.n_outputs += 1
            dtype = DatasetType.OUTPUT
        else:
            stream = "LOG_MERGE" if merge_log else f"LOG{self.n_logs}"
            self.n_logs += 0 if merge_log else 1
            dtype = DatasetType.LOG
        template = value.split("=")[-1].strip().strip("'\"")
        check_file_template(template, f"{path}.value")
        rewritten = value.replace(template, "${" + stream + "}") if template else "${" + stream + "}"
        attributes = _attributes(item, path)
        if merge_log:
            attributes = DatasetAttributes(**{**attributes.__dict__, "merge_only": True})
        for dataset_name in names:
            check_name(dataset_name, f"{path}.dataset", "dataset name")
            self.datasets.append(DatasetDef(
                name=dataset_name, type=dtype, stream=stream,
                container=fields.text(item.get("container"), f"{path}.container", max_length=512),
                attributes=attributes, file_template=template,
                serial_offset=fields.integer(item.get("offset"), f"{path}.offset", minimum=0) or 0,
                destination=fields.text(item.get("destination"), f"{path}.destination", max_length=128),
                storage_token=fields.text(item.get("token"), f"{path}.token", max_length=128),
                path=path,
            ))
        return rewritten


_TOKEN_FLAGS = {"nosplit": "nosplit", "repeat": "repeat", "ru": "reusable", "cc": "consistency_check", "mo": "merge_only",
                "an": "allow_no_output", "rd": "random_order", "ud": "use_duplicated", "ic": "index_consistent", "manytime": "many_time"}
_TOKEN_VALUES = {"ratio": ("ratio", float), "np": ("n_files_per_job", int), "of": ("offset", int), "nr": ("num_records", int),
                 "er": ("event_ratio", float), "tr": ("transient", lambda v: v == "1")}


def _attributes(item: dict[str, Any], path: str) -> DatasetAttributes:
    """Dataset attributes from an item's keys and its raw `attributes` token string."""
    values: dict[str, Any] = {}
    for token in fields.names(item.get("attributes"), f"{path}.attributes"):
        key, sep, raw = token.partition("=")
        if key in _TOKEN_FLAGS and not sep:
            values[_TOKEN_FLAGS[key]] = True
        elif key in _TOKEN_VALUES and sep:
            name, convert = _TOKEN_VALUES[key]
            try:
                values[name] = convert(raw)
            except ValueError as exc:
                raise BadInput(f"token {token!r} has a bad value", f"{path}.attributes") from exc
        elif key not in ("ps", "ns", "os", "ud"):
            raise BadInput(f"unknown dataset attribute {token!r}", f"{path}.attributes")
    if "ratio" in item:
        values["ratio"] = fields.number(item["ratio"], f"{path}.ratio", minimum=0)
    if "eventRatio" in item:
        values["event_ratio"] = fields.number(item["eventRatio"], f"{path}.eventRatio", minimum=0)
    if "nFilesPerJob" in item:
        values["n_files_per_job"] = fields.integer(item["nFilesPerJob"], f"{path}.nFilesPerJob", minimum=1)
    if "num_records" in item:
        values["num_records"] = fields.integer(item["num_records"], f"{path}.num_records", minimum=1)
    if item.get("param_type") in ("input", "pseudo_input") and "offset" in item:
        values["offset"] = fields.integer(item["offset"], f"{path}.offset", minimum=0)
    for key, name in (("check", "consistency_check"), ("usedup", "use_duplicated"), ("random", "random_order"),
                      ("reusable", "reusable"), ("indexConsistent", "index_consistent"), ("mergeOnly", "merge_only"),
                      ("allowNoOutput", "allow_no_output"), ("expand", "expand")):
        if key in item:
            values[name] = fields.flag(item[key], f"{path}.{key}")
    if "transient" in item:
        values["transient"] = fields.flag(item["transient"], f"{path}.transient")
    if "consolidate" in item:
        values["consolidate"] = fields.text(item["consolidate"], f"{path}.consolidate", max_length=512)
    for key in ("include", "exclude"):
        if key in item:
            values[key] = check_regexes(fields.names(item[key], f"{path}.{key}"), f"{path}.{key}")
    if "files" in item:
        raw_files = fields.sequence(item["files"], f"{path}.files")
        lfns = [f.get("lfn") if isinstance(f, dict) else f for f in raw_files]
        if not all(isinstance(lfn, str) and lfn for lfn in lfns):
            raise BadInput("must list file names (strings or mappings with lfn)", f"{path}.files")
        values["files"] = tuple(lfns)
    return DatasetAttributes(**values)
