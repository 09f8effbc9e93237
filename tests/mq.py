"""A test's own corner of the real broker: a trigger queue, its dead-letter queue and an events exchange
with names no other test (or engineer) uses, a queue bound to the exchange that collects every event,
and the settings that point `jedictl listen` and the agents at them."""

from __future__ import annotations

import json
from typing import Any


class TestBroker:
    __test__ = False  # not a test class, whatever its name

    def __init__(self, url: str, prefix: str):
        import pika

        self.url = url
        self.queue, self.dead_letter_queue, self.exchange = f"{prefix}.triggers", f"{prefix}.rejected", f"{prefix}.events"
        self.events_queue = f"{prefix}.seen"
        self._pika = pika
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        self.channel.confirm_delivery()
        self.channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
        for queue in (self.queue, self.dead_letter_queue, self.events_queue):
            self.channel.queue_declare(queue, durable=True)
        self.channel.queue_bind(self.events_queue, self.exchange, routing_key="#")

    @property
    def env(self) -> dict[str, str]:
        """The settings of a process that listens and publishes here."""
        return {"JEDICTL_MESSAGES__BROKER_URL": self.url, "JEDICTL_MESSAGES__QUEUE": self.queue,
                "JEDICTL_MESSAGES__DEAD_LETTER_QUEUE": self.dead_letter_queue, "JEDICTL_MESSAGES__EVENTS_EXCHANGE": self.exchange,
                "JEDICTL_MESSAGES__POLL_SECONDS": "0.2"}

    def send(self, message: dict[str, Any] | bytes, message_id: str | None = None) -> None:
        """Publish one trigger message to the queue (confirmed by the broker)."""
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.channel.basic_publish("", self.queue, body, self._pika.BasicProperties(message_id=message_id, delivery_mode=2))

    def count(self, queue: str) -> int:
        """Messages ready in `queue` (not those held unacknowledged by a consumer)."""
        return self.channel.queue_declare(queue, durable=True, passive=True).method.message_count

    def ready_after_a_while(self, queue: str, timeout: float = 20.0) -> int:
        """Messages ready in `queue` once the broker has noticed a dead consumer (it requeues what the
        consumer held when the connection's close reaches it, not at the moment the process died)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            count = self.count(queue)
            if count or time.monotonic() > deadline:
                return count
            time.sleep(0.05)

    def take_all(self, queue: str) -> list[tuple[Any, bytes]]:
        """Every ready message of `queue` as (properties, body), acknowledged."""
        taken = []
        while True:
            method, properties, body = self.channel.basic_get(queue, auto_ack=True)
            if method is None:
                return taken
            taken.append((properties, body))

    def events(self) -> list[dict[str, Any]]:
        """The task events published so far (taken from the collecting queue), each with its message id."""
        return [{**json.loads(body), "_message_id": properties.message_id} for properties, body in self.take_all(self.events_queue)]

    def remove(self) -> None:
        try:
            for queue in (self.queue, self.dead_letter_queue, self.events_queue):
                self.channel.queue_delete(queue)
            self.channel.exchange_delete(self.exchange)
        finally:
            self.connection.close()
