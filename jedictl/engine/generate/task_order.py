"""In which order the Job Generator visits tasks (jedi-inventory.md §6.3 "Fair ordering").

Tasks are grouped by user and the groups are visited round-robin, one task per group per round, so
one user's thousand tasks cannot starve another user's one. Inside a group: merge work first, then by
priority (scouting tasks count one higher) and age. Tasks at or above the express priority (1500) form
an express lane, shuffled, from which a task is taken before each regular one with the express
probability (30 %); whatever express work is left follows once the regular groups are empty.

Before all that, candidates are grouped by their share rank (engine.shares.usage.GenerationOrder: the
most under-served global share first, then the most under-served work queue in it), and the groups are
visited in rank order, each ordered as above. Pure; the random source is the caller's, so a seeded
pass repeats.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Candidate:
    task_id: int
    user: str
    priority: int
    scouting: bool = False
    merge: bool = False  # has merge work waiting
    share_rank: tuple[int, ...] = ()  # lower: its queue is more under-served


def order_tasks(candidates: Sequence[Candidate], rng: random.Random, express_priority: int = 1500, express_ratio: float = 0.3) -> list[int]:
    result: list[int] = []
    for rank in sorted({c.share_rank for c in candidates}):
        result.extend(_order_group([c for c in candidates if c.share_rank == rank], rng, express_priority, express_ratio))
    return result


def _order_group(candidates: Sequence[Candidate], rng: random.Random, express_priority: int, express_ratio: float) -> list[int]:
    express = [c for c in candidates if c.priority >= express_priority]
    rng.shuffle(express)
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.priority < express_priority:
            groups.setdefault(candidate.user, []).append(candidate)
    for members in groups.values():
        members.sort(key=lambda c: (not c.merge, -(c.priority + (1 if c.scouting else 0)), c.task_id))
    order = list(groups)
    rng.shuffle(order)
    queues = [list(reversed(groups[user])) for user in order]  # pop() from the end = best first
    result: list[int] = []
    while any(queues) or express:
        for queue in queues:
            if express and rng.random() < express_ratio:
                result.append(express.pop().task_id)
            if queue:
                result.append(queue.pop().task_id)
        if not any(queues):
            result.extend(c.task_id for c in reversed(express))
            express = []
    return result
