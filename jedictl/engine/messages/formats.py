"""The messages `jedictl listen` understands (docs/messages.md): parsed whole, before anything is done.

A message is one JSON object naming its kind in `msg_type` (PanDA's key). It becomes one trigger:

    dataset_closed  {dataset}               the catalog dataset is closed; tasks reading it re-scan now
    files_added     {dataset, files}        new files in the catalog dataset; tasks reading it re-scan now
    feed_task       {taskid}                the task's open inputs re-scan now (JEDI's jedi_contents_feeder)
    task_command    {command, taskid, user, ...}   kill, finish, retry, incexec, pause, resume, avalanche, reassign
    job_reports     {reports: [...]}        executors' final reports, each a `jobs report` line

Every message may carry `msg_id` (its id when the AMQP message_id property is absent) and `timestamp`
(ignored). Anything else -- not JSON, not an object, an unknown kind, a missing or ill-typed field, a
key the kind does not have, one bad report among many -- makes the message `Malformed`, with the
field at fault named: it is dead-lettered, never half applied.

Pure: no store, no broker.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jedictl.engine.catalogs.data import parse_files
from jedictl.engine.input import fields
from jedictl.engine.input.documents import unique_keys
from jedictl.engine.jobs.reports import ExecutorReport, parse_report
from jedictl.errors import BadInput
from jedictl.model.catalog import CatalogFile

#: The kinds of message, and the names other producers give them (PanDA's JEDI message for the feeder).
MSG_TYPES = ("dataset_closed", "files_added", "feed_task", "task_command", "job_reports")
ALIASES = {"jedi_contents_feeder": "feed_task"}
#: The operator commands a message may give (engine.commando.commands.COMMANDS), and the fields each
#: takes besides taskid, user and comment.
COMMAND_FIELDS: dict[str, frozenset[str]] = {
    "kill": frozenset(), "pause": frozenset(), "resume": frozenset(), "avalanche": frozenset(),
    "finish": frozenset({"soft"}), "retry": frozenset({"max_attempt"}), "incexec": frozenset({"changes", "rescout"}),
    "reassign": frozenset({"site", "cloud", "nucleus"}),
}
_COMMON = frozenset({"msg_type", "msg_id", "timestamp"})
_KEYS = {
    "dataset_closed": frozenset({"dataset"}),
    "files_added": frozenset({"dataset", "files"}),
    "feed_task": frozenset({"taskid"}),
    "task_command": frozenset({"command", "taskid", "user", "comment"}).union(*COMMAND_FIELDS.values()),
    "job_reports": frozenset({"reports"}),
}
#: AMQP's message_id is a short string (255 bytes); an id given in the body is held to the same.
MAX_ID = 255
_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)


class Malformed(Exception):
    """The message cannot be acted on as it is: the reason names the field at fault."""


@dataclass(frozen=True)
class DatasetTrigger:
    """A catalog dataset changed: closed, or files added (optionally none: only the re-scan)."""

    dataset: str
    closed: bool = False
    files: tuple[CatalogFile, ...] = ()


@dataclass(frozen=True)
class FeedTrigger:
    """A task's open inputs are to be re-scanned now."""

    task_id: int


@dataclass(frozen=True)
class CommandTrigger:
    """An operator command (engine.commando.commands.Request's fields)."""

    command: str
    task_id: int
    user: str
    comment: str | None = None
    soft: bool = False
    max_attempt: int | None = None
    changes: Mapping[str, Any] | None = None
    rescout: bool = False
    site: str | None = None
    cloud: str | None = None
    nucleus: str | None = None


@dataclass(frozen=True)
class ReportsTrigger:
    """Executors' final job reports, in bulk."""

    reports: tuple[ExecutorReport, ...] = field(default=())


Trigger = DatasetTrigger | FeedTrigger | CommandTrigger | ReportsTrigger


@dataclass(frozen=True)
class Message:
    """A parsed message: its id (what a redelivery is recognised by), its kind and what to do."""

    message_id: str
    msg_type: str
    trigger: Trigger


def message_id(given: str | None, body: bytes, document: Mapping[str, Any] | None = None) -> str:
    """The id of a message: the AMQP message_id property, else the body's `msg_id`, else the SHA-256 of
    the body (the same content sent twice is then one message: give ids to messages meant to repeat)."""
    if given:
        return given[:MAX_ID]
    inner = document.get("msg_id") if isinstance(document, Mapping) else None
    if isinstance(inner, str) and inner and len(inner) <= MAX_ID:
        return inner
    return "sha256:" + hashlib.sha256(body).hexdigest()


def parse_message(body: bytes, given_id: str | None = None) -> Message:
    """The message in `body`; Malformed (naming what is wrong) when it cannot be acted on."""
    try:
        document = _DECODER.decode(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Malformed(f"not UTF-8 (byte {exc.start + 1})") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; so is a key given twice
        raise Malformed(f"not JSON ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise Malformed("not a JSON object")
    identity = message_id(given_id, body, document)
    try:
        msg_type = _msg_type(document)
        unknown = sorted(set(document) - _COMMON - _KEYS[msg_type])
        if unknown:
            raise BadInput(f"unknown field for a {msg_type} message", unknown[0])
        inner_id = document.get("msg_id")
        if inner_id is not None and (not isinstance(inner_id, str) or not inner_id or len(inner_id) > MAX_ID):
            raise BadInput(f"must be a string of 1 to {MAX_ID} characters", "msg_id")
        trigger = _PARSERS[msg_type](document)
    except BadInput as exc:
        raise Malformed(str(exc)) from None
    return Message(identity, msg_type, trigger)


def _msg_type(document: Mapping[str, Any]) -> str:
    raw = document.get("msg_type")
    if not isinstance(raw, str) or not raw:
        raise BadInput("is required (one of " + ", ".join(MSG_TYPES) + ")", "msg_type")
    name = ALIASES.get(raw, raw)
    if name not in MSG_TYPES:
        raise BadInput(f"{raw!r} is not a kind of message jedictl knows (one of {', '.join(MSG_TYPES)})", "msg_type")
    return name


def _task_id(document: Mapping[str, Any]) -> int:
    task_id = fields.integer(document.get("taskid"), "taskid", minimum=1)
    if task_id is None:
        raise BadInput("is required", "taskid")
    return task_id


def _dataset(document: Mapping[str, Any]) -> str:
    return fields.text(document.get("dataset"), "dataset", required=True, max_length=512) or ""


def _dataset_closed(document: Mapping[str, Any]) -> DatasetTrigger:
    return DatasetTrigger(_dataset(document), closed=True)


def _files_added(document: Mapping[str, Any]) -> DatasetTrigger:
    name = _dataset(document)
    if document.get("files") is None:
        raise BadInput("is required (the new files: [{lfn, size, checksum, ...}])", "files")
    return DatasetTrigger(name, files=tuple(parse_files(document.get("files"), "files")))


def _feed_task(document: Mapping[str, Any]) -> FeedTrigger:
    return FeedTrigger(_task_id(document))


def _task_command(document: Mapping[str, Any]) -> CommandTrigger:
    command = fields.text(document.get("command"), "command", required=True, max_length=32) or ""
    if command not in COMMAND_FIELDS:
        raise BadInput(f"{command!r} is not a task command (one of {', '.join(COMMAND_FIELDS)})", "command")
    others = sorted(set(document) & (_KEYS["task_command"] - {"command", "taskid", "user", "comment"}) - COMMAND_FIELDS[command])
    if others:
        raise BadInput(f"is not an option of {command}", others[0])
    changes = document.get("changes")
    if command == "incexec" and not isinstance(changes, dict):
        raise BadInput("is required for incexec (the task parameters to change)", "changes")
    return CommandTrigger(
        command=command, task_id=_task_id(document),
        user=fields.text(document.get("user"), "user", required=True, max_length=128) or "",
        comment=fields.free_text(document.get("comment"), "comment"),
        soft=fields.flag(document.get("soft"), "soft"),
        max_attempt=fields.integer(document.get("max_attempt"), "max_attempt", minimum=1, maximum=fields.INT32_MAX),
        changes=fields.free_form(changes, "changes") if command == "incexec" else None,
        rescout=fields.flag(document.get("rescout"), "rescout"),
        site=fields.text(document.get("site"), "site", max_length=64),
        cloud=fields.text(document.get("cloud"), "cloud", max_length=64),
        nucleus=fields.text(document.get("nucleus"), "nucleus", max_length=64),
    )


def _job_reports(document: Mapping[str, Any]) -> ReportsTrigger:
    raw = fields.sequence(document.get("reports"), "reports")
    if not raw:
        raise BadInput("is required (a list of job reports)", "reports")
    reports = []
    for index, item in enumerate(raw):
        try:
            reports.append(parse_report(item, index + 1))
        except BadInput as exc:
            raise BadInput(str(exc), f"reports[{index}]") from None
    return ReportsTrigger(tuple(reports))


_PARSERS = {"dataset_closed": _dataset_closed, "files_added": _files_added, "feed_task": _feed_task,
            "task_command": _task_command, "job_reports": _job_reports}
