"""Job parameters: what each job's command line says, rendered from the task's template.

Follows jedi-inventory.md §6.9 (placeholders, decorators, compact lists, merge pairs, ES blocks); the
output file names the template refers to are made by `jobs.resources.allocate_output_names` (§6.8).

Template text is data. JEDI slices streams with `exec` (`${IN[0:2]}`) and evaluates `/M[...]` with
`eval`; here a placeholder body is parsed by one regular grammar,

    body     := names [slice] decorator*  |  TRN_stream ':' stream
    names    := NAME (',' NAME)*          slice := '[' [int] [':' [int] [':' [int]]] ']'
    decorator:= /L /S /A /T /F /E /P | /M '[' arithmetic ']'

and `/M` arithmetic is read by a tiny recursive-descent parser that knows numbers, + - * / // % and
brackets, nothing else.
Rendering is one pass over the template, so text produced by a placeholder (an LFN containing `${`)
is never expanded again. A placeholder that names a stream or a known value that this job cannot fill
raises `UnresolvedPlaceholder`; any other `${...}` (a shell variable) is kept verbatim, as JEDI does.
"""

from __future__ import annotations

import re
from functools import lru_cache
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from jedictl.errors import JedictlError


class TemplateError(JedictlError):
    """A job's parameters or output names cannot be made (the generator puts the task in pending)."""


class UnresolvedPlaceholder(TemplateError):
    """JEDI's UnresolvedParam: a placeholder this job has no value for."""

    def __init__(self, placeholder: str, reason: str = "has no value for this job"):
        self.placeholder = placeholder
        self.reason = reason
        super().__init__(f"unresolved {placeholder} when making job parameters: {reason}")


@dataclass(frozen=True)
class InputFile:
    """One input file record of the job (files columns lfn, size, start_event, end_event, first_event)."""

    lfn: str
    size: int | None = None
    start_event: int | None = None
    end_event: int | None = None
    first_event: int | None = None


@dataclass(frozen=True)
class InputStream:
    """The files one dataset contributes to the job, under its stream name (datasets.stream_name).

    Pass every input stream of the task, with no files if the job has none, so that a placeholder
    naming it is reported as unresolved. Merge jobs pass unmerged inputs as `TRN_<stream>`."""

    name: str
    dataset: str  # container name if any, else dataset name: the /F list-file name
    files: tuple[InputFile, ...]
    is_master: bool = False


@dataclass(frozen=True)
class OutputFile:
    stream: str  # OUTPUT0, LOG0, LOG_MERGE ... (several files may share a stream)
    lfn: str
    unmerged: bool = False  # a pre-merge output: the final name in the text is rewritten to this one


@dataclass(frozen=True)
class JobContext:
    """Everything a job's parameters may refer to."""

    task_id: int
    inputs: tuple[InputStream, ...] = ()
    outputs: tuple[OutputFile, ...] = ()
    serial_nr: int | None = None  # job_serial_nr(): the largest serial among the job's outputs
    attempt_nr: int = 1
    random_seed: int | None = None  # seed value + task offset (RS)
    source_url: str | None = None
    middle_name: str = ""
    panda_id: int | None = None  # unknown before the job row exists: ${PANDAID} is then kept
    is_merge: bool = False
    event_service: bool = False
    keep_input_order: bool = False  # orderInputBy / dynamic events: keep the order given, drop duplicates
    extra: Mapping[str, str] = field(default_factory=dict)  # LIB, SEGMENT_ID, XML_OUTMAP, TRF ...


@dataclass(frozen=True)
class RenderedParameters:
    text: str
    dropped_outputs: tuple[str, ...] = ()  # merge streams without inputs: their output files are not made
    input_list_files: tuple[tuple[str, tuple[str, ...]], ...] = ()  # /F: file name -> LFNs to write there


# Names filled from the job itself; checked before streams so a seed dataset stream cannot shadow them.
_OWN_SCALARS = ("SN", "RNDMSEED", "MAXEVENTS", "SKIPEVENTS", "FIRSTEVENT", "SURL", "ATTEMPTNR", "JEDITASKID",
                "MIDDLENAME", "PANDAID")
_OTHER_SCALARS = ("LIB", "SEGMENT_ID", "SEGMENT_NAME", "XML_OUTMAP", "XML_EXESTR", "TRF_ARGS", "TRF")
_STREAM_LIKE = re.compile(r"^(IN|OUTPUT|LOG|SEQNUMBER|TRN_OUTPUT|TRN_LOG)")
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}|\$JEDITASKID(?![A-Za-z0-9_])")
_BODY = re.compile(r"^(?P<names>[A-Za-z_]\w*(?:,[A-Za-z_]\w*)*)(?P<slice>\[[^\]]*\])?"
                   r"(?P<decorators>(?:/[A-Z](?:\[[^\]]*\])?)*)$")
_PAIR = re.compile(r"^(TRN_\w+):(\w+)$")
_DECORATOR = re.compile(r"/([A-Z])(?:\[([^\]]*)\])?")
_SLICE = re.compile(r"^\[\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?(?::\s*(-?\d*)\s*)?\]$")
_ATTEMPT_SUFFIX = re.compile(r"\.\d+$")
_DIGITS = re.compile(r"^[0-9]+$")
_ES_ONLY = re.compile(r"<PANDA_ES_ONLY>(.*?)</PANDA_ES_ONLY>", re.DOTALL)
_ES_MERGE = re.compile(r"<PANDA_ESMERGE[^>]*>.*?</PANDA_ESMERGE[^>]*>", re.DOTALL)
_UNMERGED_PREFIX = "panda.um."
_UNMERGED_SUFFIX = ".panda.um"


def render_job_parameters(template: str, job: JobContext) -> RenderedParameters:
    """The job's parameters from the task's (or the merge) template (jedi-inventory §6.9)."""
    text = _without_event_service_blocks(template, job.event_service)
    streams, datasets = _stream_map(job)
    dropped: tuple[str, ...] = ()
    if job.is_merge:
        dropped = _streams_without_merge_input(job, streams)
        for stream in dropped:
            # The argument that would name the missing output goes with it (`--outAOD=${OUTPUT1}`).
            text = re.sub(r"\s?--[^=\s]+=\$\{" + re.escape(stream) + r"\}", "", text)
            streams.pop(stream, None)
    renderer = _Renderer(job, streams, datasets, set(dropped))
    literals, placeholders = _compiled(text)
    parts = [literals[0]]
    for placeholder, literal in zip(placeholders, literals[1:]):  # left to right, as re.sub would call it
        parts.append(renderer.replace(placeholder))
        parts.append(literal)
    text = _rewrite_final_names("".join(parts), job.outputs)
    return RenderedParameters(text=text, dropped_outputs=dropped, input_list_files=tuple(renderer.list_files.items()))


@lru_cache(maxsize=256)
def _compiled(template: str) -> tuple[tuple[str, ...], tuple[re.Match[str], ...]]:
    """A template cut once into its literal text and its placeholders (n + 1 literals around n
    placeholders): every job of a task renders the same template, so the scan for placeholders is done
    once per task, not once per job (issue 18). The matches are only read (`group`), never changed."""
    literals, placeholders, end = [], [], 0
    for match in _PLACEHOLDER.finditer(template):
        literals.append(template[end:match.start()])
        placeholders.append(match)
        end = match.end()
    literals.append(template[end:])
    return tuple(literals), tuple(placeholders)


@lru_cache(maxsize=256)
def _without_event_service_blocks(template: str, event_service: bool) -> str:
    """Event-service blocks first: a placeholder inside a removed block must not count as unresolved.
    Cached: every job of a task renders the same template."""
    if event_service:
        return _ES_ONLY.sub(lambda m: m.group(1), template)
    return _ES_MERGE.sub("", _ES_ONLY.sub("", template))


@lru_cache(maxsize=4096)
def _parse_body(body: str) -> tuple[tuple[str, ...], str | None, tuple[tuple[str, str | None], ...]] | None:
    """A placeholder body as (names, slice, decorators); None when it is not one jedictl renders.
    Cached: a task's jobs use the same few placeholders over and over."""
    parsed = _BODY.match(body)
    if parsed is None:
        return None
    decorators = tuple((d.group(1), d.group(2)) for d in _DECORATOR.finditer(parsed.group("decorators") or ""))
    return tuple(parsed.group("names").split(",")), parsed.group("slice"), decorators


_FILE_DECORATORS = frozenset("LSATFME")


def placeholder_problem(body: str) -> str | None:
    """Why `${body}` could never be rendered -- its slice, decorators or /M arithmetic are not of the
    grammar above -- or None. Names are the caller's to check; nothing is evaluated but /M's
    arithmetic on a sample value."""
    if _PAIR.match(body):
        return None
    parsed = _parse_body(body)
    if parsed is None:
        return "is not a placeholder jedictl can render"
    names, slice_text, decorators = parsed
    if slice_text is not None and not _SLICE.match(slice_text):
        return f"has a slice that is not [start:stop:step] ({slice_text})"
    flags = [name for name, _ in decorators]
    if len(names) == 1 and names[0] in _OWN_SCALARS and not slice_text:
        if flags and not (names[0] == "SN" and flags == ["P"]):
            return f"has decorator /{flags[0]}, which does not apply to {names[0]}"
        return None
    unknown = set(flags) - _FILE_DECORATORS
    if unknown:
        return f"has an unknown decorator /{min(unknown)}"
    for flag, argument in decorators:
        if flag == "M":
            try:
                evaluate_arithmetic(argument or "", "1")
            except UnresolvedPlaceholder as exc:
                if "divides by zero" not in exc.reason:
                    return f"has /M arithmetic that {exc.reason.removeprefix('/M ')}"
    return None


def compact_lfn_list(lfns: Sequence[str]) -> str:
    """`f.001.root,f.002.root` -> `f.[001,002].root`: common head and tail around numeric parts.

    Trailing `.N` attempt numbers are stripped before comparing; when any varying part is not a number
    the full comma list (with the original names) is used instead."""
    if len(lfns) == 1:
        return lfns[0]
    full = ",".join(lfns)
    stripped = [_ATTEMPT_SUFFIX.sub("", lfn) for lfn in lfns]
    head = _common_prefix(stripped).rstrip("0123456789")
    rests = [name[len(head):] for name in stripped]
    tail = _common_prefix([rest[::-1] for rest in rests])[::-1].lstrip("0123456789")
    middles = [rest[: len(rest) - len(tail)] for rest in rests]
    if not all(_DIGITS.match(middle) for middle in middles):
        return full
    return f"{head}[{','.join(middles)}]{tail}"


def _common_prefix(names: Sequence[str]) -> str:
    first, last = min(names), max(names)  # the common prefix of all is that of the extremes
    # The longest equal head, found by halving (slices compare in C): this runs twice for every job's
    # input list, and a character at a time it was a tenth of the generator's time.
    low, high = 0, min(len(first), len(last))
    while low < high:
        middle = (low + high + 1) // 2
        if first[:middle] == last[:middle]:
            low = middle
        else:
            high = middle - 1
    return first[:low]


def _stream_map(job: JobContext) -> tuple[dict[str, list[str]], dict[str, str]]:
    streams: dict[str, list[str]] = {}
    datasets: dict[str, str] = {}
    for stream in job.inputs:
        lfns = [f.lfn for f in stream.files]
        if job.is_merge:
            # Largest first so an empty unmerged file is never the one a merger opens first.
            sizes = {f.lfn: f.size or 0 for f in stream.files}
            lfns = sorted(dict.fromkeys(lfns), key=lambda lfn: -sizes[lfn])
        elif job.keep_input_order:
            lfns = list(dict.fromkeys(lfns))
        else:
            lfns = sorted(set(lfns))
        streams.setdefault(stream.name, []).extend(lfns)
        datasets.setdefault(stream.name, stream.dataset.rstrip("/").split(":")[-1])
    for output in job.outputs:
        streams.setdefault(output.stream, []).append(output.lfn)
    return streams, datasets


def _streams_without_merge_input(job: JobContext, streams: Mapping[str, list[str]]) -> tuple[str, ...]:
    """Merge outputs whose unmerged counterpart has no files in this job (JEDI deletes them)."""
    dropped = []
    for output in dict.fromkeys(o.stream for o in job.outputs):
        counterpart = "TRN_LOG0" if output == "LOG_MERGE" else f"TRN_{output}"
        if not streams.get(counterpart):
            dropped.append(output)
    return tuple(dropped)


class _Renderer:
    """Renders one placeholder at a time; collects the /F list files."""

    def __init__(self, job: JobContext, streams: dict[str, list[str]], datasets: dict[str, str], dropped: set[str]):
        self.job = job
        self.streams = streams
        self.datasets = datasets
        self.dropped = dropped
        self.list_files: dict[str, tuple[str, ...]] = {}

    def replace(self, match: re.Match[str]) -> str:
        body = match.group(1)
        if body is None:  # bare $JEDITASKID
            return str(self.job.task_id)
        pair = _PAIR.match(body)
        if pair:
            return self._merge_pair(pair.group(1), pair.group(2))
        parsed = _parse_body(body)
        if parsed is None:
            return self._unknown(match.group(0), body)
        names, slice_text, decorators = parsed
        if len(names) == 1 and names[0] in _OWN_SCALARS and not slice_text:
            return self._own_scalar(match.group(0), names[0], decorators)
        if len(names) == 1 and names[0] in self.dropped:
            return ""  # a merge output without input: nothing to name
        if any(name in self.streams for name in names):
            lfns = [lfn for name in names for lfn in self.streams.get(name, [])]
            if slice_text:
                lfns = _apply_slice(lfns, slice_text, match.group(0))
            if not lfns:
                raise UnresolvedPlaceholder(match.group(0), "selects no file")
            return self._files(match.group(0), names, lfns, decorators)
        if len(names) == 1 and names[0] in self.job.extra and not decorators:
            return str(self.job.extra[names[0]])
        return self._unknown(match.group(0), body)

    def _unknown(self, placeholder: str, body: str) -> str:
        head = re.split(r"[,/\[:]", body, maxsplit=1)[0]
        if _STREAM_LIKE.match(head) or head in _OWN_SCALARS or head in _OTHER_SCALARS:
            raise UnresolvedPlaceholder(placeholder)
        return placeholder  # not ours (e.g. a shell variable): kept as written

    def _own_scalar(self, placeholder: str, name: str, decorators: Sequence[tuple[str, str | None]]) -> str:
        job = self.job
        flags = [d for d, _ in decorators]
        if name == "SN" and flags in ([], ["P"]):
            serial = job.serial_nr or 0
            return f"{serial:06d}" if flags else str(serial)
        if flags:
            raise UnresolvedPlaceholder(placeholder, f"decorator /{flags[0]} does not apply to {name}")
        if name == "PANDAID" and job.panda_id is None:
            return placeholder  # filled when the job row gets its id
        values: dict[str, object | None] = {
            "RNDMSEED": job.random_seed, "MAXEVENTS": _max_events(job), "SKIPEVENTS": _skip_events(job),
            "FIRSTEVENT": _first_event(job), "SURL": job.source_url, "ATTEMPTNR": job.attempt_nr,
            "JEDITASKID": job.task_id, "MIDDLENAME": job.middle_name, "PANDAID": job.panda_id,
        }
        value = values[name]
        if value is None:
            raise UnresolvedPlaceholder(placeholder)
        return str(value)

    def _files(self, placeholder: str, names: Sequence[str], lfns: list[str], decorators: Sequence[tuple[str, str | None]]) -> str:
        flags = {d for d, _ in decorators}
        unknown = flags - {"L", "S", "A", "T", "F", "M", "E"}
        if unknown:
            raise UnresolvedPlaceholder(placeholder, f"unknown decorator /{min(unknown)}")
        if flags & {"L", "S", "A"}:
            quoted = [f"'{lfn}'" for lfn in lfns] if "A" in flags else lfns
            return (" " if "S" in flags else ",").join(quoted)
        if "T" in flags:
            return "[" + ", ".join(repr(lfn) for lfn in lfns) + "]"
        if "F" in flags:
            stream = next(name for name in names if name in self.streams)
            list_name = "tmpin_" + self.datasets.get(stream, stream)
            self.list_files[list_name] = tuple(lfns)
            return list_name
        if "M" in flags:
            expression = next(arg for d, arg in decorators if d == "M")
            if len(lfns) != 1:
                raise UnresolvedPlaceholder(placeholder, "/M needs exactly one file")
            return evaluate_arithmetic(expression or "", lfns[0], placeholder)
        if "E" in flags:
            return unquote(",".join(lfns))
        return compact_lfn_list(lfns)

    def _merge_pair(self, transient: str, final: str) -> str:
        """`${TRN_OUTPUT0:OUTPUT0}` -> `in1,in2:out`; `${TRN_OUTPUT:OUTPUT}` pairs every OUTPUTn."""
        if final in self.streams or final in self.dropped or transient in self.streams:
            pairs = [(transient, final)]
        else:
            finals = sorted(s for s in self.streams if re.fullmatch(re.escape(final) + r"\d+", s))
            if not finals:
                raise UnresolvedPlaceholder(f"${{{transient}:{final}}}")
            pairs = [(f"TRN_{s}", s) for s in finals]
        rendered = []
        for inputs, output in pairs:
            if output in self.dropped or not self.streams.get(inputs):
                continue
            rendered.append(",".join(self.streams[inputs]) + ":" + ",".join(self.streams.get(output, [])))
        return " ".join(rendered)


def _master_files(job: JobContext) -> list[InputFile]:
    return [f for stream in job.inputs if stream.is_master for f in stream.files]


def _max_events(job: JobContext) -> int:
    total = sum(f.end_event - f.start_event + 1 for f in _master_files(job)
                if f.start_event is not None and f.end_event is not None)
    return total or -1  # 0 breaks some payloads: JEDI passes -1 ("all")


def _skip_events(job: JobContext) -> int:
    return next((f.start_event for f in _master_files(job) if f.start_event is not None), 0)


def _first_event(job: JobContext) -> int | None:
    return next((f.first_event for f in _master_files(job) if f.first_event is not None), None)


def _apply_slice(lfns: list[str], text: str, placeholder: str) -> list[str]:
    """`[a:b]`, `[a:]`, `[:b]`, `[a:b:c]` with Python semantics; `[i]` is the one file at i."""
    parsed = _SLICE.match(text)
    if parsed is None or (parsed.group(2) is None and parsed.group(3) is not None):
        raise UnresolvedPlaceholder(placeholder, f"{text} is not a range")
    start, stop, step = (int(part) if part else None for part in parsed.groups())
    if ":" not in text:
        if start is None:
            raise UnresolvedPlaceholder(placeholder, f"{text} is not a range")
        return lfns[start:start + 1] if start != -1 else lfns[-1:]
    if step == 0:
        raise UnresolvedPlaceholder(placeholder, "a range step cannot be 0")
    return lfns[start:stop:step]


def _rewrite_final_names(text: str, outputs: Sequence[OutputFile]) -> str:
    """Pre-merge jobs write `panda.um.` names: a final name written literally in the template is
    pointed at the unmerged file, without touching text that already is the unmerged name."""
    for output in outputs:
        final = final_name_of_unmerged(output.lfn) if output.unmerged else None
        if not final or final == output.lfn:
            continue
        pieces = text.split(output.lfn)
        text = output.lfn.join(piece.replace(final, output.lfn) for piece in pieces)
    return text.replace(_UNMERGED_PREFIX + _UNMERGED_PREFIX, _UNMERGED_PREFIX)


def final_name_of_unmerged(lfn: str) -> str:
    if lfn.startswith(_UNMERGED_PREFIX):
        return lfn[len(_UNMERGED_PREFIX):]
    if lfn.endswith(_UNMERGED_SUFFIX):
        return lfn[: -len(_UNMERGED_SUFFIX)]
    return lfn


# ------------------------------------------------------------------------------------- /M arithmetic

_ARITH_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|(//|[-+*/%()])|(#))\s*")


def evaluate_arithmetic(expression: str, value: str, placeholder: str = "/M") -> str:
    """`/M[#*10+1]` with `#` the file's (numeric) name. Grammar, read by recursive descent:
    expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'//'|'%') unary)* ;
    unary := ('+'|'-') unary | NUMBER | '#' | '(' expr ')'"""
    def fail(reason: str) -> UnresolvedPlaceholder:
        return UnresolvedPlaceholder(placeholder, f"/M {reason}")

    if len(expression) > 200:
        raise fail("expression is too long")
    tokens: list[int | float | str] = []
    position = 0
    while position < len(expression):
        token = _ARITH_TOKEN.match(expression, position)
        if token is None:
            raise fail(f"cannot read {expression[position:]!r}")
        number, operator, hash_sign = token.groups()
        tokens.append(_number(value if hash_sign else number, fail) if operator is None else operator)
        position = token.end()
    cursor = [0]

    def take() -> int | float | str:
        if cursor[0] >= len(tokens):
            raise fail("expression ends too early")
        cursor[0] += 1
        return tokens[cursor[0] - 1]

    def peek() -> int | float | str | None:
        return tokens[cursor[0]] if cursor[0] < len(tokens) else None

    def expr() -> int | float:
        result = term()
        while peek() in ("+", "-"):
            result = result + term() if take() == "+" else result - term()
        return result

    def term() -> int | float:
        result = unary()
        while peek() in ("*", "/", "//", "%"):
            operator, operand = take(), unary()
            if operator != "*" and operand == 0:
                raise fail("divides by zero")
            if operator == "*":
                result = result * operand
            elif operator == "/":
                result = result / operand
            elif operator == "//":
                result = result // operand
            else:
                result = result % operand
        return result

    def unary() -> int | float:
        token = take()
        if token in ("+", "-"):
            return unary() if token == "+" else -unary()
        if token == "(":
            result = expr()
            if take() != ")":
                raise fail("misses ')'")
            return result
        if isinstance(token, str):
            raise fail(f"has an unexpected {token!r}")
        return token

    result = expr()
    if cursor[0] != len(tokens):
        raise fail("has trailing tokens")
    return str(result)


def _number(text: str, fail: Callable[[str], UnresolvedPlaceholder]) -> int | float:
    if _DIGITS.match(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        raise fail(f"needs a numeric value, not {text!r}") from None
