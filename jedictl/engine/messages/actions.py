"""One message's action on the store, done once however often the message arrives (docs/messages.md,
"Delivery guarantees").

- Dataset triggers and task commands: the message's id is claimed first thing in the action's own
  transaction and its outcome settled in it (store.messages), so the action and the record of it
  commit together: a redelivered message finds its id and does nothing. A second listener handed the
  same message meanwhile waits on the id's row and then finds it.
- Job reports: they go through the report path of `jobs report` (engine.jobs.outcomes), a transaction
  per batch, whose guards make a report of a job already ended by it a `duplicate` that changes
  nothing; the id is recorded after, so a redelivery after a crash between the two is applied again
  and every report in it comes out duplicate.

A refusal (an unknown task, a status the command is refused in, files added to a closed dataset) rolls
the action back and records the message as `refused` in a transaction of its own: it is not tried
again. Any other failure propagates to the listener, which tries the message again or dead-letters it.
After a dataset or task trigger the tasks it made due are fed at once (a feeder pass limited to them:
feeding is itself idempotent); a redelivered trigger feeds them again, which finds nothing new.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from jedictl.config import Settings
from jedictl.engine.commando.commands import Request, apply_in
from jedictl.engine.feed.feeder import FEEDABLE, RESCANNED_STATES, RESCANNED_TASKS, feed_pass
from jedictl.engine.jobs.outcomes import ingest_reports
from jedictl.engine.messages.formats import CommandTrigger, DatasetTrigger, FeedTrigger, Message, ReportsTrigger
from jedictl.errors import BadInput, NotFound
from jedictl.model import TaskStatus
from jedictl.model.catalog import CatalogImport, DatasetImport
from jedictl.store import data_catalog as catalog_store
from jedictl.store import messages as message_store
from jedictl.store import tasks as task_store

#: Tasks a dataset trigger feeds: those the feeder re-scans, and those pending on their input.
TRIGGERED_TASKS = (*RESCANNED_TASKS, TaskStatus.PENDING.value)


@dataclass
class Done:
    """What a message came to: applied, duplicate (acted on before) or refused (with the reason)."""

    outcome: str
    reason: str | None = None
    item: dict[str, Any] = field(default_factory=dict)


def act(store: Any, settings: Settings, message: Message, owner: str, now: datetime) -> Done:
    """Do what `message` asks, once. Raises what is neither done nor refused (the listener retries it)."""
    trigger = message.trigger
    if isinstance(trigger, ReportsTrigger):
        return _reports(store, settings, message, trigger, now)
    if isinstance(trigger, CommandTrigger):
        done = _once(store, message, now, lambda conn: _command(conn, settings, trigger, now))
        done.item.setdefault("task_id", trigger.task_id)
        return done
    if isinstance(trigger, DatasetTrigger):
        done = _once(store, message, now, lambda conn: _dataset(conn, trigger, now))
        done.item.setdefault("dataset", trigger.dataset)
        if done.outcome == "duplicate":  # a crash may have come before the feed: feed what is still due
            with store.read() as conn:
                done.item["tasks"] = message_store.reading_tasks(conn, _names(conn, trigger.dataset), FEEDABLE, TRIGGERED_TASKS)
    else:
        assert isinstance(trigger, FeedTrigger)
        done = _once(store, message, now, lambda conn: _feed_task(conn, trigger, now))
        done.item.setdefault("tasks", [trigger.task_id])
    if done.outcome != "refused" and done.item.get("tasks"):
        fed = feed_pass(store, settings, owner, now, task_ids=done.item["tasks"])
        done.item["fed"] = {str(item["task_id"]): item["outcome"] for item in fed.items if item.get("task_id") is not None}
    return done


def _once(store: Any, message: Message, now: datetime, action: Callable[[Any], Done]) -> Done:
    """`action(conn)` in one transaction with the claim and the outcome of the message's id."""
    try:
        with store.begin() as conn:
            if not message_store.claim(conn, message.message_id, message.msg_type, now):
                return Done("duplicate", "acted on before")
            done = action(conn)
            message_store.settle(conn, message.message_id, done.outcome, _detail(done), now)
            return done
    except BadInput as exc:  # NotFound too: rolled back; recorded so that it is not tried again
        with store.begin() as conn:
            if not message_store.claim(conn, message.message_id, message.msg_type, now):
                return Done("duplicate", "acted on before")
            message_store.settle(conn, message.message_id, "refused", str(exc), now)
        return Done("refused", str(exc))


def _command(conn: Any, settings: Settings, trigger: CommandTrigger, now: datetime) -> Done:
    request = Request(command=trigger.command, task_id=trigger.task_id, user=trigger.user, comment=trigger.comment, soft=trigger.soft,
                      max_attempt=trigger.max_attempt, changes=trigger.changes, rescout=trigger.rescout, site=trigger.site,
                      cloud=trigger.cloud, nucleus=trigger.nucleus)
    outcome = apply_in(conn, request, settings, now)
    return Done("applied", outcome.message or None, {"task_id": trigger.task_id, "command": trigger.command, "status": outcome.status})


def _names(conn: Any, dataset: str) -> list[str]:
    """The dataset and the catalog containers holding it: the names a task may read it by."""
    return [dataset, *message_store.containers_of(conn, dataset)]


def _dataset(conn: Any, trigger: DatasetTrigger, now: datetime) -> Done:
    """The catalog changed as the message says, and the tasks reading the dataset due for feeding."""
    info = catalog_store.StoreDataCatalog(conn).dataset(trigger.dataset)
    if info is None:
        raise NotFound(f"dataset {trigger.dataset} is not in the data catalog")
    added = 0
    if trigger.files:
        if info.kind != "dataset":
            raise BadInput(f"{trigger.dataset} is a container: files are added to its datasets")
        report = catalog_store.import_catalog(conn, CatalogImport(
            datasets=[DatasetImport(name=trigger.dataset, scope=None, state=None, files=list(trigger.files), replicas=[], attributes={})],
            containers=[]), now)
        added = sum(line["files_added"] for line in report)
    closed = trigger.closed and info.state != "closed"
    if closed:
        catalog_store.set_state(conn, trigger.dataset, "closed", now)
    names = _names(conn, trigger.dataset)
    task_ids = message_store.reading_tasks(conn, names, FEEDABLE, TRIGGERED_TASKS)
    due = message_store.rescan_now(conn, task_ids, FEEDABLE, RESCANNED_STATES, names)
    woken = message_store.wake_pending(conn, task_ids, now)
    return Done("applied", None, {"dataset": trigger.dataset, "files_added": added, "closed": closed, "tasks": task_ids,
                                  "datasets_due": due, "pending_woken": woken})


def _feed_task(conn: Any, trigger: FeedTrigger, now: datetime) -> Done:
    task_store.get_task(conn, trigger.task_id)  # NotFound: refused
    due = message_store.rescan_now(conn, [trigger.task_id], FEEDABLE, RESCANNED_STATES)
    woken = message_store.wake_pending(conn, [trigger.task_id], now)
    return Done("applied", None, {"task_id": trigger.task_id, "tasks": [trigger.task_id], "datasets_due": due, "pending_woken": woken})


def _reports(store: Any, settings: Settings, message: Message, trigger: ReportsTrigger, now: datetime) -> Done:
    with store.read() as conn:
        row = message_store.seen(conn, message.message_id)
    if row is not None and row.outcome != message_store.ERROR:
        return Done("duplicate", "acted on before")
    results = ingest_reports(store, trigger.reports, settings, now)
    counts = dict(sorted(Counter(result.outcome for result in results).items()))
    refused = [{"job_id": r.job_id, "outcome": r.outcome, "reason": r.reason} for r in results if r.outcome in ("refused", "conflict")]
    done = Done("applied", None, {"reports": counts, **({"not_applied": refused} if refused else {})})
    with store.begin() as conn:
        if message_store.claim(conn, message.message_id, message.msg_type, now):
            message_store.settle(conn, message.message_id, "applied", _detail(done), now)
    return done


def _detail(done: Done) -> str:
    """What is kept of the outcome in processed_messages.detail."""
    return json.dumps({"reason": done.reason, **done.item}, default=str, sort_keys=True)[:4000]
