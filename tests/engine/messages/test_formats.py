"""The message formats (engine.messages.formats) and the task event (engine.messages.events): pure, no
broker, no store."""

from __future__ import annotations

import json
from collections import namedtuple
from datetime import datetime

import pytest

from jedictl.engine.messages.events import task_status_event
from jedictl.engine.messages.formats import (
    CommandTrigger,
    DatasetTrigger,
    FeedTrigger,
    Malformed,
    ReportsTrigger,
    message_id,
    parse_message,
)


def _parse(document, given_id=None):
    return parse_message(json.dumps(document).encode(), given_id)


def test_each_kind_becomes_its_trigger():
    closed = _parse({"msg_type": "dataset_closed", "dataset": "mc23:ds.1", "msg_id": "abc"})
    assert (closed.message_id, closed.msg_type, closed.trigger) == ("abc", "dataset_closed", DatasetTrigger("mc23:ds.1", closed=True))
    added = _parse({"msg_type": "files_added", "dataset": "ds", "files": [{"lfn": "f1", "size": 10, "events": 5}]}).trigger
    assert added.dataset == "ds" and not added.closed and [(f.lfn, f.size, f.n_events) for f in added.files] == [("f1", 10, 5)]
    assert _parse({"msg_type": "jedi_contents_feeder", "taskid": 7, "timestamp": 1}).trigger == FeedTrigger(7)
    command = _parse({"msg_type": "task_command", "command": "retry", "taskid": "12", "user": "alice", "max_attempt": 8}).trigger
    assert command == CommandTrigger("retry", 12, "alice", max_attempt=8)
    incexec = _parse({"msg_type": "task_command", "command": "incexec", "taskid": 3, "user": "a", "changes": {"nFilesPerJob": 5}}).trigger
    assert incexec.changes == {"nFilesPerJob": 5}
    reports = _parse({"msg_type": "job_reports", "reports": [{"job_id": 4, "status": "finished", "attempt_nr": 1}]}).trigger
    assert isinstance(reports, ReportsTrigger) and [(r.job_id, r.status) for r in reports.reports] == [(4, "finished")]


@pytest.mark.parametrize(("body", "reason"), [
    (b"\xff", "not UTF-8 (byte 1)"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"msg_type": "feed_task", "msg_type": "x"}', "not JSON (duplicate key 'msg_type' in an object)"),
    (b'{"taskid": 1}', "msg_type: is required"),
    (b'{"msg_type": "feed_task"}', "taskid: is required"),
    (b'{"msg_type": "feed_task", "taskid": 0}', "taskid: must be at least 1"),
    (b'{"msg_type": "feed_task", "taskid": 1, "task": 2}', "task: unknown field for a feed_task message"),
    (b'{"msg_type": "dataset_closed"}', "dataset: is required"),
    (b'{"msg_type": "files_added", "dataset": "d"}', "files: is required"),
    (b'{"msg_type": "files_added", "dataset": "d", "files": [{"lfn": "a"}, {"lfn": "a"}]}', "files[1].lfn: duplicate file name"),
    (b'{"msg_type": "task_command", "command": "explode", "taskid": 1, "user": "a"}', "command: 'explode' is not a task command"),
    (b'{"msg_type": "task_command", "command": "kill", "taskid": 1}', "user: is required"),
    (b'{"msg_type": "task_command", "command": "kill", "taskid": 1, "user": "a", "site": "X"}', "site: is not an option of kill"),
    (b'{"msg_type": "task_command", "command": "incexec", "taskid": 1, "user": "a"}', "changes: is required for incexec"),
    (b'{"msg_type": "job_reports", "reports": []}', "reports: is required"),
    (b'{"msg_type": "job_reports", "reports": [{"job_id": 1, "status": "lost"}]}', "reports[0]"),
    (b'{"msg_type": "feed_task", "taskid": 1, "msg_id": ""}', "msg_id: must be a string of 1 to 255 characters"),
])
def test_a_malformed_message_names_what_is_wrong(body, reason):
    with pytest.raises(Malformed) as caught:
        parse_message(body)
    assert reason in str(caught.value)


def test_the_id_is_the_property_then_the_body_then_the_content():
    body = b'{"msg_type": "feed_task", "taskid": 1}'
    assert message_id("amqp-id", body, {"msg_id": "inner"}) == "amqp-id"
    assert message_id(None, body, {"msg_id": "inner"}) == "inner"
    assert message_id(None, body, {}) == message_id(None, body, None) != message_id(None, body + b" ", {})
    assert message_id(None, body, {}).startswith("sha256:")
    assert parse_message(body).message_id == message_id(None, body, {})


def test_a_task_event_has_pandas_keys_and_a_stable_id():
    Row = namedtuple("Row", "id task_id status previous_status reason changed_at changed_by task_name user_name")
    event = task_status_event(Row(41, 7, "done", "prepared", "all files done", datetime(2030, 1, 1, 0, 0, 1), "host:1:ab", "t.name", "alice"))
    assert (event.routing_key, event.message_id) == ("task.done", "task-status-41")
    assert json.loads(event.body) == {"msg_type": "task_status", "taskid": 7, "status": "done", "previous_status": "prepared",
                                      "reason": "all files done", "timestamp": 1893456001, "changed_at": "2030-01-01T00:00:01",
                                      "changed_by": "host:1:ab", "task_name": "t.name", "user": "alice", "event_id": 41}
