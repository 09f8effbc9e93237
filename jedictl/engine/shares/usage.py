"""Work queues and global shares now: usage, the order generation gives them, and the state
`jedictl queue-shares show` prints (docs/queue-shares.md). Definitions: engine.shares.definitions.

What is measured: executing jobs (sent, starting, running) in HS06 -- cores x the site's core power,
what PanDA's share statistics and `jobs dispatch` use -- and queued jobs (defined, assigned,
activated). A queue or share is *active* when it has active tasks (ACTIVE_TASK_STATUSES) or jobs
queued or executing; only active ones take part in the redistribution of shares (share_math).
The target of a queue or share is its effective share of everything executing now; below the
target by more than the tolerance it is under-served, above it over-served.

Order: generation visits tasks of the most under-served global share first (the dispatcher's own leaf
order), and inside one share those of the most under-served work queue of their pool first.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jedictl.config import Settings
from jedictl.engine.shares.definitions import Current, current_definitions
from jedictl.engine.shares.fair_share import (
    Definitions,
    QueueShare,
    dispatch_rank,
    effective_global_shares,
    leaf_order,
    queue_shares,
    service_state,
)
from jedictl.engine.shares.global_shares import ROOT, Share, normalise
from jedictl.engine.shares.work_queues import WorkQueue
from jedictl.model import TASK_FOR_JOB_GENERATOR, TaskStatus
from jedictl.store import queue_shares as store

#: Tasks that make a queue or share active: those the generator works on, and scouted ones (between
#: their scouts and the avalanche).
ACTIVE_TASK_STATUSES = tuple(sorted({status.value for status in TASK_FOR_JOB_GENERATOR} | {TaskStatus.SCOUTED.value}))
#: A queue within 5 % of its target is on target.
DEFAULT_TOLERANCE = 0.05


# ------------------------------------------------------------------------------------------ usage

@dataclass(frozen=True)
class Counts:
    running_jobs: int = 0
    queued_jobs: int = 0
    running_cores: int = 0
    queued_cores: int = 0
    running_hs06: float = 0.0

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.running_jobs + other.running_jobs, self.queued_jobs + other.queued_jobs,
                      self.running_cores + other.running_cores, self.queued_cores + other.queued_cores,
                      self.running_hs06 + other.running_hs06)

    @property
    def busy(self) -> bool:
        return bool(self.running_jobs or self.queued_jobs)

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Counts":
        return cls(int(row.get("running_jobs") or 0), int(row.get("queued_jobs") or 0), int(row.get("running_cores") or 0),
                   int(row.get("queued_cores") or 0), float(row.get("running_hs06") or 0.0))


@dataclass(frozen=True)
class Usage:
    """Jobs per global share and per (queue type, work queue), and who has active tasks."""

    shares: Mapping[str, Counts]
    queues: Mapping[tuple[str, str], Counts]  # (prod_source_label, work queue) -> counts
    active_shares: frozenset[str]
    active_queues: frozenset[tuple[str, str]]  # (prod_source_label, work queue)

    @classmethod
    def of(cls, job_rows: Sequence[Mapping[str, Any]], task_rows: Sequence[Mapping[str, Any]]) -> "Usage":
        """From store.queue_shares.job_usage and active_tasks rows."""
        shares: dict[str, Counts] = {}
        queues: dict[tuple[str, str], Counts] = {}
        for row in job_rows:
            counts = Counts.of(row)
            if row.get("gshare"):
                shares[row["gshare"]] = shares.get(row["gshare"], Counts()) + counts
            if row.get("work_queue"):
                key = (row.get("prod_source_label") or "", row["work_queue"])
                queues[key] = queues.get(key, Counts()) + counts
        active_shares = {name for name, counts in shares.items() if counts.busy}
        active_queues = {key for key, counts in queues.items() if counts.busy}
        for row in task_rows:
            if row.get("gshare"):
                active_shares.add(row["gshare"])
            if row.get("work_queue"):
                active_queues.add((row.get("prod_source_label") or "", row["work_queue"]))
        return cls(shares, queues, frozenset(active_shares), frozenset(active_queues))


def load_usage(conn: Any) -> Usage:
    return Usage.of(store.job_usage(conn), store.active_tasks(conn, ACTIVE_TASK_STATUSES))


# ------------------------------------------------------------------------------------------ order

def share_order(root: Share, executing: Mapping[str, float]) -> dict[str, int]:
    """Position of every leaf share in the order jobs are dispatched and tasks generated: most
    under-served first (executing over pledged at every level), share "Test" always first."""
    return dispatch_rank(leaf_order(root, executing))


def queue_order(rows: Sequence[QueueShare], executing: Mapping[str, float]) -> list[str]:
    """One pool's queues that tasks belong to (normal and sub-queues), most under-served first.

    Like the global-share order, level by level: normal queues and partitions by executing over their
    target (effective share of what the pool executes; a queue with a target and nothing executing
    leads, one without a target -- idle, or not throttled -- comes last), then inside a partition its
    sub-queues the same way. Ties keep the definition order."""
    subs: dict[str, list[QueueShare]] = {}
    for row in rows:
        if row.kind == "sub" and row.partition:
            subs.setdefault(row.partition, []).append(row)
    tops = [row for row in rows if row.kind != "sub"]

    def used(row: QueueShare) -> float:
        if row.kind == "partition":
            return sum(executing.get(sub.name, 0.0) for sub in subs.get(row.name, []))
        return executing.get(row.name, 0.0)

    total = sum(used(row) for row in tops if row.effective is not None)

    def key(item: tuple[int, QueueShare]) -> tuple[float, int]:
        position, row = item
        pledged = total * (row.effective or 0.0) / 100.0
        return (math.inf if pledged <= 0 else used(row) / pledged, position)

    result: list[str] = []
    for _, row in sorted(enumerate(tops), key=key):
        if row.kind == "partition":
            result.extend(sub.name for _, sub in sorted(enumerate(subs.get(row.name, [])), key=key))
        else:
            result.append(row.name)
    return result


def pools(queues: Sequence[WorkQueue]) -> dict[tuple[str, str], list[WorkQueue]]:
    """Queues grouped by (vo, queue type), in definition order."""
    result: dict[tuple[str, str], list[WorkQueue]] = {}
    for queue in queues:
        result.setdefault((queue.vo, queue.queue_type), []).append(queue)
    return result


def pool_shares(pool: Sequence[WorkQueue], usage: Usage) -> list[QueueShare]:
    queue_type = pool[0].queue_type
    active = {name for label, name in usage.active_queues if label == queue_type}
    return queue_shares(pool, active)


@dataclass(frozen=True)
class GenerationOrder:
    """Where a task's (global share, work queue) stands: lower is more under-served."""

    share_ranks: Mapping[str, int]
    queue_ranks: Mapping[tuple[str, str], int]  # (queue type, queue name) -> position in its pool
    unthrottled: frozenset[str] = frozenset()  # shares defined with throttled: false

    def rank(self, gshare: str | None, work_queue: str | None, label: str | None) -> tuple[int, int]:
        return (self.share_ranks.get(gshare or "", len(self.share_ranks)),
                self.queue_ranks.get((label or "", work_queue or ""), len(self.queue_ranks)))


def generation_order(definitions: Definitions, usage: Usage) -> GenerationOrder:
    executing = {name: counts.running_hs06 for name, counts in usage.shares.items()}
    queue_ranks: dict[tuple[str, str], int] = {}
    for (_vo, queue_type), pool in pools(definitions.queues).items():
        rows = pool_shares(pool, usage)
        pool_executing = {name: counts.running_hs06 for (label, name), counts in usage.queues.items() if label == queue_type}
        for position, name in enumerate(queue_order(rows, pool_executing)):
            queue_ranks.setdefault((queue_type, name), position)
    unthrottled = frozenset(node.name for node in definitions.share_tree.walk() if not node.throttled and node.name != ROOT)
    return GenerationOrder(share_order(definitions.share_tree, executing), queue_ranks, unthrottled)


def load_generation_order(conn: Any, settings: Settings) -> GenerationOrder:
    return generation_order(current_definitions(conn, settings).definitions, load_usage(conn))


# ----------------------------------------------------------------------------------------- status

def _percent(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _service(counts: Counts, total: float, share: float | None, tolerance: float) -> dict[str, Any]:
    """Actual against target: share of what executes now, and the verdict."""
    actual = 100.0 * counts.running_hs06 / total if total else None
    if share is None:
        state = "not_throttled"
    elif not total:  # nothing executes: a share with a target should get something, the rest is idle
        state = "under" if share > 0 else "idle"
    else:
        state = service_state(counts.running_hs06, total * share / 100.0, tolerance)
    return {"actual_pct": _percent(actual), "state": state}


def _counts(counts: Counts) -> dict[str, Any]:
    return {"running_jobs": counts.running_jobs, "queued_jobs": counts.queued_jobs, "running_cores": counts.running_cores,
            "queued_cores": counts.queued_cores, "running_hs06": round(counts.running_hs06, 1)}


def share_status(root: Share, usage: Usage, tolerance: float = DEFAULT_TOLERANCE) -> list[dict[str, Any]]:
    """Every node of the tree depth first: configured and effective %, jobs, cores, actual %, verdict and,
    for leaves, the dispatch position; then shares that jobs or tasks carry but the tree lacks."""
    configured = normalise(root)
    leaves = {leaf.name for leaf in root.leaves()}
    effective = effective_global_shares(root, usage.active_shares & leaves)
    ranks = share_order(root, {name: counts.running_hs06 for name, counts in usage.shares.items()})
    total = sum(usage.shares.get(name, Counts()).running_hs06 for name in leaves)
    rows: list[dict[str, Any]] = []

    def sum_of(node: Share) -> Counts:
        if node.is_leaf:
            return usage.shares.get(node.name, Counts())
        return sum((sum_of(child) for child in node.children), Counts())

    def visit(node: Share, path: str | None, depth: int) -> None:
        name = node.name if path is None else f"{path}/{node.name}"
        counts = sum_of(node)
        rows.append({
            "name": node.name, "path": name, "parent": path.rsplit("/", 1)[-1] if path else None, "depth": depth,
            "leaf": node.is_leaf, "configured_pct": _percent(configured.get(node.name)),
            "effective_pct": _percent(effective.get(node.name)), "active": _busy(node, usage.active_shares),
            **_counts(counts), **_service(counts, total, effective.get(node.name), tolerance),
            "rank": ranks.get(node.name) if node.is_leaf else None, "throttled": node.throttled,
        })
        for child in node.children:
            visit(child, name, depth + 1)

    for child in root.children:
        visit(child, None, 0)
    for name in sorted(set(usage.shares) | usage.active_shares):
        if name not in configured:
            counts = usage.shares.get(name, Counts())
            rows.append({"name": name, "path": name, "parent": None, "depth": 0, "leaf": True, "configured_pct": None,
                         "effective_pct": None, "active": True, **_counts(counts),
                         "actual_pct": _percent(100.0 * counts.running_hs06 / total if total else None), "state": "undefined",
                         "rank": len(ranks), "throttled": True})
    return rows


def _busy(node: Share, active: Collection[str]) -> bool:
    return node.name in active if node.is_leaf else any(_busy(child, active) for child in node.children)


def queue_status(queues: Sequence[WorkQueue], usage: Usage, tolerance: float = DEFAULT_TOLERANCE) -> list[dict[str, Any]]:
    """Every work queue pool by pool: configured and effective % of the pool, stretchable, jobs, cores,
    actual % of what the pool executes, verdict and the generation position inside the pool; switched-off
    queues last in their pool, and queues that jobs or tasks carry but no definition has."""
    rows: list[dict[str, Any]] = []
    known: set[tuple[str, str]] = set()
    for (vo, queue_type), pool in pools(queues).items():
        shares = pool_shares(pool, usage)

        def counts_of(row: QueueShare, queue_type: str = queue_type, shares: list[QueueShare] = shares) -> Counts:
            if row.kind == "partition":
                return sum((usage.queues.get((queue_type, sub.name), Counts()) for sub in shares if sub.partition == row.name), Counts())
            return usage.queues.get((queue_type, row.name), Counts())

        total = sum(counts_of(row).running_hs06 for row in shares if row.kind != "partition" and row.configured is not None)
        executing = {row.name: counts_of(row).running_hs06 for row in shares if row.kind != "partition"}
        order = {name: position for position, name in enumerate(queue_order(shares, executing))}
        for row in shares:
            known.add((queue_type, row.name))
            counts = counts_of(row)
            rows.append({
                "name": row.name, "path": f"{row.partition}/{row.name}" if row.partition else row.name, "vo": vo,
                "queue_type": queue_type, "kind": row.kind, "partition": row.partition, "stretchable": row.stretchable,
                "configured_pct": _percent(row.configured), "effective_pct": _percent(row.effective), "active": row.active,
                **_counts(counts), **_service(counts, total, row.effective, tolerance), "rank": order.get(row.name),
            })
        for queue in pool:
            if not queue.active:
                known.add((queue_type, queue.name))
                rows.append({"name": queue.name, "path": queue.name, "vo": vo, "queue_type": queue_type, "kind": queue.kind,
                             "partition": queue.partition, "stretchable": queue.stretchable, "configured_pct": None,
                             "effective_pct": None, "active": False, **_counts(Counts()), "actual_pct": None,
                             "state": "switched_off", "rank": None})
    for label, name in sorted(set(usage.queues) | usage.active_queues):
        if (label, name) not in known:
            rows.append({"name": name, "path": name, "vo": None, "queue_type": label, "kind": None, "partition": None,
                         "stretchable": False, "configured_pct": None, "effective_pct": None, "active": True,
                         **_counts(usage.queues.get((label, name), Counts())), "actual_pct": None, "state": "undefined",
                         "rank": None})
    return rows


def group_share_status(shares: Mapping[str, float], executing: Mapping[str, float], tolerance: float = DEFAULT_TOLERANCE) -> list[dict[str, Any]]:
    """The working groups given a share (`privileges`): their share of the groups' total, the HS06 their
    jobs execute, the actual percent of what the groups execute, the verdict, and the position the
    generator gives them (the one executing least per unit of its share first; docs/queue-shares.md)."""
    total_share = sum(shares.values())
    total = sum(executing.get(group, 0.0) for group in shares)
    order = sorted(shares, key=lambda group: (executing.get(group, 0.0) / shares[group], group))
    rows = []
    for group in sorted(shares):
        configured = 100.0 * shares[group] / total_share if total_share else None
        running = executing.get(group, 0.0)
        rows.append({"group": group, "share": shares[group], "configured_pct": _percent(configured), "running_hs06": round(running, 1),
                     **_service(Counts(running_hs06=running), total, configured, tolerance), "rank": order.index(group)})
    return rows


def status_report(current: Current, usage: Usage, tolerance: float = DEFAULT_TOLERANCE,
                  group_shares: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    return {
        "work_queues_from": current.sources["work_queues"], "global_shares_from": current.sources["global_shares"],
        "measured_in": "HS06 of executing jobs (cores x site core power)", "tolerance_pct": round(tolerance * 100, 2),
        "global_shares": share_status(current.definitions.share_tree, usage, tolerance),
        "work_queues": queue_status(current.definitions.queues, usage, tolerance),
        "group_shares": list(group_shares),
    }


def task_ranks(conn: Any, order: GenerationOrder, task_ids: Collection[int]) -> dict[int, tuple[int, int]]:
    """Each task's rank in `order` by its global share, work queue and label (tasks not found: last)."""
    placed = store.task_queues(conn, task_ids)
    last = (len(order.share_ranks), len(order.queue_ranks))
    return {task_id: order.rank(*placed[task_id]) if task_id in placed else last for task_id in task_ids}
