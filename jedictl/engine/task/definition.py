"""The normalised task both input formats parse into, and the checks that apply to both.

A `TaskDefinition` is what `submit --dry-run` prints and what the refiner turns into rows. It is
plain data: no store, no configuration.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from jedictl.engine.input.regexes import compile_pattern
from jedictl.engine.task.options import TaskOptions
from jedictl.engine.task.templates import placeholder_problem
from jedictl.errors import BadInput
from jedictl.model import DatasetType
from jedictl.model.files import is_many_time

# Rucio-style names: letters, digits and . _ - : / + ; no spaces, quotes or shell metacharacters.
# Anchored with \Z, not $: `$` also matches before a final newline, which let "name\n" through.
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-:/+]{1,255}\Z")
USER_RE = re.compile(r"^[\w.@\-]{1,128}\Z")
STREAM_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")
#: Task priorities: INTEGER columns, with room for the +1 that scouts get and the watchdog's boosts.
PRIORITY_RANGE = (-(10**9), 10**9)

#: Placeholders the job generator fills besides dataset streams (jedi-inventory.md §6.9).
SCALAR_PLACEHOLDERS = frozenset({
    "SN", "RNDMSEED", "MAXEVENTS", "SKIPEVENTS", "FIRSTEVENT", "SURL", "ATTEMPTNR", "LIB", "MIDDLENAME",
    "SEGMENT_ID", "SEGMENT_NAME", "XML_OUTMAP", "XML_EXESTR", "TRF_ARGS", "TRF", "JEDITASKID", "PANDAID",
})
# A leftover placeholder of this shape can never be rendered (JEDI's UnresolvedParam).
_STREAM_LIKE = re.compile(r"^(IN|OUTPUT|LOG|SEQNUMBER|TRN_OUTPUT|TRN_LOG)")
_BRACED = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class DatasetAttributes:
    """JEDI's dataset attribute tokens (jedi-inventory.md §2), typed."""

    ratio: float | None = None  # secondary files per master file
    nosplit: bool = False  # every job gets all files
    repeat: bool = False  # reuse cyclically
    n_files_per_job: int | None = None  # np=
    reusable: bool = False  # ru
    offset: int | None = None  # of=: skip the first n files / sequence numbers start at n+1
    num_records: int | None = None  # nr=: size of a seq_number dataset
    event_ratio: float | None = None  # er=
    include: tuple[str, ...] = ()  # regexes on LFNs
    exclude: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # explicit LFN list
    expand: bool = False  # expand a container into its datasets
    consolidate: str | None = None
    consistency_check: bool = False  # cc
    merge_only: bool = False  # mo
    allow_no_output: bool = False  # an
    transient: bool | None = None  # tr
    random_order: bool = False  # rd
    use_duplicated: bool = False  # ud
    index_consistent: bool = False  # ic
    # An output container (an output or log named `<outDS>/`): each site its jobs go to gets a dataset
    # of its own inside it (seed 000 "Workflow for analysis" step 5). Set by the refiner, not a JEDI token.
    per_site: bool = False
    # Seed 000 "Different treatment of input datasets": a many-time input is read by many jobs (pile-up,
    # conditions) and counted as availability; a one-time input is read by one job and charged as a
    # transfer. None: decided by how the files join jobs (`is_many_time`).
    many_time: bool | None = None

    @property
    def shares_files(self) -> bool:
        """Files that join many jobs: every job gets them all (nosplit), they cycle (repeat) or rewind (reusable)."""
        return self.nosplit or self.repeat or self.reusable

    @property
    def is_many_time(self) -> bool:
        """A many-time input: marked so, or its files are shared by jobs (nosplit, repeat, reusable)."""
        return is_many_time(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """Only the attributes that differ from the defaults (what is stored and shown)."""
        defaults = DatasetAttributes()
        return {
            f.name: list(value) if isinstance(value, tuple) else value
            for f in dataclasses.fields(self)
            if (value := getattr(self, f.name)) != getattr(defaults, f.name)
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "DatasetAttributes":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in known})

    def tokens(self) -> str:
        """JEDI's comma-token form (`ratio=2,nosplit,of=3`), for display and export."""
        names = {
            "ratio": "ratio", "nosplit": "nosplit", "repeat": "repeat", "n_files_per_job": "np", "reusable": "ru",
            "offset": "of", "num_records": "nr", "event_ratio": "er", "consistency_check": "cc", "merge_only": "mo",
            "allow_no_output": "an", "transient": "tr", "random_order": "rd", "use_duplicated": "ud", "index_consistent": "ic",
            "many_time": "manytime",
        }
        out = []
        for key, token in names.items():
            value = getattr(self, key)
            if value is True:
                out.append(token)
            elif value not in (None, False):
                out.append(f"{token}={int(value) if isinstance(value, bool) else value}")
        return ",".join(out)


@dataclass(frozen=True)
class DatasetDef:
    name: str
    type: DatasetType
    stream: str
    is_master: bool = False
    container: str | None = None
    attributes: DatasetAttributes = field(default_factory=DatasetAttributes)
    file_template: str | None = None  # outputs and logs
    serial_offset: int = 0  # the first serial number is 1 + offset
    destination: str | None = None
    storage_token: str | None = None
    path: str = ""  # where it was defined in the submitted document


@dataclass(frozen=True)
class MergeDef:
    trans_path: str | None
    job_parameters: str
    use_local_io: bool = False


@dataclass(frozen=True)
class BuildDef:
    """The build job of an analysis task that ships sources (PanDA's buildSpec): one per site, before the
    run jobs there; its output is the site's lib file, which the run jobs read (`${LIB}`)."""

    trans_path: str | None
    job_parameters: str  # with ${IN} (the source archive), ${OUT} (the lib file it writes), ${SURL}
    archive: str | None = None


@dataclass(frozen=True)
class PreprocessDef:
    """The preprocess job a task asks for (PanDA's preproSpec): one job before the task's normal ones."""

    trans_path: str | None
    job_parameters: str  # with ${SURL}, ${JEDITASKID}, ${PANDAID}


@dataclass(frozen=True)
class TaskDefinition:
    name: str
    user_name: str
    vo: str
    prod_source_label: str
    task_type: str
    task_priority: int
    unique_name: bool
    job_parameters: str
    datasets: tuple[DatasetDef, ...]
    options: TaskOptions
    processing_type: str | None = None
    working_group: str | None = None
    country_group: str | None = None
    campaign: str | None = None
    req_id: int | None = None
    parent_id: int | None = None
    trans_path: str | None = None
    trans_home: str | None = None
    trans_uses: str | None = None
    architecture: str | None = None
    container_name: str | None = None
    source_url: str | None = None
    cloud: str | None = None
    site: str | None = None
    nucleus: str | None = None
    work_queue: str | None = None
    gshare: str | None = None
    no_input: bool = False
    merge: MergeDef | None = None
    build: BuildDef | None = None
    preprocess: PreprocessDef | None = None
    splitting: Any | None = None  # engine.task.splitting.SplittingDef: a WMCore algorithm cuts the jobs
    format: str = "spec"  # "spec" | "panda"
    unknown_keys: tuple[str, ...] = ()
    priority_capped_from: int | None = None  # the priority asked for, when the analysis cap lowered it
    current_priority: int | None = None  # the priority it starts with: a privileged analysis task's jumps the queue

    def inputs(self) -> list[DatasetDef]:
        return [d for d in self.datasets if d.type in (DatasetType.INPUT, DatasetType.PSEUDO_INPUT, DatasetType.RANDOM_SEED)]

    def outputs(self) -> list[DatasetDef]:
        return [d for d in self.datasets if d.type in (DatasetType.OUTPUT, DatasetType.LOG)]

    def summary(self) -> dict[str, Any]:
        """The normalised task as plain data (what `submit --dry-run` prints)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("datasets", "options", "merge", "build", "preprocess", "splitting")}
        data["options"] = self.options.as_dict()
        data["datasets"] = [
            {"name": d.name, "type": d.type.value, "stream": d.stream, "master": d.is_master, "container": d.container,
             "attributes": d.attributes.as_dict(), "file_template": d.file_template,
             "first_serial": 1 + d.serial_offset if d.file_template else None, "destination": d.destination}
            for d in self.datasets
        ]
        data["merge"] = dataclasses.asdict(self.merge) if self.merge else None
        data["build"] = dataclasses.asdict(self.build) if self.build else None
        data["preprocess"] = dataclasses.asdict(self.preprocess) if self.preprocess else None
        data["splitting"] = {"algorithm": self.splitting.algorithm, **self.splitting.params} if self.splitting else None
        data["unknown_keys"] = list(self.unknown_keys)
        return data


def effective_options(definition: TaskDefinition) -> TaskOptions:
    """Options as JEDI's extractCommon derives them when the task is refined (§3.5)."""
    options = definition.options
    changes: dict[str, Any] = {}
    if options.n_files_per_job is None and options.n_events_per_job is None and options.tgt_num_events_per_job:
        changes["n_events_per_job"] = options.tgt_num_events_per_job
    nepj = changes.get("n_events_per_job", options.n_events_per_job)
    if options.n_files_per_job is None and options.n_events_per_input_file and nepj and nepj >= options.n_events_per_input_file:
        changes["n_files_per_job"] = nepj // options.n_events_per_input_file
    return dataclasses.replace(options, **changes) if changes else options


#: The sandbox a job gets, in its job parameters: `-a ARCHIVE` (prun/pathena's source tarball).
SANDBOX_RE = re.compile(r"(?:^|(?<=\s))-a\s+(\S+)")


def sandbox_of(job_parameters: str | None) -> str | None:
    """The sandbox (`-a ARCHIVE`) the job parameters name, else None."""
    found = SANDBOX_RE.search(job_parameters or "")
    return found.group(1) if found else None


def payload_identity(trans_uses: str | None, trans_home: str | None, trans_path: str | None, job_parameters: str) -> str:
    """JEDI's requestType: the same program, arguments and sandbox give the same hash (the watchdog pauses
    the tasks of a payload that keeps failing)."""
    template = re.sub(r"\$\{[^}]*\}", "", job_parameters)
    key = "|".join(str(part) for part in (trans_uses, trans_home, trans_path, template, sandbox_of(job_parameters) or ""))
    return str(uuid.uuid5(uuid.NAMESPACE_URL, key))


def placeholder_names(text: str) -> list[str]:
    """Stream/scalar names used in `${...}` placeholders, decorators and slices stripped.

    `${IN/T}` -> IN, `${IN[0:2]}` -> IN, `${IN,IN2/L}` -> IN, IN2, `${TRN_OUTPUT0:OUTPUT0}` -> both.
    """
    return [name for body in _BRACED.findall(text) for name in _body_names(body)]


def _body_names(body: str) -> list[str]:
    head = re.split(r"[/\[]", body, maxsplit=1)[0]
    return [part.strip() for part in re.split(r"[,:]", head) if part.strip()]


def check_fixed_placeholders(template: str, allowed: Iterable[str], kind: str, path: str) -> None:
    """Every placeholder of a job whose values are a fixed set (a build or preprocess job) is one of them."""
    allowed = tuple(allowed)
    for body in _BRACED.findall(template):
        if body not in allowed:
            raise BadInput(f"placeholder ${{{body}}} is not one a {kind} job fills ({', '.join('${' + p + '}' for p in allowed)})", path)


def check_placeholders(template: str, streams: Iterable[str], path: str, strict: bool) -> None:
    """Every stream-like placeholder must name a defined stream; with `strict`, every placeholder. A
    placeholder naming only known things must also be renderable: its slice, decorators and /M
    arithmetic are checked now, not when the first job is made."""

    known = set(streams) | SCALAR_PLACEHOLDERS
    for body in _BRACED.findall(template):
        names = _body_names(body)
        for name in names:
            if name not in known and (strict or _STREAM_LIKE.match(name)):
                raise BadInput(f"placeholder ${{{name}}} names no input, output or known value", path)
        problem = placeholder_problem(body) if names and all(name in known for name in names) else None
        if problem:
            raise BadInput(f"placeholder ${{{body}}} {problem}", path)


def is_output_container(name: str, dataset_type: DatasetType) -> bool:
    """An output or log dataset named with a trailing '/' is a container (PanDA's `--outDS user.x.y/`):
    the task writes a dataset per site inside it."""
    return dataset_type in (DatasetType.OUTPUT, DatasetType.LOG) and name.endswith("/")


def check_name(value: Any, path: str, what: str = "name") -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise BadInput(f"{what} must be 1-255 characters of letters, digits and . _ - : / +", path)
    return value


def check_regexes(patterns: Iterable[str], path: str) -> tuple[str, ...]:
    """Include/exclude patterns: valid, and unable to make the feeder backtrack for hours on a file name."""

    out = []
    for index, pattern in enumerate(patterns):
        compile_pattern(pattern, f"{path}[{index}]")
        out.append(pattern)
    return tuple(out)


def check_file_template(template: str, path: str) -> str:
    if "${SN" not in template:
        raise BadInput("must contain ${SN} (or ${SN/P}) so that each job writes a new file", path)
    if len(template) > 512 or any(ch.isspace() for ch in template):
        raise BadInput("must be one file name of at most 512 characters", path)
    return template


def input_role(dataset_type: str, is_master: bool, attributes: dict[str, Any] | None) -> str | None:
    """How a task dataset is read, as `task show` and `explain` say it: `master` (split over the jobs),
    `one-time` (a secondary each of whose files one job consumes) or `many-time` (a secondary read by
    many jobs, consumed by none); None for what is not an input file dataset."""
    if dataset_type != DatasetType.INPUT.value:
        return None
    if is_master:
        return "master"
    return "many-time" if DatasetAttributes.from_dict(attributes or {}).is_many_time else "one-time"


def check_many_time(attributes: DatasetAttributes, is_master: bool, path: str) -> None:
    """A master is split over jobs, each file read once: it cannot be many-time; and a one-time input
    cannot share its files among jobs."""
    if is_master and attributes.many_time:
        raise BadInput("many_time applies to secondary inputs only: the master's files are split over the jobs", path)
    if attributes.many_time is False and attributes.shares_files:
        raise BadInput("a one-time input is read by one job: it cannot be nosplit, repeat or reusable", path)


def check_datasets(datasets: list[DatasetDef], path: str) -> None:
    """Rules that hold for both formats once all datasets are known."""
    if not any(d.type in (DatasetType.OUTPUT, DatasetType.LOG) for d in datasets):
        raise BadInput("the task writes nothing: at least one output (or log) dataset is required", path)
    if not any(d.is_master for d in datasets):
        raise BadInput("the task has no input: give an input dataset or set no_input", path)
    for d in datasets:
        if d.type == DatasetType.INPUT:
            check_many_time(d.attributes, d.is_master, d.path or path)
