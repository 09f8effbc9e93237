"""Task events: with a broker configured, every task status change is written to the outbox in its own
transaction and published after the pass (or by `jedictl listen`), once confirmed deleted; a broker that
is down never fails a pass. On both backends, against the real broker."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from sqlalchemy import func, select

from jedictl.store import messages as message_store
from jedictl.store.schema import message_outbox, task_status_history
from tests.cli.test_jobs_report import TASK, _dispatch_all, _finished, _report
from tests.cli.test_generate import _grid
from tests.helpers import run_sql
from tests.messages.test_listen import NOW, _listen, _running_task

pytestmark = pytest.mark.mq


def _outbox(store) -> int:
    return run_sql(store, lambda conn: conn.execute(select(func.count()).select_from(message_outbox)).scalar_one())


def _history(store, task_id: int) -> list[str]:
    return run_sql(store, lambda conn: conn.execute(select(task_status_history.c.status).where(
        task_status_history.c.task_id == task_id).order_by(task_status_history.c.id)).scalars().all())


def test_every_status_change_of_a_task_is_published_once(cli, store, amqp, tmp_path):
    _grid(cli, store, tmp_path)
    env = amqp.env
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK), env=env)["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store, env=env)
    _report(cli, store, *[_finished(job) for job in _dispatch_all(cli, store)])
    cli("finalize", db=store, env=env)  # the batch path writes its history lines in bulk: their events too

    events = amqp.events()
    assert [e["status"] for e in events] == _history(store, task_id) == ["registered", "defined", "assigning", "ready", "running", "prepared", "done"]
    first, last = events[0], events[-1]
    assert (first["msg_type"], first["taskid"], first["previous_status"], first["task_name"]) == ("task_status", task_id, None, "report.tests")
    assert (last["previous_status"], last["changed_by"].count(":")) == ("prepared", 2)  # the finalize pass's owner id
    assert isinstance(last["timestamp"], int) and datetime.fromisoformat(last["changed_at"])
    assert len({e["_message_id"] for e in events}) == len(events) and all(e["_message_id"] == f"task-status-{e['event_id']}" for e in events)
    assert _outbox(store) == 0


def test_routing_keys_name_the_status(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    amqp.events()  # nothing was configured while the task was made: no events, and none queued
    assert _outbox(store) == 0
    amqp.channel.queue_declare(amqp.events_queue + ".paused", durable=True)
    amqp.channel.queue_bind(amqp.events_queue + ".paused", amqp.exchange, routing_key="task.paused")
    try:
        cli("task", "pause", str(task_id), "--user", "alice", db=store, env=amqp.env)
        cli("task", "resume", str(task_id), "--user", "alice", db=store, env=amqp.env)
        paused = amqp.take_all(amqp.events_queue + ".paused")
        assert [json.loads(body)["status"] for _, body in paused] == ["paused"]  # routing key task.paused: only that one
        assert [e["status"] for e in amqp.events()] == ["paused", "running"]
    finally:
        amqp.channel.queue_delete(amqp.events_queue + ".paused")


def test_changes_made_by_messages_are_published_by_the_listener(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    amqp.send({"msg_type": "task_command", "command": "kill", "taskid": task_id, "user": "alice"})
    report = _listen(cli, store, amqp)
    assert report["counts"]["published"] == 2
    assert [(e["taskid"], e["status"], e["changed_by"]) for e in amqp.events()] == [(task_id, "aborting", "alice"), (task_id, "aborted", "alice")]
    assert _history(store, task_id)[-2:] == ["aborting", "aborted"]


def test_a_broker_that_is_down_never_fails_a_pass(cli, store, amqp, tmp_path):
    _grid(cli, store, tmp_path)
    down = {**amqp.env, "JEDICTL_MESSAGES__BROKER_URL": "amqp://guest:guest@127.0.0.1:1/%2F"}
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK), env=down)["task_id"]
    result = cli("refine", db=store, env=down)
    assert "jedictl: warning: task events not published yet: broker amqp://guest:***@127.0.0.1:1/%2F is unreachable" in result.stderr
    assert _history(store, task_id) == ["registered", "defined"] and _outbox(store) == 2  # committed; the events wait

    report = _listen(cli, store, amqp)  # the next publisher with a broker publishes them
    assert report["counts"]["published"] == 2 and _outbox(store) == 0
    assert [e["status"] for e in amqp.events()] == ["registered", "defined"]


def test_two_publishers_never_take_the_same_event(store):
    from jedictl.store.database import open_store

    opened = open_store(store, task_events=True)
    try:
        with opened.begin() as conn:
            conn.execute(message_outbox.insert(), [{"task_id": 1, "status": "ready", "changed_at": datetime(2030, 1, 1), "changed_by": "x"}] * 5)
        now = datetime(2030, 1, 1)
        with opened.begin() as conn:
            first = [row.id for row in message_store.claim_events(conn, "one", now, 60, 3)]
        with opened.begin() as conn:
            second = [row.id for row in message_store.claim_events(conn, "two", now, 60, 10)]
        assert len(first) == 3 and len(second) == 2 and not set(first) & set(second)
        with opened.begin() as conn:
            assert message_store.delete_events(conn, second, "one") == 0  # not its rows
            assert message_store.delete_events(conn, second, "two") == 2
            message_store.release_events(conn, first, "one")
        with opened.begin() as conn:  # given back: the next publisher takes them
            assert len(message_store.claim_events(conn, "three", now, 60, 10)) == 3
        later = datetime(2030, 1, 1, 0, 5)
        with opened.begin() as conn:  # and a publisher that died holding them loses them when its lease ends
            assert len(message_store.claim_events(conn, "four", later, 60, 10)) == 3
    finally:
        opened.close()


def test_no_broker_no_outbox(cli, store, tmp_path):
    _running_task(cli, store, tmp_path)
    assert _outbox(store) == 0


def test_check_finds_an_event_of_a_change_that_did_not_happen(cli, store, amqp, tmp_path):
    """The guard: an event is written in its change's transaction. A writer that queued events apart from
    the change (here: one written by hand) leaves an event the history does not hold, and check says so."""
    from jedictl.store.invariants import check_all

    _grid(cli, store, tmp_path)
    down = {**amqp.env, "JEDICTL_MESSAGES__BROKER_URL": "amqp://guest:guest@127.0.0.1:1/%2F"}
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK), env=down)["task_id"]
    assert run_sql(store, check_all) == [] and _outbox(store) == 1  # waiting, and matching its history line
    run_sql(store, lambda conn: conn.execute(message_outbox.insert().values(
        task_id=task_id, status="done", changed_at=datetime(2030, 1, 1), changed_by="nobody")))
    assert run_sql(store, check_all) == [
        f"task {task_id} event 2 (done) waits to be published for a status change the task's history does not hold"]
    result = cli("check", db=store, code=None)
    assert result.exit_code != 0 and "events_of_changes" in result.stdout
