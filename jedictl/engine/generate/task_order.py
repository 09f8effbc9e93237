"""In which order the Job Generator visits tasks (jedi-inventory.md §6.3 "Fair ordering").

Tasks are grouped by account -- their working group when they have one (group analysis and group
production count against the group), else their user -- and the accounts are visited round-robin, one
task per account per round, so one user's thousand tasks cannot starve another user's one. Inside an
account: merge work first, then by priority (scouting tasks count one higher) and age. Tasks at or above
the express priority (1500), and the analysis tasks of privileged users and groups (seed 000 "Special
permission": they jump over other tasks; engine.task.privileges), form an express lane, shuffled, from
which a task is taken before each regular one with the express probability (30 %); whatever express
work is left follows once the regular accounts are empty.

Group shares (docs/queue-shares.md): working groups given a share in `privileges` take their turn in
each round before the other accounts, the one executing least per unit of its share first, so the
groups divide what their share of the CPU gets in proportion to their shares.

Before all that, candidates are grouped by their share rank (engine.shares.usage.GenerationOrder: the
most under-served global share first, then the most under-served work queue in it), and the groups are
visited in rank order, each ordered as above. Pure; the random source is the caller's, so a seeded
pass repeats.
"""

from __future__ import annotations

import math
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
    working_group: str | None = None
    jumps: bool = False  # a privileged analysis task: in the express lane whatever its priority
    group_usage: float | None = None  # its group has a share: HS06 executing per unit of it (lower: more under-served)

    @property
    def account(self) -> str:
        """Who the task takes its turns as: its working group, else its user."""
        return f"group {self.working_group}" if self.working_group else self.user


def order_tasks(candidates: Sequence[Candidate], rng: random.Random, express_priority: int = 1500, express_ratio: float = 0.3) -> list[int]:
    result: list[int] = []
    for rank in sorted({c.share_rank for c in candidates}):
        result.extend(_order_group([c for c in candidates if c.share_rank == rank], rng, express_priority, express_ratio))
    return result


def _order_group(candidates: Sequence[Candidate], rng: random.Random, express_priority: int, express_ratio: float) -> list[int]:
    def is_express(candidate: Candidate) -> bool:
        return candidate.jumps or candidate.priority >= express_priority

    express = [c for c in candidates if is_express(c)]
    rng.shuffle(express)
    groups: dict[str, list[Candidate]] = {}
    usage: dict[str, float] = {}
    for candidate in candidates:
        if not is_express(candidate):
            groups.setdefault(candidate.account, []).append(candidate)
        if candidate.group_usage is not None:
            usage[candidate.account] = candidate.group_usage
    for members in groups.values():
        members.sort(key=lambda c: (not c.merge, -(c.priority + (1 if c.scouting else 0)), c.task_id))
    order = list(groups)
    rng.shuffle(order)
    # Groups with a share first, the most under-served first; the sort is stable, so ties and the
    # accounts without a share keep the shuffled order.
    order.sort(key=lambda account: usage.get(account, math.inf))
    queues = [list(reversed(groups[account])) for account in order]  # pop() from the end = best first
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
