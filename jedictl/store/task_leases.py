"""Task leases in the agent passes: which tasks each pass claims, in what order, and one task's claim, renewal and release.

A pass names its candidates with one of the filters below (finalize's is store.completion.candidates)
and an order (`BY_ID`, `BY_PRIORITY`); the engine hands both to `claim` without reading them. Every
operation here is store.leases on the `tasks` table, looked up at call time, so its guards hold
unchanged (and so do the test hooks that replace them).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

import json

from sqlalchemy import BigInteger, ColumnElement, Connection, Row, all_, bindparam, exists, func, literal_column, or_, select, true
from sqlalchemy.dialects.postgresql import ARRAY

from jedictl.model import DatasetStatus, TaskStatus
from jedictl.store import leases
from jedictl.store.schema import datasets, tasks

#: Oldest task first.
BY_ID = (tasks.c.id,)
#: Highest current priority first, then the oldest.
BY_PRIORITY = (tasks.c.current_priority.desc(), tasks.c.id)


# ------------------------------------------------------------------------------- each pass's tasks

def refine_candidates() -> ColumnElement[bool]:
    """Tasks the refiner takes: `registered`, and `pending` on their parent (old status `registered`)."""
    waiting_on_parent = (tasks.c.status == TaskStatus.PENDING.value) & (tasks.c.old_status == TaskStatus.REGISTERED.value)
    return (tasks.c.status == TaskStatus.REGISTERED.value) | waiting_on_parent


def feed_candidates(now: datetime, due: datetime, feedable: Collection[str], rescanned_states: Collection[str],
                    rescanned_tasks: Collection[str]) -> ColumnElement[bool]:
    """Tasks the feeder takes: `defined` with a `feedable` dataset to (re)scan, `defined` with every input
    fed and none open (a feeder killed after its last dataset, before the task's own step), tasks in
    `rescanned_tasks` whose open or growing input (`rescanned_states`) was last checked before `due`, and
    tasks pending on a missing input whose wait is over."""
    has = lambda *conditions: exists(select(datasets.c.id).where(datasets.c.task_id == tasks.c.id, datasets.c.type.in_(feedable), *conditions))  # noqa: E731
    to_scan = has(datasets.c.status.in_([DatasetStatus.DEFINED.value, DatasetStatus.TOUPDATE.value]))
    return or_(
        (tasks.c.status == TaskStatus.DEFINED.value) & to_scan,
        (tasks.c.status == TaskStatus.DEFINED.value) & has() & ~to_scan & ~has(datasets.c.state.in_(rescanned_states)),
        tasks.c.status.in_(rescanned_tasks) & has(datasets.c.state.in_(rescanned_states),
                                                  or_(datasets.c.state_checked_at.is_(None), datasets.c.state_checked_at < due)),
        (tasks.c.status == TaskStatus.PENDING.value) & (tasks.c.old_status == TaskStatus.DEFINED.value)
        & or_(tasks.c.wait_until.is_(None), tasks.c.wait_until <= now),
    )


def among(candidates: ColumnElement[bool], task_ids: Collection[int]) -> ColumnElement[bool]:
    """`candidates` limited to these tasks (a pass asked to handle a few tasks now: `jedictl listen`)."""
    return candidates & tasks.c.id.in_(sorted(set(task_ids)))


def broker_candidates(now: datetime) -> ColumnElement[bool]:
    """Tasks the Task Broker takes: `assigning` and not waiting (`wait_until` passed)."""
    return (tasks.c.status == TaskStatus.ASSIGNING.value) & or_(tasks.c.wait_until.is_(None), tasks.c.wait_until <= now)


def _generating(now: datetime, statuses: Collection[str]) -> ColumnElement[bool]:
    """What makes a task the generator's to work on (besides input left): its status and no wait."""
    return tasks.c.status.in_(statuses) & or_(tasks.c.wait_until.is_(None), tasks.c.wait_until <= now)


def generation_candidates(conn: Connection, now: datetime, statuses: Collection[str], input_types: Collection[str]) -> list[Row]:
    """Free tasks in `statuses`, not waiting, with released input left to make jobs from (a master of
    `input_types`) or merge work released: (id, user_name, current_priority, status, gshare,
    resource_type, prod_source_label, merge_left, working_group)."""
    work_left = exists(select(datasets.c.id).where(
        datasets.c.task_id == tasks.c.id, datasets.c.master_id.is_(None), datasets.c.type.in_(input_types),
        datasets.c.n_files_to_be_used > datasets.c.n_files_used))
    # Unmerged files released to merge jobs: the unmerged log's watermark is above what merge jobs took.
    merge_left = exists(select(datasets.c.id).where(
        datasets.c.task_id == tasks.c.id, datasets.c.master_id.is_(None), datasets.c.type == "trn_log",
        datasets.c.n_files_to_be_used > datasets.c.n_files_used)).label("merge_left")
    return list(conn.execute(select(tasks.c.id, tasks.c.user_name, tasks.c.current_priority, tasks.c.status, tasks.c.gshare,
                                    tasks.c.resource_type, tasks.c.prod_source_label, merge_left, tasks.c.working_group)
                             .where(_generating(now, statuses), or_(work_left, merge_left), leases.is_free(tasks, now))))


# ------------------------------------------------------------------------------- claims and releases

def claim(conn: Connection, candidates: ColumnElement[bool], order_by: Sequence[Any], exclude: Iterable[int], owner: str,
          now: datetime, seconds: float, limit: int) -> list[int]:
    """Lease up to `limit` free tasks matching `candidates`, none of `exclude`, in `order_by` order; their ids."""
    return leases.claim(conn, tasks, candidates & not_one_of(conn, tasks.c.id, exclude), order_by, owner, now, seconds, limit)


def candidate_ids(conn: Connection, candidates: ColumnElement[bool], order_by: Sequence[Any], exclude: Iterable[int], now: datetime,
                  limit: int) -> list[int]:
    """The ids of up to `limit` free tasks matching `candidates`, none of `exclude`, in `order_by` order --
    what a pass will claim, found with one look at every task its filter covers. A claim of a few from
    the whole filter at a time looked at them all again for every few (finalize's 10,000 tasks in
    batches of 50 on PostgreSQL: 181 s of claims)."""
    query = select(tasks.c.id).where(candidates, not_one_of(conn, tasks.c.id, exclude), leases.is_free(tasks, now))
    return list(conn.execute(query.order_by(*order_by).limit(limit)).scalars())


def claim_listed(conn: Connection, ids: Sequence[int], candidates: ColumnElement[bool], owner: str, now: datetime,
                 seconds: float) -> list[int]:
    """Lease those of `ids` (a `candidate_ids` list) that are still free and still match `candidates`, the
    filter checked again for them alone; their ids."""
    if not ids:
        return []
    return leases.claim(conn, tasks, tasks.c.id.in_(list(ids)) & candidates, BY_ID, owner, now, seconds, len(ids))


def not_one_of(conn: Connection, column: Any, ids: Iterable[int]) -> ColumnElement[bool]:
    """`column NOT IN ids` as one bound parameter (a JSON array on SQLite, an array on PostgreSQL): a
    pass that excludes the thousands of tasks it has seen would otherwise render and bind thousands of
    parameters at every claim."""
    values = sorted(set(ids))
    if not values:
        return true()
    if conn.dialect.name == "postgresql":
        return column != all_(bindparam("excluded", values, type_=ARRAY(BigInteger)))
    return column.notin_(select(literal_column("value")).select_from(func.json_each(bindparam("excluded", json.dumps(values)))))


def claim_one(conn: Connection, task_id: int, owner: str, now: datetime, seconds: float) -> bool:
    """Lease one known task if it is free; False otherwise."""
    return leases.claim_one(conn, tasks, task_id, owner, now, seconds)


def claim_for_generation(conn: Connection, task_id: int, owner: str, now: datetime, seconds: float, statuses: Collection[str]) -> bool:
    """Lease one task of a `generation_candidates` list if it is free and still in `statuses`, not waiting."""
    return leases.claim_one(conn, tasks, task_id, owner, now, seconds, where=_generating(now, statuses))


def renew(conn: Connection, task_id: int, owner: str, now: datetime, seconds: float, expected: Iterable[str]) -> None:
    """Extend our lease to `now + seconds` while the task is in one of `expected`; LeaseLost otherwise."""
    leases.renew(conn, tasks, task_id, owner, now, seconds, where=tasks.c.status.in_([str(s) for s in expected]))


def release(conn: Connection, task_id: int, owner: str) -> bool:
    """Give up our lease on one task; False when it was not ours."""
    return leases.release(conn, tasks, task_id, owner)


def release_all(conn: Connection, owner: str) -> list[int]:
    """Give up every task lease `owner` holds; the ids."""
    return leases.release_all(conn, tasks, owner)
