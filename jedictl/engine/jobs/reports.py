"""What executors send: final job reports and heartbeats, one JSON object per line (docs/executor-protocol.md).

Parsing is pure and per line: a malformed line is refused with its line number and the reason, and the
other lines still count -- an executor's batch is never lost to one bad record. Keys are jedictl's
snake_case names; a few of PanDA's pilot names are accepted as aliases so a pilot-side adapter can pass
its fields through (`pilotErrorCode` -> error_source pilot, `maxPSS` -> max_pss, ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from jedictl.clock import EARLIEST, LATEST, in_range, parse_time
from jedictl.engine.input import fields
from jedictl.engine.input.documents import unique_keys
from jedictl.engine.jobs.results import OutputReport
from jedictl.engine.jobs.states import HEARTBEAT_STATUSES, REPORT_STATUSES
from jedictl.errors import BadInput

REPORT_KEYS = frozenset({
    "job_id", "status", "attempt_nr", "error_source", "error_code", "error_diag", "trans_exit_code", "wall_time", "cpu_time",
    "max_pss", "max_rss", "n_events", "started_at", "ended_at", "outputs",
})
OUTPUT_KEYS = frozenset({"lfn", "size", "checksum", "guid", "n_events", "no_output"})
HEARTBEAT_KEYS = frozenset({"job_id", "status", "attempt_nr"})
#: error_code and trans_exit_code are INTEGER columns.
_INT32 = (-fields.INT32_MAX - 1, fields.INT32_MAX)
#: Memory high-water marks (kB) above a pebibyte are not measurements; the scouts turn them into MB in an
#: INTEGER column, which such a value would overflow.
MAX_MEMORY_KB = 2**40
#: Wall and CPU times (s) above this (68 years) are not measurements either.
MAX_SECONDS = float(fields.INT32_MAX)
#: An error_diag is kept to this many characters, its control characters escaped: a longer one is cut
#: (as PanDA cuts pilotErrorDiag), never a reason to refuse the report and leave the job `sent`.
MAX_DIAG = 4000
#: How checksums are written (what the catalog and `jedictl pilot` write): adler32 or md5, in hex.
_CHECKSUM = re.compile(r"^(ad|md5):([0-9a-fA-F]+)\Z")
_CHECKSUM_DIGITS = {"ad": 8, "md5": 32}
# PanDA pilot field names (update_job) -> jedictl's.
_ALIASES = {
    "PandaID": "job_id", "pandaid": "job_id", "jobStatus": "status", "attemptNr": "attempt_nr", "transExitCode": "trans_exit_code",
    "cpuConsumptionTime": "cpu_time", "maxPSS": "max_pss", "maxRSS": "max_rss", "nEvents": "n_events", "startTime": "started_at",
    "endTime": "ended_at", "pilotErrorDiag": "error_diag", "exeErrorDiag": "error_diag",
}
# A PanDA error-code field names its source.
_SOURCE_FIELDS = {"pilotErrorCode": "pilot", "exeErrorCode": "exe", "ddmErrorCode": "ddm", "jobDispatcherErrorCode": "jobdispatcher",
                  "taskBufferErrorCode": "taskbuffer", "supErrorCode": "sup"}


class ExecutorReport(NamedTuple):
    """One final report: the outcome and the metrics the job row keeps."""

    line: int
    job_id: int
    status: str  # finished | failed
    attempt_nr: int | None = None
    error_source: str | None = None
    error_code: int | None = None
    error_diag: str | None = None
    trans_exit_code: int | None = None
    wall_time: float | None = None  # s
    cpu_time: float | None = None  # s
    max_pss: int | None = None  # kB, as pilots report it
    max_rss: int | None = None  # kB
    n_events: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outputs: tuple[OutputReport, ...] = ()


@dataclass(frozen=True)
class Heartbeat:
    line: int | None  # None: given on the command line
    job_id: int
    status: str  # starting | running | holding | transferring | merging
    attempt_nr: int | None = None


@dataclass(frozen=True)
class Refused:
    """A line that could not be read, or a report the store would not take."""

    line: int
    job_id: int | None
    reason: str


def json_lines(text: str | Iterable[str | bytes]) -> Iterator[tuple[int, Any | Refused]]:
    """(line number, decoded object or Refused) for every non-blank line. Lines end at \n only (JSON
    Lines): str.splitlines() also broke lines at \r, \x1c, \x85 and U+2028, which JSON keeps raw inside
    strings (an error_diag quoting a payload's output), so a valid report was cut in two and refused.

    `text` is the whole input, or its lines as a stream yields them (each ending at \n, as str or as
    UTF-8 bytes -- `read_lines`): a line that is not UTF-8 is refused alone."""
    for number, raw in enumerate(text.split("\n") if isinstance(text, str) else text, 1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, Refused(number, None, f"not UTF-8 (byte {exc.start + 1})")
                continue
        if not raw.strip():
            continue
        try:
            yield number, _DECODER.decode(raw)  # {"status": "finished", "status": "failed"} is no report
        except json.JSONDecodeError as exc:
            yield number, Refused(number, None, f"not JSON ({exc.msg} at column {exc.colno})")
        except RecursionError:
            yield number, Refused(number, None, "not JSON (nested too deeply)")
        except ValueError as exc:  # an integer of more digits than Python converts, or a key given twice
            problem = str(exc).splitlines()[0]
            yield number, Refused(number, None, problem if problem.startswith("duplicate key") else f"not JSON ({problem})")


def parse_reports(text: str) -> tuple[list[ExecutorReport], list[Refused]]:
    return _parse(text, parse_report)


def parse_heartbeats(text: str) -> tuple[list[Heartbeat], list[Refused]]:
    return _parse(text, parse_heartbeat)


def stream_reports(lines: str | Iterable[str | bytes], refused: list[Refused]) -> Iterator[ExecutorReport]:
    """The reports of `lines` one at a time, as they are read; lines that cannot be read go to `refused`."""
    for item in _stream(lines, parse_report):
        if isinstance(item, Refused):
            refused.append(item)
        else:
            yield item


def _parse(text: str, parse_one: Any) -> tuple[list[Any], list[Refused]]:
    parsed, refused = [], []
    for item in _stream(text, parse_one):
        (refused if isinstance(item, Refused) else parsed).append(item)
    return parsed, refused


def _stream(lines: str | Iterable[str | bytes], parse_one: Any) -> Iterator[Any]:
    for number, item in json_lines(lines):
        if isinstance(item, Refused):
            yield item
            continue
        try:
            yield parse_one(item, number)
        except BadInput as exc:
            job_id = item.get("job_id", item.get("PandaID")) if isinstance(item, Mapping) else None
            yield Refused(number, job_id if isinstance(job_id, int) else None, str(exc))


def parse_report(item: Any, line: int = 1) -> ExecutorReport:
    """The report of one decoded line; BadInput names the first field that is wrong."""
    report = _plain_report(item, line)
    return report if report is not None else _checked_report(item, line)


#: One decoder for every line (json.loads with a hook built a new one per call).
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)
_REPORT_STATUS_VALUES = frozenset(s.value for s in REPORT_STATUSES)
_PLAIN_CHECKSUM = re.compile(r"(?:ad:[0-9a-f]{8}|md5:[0-9a-f]{32})\Z")
_MAX_LFN = 1024
_MAX_GUID = 64


def _plain_report(item: Any, line: int) -> ExecutorReport | None:
    """The common case in one pass of precompiled checks: a report with jedictl's own keys, every value
    of its plain type and within bounds (what `_checked_report` would return for it, the same values).
    None for anything else -- an alias, a string for a number, an empty text, a control character, a
    value out of range --, which `_checked_report` then reads field by field and refuses with its
    message: this path accepts a subset of what that one accepts and never refuses anything itself."""
    if type(item) is not dict or not item.keys() <= REPORT_KEYS:
        return None
    get = item.get
    status = get("status")
    if type(status) is not str or status not in _REPORT_STATUS_VALUES:
        return None
    job_id = get("job_id")
    if type(job_id) is not int or not 1 <= job_id <= _INT64_MAX:
        return None
    attempt_nr = get("attempt_nr")
    if attempt_nr is not None and (type(attempt_nr) is not int or not 0 <= attempt_nr <= _INT64_MAX):
        return None
    error_source, error_code = get("error_source"), get("error_code")
    if error_source is None:
        if error_code is not None:
            return None
    elif (type(error_source) is not str or not 0 < len(error_source) <= 32 or not error_source.isascii() or not error_source.isprintable()
          or type(error_code) is not int or not _INT32[0] <= error_code <= _INT32[1]):
        return None
    error_diag = get("error_diag")
    if error_diag is not None:
        if type(error_diag) is not str or not error_diag:
            return None
        error_diag = fields.free_text(error_diag, "", MAX_DIAG, keep="\n\t", truncate=True)
    trans_exit_code = get("trans_exit_code")
    if trans_exit_code is not None and (type(trans_exit_code) is not int or not _INT32[0] <= trans_exit_code <= _INT32[1]):
        return None
    wall_time, cpu_time = get("wall_time"), get("cpu_time")
    if wall_time is not None:
        if (type(wall_time) is not float and type(wall_time) is not int) or not 0 <= wall_time <= MAX_SECONDS:  # NaN fails too
            return None
        wall_time = float(wall_time)
    if cpu_time is not None:
        if (type(cpu_time) is not float and type(cpu_time) is not int) or not 0 <= cpu_time <= MAX_SECONDS:
            return None
        cpu_time = float(cpu_time)
    max_pss, max_rss, n_events = get("max_pss"), get("max_rss"), get("n_events")
    if max_pss is not None and (type(max_pss) is not int or not 0 <= max_pss <= MAX_MEMORY_KB):
        return None
    if max_rss is not None and (type(max_rss) is not int or not 0 <= max_rss <= MAX_MEMORY_KB):
        return None
    if n_events is not None and (type(n_events) is not int or not 0 <= n_events <= _INT64_MAX):
        return None
    started_at, ended_at = get("started_at"), get("ended_at")
    if started_at is not None or ended_at is not None:
        try:
            started_at = _time(started_at, "")
            ended_at = _time(ended_at, "")
        except BadInput:
            return None
        if started_at is not None and ended_at is not None and ended_at < started_at:
            return None
    listed = get("outputs")
    outputs: tuple[OutputReport, ...] = ()
    if listed is not None:
        if type(listed) is not list:
            return None
        made = []
        total = 0
        for entry in listed:
            if type(entry) is not dict or not entry.keys() <= OUTPUT_KEYS:
                return None
            lfn, size, checksum = entry.get("lfn"), entry.get("size"), entry.get("checksum")
            guid, events, no_output = entry.get("guid"), entry.get("n_events"), entry.get("no_output", False)
            if type(lfn) is not str or not 0 < len(lfn) <= _MAX_LFN or not lfn.isascii() or not lfn.isprintable():
                return None
            if size is not None:
                if type(size) is not int or not 0 <= size <= _INT64_MAX:
                    return None
                total += size
            if checksum is not None and (type(checksum) is not str or _PLAIN_CHECKSUM.match(checksum) is None):
                return None
            if guid is not None and (type(guid) is not str or not 0 < len(guid) <= _MAX_GUID or not guid.isascii() or not guid.isprintable()):
                return None
            if events is not None and (type(events) is not int or not 0 <= events <= _INT64_MAX):
                return None
            if no_output is None:
                no_output = False
            elif type(no_output) is not bool:
                return None
            made.append(OutputReport(lfn, size, checksum, guid, events, no_output))
        if total > _INT64_MAX or len({output.lfn for output in made}) != len(made):
            return None
        outputs = tuple(made)
    return ExecutorReport(line, job_id, status, attempt_nr, error_source, error_code, error_diag, trans_exit_code, wall_time, cpu_time,
                          max_pss, max_rss, n_events, started_at, ended_at, outputs)


_INT64_MAX = fields.INT64_MAX


def _checked_report(item: Any, line: int) -> ExecutorReport:
    """A report read field by field, each through its reader, refusing the first that is wrong."""
    raw = _normalise(item, REPORT_KEYS, f"line {line}")
    where = f"line {line}"
    status = fields.text(raw.get("status"), f"{where}.status", required=True, max_length=32)
    if status not in {s.value for s in REPORT_STATUSES}:
        raise BadInput(f"must be one of {', '.join(sorted(s.value for s in REPORT_STATUSES))} "
                       "(progress goes through `jobs heartbeat`)", f"{where}.status")
    outputs = tuple(_output(entry, f"{where}.outputs[{index}]") for index, entry in enumerate(fields.sequence(raw.get("outputs"), f"{where}.outputs")))
    if len({o.lfn for o in outputs}) != len(outputs):
        raise BadInput("names a file twice", f"{where}.outputs")
    if sum(o.size or 0 for o in outputs) > fields.INT64_MAX:  # the job's output_bytes, a BIGINT
        raise BadInput(f"sizes add up to more than {fields.INT64_MAX} bytes", f"{where}.outputs")
    error_code = fields.integer(raw.get("error_code"), f"{where}.error_code", *_INT32)
    error_source = fields.text(raw.get("error_source"), f"{where}.error_source", max_length=32)
    if (error_code is None) != (error_source is None):
        raise BadInput("error_source and error_code go together", f"{where}.error_code")
    started_at = _time(raw.get("started_at"), f"{where}.started_at")
    ended_at = _time(raw.get("ended_at"), f"{where}.ended_at")
    if started_at is not None and ended_at is not None and ended_at < started_at:
        raise BadInput(f"{ended_at:%Y-%m-%dT%H:%M:%S}Z is before started_at ({started_at:%Y-%m-%dT%H:%M:%S}Z)", f"{where}.ended_at")
    return ExecutorReport(
        line=line,
        job_id=_job_id(raw, where),
        status=status,
        attempt_nr=fields.integer(raw.get("attempt_nr"), f"{where}.attempt_nr", minimum=0),
        error_source=error_source,
        error_code=error_code,
        error_diag=fields.free_text(raw.get("error_diag"), f"{where}.error_diag", MAX_DIAG, keep="\n\t", truncate=True),
        trans_exit_code=fields.integer(raw.get("trans_exit_code"), f"{where}.trans_exit_code", *_INT32),
        wall_time=_seconds(raw.get("wall_time"), f"{where}.wall_time"),
        cpu_time=_seconds(raw.get("cpu_time"), f"{where}.cpu_time"),
        max_pss=fields.integer(raw.get("max_pss"), f"{where}.max_pss", minimum=0, maximum=MAX_MEMORY_KB),
        max_rss=fields.integer(raw.get("max_rss"), f"{where}.max_rss", minimum=0, maximum=MAX_MEMORY_KB),
        n_events=fields.integer(raw.get("n_events"), f"{where}.n_events", minimum=0),
        started_at=started_at,
        ended_at=ended_at,
        outputs=outputs,
    )


def parse_heartbeat(item: Any, line: int | None = 1) -> Heartbeat:
    where = f"line {line}" if line is not None else "heartbeat"
    raw = _normalise(item, HEARTBEAT_KEYS, where)
    status = fields.text(raw.get("status"), f"{where}.status", max_length=32) or "running"
    if status not in {s.value for s in HEARTBEAT_STATUSES}:
        raise BadInput(f"must be one of {', '.join(sorted(s.value for s in HEARTBEAT_STATUSES))} "
                       "(the end of a job goes through `jobs report`)", f"{where}.status")
    return Heartbeat(line, _job_id(raw, where), status, fields.integer(raw.get("attempt_nr"), f"{where}.attempt_nr", minimum=0))


def _normalise(item: Any, allowed: frozenset[str], where: str) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise BadInput("must be a JSON object", where)
    raw: dict[str, Any] = {}
    for key, value in item.items():
        if key in _SOURCE_FIELDS:
            if value not in (None, 0, "0") and "error_code" in allowed and "error_code" not in raw:
                raw["error_source"], raw["error_code"] = _SOURCE_FIELDS[key], value
            continue
        name = _ALIASES.get(key, key)
        if name not in allowed:
            raise BadInput(f"unknown key; expected one of {', '.join(sorted(allowed))}", f"{where}.{key}")
        raw[name] = value
    return raw


def _job_id(raw: Mapping[str, Any], where: str) -> int:
    job_id = fields.integer(raw.get("job_id"), f"{where}.job_id", minimum=1)
    if job_id is None:
        raise BadInput("is required", f"{where}.job_id")
    return job_id


def _output(entry: Any, where: str) -> OutputReport:
    if not isinstance(entry, Mapping):
        raise BadInput("must be an object", where)
    unknown = set(entry) - OUTPUT_KEYS
    if unknown:
        raise BadInput(f"unknown key {sorted(unknown)[0]!r}; expected one of {', '.join(sorted(OUTPUT_KEYS))}", where)
    return OutputReport(
        lfn=fields.text(entry.get("lfn"), f"{where}.lfn", required=True, max_length=1024) or "",
        size=fields.integer(entry.get("size"), f"{where}.size", minimum=0),
        checksum=_checksum(entry.get("checksum"), f"{where}.checksum"),
        guid=fields.text(entry.get("guid"), f"{where}.guid", max_length=64),
        n_events=fields.integer(entry.get("n_events"), f"{where}.n_events", minimum=0),
        no_output=fields.flag(entry.get("no_output"), f"{where}.no_output"),
    )


def _checksum(value: Any, where: str) -> str | None:
    """`ad:` and 8 hex digits (adler32) or `md5:` and 32, stored in lower case as the catalog keeps them."""
    text = fields.text(value, where, max_length=64)
    if text is None:
        return None
    match = _CHECKSUM.match(text)
    if match is None or len(match.group(2)) != _CHECKSUM_DIGITS[match.group(1)]:
        raise BadInput("must be ad: and 8 hex digits (adler32) or md5: and 32 hex digits, e.g. ad:0a1b2c3d", where)
    return f"{match.group(1)}:{match.group(2).lower()}"


def _seconds(value: Any, where: str) -> float | None:
    seconds = fields.number(value, where, minimum=0)
    if seconds is not None and seconds > MAX_SECONDS:
        raise BadInput(f"must be at most {MAX_SECONDS:.0f} seconds", where)
    return seconds


def _time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        from datetime import UTC

        try:
            moment = datetime.fromtimestamp(value, UTC).replace(tzinfo=None)  # epoch seconds, as pilots send
        except (ValueError, OverflowError, OSError) as exc:  # NaN, or a time no calendar holds
            raise BadInput("must be an ISO-8601 time or epoch seconds", where) from exc
        return _in_range(moment, where)
    try:
        moment = parse_time(str(value))
    except ValueError as exc:
        raise BadInput("must be an ISO-8601 time or epoch seconds", where) from exc
    return _in_range(moment, where)


def _in_range(moment: datetime, where: str) -> datetime:
    if not in_range(moment):
        raise BadInput(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}", where)
    return moment
