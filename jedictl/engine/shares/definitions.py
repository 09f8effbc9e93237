"""Work-queue and global-share definitions: where the ones in force come from, the import/export format,
and the validated plans of `queue-shares import` and `set` (docs/queue-shares.md).

Definitions in force: the store's `work_queues` and `global_shares` tables once `queue-shares import`
or `queue-shares set` has written them; until then each section falls back to the settings of the
same name. Every agent reads them through `current_definitions`, so the refiner tags tasks, the
generator orders them and the dispatcher hands jobs out by the same definitions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jedictl.config import Settings
from jedictl.engine.input import fields
from jedictl.engine.shares.fair_share import Definitions, flatten_shares, load_sections
from jedictl.engine.shares.work_queues import WorkQueue
from jedictl.errors import BadInput, NotFound
from jedictl.store import queue_shares as store

SECTIONS = ("work_queues", "global_shares")


@dataclass(frozen=True)
class Current:
    definitions: Definitions
    sources: Mapping[str, str]  # section -> "store" | "settings"


def current_definitions(conn: Any, settings: Settings) -> Current:
    """The definitions in force: each section from the store if it holds any rows, else from the settings."""
    queue_rows, share_rows = store.load_queue_rows(conn), store.load_share_rows(conn)
    sources = {"work_queues": "store" if queue_rows else "settings", "global_shares": "store" if share_rows else "settings"}
    definitions = load_sections(queue_rows or settings.work_queues, share_rows or settings.global_shares,
                                f"{sources['work_queues']} work_queues", f"{sources['global_shares']} global_shares")
    return Current(definitions, sources)


def queue_document(queue: WorkQueue) -> dict[str, Any]:
    """One queue in the import/export format; defaults left out."""
    row: dict[str, Any] = {"name": queue.name, "vo": queue.vo, "queue_type": queue.queue_type, "kind": queue.kind}
    if queue.partition:
        row["partition"] = queue.partition
    if queue.share is not None:
        row["share"] = _number(queue.share)
    row["order"] = queue.order
    if queue.criteria_text:
        row["criteria"] = queue.criteria_text
    if queue.variables:
        row["variables"] = dict(queue.variables)
    if queue.stretchable:
        row["stretchable"] = True
    if not queue.active:
        row["status"] = "inactive"
    return row


def export_document(definitions: Definitions) -> dict[str, list[dict[str, Any]]]:
    """Both sections in the import format: queues in order, shares flat with parent names."""
    shares = [{**row, "value": _number(row["value"])} for row in flatten_shares(definitions.share_tree)]
    return {"work_queues": [queue_document(queue) for queue in definitions.queues], "global_shares": shares}


def _number(value: float | None) -> float | int | None:
    """12.0 as 12, so exported files read as they were written."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 else value


@dataclass(frozen=True)
class Plan:
    """Validated definitions and the sections of them to write (the rows, in the store's format)."""

    definitions: Definitions
    rows: Mapping[str, list[dict[str, Any]]]  # section -> rows to store
    change: dict[str, Any] = field(default_factory=dict)


def plan_import(document: Any, current: Definitions) -> Plan:
    """Validate an import document whole. Each section it holds replaces that section; a missing
    section keeps the current one. Raises BadInput naming the field at fault."""
    body = fields.mapping(document, "document")
    for key in body:
        if key not in SECTIONS:
            raise BadInput(f"unknown section (known: {', '.join(SECTIONS)})", str(key))
    present = [section for section in SECTIONS if section in body]
    if not present:
        raise BadInput("nothing to import: the file holds neither work_queues nor global_shares")
    merged = {**export_document(current), **{section: body[section] for section in present}}
    definitions = load_sections(merged["work_queues"], merged["global_shares"])
    if "work_queues" in body and not definitions.queues:
        raise BadInput("at least one work queue is required", "work_queues")
    exported = export_document(definitions)
    return Plan(definitions, {section: exported[section] for section in present})


def plan_set(current: Definitions, name: str, share: float | None, stretchable: bool | None, kind: str | None = None,
             vo: str | None = None, queue_type: str | None = None) -> Plan:
    """Change one queue's share (and stretchability) or one global share's value; validated like an import."""
    if share is None and stretchable is None:
        raise BadInput("nothing to set: give --share and/or --stretchable/--no-stretchable")
    if share is not None and (share < 0 or not math.isfinite(share)):
        raise BadInput("must be a number of at least 0", "--share")
    if kind not in (None, "queue", "share"):
        raise BadInput("must be queue or share", "--kind")
    document = export_document(current)
    queues = [row for row in document["work_queues"] if row["name"] == name and vo in (None, row["vo"])
              and queue_type in (None, row["queue_type"])]
    shares = [row for row in document["global_shares"] if row["name"] == name]
    if kind == "queue" or (vo or queue_type):
        shares = []
    if kind == "share":
        queues = []
    if not queues and not shares:
        raise NotFound(f"no work queue or global share named {name!r}" + (f" (of vo {vo})" if vo else "")
                       + (f" (of type {queue_type})" if queue_type else ""))
    if queues and shares:
        raise BadInput(f"{name!r} names a work queue and a global share: add --kind queue or --kind share")
    if len(queues) > 1:
        pools = ", ".join(f"vo {row['vo']} type {row['queue_type']}" for row in queues)
        raise BadInput(f"{name!r} names {len(queues)} work queues ({pools}): add --vo and/or --queue-type")
    if queues:
        row = queues[0]
        before = {"share": row.get("share"), "stretchable": bool(row.get("stretchable"))}
        if share is not None:
            row["share"] = _number(float(share))
        if stretchable is not None:
            row["stretchable"] = stretchable
        after = {"share": row.get("share"), "stretchable": bool(row.get("stretchable"))}
        section, label = "work_queues", {"kind": "work queue", "vo": row["vo"], "queue_type": row["queue_type"]}
    else:
        if stretchable is not None:
            raise BadInput("only work queues stretch; a global share lends to its siblings anyway", "--stretchable")
        row = shares[0]
        before = {"share": row["value"], "stretchable": None}  # the keys of a queue's change: one shape for scripts
        row["value"] = _number(float(share))
        after = {"share": row["value"], "stretchable": None}
        section, label = "global_shares", {"kind": "global share", "vo": None, "queue_type": None}
    definitions = load_sections(document["work_queues"], document["global_shares"])
    exported = export_document(definitions)
    change = {"name": name, **label, "before": before, "after": after}
    return Plan(definitions, {section: exported[section]}, change)
