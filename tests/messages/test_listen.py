"""`jedictl listen` against the real broker, on both store backends: each kind of message turned into
its action, once, acknowledged after its commit; refused and malformed messages; the consumer going on."""

from __future__ import annotations

import json

import pytest
import yaml
from sqlalchemy import select

from jedictl.engine.agent import PASS_COUNTS
from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, catalog_files, datasets, processed_messages, task_commands, tasks
from tests.cli.test_generate import DS_IN, WORKED_EXAMPLE, _grid
from tests.cli.test_jobs_report import TASK, _dispatch_all, _failed, _finished
from tests.helpers import run_sql, store_dump

pytestmark = pytest.mark.mq

NOW = "2030-01-01T00:00:00"
#: A task whose input is open in the catalog: the feeder releases nothing and the task waits in `defined`.
OPEN_TASK = {**WORKED_EXAMPLE, "taskName": "listen.open", "skipScout": True,
             "jobParameters": [{**WORKED_EXAMPLE["jobParameters"][0], "dataset": "ds.open"}, *WORKED_EXAMPLE["jobParameters"][1:]]}


def _listen(cli, store, amqp, *args: str, code: int = 0) -> dict:
    result = cli("listen", "--once", "--now", NOW, "-o", "json", *args, db=store, env=amqp.env, code=code)
    return json.loads(result.stdout)


def _open_input(cli, store, tmp_path, files: int = 10) -> int:
    """The grid, an open catalog dataset ds.open, and a task reading it fed once (waiting in `defined`)."""
    _grid(cli, store, tmp_path)
    catalog = tmp_path / "open.yaml"
    catalog.write_text(yaml.safe_dump({"datasets": [{**DS_IN["datasets"][0], "name": "ds.open", "state": "open",
                                                     "files": DS_IN["datasets"][0]["files"][:files]}]}))
    cli("data", "import", str(catalog), db=store)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(OPEN_TASK))["task_id"]
    cli("refine", "--now", NOW, db=store)
    cli("feed", "--now", NOW, db=store)
    assert _status(store, task_id) == "defined"
    return task_id


def _status(store, task_id: int) -> str:
    return run_sql(store, lambda conn: conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar_one())


def _input(store, task_id: int) -> dict:
    return run_sql(store, lambda conn: dict(conn.execute(select(datasets).where(datasets.c.task_id == task_id,
                                                                                 datasets.c.type == "input")).one()._mapping))


def _processed(store) -> dict[str, tuple[str, str]]:
    return dict(run_sql(store, lambda conn: [(row.message_id, (row.msg_type, row.outcome)) for row in conn.execute(select(processed_messages))]))


# ------------------------------------------------------------------------------ dataset triggers

def test_a_closed_dataset_feeds_its_task_now(cli, store, amqp, tmp_path):
    task_id = _open_input(cli, store, tmp_path)
    cli("feed", "--now", NOW, db=store)  # not due: the open input was checked at NOW, the next look is 5 minutes on
    assert _status(store, task_id) == "defined"

    amqp.send({"msg_type": "dataset_closed", "dataset": "ds.open"}, message_id="close-1")
    report = _listen(cli, store, amqp)
    assert report["counts"]["applied"] == 1 and report["errors"] == 0
    assert tuple(report["counts"]) == PASS_COUNTS["listen"]  # every count, 0 included (docs/json-output.md)
    item = report["items"][0]
    assert item["result"]["closed"] is True and item["result"]["tasks"] == [task_id]
    assert item["result"]["fed"] == {str(task_id): "assigning"}
    assert _status(store, task_id) == "assigning"
    assert _input(store, task_id)["state"] == "closed" and _input(store, task_id)["n_files_to_be_used"] == 10
    assert run_sql(store, lambda conn: conn.execute(select(catalog_datasets.c.state).where(catalog_datasets.c.name == "ds.open")).scalar_one()) == "closed"
    assert amqp.count(amqp.queue) == 0
    assert _processed(store) == {"close-1": ("dataset_closed", "applied")}
    assert run_sql(store, check_all) == []


def test_files_added_reach_the_catalog_and_the_task_once(cli, store, amqp, tmp_path):
    task_id = _open_input(cli, store, tmp_path, files=10)
    new = [{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(11, 16)]
    amqp.send({"msg_type": "files_added", "dataset": "ds.open", "files": new}, message_id="add-1")
    amqp.send({"msg_type": "files_added", "dataset": "ds.open", "files": new}, message_id="add-1")  # the producer sent it twice
    report = _listen(cli, store, amqp)
    assert [(i["outcome"], i["message_id"]) for i in report["items"]] == [("applied", "add-1"), ("duplicate", "add-1")]
    assert report["items"][0]["result"]["files_added"] == 5
    assert _input(store, task_id)["n_files"] == 15 and _status(store, task_id) == "defined"  # still open: nothing released
    in_catalog = run_sql(store, lambda conn: conn.execute(select(catalog_files.c.lfn).join(
        catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id).where(catalog_datasets.c.name == "ds.open")).scalars().all())
    assert len(in_catalog) == 15

    # The same files again under another id (a producer that lost its confirm): known files are skipped.
    amqp.send({"msg_type": "files_added", "dataset": "ds.open", "files": new}, message_id="add-2")
    amqp.send({"msg_type": "dataset_closed", "dataset": "ds.open"}, message_id="close-2")
    report = _listen(cli, store, amqp)
    assert [i["outcome"] for i in report["items"]] == ["applied", "applied"]
    assert report["items"][0]["result"]["files_added"] == 0
    assert _status(store, task_id) == "assigning" and _input(store, task_id)["n_files_to_be_used"] == 15
    assert run_sql(store, check_all) == []


def test_a_task_pending_on_its_missing_input_is_fed_when_the_dataset_arrives(cli, store, amqp, tmp_path):
    _grid(cli, store, tmp_path)
    spec = json.loads(json.dumps(OPEN_TASK).replace('"ds.open"', '"ds.late"'))
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**spec, "waitInput": True}))["task_id"]
    cli("refine", "--now", NOW, db=store)
    cli("feed", "--now", NOW, db=store)
    assert _status(store, task_id) == "pending"  # ds.late is not in the catalog: the feeder looks again in an hour

    catalog = tmp_path / "late.yaml"
    catalog.write_text(yaml.safe_dump({"datasets": [{**DS_IN["datasets"][0], "name": "ds.late", "state": "closed"}]}))
    cli("data", "import", str(catalog), db=store)
    amqp.send({"msg_type": "dataset_closed", "dataset": "ds.late"})
    item = _listen(cli, store, amqp)["items"][0]
    assert item["outcome"] == "applied" and item["result"]["pending_woken"] == [task_id]
    assert _status(store, task_id) == "assigning"


def test_feed_task_and_pandas_contents_feeder_message(cli, store, amqp, tmp_path):
    task_id = _open_input(cli, store, tmp_path)
    run_sql(store, lambda conn: conn.execute(catalog_datasets.update().where(catalog_datasets.c.name == "ds.open").values(state="closed")))
    amqp.send({"msg_type": "jedi_contents_feeder", "taskid": task_id, "timestamp": 1893456000})
    amqp.send({"msg_type": "feed_task", "taskid": 999})
    items = _listen(cli, store, amqp)["items"]
    assert (items[0]["outcome"], items[0]["msg_type"], items[0]["task_id"]) == ("applied", "feed_task", task_id)
    assert items[0]["result"]["fed"] == {str(task_id): "assigning"}
    assert (items[1]["outcome"], items[1]["reason"]) == ("refused", "task 999 does not exist")
    assert _status(store, task_id) == "assigning"


# --------------------------------------------------------------------------------- task commands

def _running_task(cli, store, tmp_path) -> int:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps(TASK))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    return task_id


def _audit(store, task_id: int) -> list[tuple[str, str]]:
    return run_sql(store, lambda conn: [(row.command, row.requested_by) for row in conn.execute(
        select(task_commands).where(task_commands.c.task_id == task_id).order_by(task_commands.c.id))])


def test_a_command_message_goes_through_the_command_path_once(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    pause = {"msg_type": "task_command", "command": "pause", "taskid": task_id, "user": "alice", "comment": "site in downtime"}
    amqp.send(pause, message_id="pause-1")
    amqp.send({"msg_type": "task_command", "command": "resume", "taskid": task_id, "user": "alice"}, message_id="resume-1")
    amqp.send(pause, message_id="pause-1")  # redelivered after the resume: pausing again would undo the resume
    items = _listen(cli, store, amqp)["items"]
    assert [(i["outcome"], i["result"].get("status")) for i in items] == [("applied", "paused"), ("applied", "running"), ("duplicate", None)]
    assert _status(store, task_id) == "running"
    assert _audit(store, task_id) == [("pause", "alice"), ("resume", "alice")]
    assert run_sql(store, lambda conn: conn.execute(select(task_commands.c.comment).where(task_commands.c.command == "pause")).scalar_one()) \
        == "site in downtime"


def test_a_command_the_status_refuses_is_recorded_and_not_retried(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    amqp.send({"msg_type": "task_command", "command": "resume", "taskid": task_id, "user": "bob"}, message_id="resume-early")
    report = _listen(cli, store, amqp)
    item = report["items"][0]
    assert item["outcome"] == "refused" and "its status is running" in item["reason"]
    assert report["errors"] == 0 and amqp.count(amqp.queue) == 0
    assert _processed(store) == {"resume-early": ("task_command", "refused")}
    cli("task", "pause", str(task_id), "--user", "alice", db=store)
    amqp.send({"msg_type": "task_command", "command": "resume", "taskid": task_id, "user": "bob"}, message_id="resume-early")
    assert _listen(cli, store, amqp)["items"][0]["outcome"] == "duplicate"  # a late redelivery does not resume the paused task
    assert _status(store, task_id) == "paused"


def test_kill_by_message_aborts_the_task(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    amqp.send({"msg_type": "task_command", "command": "kill", "taskid": task_id, "user": "alice"})
    item = _listen(cli, store, amqp)["items"][0]
    assert (item["outcome"], item["result"]["status"]) == ("applied", "aborted")
    assert _audit(store, task_id) == [("kill", "alice")]
    assert run_sql(store, check_all) == []


# ----------------------------------------------------------------------------------- job reports

def test_job_reports_in_bulk_through_the_report_path(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    jobs = _dispatch_all(cli, store)
    assert len(jobs) >= 3
    reports = [_finished(jobs[0]), _failed(jobs[1]), _finished(jobs[2])]
    amqp.send({"msg_type": "job_reports", "reports": reports}, message_id="reports-1")
    item = _listen(cli, store, amqp)["items"][0]
    assert (item["outcome"], item["result"]["reports"]) == ("applied", {"applied": 3})
    shown = {j["job_id"]: j["status"] for j in cli.json("jobs", "list", "--task", str(task_id), "--limit", "100", db=store)}
    assert (shown[jobs[0]["job_id"]], shown[jobs[1]["job_id"]], shown[jobs[2]["job_id"]]) == ("finished", "failed", "finished")
    before = store_dump(store)

    # The same reports under another id: the report path's guards find each a duplicate.
    amqp.send({"msg_type": "job_reports", "reports": reports}, message_id="reports-again")
    amqp.send({"msg_type": "job_reports", "reports": reports}, message_id="reports-1")
    items = _listen(cli, store, amqp)["items"]
    assert (items[0]["outcome"], items[0]["result"]["reports"]) == ("applied", {"duplicate": 3})
    assert items[1]["outcome"] == "duplicate"
    after = store_dump(store)
    assert {name: rows for name, rows in after.items() if name != "processed_messages"} == \
        {name: rows for name, rows in before.items() if name != "processed_messages"}
    assert run_sql(store, check_all) == []


def test_a_report_the_path_refuses_is_named_in_the_result(cli, store, amqp, tmp_path):
    _running_task(cli, store, tmp_path)
    job = _dispatch_all(cli, store)[0]
    amqp.send({"msg_type": "job_reports", "reports": [_finished(job), {**_failed(job), "job_id": 10**9}]})
    item = _listen(cli, store, amqp)["items"][0]
    assert item["outcome"] == "applied" and item["result"]["reports"] == {"applied": 1, "refused": 1}
    assert item["result"]["not_applied"][0]["job_id"] == 10**9


# ----------------------------------------------------------------------------- malformed messages

def test_malformed_messages_are_dead_lettered_and_the_listener_goes_on(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    before = store_dump(store)
    amqp.send(b"{not json", message_id="m-1")
    amqp.send({"msg_type": "launch_rocket"}, message_id="m-2")
    amqp.send({"msg_type": "task_command", "command": "kill", "taskid": "x", "user": "alice"}, message_id="m-3")
    amqp.send({"msg_type": "job_reports", "reports": [{"job_id": 1, "status": "finished", "attempt_nr": 1}, {"status": "won"}]}, message_id="m-4")
    amqp.send({"msg_type": "task_command", "command": "pause", "taskid": task_id, "user": "alice", "soft": True}, message_id="m-5")
    amqp.send({"msg_type": "task_command", "command": "pause", "taskid": task_id, "user": "alice"}, message_id="m-6")
    report = _listen(cli, store, amqp)
    assert [i["outcome"] for i in report["items"]] == ["rejected"] * 5 + ["applied"]
    reasons = [i["reason"] for i in report["items"][:5]]
    assert reasons[0].startswith("malformed: not JSON")
    assert "'launch_rocket' is not a kind of message" in reasons[1]
    assert "taskid: must be an integer" in reasons[2]
    assert "reports[1]" in reasons[3]
    assert "soft: is not an option of pause" in reasons[4]
    assert report["errors"] == 0
    dead = amqp.take_all(amqp.dead_letter_queue)
    assert [p.message_id for p, _ in dead] == ["m-1", "m-2", "m-3", "m-4", "m-5"]
    assert dead[0][1] == b"{not json" and dead[0][0].headers["x-jedictl-reason"] == reasons[0]
    assert dead[1][0].headers["x-jedictl-queue"] == amqp.queue
    assert amqp.count(amqp.queue) == 0
    after = store_dump(store)
    assert after["processed_messages"] == [("m-6", "task_command", "applied", after["processed_messages"][0][3], 0,
                                            after["processed_messages"][0][5], after["processed_messages"][0][6])]
    assert _status(store, task_id) == "paused"
    assert {n: r for n, r in before.items() if n not in ("processed_messages", "tasks", "jobs", "task_commands", "task_status_history")} == \
        {n: r for n, r in after.items() if n not in ("processed_messages", "tasks", "jobs", "task_commands", "task_status_history")}


# -------------------------------------------------------------------------------- failing actions

def test_a_failing_action_is_tried_again_then_dead_lettered(cli, store, amqp, tmp_path, monkeypatch):
    task_id = _running_task(cli, store, tmp_path)
    from jedictl.engine.messages import actions

    real = actions.apply_in
    failures = {"left": 1}

    def flaky(*args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("lock timeout")
        return real(*args, **kwargs)

    monkeypatch.setattr(actions, "apply_in", flaky)
    amqp.send({"msg_type": "task_command", "command": "pause", "taskid": task_id, "user": "alice"}, message_id="flaky")
    result = cli("listen", "--once", "--now", NOW, "-o", "json", db=store, env=amqp.env, code=1)
    report = json.loads(result.stdout)
    assert [i["outcome"] for i in report["items"]] == ["error", "applied"]  # given back, taken again, applied
    assert "RuntimeError: lock timeout" in result.stderr
    assert _processed(store) == {"flaky": ("task_command", "applied")}
    assert _status(store, task_id) == "paused"

    failures["left"] = 10
    amqp.send({"msg_type": "task_command", "command": "resume", "taskid": task_id, "user": "alice"}, message_id="poison")
    report = json.loads(cli("listen", "--once", "--now", NOW, "-o", "json", db=store, env=amqp.env, code=1).stdout)
    assert [i["outcome"] for i in report["items"]] == ["error", "error", "rejected"]
    assert report["items"][2]["reason"] == "failed 3 times: RuntimeError: lock timeout"
    dead = amqp.take_all(amqp.dead_letter_queue)
    assert [p.message_id for p, _ in dead] == ["poison"] and amqp.count(amqp.queue) == 0
    row = run_sql(store, lambda conn: conn.execute(select(processed_messages).where(processed_messages.c.message_id == "poison")).one())
    assert (row.outcome, row.attempts) == ("error", 3)
    assert _status(store, task_id) == "paused"


# ---------------------------------------------------------------------------- the command itself

def test_listen_waits_for_messages_until_max_messages(cli, store, amqp, tmp_path):
    task_id = _running_task(cli, store, tmp_path)
    import threading
    import time

    import pika

    def send_later():  # on a connection of its own: pika's connections are not shared between threads
        time.sleep(1.0)
        connection = pika.BlockingConnection(pika.URLParameters(amqp.url))
        connection.channel().basic_publish("", amqp.queue, json.dumps(
            {"msg_type": "task_command", "command": "pause", "taskid": task_id, "user": "alice"}).encode())
        connection.close()

    sender = threading.Thread(target=send_later)
    sender.start()
    report = json.loads(cli("listen", "--max-messages", "1", "--now", NOW, "-o", "json", db=store, env=amqp.env).stdout)
    sender.join()
    assert report["counts"]["applied"] == 1
    assert _status(store, task_id) == "paused"


def test_listen_needs_a_broker_it_can_read(cli, store):
    assert cli("listen", "--once", db=store, code=2).stderr.strip() == \
        "jedictl: error: --broker: no broker to listen to: give --broker URL or set messages.broker_url"
    assert cli("listen", "--once", "--broker", "http://x", db=store, code=2).stderr.strip() == \
        "jedictl: error: --broker: 'http://x' is not an AMQP URL (amqp://USER:PASSWORD@HOST:PORT/VHOST)"
    result = cli("listen", "--once", "--broker", "amqp://me:secret@127.0.0.1:1/%2F", db=store, code=1)
    assert result.stderr.startswith("jedictl: error: broker amqp://me:***@127.0.0.1:1/%2F is unreachable: ") and "secret" not in result.stderr


def test_config_show_masks_the_brokers_password(cli):
    rows = cli.json("config", "show", env={"JEDICTL_MESSAGES__BROKER_URL": "amqp://jedi:s3cret@mq.example.org:5672/prod"})
    row = next(r for r in rows if r["key"] == "messages.broker_url")
    assert row["value"] == "amqp://jedi:***@mq.example.org:5672/prod" and row["source"] == "env JEDICTL_MESSAGES__BROKER_URL"
