"""Fair-share arithmetic for work queues and global shares (seed 000 "Work queues", "Shares",
"JEDI_Work_Queue"; jedi-inventory.md §12; panda-server.md §3.2-3.6), and the validation of definitions
imported as flat lists with parent names (`queue-shares import`).

Work queues: every normal or partition queue of one (VO, type) pool has a share; a partition's share is
divided among its sub-queues. A queue is active when it has active tasks (a partition when one of its
sub-queues is). The share of inactive queues is redistributed: to the active stretchable queues in
proportion to their original shares if there are any, otherwise to all active queues in proportion.
Inside a partition the same rule divides the partition's share among its sub-queues.

Global shares: a node's value is a share of its parent normalised over its siblings (`global_shares.normalise`);
after redistribution the normalisation runs over active siblings only, so an idle branch lends its share
to its siblings first. Targets are a share of what runs now (PanDA pledges a share of the executing
HS06, not of installed capacity), and the most under-served queue or leaf (lowest actual/target) comes
first for generation and dispatch.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.shares.global_shares import REGEX_ATTRIBUTES, ROOT, Share, load_shares, normalise
from jedictl.engine.shares.work_queues import WorkQueue, load_queues
from jedictl.errors import BadInput

QUEUE_ATTRIBUTES = frozenset({"name", "vo", "queue_type", "kind", "partition", "share", "order", "criteria",
                              "variables", "stretchable", "status"})
SHARE_ATTRIBUTES = frozenset({"name", "value", "parent", "sort_order", "children", "rtype", "vo", "throttled", *REGEX_ATTRIBUTES})
#: PanDA dispatches share "Test" before every other (getCriteriaForGlobalShares).
DISPATCH_FIRST = ("Test",)


@dataclass(frozen=True)
class Unit:
    """Something that holds a share: its weight, whether it has work, whether it may stretch."""

    name: str
    share: float
    active: bool
    stretchable: bool = False


def redistribute(units: Sequence[Unit]) -> dict[str, float]:
    """Effective shares, in the units' own scale: inactive units get nothing and what they leave goes to
    the active stretchable units (if any) else to every active unit, in proportion to original shares."""
    result = {unit.name: (unit.share if unit.active else 0.0) for unit in units}
    unused = sum(unit.share for unit in units if not unit.active)
    active = [unit for unit in units if unit.active]
    receivers = [unit for unit in active if unit.stretchable] or active
    if not unused or not receivers:
        return result
    weight = sum(unit.share for unit in receivers)
    for unit in receivers:
        # receivers without any weight share equally (a pool of zero-share queues still gets the CPU)
        part = unit.share / weight if weight else 1.0 / len(receivers)
        result[unit.name] += unused * part
    return result


@dataclass(frozen=True)
class QueueShare:
    name: str
    vo: str
    queue_type: str
    kind: str  # normal | partition | sub
    partition: str | None
    configured: float | None  # percent of its pool before redistribution (None: the queue is not throttled)
    effective: float | None  # percent after redistribution
    active: bool
    stretchable: bool


def queue_shares(queues: Sequence[WorkQueue], active: Collection[str]) -> list[QueueShare]:
    """Configured and effective shares of every queue, per (VO, type) pool, in percent of the pool.

    `active` names the queues that have active tasks (a partition is active through its sub-queues).
    Queues without a share are not throttled and take no part (their shares are None); queues whose
    status is inactive are left out.
    """
    result: list[QueueShare] = []
    pools: dict[tuple[str, str], list[WorkQueue]] = {}
    for queue in queues:
        if queue.active:  # a queue switched off (status inactive) takes no part at all
            pools.setdefault((queue.vo, queue.queue_type), []).append(queue)
    for pool in pools.values():
        subs: dict[str, list[WorkQueue]] = {}
        for queue in pool:
            if queue.kind == "sub" and queue.partition:
                subs.setdefault(queue.partition, []).append(queue)
        tops = [q for q in pool if q.kind != "sub" and q.share is not None]
        total = sum(q.share or 0.0 for q in tops)
        configured = {q.name: _percent(q.share or 0.0, total) for q in tops}
        effective = redistribute([Unit(q.name, configured[q.name], _busy(q, subs, active), q.stretchable) for q in tops])
        for queue in pool:
            if queue.kind == "sub":
                continue
            result.append(QueueShare(queue.name, queue.vo, queue.queue_type, queue.kind, None, configured.get(queue.name),
                                     effective.get(queue.name), _busy(queue, subs, active), queue.stretchable))
            if queue.kind == "partition":
                result.extend(_sub_shares(queue, subs.get(queue.name, []), configured.get(queue.name),
                                          effective.get(queue.name), active))
    return result


def _busy(queue: WorkQueue, subs: Mapping[str, Sequence[WorkQueue]], active: Collection[str]) -> bool:
    """A queue with active tasks, or a partition one of whose sub-queues has some."""
    if queue.name in active:
        return True
    return queue.kind == "partition" and any(sub.name in active for sub in subs.get(queue.name, []))


def _sub_shares(partition: WorkQueue, members: Sequence[WorkQueue], configured: float | None, effective: float | None,
                active: Collection[str]) -> list[QueueShare]:
    """A partition's share divided among its sub-queues by their own shares (equally when none has one)."""
    weights = {q.name: q.share or 0.0 for q in members}
    total = sum(weights.values())
    if not total:
        weights, total = {q.name: 1.0 for q in members}, float(len(members))
    fraction = {name: weight / total if total else 0.0 for name, weight in weights.items()}
    inner = redistribute([Unit(q.name, fraction[q.name], q.name in active, q.stretchable) for q in members])
    return [QueueShare(q.name, q.vo, q.queue_type, "sub", partition.name,
                       None if configured is None else configured * fraction[q.name],
                       None if effective is None else effective * inner[q.name],
                       q.name in active, q.stretchable) for q in members]


def effective_global_shares(root: Share, active_leaves: Collection[str]) -> dict[str, float]:
    """Absolute percent of every node when only branches with active leaves count (inactive: 0)."""
    result: dict[str, float] = {}

    def busy(node: Share) -> bool:
        return node.name in active_leaves if node.is_leaf else any(busy(child) for child in node.children)

    def visit(node: Share, absolute: float) -> None:
        result[node.name] = absolute
        live = [child for child in node.children if busy(child)]
        weight = sum(child.value for child in live)
        for child in node.children:
            if child in live:
                part = child.value / weight if weight else 1.0 / len(live)
                visit(child, absolute * part)
            else:
                visit(child, 0.0)

    visit(root, 100.0 if busy(root) else 0.0)
    result.pop(ROOT, None)
    return result


@dataclass(frozen=True)
class Service:
    """Target against actual for one queue or share."""

    name: str
    share: float  # percent
    actual: float  # running jobs, cores or HS06 -- whatever `actual` was measured in
    target: float
    ratio: float | None  # actual / target (None: no target)
    state: str  # under | over | on_target | idle


def service(shares: Mapping[str, float], actual: Mapping[str, float], *, tolerance: float = 0.0) -> list[Service]:
    """Target = share % of everything running now; a queue is under-served below target x (1 - tolerance)
    and over-served above target x (1 + tolerance). Ordered most under-served first."""
    total = sum(actual.get(name, 0.0) for name in shares)
    rows = []
    for name, share in shares.items():
        have = actual.get(name, 0.0)
        target = total * share / 100.0
        ratio = have / target if target else None
        rows.append(Service(name, share, have, target, ratio, service_state(have, target, tolerance)))
    return rank(rows)


def service_state(have: float, target: float, tolerance: float = 0.0) -> str:
    """under | over | on_target against a target; idle with neither a target nor anything running."""
    if not target:
        return "over" if have else "idle"
    if have < target * (1 - tolerance):
        return "under"
    if have > target * (1 + tolerance):
        return "over"
    return "on_target"


def rank(rows: Iterable[Service]) -> list[Service]:
    """Most under-served first: lowest actual/target; no target last; ties by larger share, then name.
    A share with a target and nothing running at all has ratio 0 and leads."""
    return sorted(rows, key=lambda row: (math.inf if row.ratio is None else row.ratio, -row.share, row.name))


def leaf_order(root: Share, executing: Mapping[str, float], shares_percent: Mapping[str, float] | None = None) -> list[str]:
    """PanDA's sort_branch_by_current_hs_distribution: at every level children in order of executing over
    pledged (pledged = total executing x node % / 100), most under-served first, a zero pledge last; the
    tree flattened depth first into the leaf order generation and dispatch use."""
    percent = dict(shares_percent) if shares_percent is not None else normalise(root)
    total = sum(executing.get(leaf.name, 0.0) for leaf in root.leaves())

    def used(node: Share) -> float:
        return executing.get(node.name, 0.0) if node.is_leaf else sum(used(child) for child in node.children)

    def key(item: tuple[int, Share]) -> tuple[float, int]:
        position, node = item
        pledged = total * percent.get(node.name, 0.0) / 100.0
        return (math.inf if pledged <= 0 else used(node) / pledged, position)

    def flatten(node: Share) -> list[str]:
        if node.is_leaf:
            return [] if node.name == ROOT else [node.name]
        ordered = sorted(enumerate(node.children), key=key)
        return [name for _, child in ordered for name in flatten(child)]

    return flatten(root)


def dispatch_rank(order: Sequence[str], first: Sequence[str] = DISPATCH_FIRST) -> dict[str, int]:
    """Position of each share in the dispatch order; `first` shares lead whatever their service."""
    leading = [name for name in first if name in order]
    return {name: index for index, name in enumerate(leading + [n for n in order if n not in leading])}


def dispatch_key(gshare: str | None, priority: int, age: Any, ranks: Mapping[str, int]) -> tuple[int, int, Any]:
    """Sort key of a queued job: share rank (unknown shares last), then priority (high first), then age
    (`age`: the job id or creation time, oldest first)."""
    return (ranks.get(gshare or "", len(ranks)), -priority, age)


# ------------------------------------------------------------------------------------ definitions

@dataclass(frozen=True)
class Definitions:
    """Validated work queues and global shares, ready for the store or the settings."""

    queues: tuple[WorkQueue, ...]
    share_tree: Share
    share_definitions: tuple[dict[str, Any], ...]  # nested form (children lists), as settings hold it


def load_definitions(document: Any, path: str = "queue_shares") -> Definitions:
    """Validate an import document `{work_queues: [...], global_shares: [...]}`; shares may be nested
    (`children`) or flat with `parent` names. Raises BadInput naming the offending field."""
    body = fields.mapping(document, path)
    for key in body:
        if key not in ("work_queues", "global_shares"):
            raise BadInput("unknown section (known: work_queues, global_shares)", f"{path}.{key}")
    return load_sections(body.get("work_queues"), body.get("global_shares"), f"{path}.work_queues", f"{path}.global_shares")


def load_sections(queue_rows: Any, share_rows: Any, queue_path: str = "work_queues",
                  share_path: str = "global_shares") -> Definitions:
    """Validate the two sections, each named by its own path (they may come from different places:
    the store, the settings, a file)."""
    queue_rows = fields.sequence(queue_rows, queue_path)
    for index, raw in enumerate(queue_rows):
        _known_keys(raw, QUEUE_ATTRIBUTES, f"{queue_path}[{index}]")
    queues = load_queues(queue_rows, queue_path)
    nested = nest_shares(fields.sequence(share_rows, share_path), share_path)
    return Definitions(tuple(queues), load_shares(nested, share_path), tuple(nested))


def nest_shares(rows: Sequence[Any], path: str = "global_shares") -> list[dict[str, Any]]:
    """Flat share rows with `parent` names (as the `global_shares` table holds them) into the nested form
    `global_shares.load_shares` reads; rows may also carry nested `children` (checked by `load_shares`).
    Siblings keep `sort_order`, then the given order. Unknown parents, names defined twice and cycles
    are refused."""
    index_of: dict[str, int] = {}
    for index, raw in enumerate(rows):
        where = f"{path}[{index}]"
        if not isinstance(raw, dict):  # fields.mapping takes None for {}: a null entry reached raw.get
            raise BadInput("must be a mapping", where)
        _known_keys(raw, SHARE_ATTRIBUTES, where)
        name = fields.text(raw.get("name"), f"{where}.name", required=True, max_length=64) or ""
        if name in index_of:
            raise BadInput(f"share {name!r} is defined twice (first at {path}[{index_of[name]}])", f"{where}.name")
        index_of[name] = index
    parents: dict[str, str | None] = {}
    for name, index in index_of.items():
        parent = fields.text(rows[index].get("parent"), f"{path}[{index}].parent", max_length=64)
        if parent is not None and parent not in index_of:
            raise BadInput(f"names no share defined here ({parent!r})", f"{path}[{index}].parent")
        parents[name] = parent
    for name, index in index_of.items():
        chain, node = [name], parents[name]
        while node is not None:
            if node in chain:
                loop = " -> ".join(chain[chain.index(node):] + [node])
                raise BadInput(f"shares form a cycle: {loop}", f"{path}[{index}].parent")
            chain.append(node)
            node = parents[node]

    def order(name: str) -> tuple[int, int]:
        sort_order = fields.integer(rows[index_of[name]].get("sort_order"), f"{path}[{index_of[name]}].sort_order",
                                    -(2**31), 2**31 - 1) or 0
        return sort_order, index_of[name]

    def build(name: str) -> dict[str, Any]:
        node = {k: v for k, v in rows[index_of[name]].items() if k not in ("parent", "sort_order")}
        kids = sorted((child for child, parent in parents.items() if parent == name), key=order)
        if kids and node.get("children"):
            raise BadInput("has nested children and is named as a parent too; use one form", f"{path}[{index_of[name]}].children")
        if kids:
            node["children"] = [build(child) for child in kids]
        return node

    return [build(name) for name in sorted((n for n, p in parents.items() if p is None), key=order)]


def flatten_shares(root: Share) -> list[dict[str, Any]]:
    """The tree as flat rows with parent names and sort orders (`queue-shares export`)."""
    rows: list[dict[str, Any]] = []

    def visit(node: Share, parent: str | None) -> None:
        for position, child in enumerate(node.children):
            row: dict[str, Any] = {"name": child.name, "value": child.value, "parent": parent, "sort_order": position}
            row.update({key: pattern.pattern for key, pattern in child.patterns.items()})
            if child.rtype:
                row["rtype"] = child.rtype
            if child.vo:
                row["vo"] = child.vo
            if not child.throttled:
                row["throttled"] = False
            rows.append(row)
            visit(child, child.name)

    visit(root, None)
    return rows


def _known_keys(raw: Any, allowed: frozenset[str], where: str) -> None:
    body = fields.mapping(raw, where)
    for key in body:
        if key not in allowed:
            raise BadInput(f"unknown attribute (known: {', '.join(sorted(allowed))})", f"{where}.{key}")


def _percent(value: float, total: float) -> float:
    return 100.0 * value / total if total else 0.0
