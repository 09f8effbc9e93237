"""The consume loop of `jedictl listen` (JEDI's Message Processor): one message at a time, taken
unacknowledged from the queue, parsed whole, acted on once (engine.messages.actions), and acknowledged
only after its action committed -- so a listener killed at any moment leaves the message to the broker,
which delivers it again, and the action's record makes the second delivery do nothing.

What becomes of a message:
    applied / duplicate / refused   acknowledged (refused: the store said no, recorded with the reason)
    rejected    malformed, or failed messages.max_attempts times: moved to the dead-letter queue with
                the reason in a header, then acknowledged; the loop goes on
    error       its action failed (a conflict, a lock timeout): given back to the queue to be tried again
A store that cannot be reached stops the loop (exit 3); the message in hand goes back to the queue with
the connection.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable

from jedictl.config import Settings
from jedictl.engine.agent import PassReport, error_line
from jedictl.engine.messages.actions import act
from jedictl.engine.messages.broker import Broker, BrokerUnavailable, Delivery
from jedictl.engine.messages.formats import Malformed, message_id, parse_message
from jedictl.engine.messages.publisher import publish_waiting
from jedictl.errors import StoreUnavailable
from jedictl.store import messages as message_store


class Listener:
    """A store, a broker connection, the queue and the rules to consume it by."""

    def __init__(self, store: Any, settings: Settings, broker: Broker, owner: str, clock: Callable[[], datetime], queue: str):
        self.store, self.settings, self.broker, self.owner, self.clock, self.queue = store, settings, broker, owner, clock, queue
        self.dead_letter_queue = settings.messages.dead_letter_queue
        broker.declare_queues(queue, self.dead_letter_queue)
        broker.declare_exchange(settings.messages.events_exchange)
        self._forgotten_at: datetime | None = None

    def take(self, report: PassReport, limit: int | None) -> int:
        """Handle the messages waiting in the queue, at most `limit`; the number handled."""
        handled = 0
        while limit is None or handled < limit:
            delivery = self.broker.get(self.queue)
            if delivery is None:
                break
            self.handle(delivery, report)
            handled += 1
        return handled

    def handle(self, delivery: Delivery, report: PassReport) -> None:
        now = self.clock()
        try:
            message = parse_message(delivery.body, delivery.message_id)
        except Malformed as exc:
            self.broker.dead_letter(delivery, self.queue, self.dead_letter_queue, f"malformed: {exc}")
            report.add("rejected", **_item(message_id(delivery.message_id, delivery.body), None, reason=f"malformed: {exc}"))
            return
        try:
            done = act(self.store, self.settings, message, self.owner, now)
        except (StoreUnavailable, BrokerUnavailable, KeyboardInterrupt):
            raise  # the message goes back to the queue with the connection
        except Exception as exc:  # noqa: BLE001 - one message's failure must not stop the listener
            self._failed(delivery, message, exc, report, now)
            return
        self.broker.ack(delivery)
        report.add(done.outcome, **_item(message.message_id, message.msg_type, reason=done.reason, result=done.item))

    def _failed(self, delivery: Delivery, message: Any, exc: Exception, report: PassReport, now: datetime) -> None:
        """A failed action: tried again until messages.max_attempts, then dead-lettered."""
        reason = error_line(exc)
        with self.store.begin() as conn:
            attempts = message_store.failed_attempt(conn, message.message_id, message.msg_type, reason, now)
        if attempts >= self.settings.messages.max_attempts:
            why = f"failed {attempts} times: {reason}"
            self.broker.dead_letter(delivery, self.queue, self.dead_letter_queue, why)
            report.add("rejected", **_item(message.message_id, message.msg_type, reason=why))
            return
        self.broker.requeue(delivery)
        item = _item(message.message_id, message.msg_type)
        del item["reason"]  # add_failure gives the error's line
        report.add_failure(exc, **item)

    def publish(self, report: PassReport) -> None:
        """Publish the task events waiting in the outbox; counted in the report."""
        published = publish_waiting(self.store, self.broker, self.settings, self.owner, self.clock())
        if published:
            report.counts["published"] = report.counts.get("published", 0) + published

    def forget_old(self) -> int:
        """Drop the ids of messages processed longer ago than messages.keep_processed_days (once an hour)."""
        now = self.clock()
        if self._forgotten_at is not None and now - self._forgotten_at < timedelta(hours=1):
            return 0
        self._forgotten_at = now
        with self.store.begin() as conn:
            return message_store.forget_before(conn, now - timedelta(days=self.settings.messages.keep_processed_days))


def _item(identity: str, msg_type: str | None, *, reason: str | None = None, result: dict[str, Any] | None = None) -> dict[str, Any]:
    """A report item: every key present (docs/json-output.md)."""
    result = dict(result or {})
    return {"message_id": identity, "msg_type": msg_type, "task_id": result.pop("task_id", None), "reason": reason, "result": result}
