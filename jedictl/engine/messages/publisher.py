"""Publishing task events (docs/messages.md, "Task events"): the outbox drained to the broker.

Every status change of a store opened with task events wrote its outbox row in its own transaction
(store.messages.queue_status_events), so an event exists exactly when its change committed. A publisher
leases a batch of rows, publishes them with confirms, and deletes them; rows it could not publish are
given back, and the rows of a publisher that died come free when its lease expires. Events are
therefore delivered at least once, in the order of their changes within a batch, each with a stable
message id (`task-status-<outbox id>`) by which a consumer recognises a repeat.

Agent commands publish after their passes (commands._events) and `jedictl listen` whenever its queue
is empty. A failure to publish never fails the pass that made the changes: the rows wait for the next.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jedictl.config import Settings
from jedictl.engine.messages.broker import Broker
from jedictl.engine.messages.events import task_status_event
from jedictl.store import messages as message_store


def publish_waiting(store: Any, broker: Broker, settings: Settings, owner: str, now: datetime) -> int:
    """Publish every event in the outbox (as many batches as it takes); the events published."""
    published = 0
    batch = settings.messages.publish_batch
    while True:
        with store.begin() as conn:
            rows = message_store.claim_events(conn, owner, now, settings.messages.publish_lease_seconds, batch)
        if not rows:
            return published
        ids = [row.id for row in rows]
        try:
            broker.publish(settings.messages.events_exchange, [task_status_event(row) for row in rows])
        except BaseException:
            with store.begin() as conn:
                message_store.release_events(conn, ids, owner)
            raise
        with store.begin() as conn:
            message_store.delete_events(conn, ids, owner)
        published += len(rows)
        if len(rows) < batch:
            return published


def publish_now(store: Any, settings: Settings, owner: str, now: datetime) -> int:
    """Connect, publish what waits in the outbox, disconnect; nothing (not even a connection) when the
    outbox is empty. The events published."""
    with store.read() as conn:
        if not message_store.waiting_events(conn):
            return 0
    broker = Broker(settings.messages.broker_url, settings.messages)
    try:
        broker.declare_exchange(settings.messages.events_exchange)
        return publish_waiting(store, broker, settings, owner, now)
    finally:
        broker.close()
