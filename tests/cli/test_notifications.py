"""Owners told of their task's end (issue 20, seed 001), through a real SMTP server (aiosmtpd, started
here), a real HTTP webhook and a program: once per end, never holding the task back, a failing channel
retried on the next passes and given up after `notify.max_attempts`, a channel that succeeded not
repeated, and two passes never sending one notification together."""

from __future__ import annotations

import json
import socket
import sys
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from sqlalchemy import select, update

from jedictl.store import notifications
from jedictl.store.schema import tasks
from tests.cli.test_generate import _grid
from tests.cli.test_scouts_once import SCOUTED_TASK, _drive
from tests.helpers import run_sql
from tests.store.rows import add_task


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):  # noqa: ANN001, ANN201, N802 (aiosmtpd's hook)
        self.messages.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp():
    from aiosmtpd.controller import Controller

    box = _Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=_free_port())
    controller.start()
    box.port = controller.port
    yield box
    controller.stop()


@pytest.fixture
def webhook():
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):  # noqa: ANN002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    server.server_close()


def _config(tmp_path, **notify) -> dict[str, str]:
    path = tmp_path / f"notify-{len(list(tmp_path.glob('notify-*')))}.yaml"
    path.write_text(yaml.safe_dump({"notify": notify}))
    return {"JEDICTL_CONFIG": str(path)}


def _ended_task(cli, store, tmp_path) -> dict:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(SCOUTED_TASK))["task_id"]
    assert _drive(cli, store, task_id, [0]) == "done"  # no channel configured: nothing sent, nothing due kept back
    return cli.json("task", "show", str(task_id), db=store)


def _items(report: dict, outcome: str) -> list[dict]:
    return [item for item in report["items"] if item["outcome"] == outcome]


def test_the_owner_is_mailed_posted_and_run_once_per_end(cli, store, tmp_path, smtp, webhook):
    task = _ended_task(cli, store, tmp_path)
    url, posted = webhook
    ran = tmp_path / "ran.jsonl"
    command = [sys.executable, "-c", f"import sys; open({str(ran)!r}, 'a').write(sys.stdin.read() + '\\n')"]
    env = _config(tmp_path, smtp_host="127.0.0.1", smtp_port=smtp.port, mail_domain="example.org", webhook_url=url, command=command)

    report = cli.json("finalize", db=store, env=env)
    assert [item["task_id"] for item in _items(report, "notified")] == [task["task_id"]], report
    assert report["counts"]["notified"] == 1 and report["errors"] == 0
    (mail,) = smtp.messages
    assert mail.rcpt_tos == [f"{task['user']}@example.org"]
    body = mail.content.decode()
    assert f"Subject: jedictl: task {task['task_id']} {task['name']} done" in body and "files 25, finished 25, failed 0" in body
    assert [(hook["task_id"], hook["status"]) for hook in posted] == [(task["task_id"], "done")]
    assert [json.loads(line)["status"] for line in ran.read_text().splitlines()] == ["done"]

    again = cli.json("finalize", db=store, env=env)
    assert again["counts"]["notified"] == 0 and len(smtp.messages) == 1 and len(posted) == 1  # once per end
    shown = cli.json("task", "show", str(task["task_id"]), db=store)["notified"]
    assert shown["channels"] == ["mail", "webhook", "command"] and shown["attempts"] == 0 and shown["error"] is None
    assert shown["for"] is not None


def test_a_failing_channel_never_holds_the_task_back_is_retried_then_given_up_and_others_are_not_repeated(cli, store, tmp_path, webhook):
    task = _ended_task(cli, store, tmp_path)
    url, posted = webhook
    dead = _free_port()  # nothing listens there
    env = _config(tmp_path, smtp_host="127.0.0.1", smtp_port=dead, mail_domain="example.org", webhook_url=url, max_attempts=2)

    first = cli.json("finalize", db=store, env=env)
    (failed,) = _items(first, "notify_failed")
    assert failed["reason"].startswith("mail: ") and "attempt 1 of 2" in failed["reason"] and "sent: webhook" in failed["reason"]
    assert first["errors"] == 0  # the pass did its work: the task is done whatever the mail server does
    assert cli.json("task", "show", str(task["task_id"]), db=store)["status"] == "done"

    second = cli.json("finalize", db=store, env=env)
    (given_up,) = _items(second, "notify_given_up")
    assert "attempt 2 of 2" in given_up["reason"]
    assert len(posted) == 1  # the webhook had succeeded: not posted again
    assert cli.json("finalize", db=store, env=env)["counts"]["notify_given_up"] == 0  # settled for this end
    row = run_sql(store, lambda conn: conn.execute(select(tasks.c.notify_error, tasks.c.notify_channels, tasks.c.notified_for,
                                                          tasks.c.ended_at).where(tasks.c.id == task["task_id"])).one())
    assert row.notify_error.startswith("mail: ") and row.notify_channels == "webhook" and row.notified_for == row.ended_at


def test_a_task_that_ended_before_the_window_is_not_notified(cli, store, tmp_path, smtp):
    """A channel configured late (or a store upgraded with old ended tasks) mails no old task."""
    task = _ended_task(cli, store, tmp_path)
    env = _config(tmp_path, smtp_host="127.0.0.1", smtp_port=smtp.port, mail_domain="example.org", max_age_hours=1)
    ended = run_sql(store, lambda conn: conn.execute(select(tasks.c.ended_at).where(tasks.c.id == task["task_id"])).scalar_one())
    later = (ended + timedelta(hours=2)).isoformat()
    assert cli.json("finalize", "--now", later, db=store, env=env)["counts"]["notified"] == 0  # ended 2 h ago: too old
    assert smtp.messages == []


def test_a_claim_keeps_a_second_pass_off_and_lapses_when_its_process_died(store):
    """Store level: two passes claiming one end, and a pass killed after its send (no record)."""
    now = datetime(2030, 1, 1, 12)
    since = now - timedelta(hours=72)

    task_id = run_sql(store, lambda conn: add_task(conn, "notify.claim", status="done", ended_at=now - timedelta(minutes=5)))
    ended = now - timedelta(minutes=5)
    until = now + timedelta(seconds=40)
    assert run_sql(store, lambda conn: notifications.claim(conn, task_id, ended, now, since, until)) is not None
    assert run_sql(store, lambda conn: notifications.claim(conn, task_id, ended, now, since, until)) is None  # the other pass
    assert run_sql(store, lambda conn: notifications.due(conn, now, since, 10)) == []
    # The claimer died after sending, before recording: once the claim lapses the end is due again.
    later = until + timedelta(seconds=1)
    assert [row.id for row in run_sql(store, lambda conn: notifications.due(conn, later, since, 10))] == [task_id]
    # Recorded as sent, then the task ends again (a retry): due for its new end.
    run_sql(store, lambda conn: notifications.record(conn, task_id, ended, channels="mail", error=None, attempts=0, settled=True))
    assert run_sql(store, lambda conn: notifications.due(conn, later, since, 10)) == []
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == task_id).values(ended_at=later)))
    assert [row.id for row in run_sql(store, lambda conn: notifications.due(conn, later, since, 10))] == [task_id]
