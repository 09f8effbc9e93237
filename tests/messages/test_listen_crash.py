"""A real `jedictl listen` killed between receiving a message and committing its action, or between the
commit and the acknowledgement (tests/hooks: JEDICTL_HOOK_DIE_AT), on both backends: the broker delivers
the message again, and the action is done exactly once."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import jobs, processed_messages, task_commands, task_status_history
from tests.cli.test_jobs_report import _dispatch_all, _finished
from tests.helpers import hooked_env, jedictl_process, run_sql, store_dump
from tests.messages.test_listen import NOW, _listen, _open_input, _running_task, _status

pytestmark = pytest.mark.mq


def _killed_listener(store: str, amqp, die_at: str) -> None:
    """`jedictl listen` in a process of its own, killed by the hook at `die_at` while handling the message."""
    env = hooked_env(die_at=die_at)
    env.update(amqp.env)
    process = jedictl_process(["listen", "--max-messages", "1", "--now", NOW, "--db", store], env=env)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == -9, stderr


def _commands(store, task_id: int) -> list[str]:
    return run_sql(store, lambda conn: conn.execute(select(task_commands.c.command).where(task_commands.c.task_id == task_id)).scalars().all())


@pytest.mark.parametrize("die_at", ["listen-before-commit", "listen-before-ack"])
def test_a_command_message_survives_a_crash_and_is_applied_once(cli, store, amqp, tmp_path, die_at):
    task_id = _running_task(cli, store, tmp_path)
    before = store_dump(store)
    amqp.send({"msg_type": "task_command", "command": "pause", "taskid": task_id, "user": "alice"}, message_id="pause-crash")
    _killed_listener(store, amqp, die_at)

    assert amqp.ready_after_a_while(amqp.queue) == 1  # not acknowledged: back in the queue
    if die_at == "listen-before-commit":
        assert store_dump(store) == before  # the action's transaction died with the process
    else:
        assert _status(store, task_id) == "paused" and _commands(store, task_id) == ["pause"]

    report = _listen(cli, store, amqp)
    assert [i["outcome"] for i in report["items"]] == ["applied" if die_at == "listen-before-commit" else "duplicate"]
    assert amqp.count(amqp.queue) == 0
    assert _status(store, task_id) == "paused"
    assert _commands(store, task_id) == ["pause"]
    history = run_sql(store, lambda conn: conn.execute(select(task_status_history.c.status).where(
        task_status_history.c.task_id == task_id)).scalars().all())
    assert history.count("paused") == 1
    assert run_sql(store, check_all) == []


@pytest.mark.parametrize("die_at", ["listen-before-commit", "listen-before-ack"])
def test_a_report_message_survives_a_crash_and_is_applied_once(cli, store, amqp, tmp_path, die_at):
    _running_task(cli, store, tmp_path)
    dispatched = _dispatch_all(cli, store)[:2]
    amqp.send({"msg_type": "job_reports", "reports": [_finished(job) for job in dispatched]}, message_id="reports-crash")
    _killed_listener(store, amqp, die_at)
    assert amqp.ready_after_a_while(amqp.queue) == 1
    ids = [job["job_id"] for job in dispatched]
    statuses = lambda: run_sql(store, lambda conn: conn.execute(select(jobs.c.status).where(jobs.c.id.in_(ids))).scalars().all())  # noqa: E731
    assert set(statuses()) == ({"sent"} if die_at == "listen-before-commit" else {"finished"})
    after_crash = store_dump(store)

    item = _listen(cli, store, amqp)["items"][0]
    if die_at == "listen-before-commit":
        assert (item["outcome"], item["result"]["reports"]) == ("applied", {"applied": 2})
    else:  # the reports and the message's record had committed: the redelivery is known
        assert item["outcome"] == "duplicate"
        assert store_dump(store) == after_crash
    assert set(statuses()) == {"finished"}
    assert run_sql(store, lambda conn: conn.execute(select(processed_messages.c.outcome)).scalars().all()) == ["applied"]
    assert run_sql(store, check_all) == []


def test_reports_committed_but_not_recorded_are_found_duplicates_when_redelivered(cli, store, amqp, tmp_path, monkeypatch):
    """The window job reports leave open (their id is recorded after their own transactions): a listener
    stopped there gets the message again, applies it again, and the report path's guards make every
    report a duplicate -- nothing changes twice."""
    _running_task(cli, store, tmp_path)
    dispatched = _dispatch_all(cli, store)[:2]
    from jedictl.engine.messages import actions

    monkeypatch.setattr(actions.message_store, "claim", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt()))
    amqp.send({"msg_type": "job_reports", "reports": [_finished(job) for job in dispatched]}, message_id="reports-window")
    cli("listen", "--once", "--now", NOW, db=store, env=amqp.env, code=130)
    monkeypatch.undo()
    assert amqp.ready_after_a_while(amqp.queue) == 1
    after_reports = store_dump(store)
    assert after_reports["processed_messages"] == []

    item = _listen(cli, store, amqp)["items"][0]
    assert (item["outcome"], item["result"]["reports"]) == ("applied", {"duplicate": 2})
    now = store_dump(store)
    assert {n: r for n, r in now.items() if n != "processed_messages"} == {n: r for n, r in after_reports.items() if n != "processed_messages"}
    assert run_sql(store, check_all) == []


def test_a_dataset_message_survives_a_crash_before_its_commit(cli, store, amqp, tmp_path):
    task_id = _open_input(cli, store, tmp_path)
    amqp.send({"msg_type": "dataset_closed", "dataset": "ds.open"}, message_id="close-crash")
    _killed_listener(store, amqp, "listen-before-commit")
    assert _status(store, task_id) == "defined" and amqp.ready_after_a_while(amqp.queue) == 1
    item = _listen(cli, store, amqp)["items"][0]
    assert item["outcome"] == "applied" and item["result"]["fed"] == {str(task_id): "assigning"}
    assert _status(store, task_id) == "assigning"


def test_a_dataset_message_redelivered_after_its_commit_still_feeds_what_is_due(cli, store, amqp, tmp_path, monkeypatch):
    """A listener that died after the trigger committed and before it fed the tasks: the redelivery is a
    duplicate for the record, and the tasks still due are fed."""
    task_id = _open_input(cli, store, tmp_path)
    from jedictl.engine.messages import actions

    monkeypatch.setattr(actions, "feed_pass", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt()))
    amqp.send({"msg_type": "dataset_closed", "dataset": "ds.open"}, message_id="close-late")
    cli("listen", "--once", "--now", NOW, db=store, env=amqp.env, code=130)
    monkeypatch.undo()
    assert _status(store, task_id) == "defined" and amqp.ready_after_a_while(amqp.queue) == 1
    item = _listen(cli, store, amqp)["items"][0]
    assert item["outcome"] == "duplicate" and item["result"]["fed"] == {str(task_id): "assigning"}
    assert _status(store, task_id) == "assigning"
