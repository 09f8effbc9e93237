"""Work queues: definitions, validation, and which queue a task belongs to (seed 000 "Work queues").

Normal queues have criteria; partition queues have none and hold sub-queues that do. Queues of the
task's VO and type (its prodSourceLabel) are tried in `order`; the first whose criteria match wins. A
task matching a sub-queue belongs to the sub-queue (and through it to the partition).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from jedictl.engine.input import expressions

from jedictl.engine.input import fields
from jedictl.errors import BadInput

KINDS = ("normal", "partition", "sub")
STATUSES = ("active", "inactive")
#: queue_order is an INTEGER column.
ORDER_RANGE = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class WorkQueue:
    name: str
    vo: str
    queue_type: str
    order: int
    criteria_text: str
    criteria: expressions.Node = field(compare=False)
    kind: str = "normal"
    partition: str | None = None
    share: float | None = None
    stretchable: bool = False
    active: bool = True
    variables: dict[str, Any] = field(default_factory=dict)

    def serves(self, vo: str, label: str) -> bool:
        return self.active and self.queue_type == label and self.vo in ("*", vo)


def load_queues(definitions: Sequence[Mapping[str, Any]], path: str = "work_queues") -> list[WorkQueue]:
    """Validate queue definitions (from configuration or `queue-shares import`)."""
    queues: list[WorkQueue] = []
    seen: set[tuple[str, str, str]] = set()
    for index, raw in enumerate(definitions):
        where = f"{path}[{index}]"
        body = fields.mapping(raw, where)
        name = fields.text(body.get("name"), f"{where}.name", required=True, max_length=64) or ""
        vo = fields.text(body.get("vo"), f"{where}.vo", max_length=32) or "*"
        queue_type = fields.text(body.get("queue_type"), f"{where}.queue_type", required=True, max_length=32) or ""
        kind = fields.text(body.get("kind"), f"{where}.kind") or "normal"
        if kind not in KINDS:
            raise BadInput(f"must be one of {', '.join(KINDS)}", f"{where}.kind")
        key = (name, vo, queue_type)
        if key in seen:
            raise BadInput(f"queue {name!r} is defined twice for vo {vo} and type {queue_type}", f"{where}.name")
        seen.add(key)
        text = fields.text(body.get("criteria"), f"{where}.criteria", max_length=4096) or ""
        variables = expressions.parse_variables(body.get("variables"), f"{where}.variables")
        if kind == "partition" and text:
            raise BadInput("a partition has no criteria of its own (its sub-queues do)", f"{where}.criteria")
        share = fields.number(body.get("share"), f"{where}.share", minimum=0)
        queues.append(WorkQueue(
            name=name, vo=vo, queue_type=queue_type,
            order=fields.integer(body.get("order"), f"{where}.order", *ORDER_RANGE) or 0,
            criteria_text=text, criteria=expressions.parse(text, variables, f"{where}.criteria"),
            kind=kind, partition=fields.text(body.get("partition"), f"{where}.partition", max_length=64),
            share=share, stretchable=fields.flag(body.get("stretchable"), f"{where}.stretchable"),
            active=_status(body.get("status"), f"{where}.status") == "active",
            variables=variables,
        ))
    partitions = {(q.name, q.vo, q.queue_type) for q in queues if q.kind == "partition"}
    for index, queue in enumerate(queues):
        if queue.kind == "sub" and (queue.partition, queue.vo, queue.queue_type) not in partitions:
            raise BadInput(f"sub-queue {queue.name!r} names no known partition ({queue.partition!r}) of vo {queue.vo} and type "
                           f"{queue.queue_type}", f"{path}[{index}].partition")
        if queue.kind != "sub" and queue.partition:
            raise BadInput("only a sub-queue belongs to a partition", f"{path}[{index}].partition")
    return queues


def _status(value: Any, path: str) -> str:
    status = fields.text(value, path) or "active"
    if status not in STATUSES:
        raise BadInput(f"must be one of {', '.join(STATUSES)}", path)
    return status


def match_queue(
    queues: Sequence[WorkQueue], attributes: Mapping[str, Any], vo: str, label: str, requested: str | None = None
) -> WorkQueue | None:
    """The queue a task belongs to: the one it asked for by name, else the first matching by order."""
    candidates = [q for q in queues if q.serves(vo, label) and q.kind != "partition"]
    if requested:
        return next((q for q in candidates if q.name == requested), None)
    for queue in sorted(candidates, key=lambda q: q.order):
        if expressions.evaluate(queue.criteria, attributes):
            return queue
    return None
