"""The jumbo watchdog's decisions (seed 000 "Jumbo job switcher": JEDI's JumboWatchDog), pure.

`switch` enables jumbo jobs in the event-service tasks that have the most events left -- more than
`jumbo.min_events_enable`, at a current priority below `jumbo.max_curr_prio`, asking for jumbo jobs
(nJumboJobs > 0) and not pinned to a site -- while fewer than `jumbo.max_tasks` tasks have them and their
events left total less than `jumbo.max_events`; and disables them in tasks with fewer than
`jumbo.min_events_disable` events left (a task close to done makes no jumbo jobs of a few events).
`jumbo_sites_for` says where a task's next jumbo jobs go: the jumbo sites, at most the task's
maxJumboPerSite (or `jumbo.per_site`) each, until it has nJumboJobs (or `jumbo.per_task`) live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JumboTask:
    id: int
    remaining: int  # events of its ranges still to do or in flight
    current_priority: int
    use_jumbo: bool | None
    n_jumbo_jobs: int | None
    pinned: bool  # the task names a site: the machinery is off (seed 000)


@dataclass(frozen=True)
class Switch:
    task_id: int
    enable: bool
    reason: str


def switch(tasks: Sequence[JumboTask], settings: Any) -> list[Switch]:
    decisions = []
    active = []
    for task in tasks:
        if task.use_jumbo and task.remaining < settings.min_events_disable:
            decisions.append(Switch(task.id, False, f"{task.remaining} events left < jumbo.min_events_disable {settings.min_events_disable}"))
        elif task.use_jumbo:
            active.append(task)
    n_active, total = len(active), sum(task.remaining for task in active)
    candidates = sorted((task for task in tasks if not task.use_jumbo and (task.n_jumbo_jobs or 0) > 0 and not task.pinned
                         and task.remaining >= settings.min_events_enable and task.current_priority < settings.max_curr_prio),
                        key=lambda task: (-task.remaining, task.id))
    for task in candidates:
        if n_active >= settings.max_tasks or total >= settings.max_events:
            break
        decisions.append(Switch(task.id, True, f"{task.remaining} events left (the most of the candidates); "
                                               f"{n_active + 1} of jumbo.max_tasks {settings.max_tasks}"))
        n_active, total = n_active + 1, total + task.remaining
    return decisions


def jumbo_sites_for(wanted: int, per_site: int, live: Mapping[str, int], sites: Sequence[str]) -> list[str]:
    """The sites of the jumbo jobs to make now (a site may appear several times)."""
    missing = wanted - sum(live.values())
    made: list[str] = []
    for site in sites:
        room = per_site - live.get(site, 0)
        while room > 0 and len(made) < missing:
            made.append(site)
            room -= 1
    return made
