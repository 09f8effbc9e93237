"""jedictl's own task spec (YAML or JSON) -> TaskDefinition.

The spec names things in snake_case and groups options by section (see docs/task-spec.md, generated
in part from `engine.task.options`). Unlike PanDA's format it is strict: an unknown field is an error,
because a typo in one's own spec should not be silently ignored.
"""

from __future__ import annotations

from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.options import BY_NAME, SECTIONS, build_options, coerce, iter_by_section
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
    STREAM_RE,
    check_regexes,
    placeholder_names,
)
from jedictl.engine.task.build import parse_build_spec
from jedictl.engine.task.preprocess import parse_preprocess_spec
from jedictl.engine.task.splitting import check_task as check_splitting_task
from jedictl.engine.task.splitting import parse_splitting
from jedictl.errors import BadInput
from jedictl.model import DatasetType

TOP_LEVEL = {
    "name": "task name (unique per user unless unique_name is false)",
    "user": "owner (default: --user, else the login name)",
    "vo": "virtual organisation (default wlcg)",
    "label": "PanDA prodSourceLabel: managed, user, test, ... (default managed); user and panda are analysis: jobs go to the data (analysis.md)",
    "task_type": "prod or anal (default: anal for label user, else prod)",
    "processing_type": "processing type (evgen, simul, reco, ...): used by work queues and shares",
    "working_group": "working group (e.g. GP_TOP)",
    "country_group": "country group",
    "campaign": "campaign",
    "priority": "task priority (default 1000 for label user, else 0; analysis tasks are capped at 1000 unless privileged, see Priority)",
    "parent": "id of the parent task this task waits for (also --parent)",
    "unique_name": "refuse a second task with this name for the same user (default true)",
    "transformation": "the program jobs run (PanDA transPath)",
    "release": "software release (transUses)",
    "cache": "software cache (transHome)",
    "architecture": "platform, e.g. x86_64-el9-gcc13-opt",
    "container": "container image",
    "source_url": "URL substituted for ${SURL}",
    "command": "job-parameter template: the arguments, with ${IN}, ${OUTPUT0}, ${RNDMSEED}, ... (required)",
    "no_input": "the task reads no input; jobs come from split.n_events/n_events_per_job or split.n_files",
    "inputs": "input datasets; the first is the master, the rest secondaries",
    "outputs": "output datasets with their file-name templates (at least one)",
    "log": "the log dataset and its file-name template",
    "work_queue": "put the task in this work queue instead of matching criteria",
    "gshare": "put the task in this global share instead of matching",
    "build": "the task ships sources: a build job per site makes the lib file its jobs read (${LIB}); see build-jobs.md",
    "preprocess": "a preprocess job runs before the task's normal jobs (topreprocess, preprocessing); see preprocessing.md",
    "splitting": "split the jobs with a WMCore algorithm: {algorithm: LumiBased, lumis_per_job: 2, ...} (WMCore's parameters; see splitting.md)",
}
INPUT_KEYS = {
    "dataset": "dataset or container name (or a list of names for the same stream)",
    "stream": "placeholder name in the command (default IN for the master, IN1, IN2 ... for secondaries)",
    "container": "container the dataset belongs to",
    "expand": "expand a container into its datasets",
    "include": "regular expressions: only matching file names",
    "exclude": "regular expressions: skip matching file names",
    "files": "explicit list of file names",
    "offset": "skip the first N files (seq_number: numbers start at N+1)",
    "ratio": "secondary: files per master file",
    "nosplit": "secondary: every job gets all its files",
    "repeat": "secondary: reuse its files cyclically",
    "files_per_job": "secondary: this many files per job (np)",
    "reusable": "secondary: files may be used by several jobs",
    "many_time": "secondary: read by many jobs (pile-up, conditions): counted as availability, not as a transfer per job, "
                 "and never consumed (default: true for nosplit, repeat and reusable inputs, else false; see Many-time and one-time inputs)",
    "event_ratio": "secondary: events per master event",
    "num_records": "seq_number: how many sequence numbers",
    "consistency_check": "only files the parent task finished (cc)",
    "random_order": "shuffle the file order",
}
OUTPUT_KEYS = {
    "dataset": "output dataset name; ending in / it is an output container, with a dataset per site inside (analysis.md)",
    "file_template": "file name with ${SN} (serial number) or ${SN/P} (6 digits), e.g. EVNT.${JEDITASKID}._${SN/P}.pool.root",
    "stream": "placeholder name (default OUTPUT0, OUTPUT1, ... / LOG0)",
    "container": "container the dataset is added to",
    "destination": "storage endpoint for the files",
    "token": "storage token",
    "offset": "serial numbers start at 1 + offset",
    "allow_no_output": "the file may be missing when the job ends",
}
MERGE_KEYS = {"transformation": "program of the merge jobs", "command": "job-parameter template of merge jobs (required)",
              "use_local_io": "merge jobs copy their input to scratch"}
PLACEMENT_COLUMNS = {"cloud": "run in this cloud", "site": "run at this site (an analysis task's jobs wait `assigned` there for input the site lacks)", "nucleus": "write outputs to this nucleus"}
ANALYSIS_LABELS = ("user", "panda")


def parse_task_spec(
    document: dict[str, Any],
    *,
    user: str,
    priority: int | None = None,
    parent_id: int | None = None,
    analysis_priority: int = 1000,
) -> TaskDefinition:
    allowed = set(TOP_LEVEL) | set(SECTIONS)
    for key in document:
        if key not in allowed:
            raise BadInput("unknown field", str(key))
    name = check_name(fields.text(document.get("name"), "name", required=True), "name", "task name")
    label = fields.text(document.get("label"), "label", max_length=32) or "managed"
    task_type = fields.text(document.get("task_type"), "task_type", max_length=64) or ("anal" if label in ANALYSIS_LABELS else "prod")
    spec_priority = fields.integer(document.get("priority"), "priority", *PRIORITY_RANGE)
    task_priority = priority if priority is not None else spec_priority
    if task_priority is None:
        task_priority = analysis_priority if label in ANALYSIS_LABELS else 0
    spec_user = fields.text(document.get("user"), "user", max_length=128)

    values, path_of, placement, merge_keys = _sections(document)
    no_input = fields.flag(document.get("no_input"), "no_input")
    datasets: list[DatasetDef] = []
    if no_input:
        datasets.append(DatasetDef(name="pseudo_dataset", type=DatasetType.PSEUDO_INPUT, stream="IN", is_master=True, path="no_input"))
    for index, item in enumerate(fields.sequence(document.get("inputs"), "inputs")):
        datasets.extend(_input(item, f"inputs[{index}]", first=(index == 0 and not no_input), used={d.stream for d in datasets}))
    outputs = fields.sequence(document.get("outputs"), "outputs")
    if not outputs:
        raise BadInput("at least one output dataset is required", "outputs")
    for index, item in enumerate(outputs):
        datasets.append(_output(item, f"outputs[{index}]", DatasetType.OUTPUT, f"OUTPUT{index}"))
    if document.get("log") is not None:
        datasets.append(_output(document["log"], "log", DatasetType.LOG, "LOG0"))

    command = fields.text(document.get("command"), "command", required=True, max_length=65536) or ""
    used = set(placeholder_names(command))
    if "RNDMSEED" in used:
        datasets.append(DatasetDef(name="RNDMSEED", type=DatasetType.RANDOM_SEED, stream="RNDMSEED", path="command"))
    if "SEQNUMBER" in used and not any(d.stream == "SEQNUMBER" for d in datasets):
        datasets.append(DatasetDef(name="seq_number", type=DatasetType.PSEUDO_INPUT, stream="SEQNUMBER", path="command"))
    check_datasets(datasets, "inputs")
    check_placeholders(command, {d.stream for d in datasets}, "command", strict=True)

    merge = None
    if document.get("merge") is not None:  # a merge section turns merging on
        values["merge_output"] = True
        path_of.setdefault("merge_output", "merge")
        merge = MergeDef(
            trans_path=fields.text(merge_keys.get("transformation"), "merge.transformation", max_length=512),
            job_parameters=fields.text(merge_keys.get("command"), "merge.command", required=True, max_length=65536) or "",
            use_local_io=fields.flag(merge_keys.get("use_local_io"), "merge.use_local_io"),
        )
    options = build_options(values, path_of)
    splitting = None
    if document.get("splitting") is not None:
        splitting = parse_splitting(document["splitting"])
        options = check_splitting_task(splitting, options, datasets, no_input, path_of)
    build = parse_build_spec(document["build"]) if document.get("build") is not None else None
    preprocess = parse_preprocess_spec(document["preprocess"]) if document.get("preprocess") is not None else None
    if no_input and options.n_events is None and options.n_files is None:
        raise BadInput("a no-input task needs split.n_events (with n_events_per_job) or split.n_files", "no_input")

    return TaskDefinition(
        name=name,
        user_name=user or spec_user or "",
        vo=fields.text(document.get("vo"), "vo", max_length=32) or "wlcg",
        prod_source_label=label,
        task_type=task_type,
        task_priority=task_priority,
        unique_name=fields.flag(document.get("unique_name", True), "unique_name"),
        job_parameters=command,
        datasets=tuple(datasets),
        options=options,
        processing_type=fields.text(document.get("processing_type"), "processing_type", max_length=64),
        working_group=fields.text(document.get("working_group"), "working_group", max_length=32),
        country_group=fields.text(document.get("country_group"), "country_group", max_length=32),
        campaign=fields.text(document.get("campaign"), "campaign", max_length=64),
        parent_id=parent_id if parent_id is not None else fields.integer(document.get("parent"), "parent", minimum=1),
        trans_path=fields.text(document.get("transformation"), "transformation", max_length=512),
        trans_home=fields.text(document.get("cache"), "cache", max_length=256),
        trans_uses=fields.text(document.get("release"), "release", max_length=256),
        architecture=fields.text(document.get("architecture"), "architecture", max_length=256),
        container_name=fields.text(document.get("container"), "container", max_length=512),
        source_url=fields.text(document.get("source_url"), "source_url"),
        cloud=placement.get("cloud"),
        site=placement.get("site"),
        nucleus=placement.get("nucleus"),
        work_queue=fields.text(document.get("work_queue"), "work_queue", max_length=64),
        gshare=fields.text(document.get("gshare"), "gshare", max_length=64),
        no_input=no_input,
        merge=merge,
        build=build,
        preprocess=preprocess,
        splitting=splitting,
        format="spec",
    )


def _sections(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, str | None], dict[str, Any]]:
    """Typed options from the option sections, plus the non-option keys of `placement` and `merge`."""
    values: dict[str, Any] = {}
    path_of: dict[str, str] = {}
    placement: dict[str, str | None] = {}
    merge_keys: dict[str, Any] = {}
    for section in SECTIONS:
        names = {spec.name for spec in iter_by_section(section)}
        for key, raw in fields.mapping(document.get(section), section).items():
            path = f"{section}.{key}"
            if section == "placement" and key in PLACEMENT_COLUMNS:
                placement[key] = fields.text(raw, path, max_length=256)
            elif section == "merge" and key in MERGE_KEYS:
                merge_keys[key] = raw
            elif key in names:
                values[key] = coerce(BY_NAME[key], raw, path)
                path_of[key] = path
            else:
                raise BadInput("unknown field", path)
    return values, path_of, placement, merge_keys


def _input(item: Any, path: str, first: bool, used: set[str]) -> list[DatasetDef]:
    body = fields.mapping(item, path)
    for key in body:
        if key not in INPUT_KEYS:
            raise BadInput("unknown field", f"{path}.{key}")
    names = fields.names(body.get("dataset"), f"{path}.dataset")
    if not names:
        raise BadInput("is required", f"{path}.dataset")
    is_seq = names == ["seq_number"]
    stream = _stream(body, path) or ("SEQNUMBER" if is_seq else "IN" if first else f"IN{len(used)}")
    attributes = DatasetAttributes(
        ratio=fields.number(body.get("ratio"), f"{path}.ratio", minimum=0),
        nosplit=fields.flag(body.get("nosplit"), f"{path}.nosplit"),
        repeat=fields.flag(body.get("repeat"), f"{path}.repeat"),
        n_files_per_job=fields.integer(body.get("files_per_job"), f"{path}.files_per_job", minimum=1),
        reusable=fields.flag(body.get("reusable"), f"{path}.reusable"),
        offset=fields.integer(body.get("offset"), f"{path}.offset", minimum=0),
        num_records=fields.integer(body.get("num_records"), f"{path}.num_records", minimum=1),
        event_ratio=fields.number(body.get("event_ratio"), f"{path}.event_ratio", minimum=0),
        include=check_regexes(fields.names(body.get("include"), f"{path}.include"), f"{path}.include"),
        exclude=check_regexes(fields.names(body.get("exclude"), f"{path}.exclude"), f"{path}.exclude"),
        files=tuple(fields.names(body.get("files"), f"{path}.files")),
        expand=fields.flag(body.get("expand"), f"{path}.expand"),
        consistency_check=fields.flag(body.get("consistency_check"), f"{path}.consistency_check"),
        random_order=fields.flag(body.get("random_order"), f"{path}.random_order"),
        many_time=None if body.get("many_time") is None else fields.flag(body.get("many_time"), f"{path}.many_time"),
    )
    if first and (attributes.ratio or attributes.nosplit or attributes.repeat or attributes.n_files_per_job):
        raise BadInput("ratio, nosplit, repeat and files_per_job apply to secondary inputs only", path)
    dtype = DatasetType.PSEUDO_INPUT if is_seq else DatasetType.INPUT
    return [
        DatasetDef(name=check_name(name, f"{path}.dataset", "dataset name"), type=dtype, stream=stream,
                   is_master=first and not is_seq, container=fields.text(body.get("container"), f"{path}.container", max_length=512),
                   attributes=attributes, path=path)
        for name in dict.fromkeys(names)
    ]


def _output(item: Any, path: str, dtype: DatasetType, default_stream: str) -> DatasetDef:
    body = fields.mapping(item, path)
    for key in body:
        if key not in OUTPUT_KEYS:
            raise BadInput("unknown field", f"{path}.{key}")
    name = fields.text(body.get("dataset"), f"{path}.dataset", required=True)
    template = fields.text(body.get("file_template"), f"{path}.file_template", required=True) or ""
    return DatasetDef(
        name=check_name(name, f"{path}.dataset", "dataset name"),
        type=dtype,
        stream=_stream(body, path) or default_stream,
        container=fields.text(body.get("container"), f"{path}.container", max_length=512),
        attributes=DatasetAttributes(allow_no_output=fields.flag(body.get("allow_no_output"), f"{path}.allow_no_output")),
        file_template=check_file_template(template, f"{path}.file_template"),
        serial_offset=fields.integer(body.get("offset"), f"{path}.offset", minimum=0) or 0,
        destination=fields.text(body.get("destination"), f"{path}.destination", max_length=128),
        storage_token=fields.text(body.get("token"), f"{path}.token", max_length=128),
        path=path,
    )


def _stream(body: dict[str, Any], path: str) -> str | None:
    stream = fields.text(body.get("stream"), f"{path}.stream", max_length=64)
    if stream is not None and not STREAM_RE.match(stream):
        raise BadInput("must be upper-case letters, digits and _ (a placeholder name)", f"{path}.stream")
    return stream
