"""The AMQP 0-9-1 connection (RabbitMQ; docs/architecture.md decision 39 says why AMQP): pika is imported
here and nowhere else, and only when a command talks to a broker, so `--help` and the agents without a
broker never load it.

What jedictl asks of the broker, and nothing more:
- `get`: one message at a time from a durable queue, unacknowledged (basic.get, no auto-ack): a process
  that dies holding it leaves it to the broker, which delivers it again.
- `ack` once its action has committed; `requeue` (basic.nack) to try again.
- `dead_letter`: a copy to the dead-letter queue with the reason in a header, confirmed by the broker,
  then the original acknowledged (a crash in between leaves two copies, never none).
- `publish`: events to a topic exchange, each confirmed (publisher confirms) before `publish` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from jedictl.config import MessageSettings
from jedictl.engine.messages.events import Event
from jedictl.errors import BadInput, JedictlError
from jedictl.redact import mask_url

#: Headers a dead-lettered message carries: why, and the queue it came from.
REASON_HEADER = "x-jedictl-reason"
QUEUE_HEADER = "x-jedictl-queue"


class BrokerUnavailable(JedictlError):
    """The broker cannot be reached, refused the login, or dropped the connection (exit 1)."""


@dataclass(frozen=True)
class Delivery:
    """One message taken from the queue and not acknowledged yet."""

    tag: int
    message_id: str | None
    body: bytes
    redelivered: bool
    headers: dict[str, Any]


def check_url(url: str, option: str) -> str:
    """An AMQP URL as given, or BadInput naming `option` (before anything is connected or written)."""
    parts = urlsplit(url)
    if parts.scheme not in ("amqp", "amqps") or not parts.hostname:
        raise BadInput(f"{mask_url(url)!r} is not an AMQP URL (amqp://USER:PASSWORD@HOST:PORT/VHOST)", option)
    try:
        parts.port
    except ValueError:
        raise BadInput(f"{mask_url(url)!r}: the port is not a number", option) from None
    return url


def _pika() -> Any:
    try:
        import pika
    except ModuleNotFoundError:
        raise JedictlError("messages need the pika package: pip install 'jedictl[mq]'") from None
    return pika


class Broker:
    """One connection and one channel, publisher confirms on."""

    def __init__(self, url: str, settings: MessageSettings):
        pika = _pika()
        self.url, self.settings = url, settings
        self._errors = (pika.exceptions.AMQPError, OSError)
        try:
            parameters = pika.URLParameters(url)
        except Exception as exc:  # noqa: BLE001 - pika's own words on a URL it cannot read
            raise BadInput(f"{mask_url(url)!r} is not an AMQP URL ({exc})", "messages.broker_url") from None
        parameters.connection_attempts = 1
        parameters.socket_timeout = settings.connect_timeout_seconds
        parameters.stack_timeout = settings.connect_timeout_seconds
        parameters.blocked_connection_timeout = settings.connect_timeout_seconds
        parameters.heartbeat = settings.heartbeat_seconds
        try:
            self.connection = pika.BlockingConnection(parameters)
            self.channel = self.connection.channel()
            self.channel.confirm_delivery()
        except self._errors as exc:
            raise BrokerUnavailable(f"broker {mask_url(url)} is unreachable: {_describe(exc)}") from None
        self._properties = pika.BasicProperties

    # --------------------------------------------------------------------------------- topology

    def declare_queues(self, *queues: str) -> None:
        """Durable queues (declaring one that exists changes nothing)."""
        with self._failing("declaring its queues"):
            for queue in queues:
                self.channel.queue_declare(queue=queue, durable=True)

    def declare_exchange(self, exchange: str) -> None:
        """The durable topic exchange events go to."""
        with self._failing(f"declaring exchange {exchange}"):
            self.channel.exchange_declare(exchange=exchange, exchange_type="topic", durable=True)

    # --------------------------------------------------------------------------------- consuming

    def get(self, queue: str) -> Delivery | None:
        """The next message of `queue`, unacknowledged; None when the queue holds none ready."""
        with self._failing(f"reading queue {queue}"):
            method, properties, body = self.channel.basic_get(queue=queue, auto_ack=False)
        if method is None:
            return None
        return Delivery(tag=method.delivery_tag, message_id=properties.message_id, body=bytes(body), redelivered=bool(method.redelivered),
                        headers=dict(properties.headers or {}))

    def ack(self, delivery: Delivery) -> None:
        with self._failing("acknowledging a message"):
            self.channel.basic_ack(delivery_tag=delivery.tag)

    def requeue(self, delivery: Delivery) -> None:
        with self._failing("giving a message back"):
            self.channel.basic_nack(delivery_tag=delivery.tag, requeue=True)

    def dead_letter(self, delivery: Delivery, queue: str, dead_letter_queue: str, reason: str) -> None:
        """Move a message to `dead_letter_queue` with the reason, then acknowledge the original."""
        headers = {**delivery.headers, REASON_HEADER: reason[:1000], QUEUE_HEADER: queue}
        with self._failing(f"dead-lettering a message to {dead_letter_queue}"):
            self.channel.basic_publish(exchange="", routing_key=dead_letter_queue, body=delivery.body, mandatory=True,
                                       properties=self._properties(message_id=delivery.message_id, headers=headers, delivery_mode=2))
            self.channel.basic_ack(delivery_tag=delivery.tag)

    # --------------------------------------------------------------------------------- publishing

    def publish(self, exchange: str, events: Sequence[Event]) -> None:
        """Publish `events`, each confirmed by the broker before the next (an unroutable event -- nobody
        has bound a queue for it -- is confirmed and dropped, as a topic exchange does)."""
        with self._failing(f"publishing to {exchange}"):
            for event in events:
                self.channel.basic_publish(exchange=exchange, routing_key=event.routing_key, body=event.body,
                                           properties=self._properties(message_id=event.message_id, content_type="application/json",
                                                                       delivery_mode=2))

    # --------------------------------------------------------------------------------- the rest

    def sleep(self, seconds: float) -> None:
        """Wait, answering the broker's heartbeats meanwhile."""
        with self._failing("waiting for messages"):
            self.connection.sleep(seconds)

    def close(self) -> None:
        try:
            if self.connection.is_open:
                self.connection.close()
        except self._errors:
            pass  # it is gone already: what it held goes back to its queue

    def _failing(self, doing: str) -> Any:
        return _Failing(self, doing)


class _Failing:
    """A broker error while `doing` something, as one BrokerUnavailable line."""

    def __init__(self, broker: Broker, doing: str):
        self.broker, self.doing = broker, doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> bool:
        if exc is not None and isinstance(exc, self.broker._errors):
            raise BrokerUnavailable(f"broker {mask_url(self.broker.url)} failed while {self.doing}: {_describe(exc)}") from None
        return False


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or repr(exc)
    return mask_url(f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__)
