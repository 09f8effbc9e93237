"""Named operations on `work_queues` and `global_shares` (`jedictl queue-shares`), and the job and task
counts the share arithmetic needs.

Rows travel as plain dicts in the import/export format (docs/queue-shares.md): a queue names its
partition, a share its parent; the ids behind those names are this module's business. The tables are
small (tens of rows), so a replacement deletes and re-inserts them inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from jedictl.model import JobStatus
from jedictl.store.bulk import slices
from jedictl.store.dispatch import DEFAULT_CORE_POWER
from jedictl.store.schema import global_shares, jobs, sites, tasks, work_queues

#: Share attributes held in columns of their own, besides name/value/parent/sort_order.
SHARE_COLUMNS = ("prodsourcelabel", "workinggroup", "campaign", "processingtype", "transpath", "rtype", "vo")
#: Jobs waiting for a slot (PanDA's "queued": activated; defined and assigned are on their way).
QUEUED = (JobStatus.DEFINED.value, JobStatus.ASSIGNED.value, JobStatus.ACTIVATED.value)
#: Jobs holding a slot (PanDA's "executing": sent and running; starting is between the two).
EXECUTING = (JobStatus.SENT.value, JobStatus.STARTING.value, JobStatus.RUNNING.value)


# ------------------------------------------------------------------------------------ definitions

def load_queue_rows(conn: Connection) -> list[dict[str, Any]]:
    """The stored work queues in the import format, by id (the order they were imported in)."""
    partition = work_queues.alias("partition")
    rows = conn.execute(
        select(work_queues, partition.c.name.label("partition_name"))
        .select_from(work_queues.outerjoin(partition, partition.c.id == work_queues.c.partition_id))
        .order_by(work_queues.c.id)
    ).all()
    result = []
    for row in rows:
        item: dict[str, Any] = {"name": row.name, "vo": row.vo, "queue_type": row.queue_type, "kind": row.kind}
        if row.partition_name is not None:
            item["partition"] = row.partition_name
        if row.share is not None:
            item["share"] = row.share
        if row.queue_order is not None:
            item["order"] = row.queue_order
        if row.criteria:
            item["criteria"] = row.criteria
        if row.variables:
            item["variables"] = dict(row.variables)
        if row.stretchable:
            item["stretchable"] = True
        if row.status and row.status != "active":
            item["status"] = row.status
        result.append(item)
    return result


def load_share_rows(conn: Connection) -> list[dict[str, Any]]:
    """The stored global shares as flat rows with parent names and sort orders, by id."""
    parent = global_shares.alias("parent")
    rows = conn.execute(
        select(global_shares, parent.c.name.label("parent_name"))
        .select_from(global_shares.outerjoin(parent, parent.c.id == global_shares.c.parent_id))
        .order_by(global_shares.c.id)
    ).all()
    result = []
    for row in rows:
        item: dict[str, Any] = {"name": row.name, "value": row.value, "parent": row.parent_name, "sort_order": row.sort_order}
        item.update({column: row._mapping[column] for column in SHARE_COLUMNS if row._mapping[column] is not None})
        if not row.throttled:
            item["throttled"] = False
        result.append(item)
    return result


def replace_queues(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
    """Make `work_queues` hold exactly `rows` (validated, in the import format), in their order; a
    sub-queue's partition is linked once every row is in."""
    conn.execute(update(work_queues).values(partition_id=None))
    conn.execute(delete(work_queues))
    ids: dict[tuple[str, str, str], int] = {}
    for row in rows:
        new_id = conn.execute(insert(work_queues).values(
            name=row["name"], vo=row.get("vo") or "*", queue_type=row["queue_type"], kind=row.get("kind") or "normal",
            share=row.get("share"), queue_order=row.get("order"), criteria=row.get("criteria") or "",
            variables=dict(row["variables"]) if row.get("variables") else None, stretchable=bool(row.get("stretchable")),
            status=row.get("status") or "active",
        ).returning(work_queues.c.id)).scalar_one()
        ids[(row["name"], row.get("vo") or "*", row["queue_type"])] = new_id
    for row in rows:
        if row.get("partition"):  # validated: a partition of the same vo and type
            pool = (row.get("vo") or "*", row["queue_type"])
            conn.execute(update(work_queues).where(work_queues.c.id == ids[(row["name"], *pool)])
                         .values(partition_id=ids[(row["partition"], *pool)]))
    return len(rows)


def replace_shares(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
    """Make `global_shares` hold exactly `rows` (validated flat rows, parents before their children)."""
    conn.execute(update(global_shares).values(parent_id=None))
    conn.execute(delete(global_shares))
    ids: dict[str, int] = {}
    for row in rows:
        values = {column: row.get(column) for column in SHARE_COLUMNS}
        new_id = conn.execute(insert(global_shares).values(
            name=row["name"], value=row.get("value") or 0.0, parent_id=ids[row["parent"]] if row.get("parent") else None,
            throttled=row.get("throttled", True) is not False, sort_order=row.get("sort_order") or 0, **values,
        ).returning(global_shares.c.id)).scalar_one()
        ids[row["name"]] = new_id
    return len(rows)


# ----------------------------------------------------------------------------------------- counts

def job_usage(conn: Connection) -> list[dict[str, Any]]:
    """Queued and executing jobs, their cores and executing HS06 (cores x the site's core power, as
    `jobs dispatch` measures it), per (gshare, work_queue, prod_source_label)."""
    power = func.coalesce(func.nullif(sites.c.core_power, 0), DEFAULT_CORE_POWER)
    cores = func.coalesce(func.nullif(jobs.c.core_count, 0), 1)
    rows = conn.execute(
        select(jobs.c.gshare, jobs.c.work_queue, jobs.c.prod_source_label, jobs.c.status, func.count(), func.sum(cores),
               func.sum(cores * power))
        .select_from(jobs.outerjoin(sites, sites.c.name == jobs.c.site))
        .where(jobs.c.status.in_(QUEUED + EXECUTING))
        .group_by(jobs.c.gshare, jobs.c.work_queue, jobs.c.prod_source_label, jobs.c.status)
    ).all()
    usage: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for gshare, queue, label, status, count, n_cores, hs06 in rows:
        item = usage.setdefault((gshare, queue, label), {
            "gshare": gshare, "work_queue": queue, "prod_source_label": label, "running_jobs": 0, "queued_jobs": 0,
            "running_cores": 0, "queued_cores": 0, "running_hs06": 0.0})
        if status in EXECUTING:
            item["running_jobs"] += int(count)
            item["running_cores"] += int(n_cores or 0)
            item["running_hs06"] += float(hs06 or 0.0)
        else:
            item["queued_jobs"] += int(count)
            item["queued_cores"] += int(n_cores or 0)
    return list(usage.values())


def executing_by_group(conn: Connection, groups: Sequence[str]) -> dict[str, float]:
    """The HS06 the jobs of each of these working groups execute now (cores x the site's core power)."""
    power = func.coalesce(func.nullif(sites.c.core_power, 0), DEFAULT_CORE_POWER)
    cores = func.coalesce(func.nullif(jobs.c.core_count, 0), 1)
    found: dict[str, float] = {}
    for part in slices(sorted(set(groups))):
        for group, hs06 in conn.execute(
                select(jobs.c.working_group, func.sum(cores * power)).select_from(jobs.outerjoin(sites, sites.c.name == jobs.c.site))
                .where(jobs.c.status.in_(EXECUTING), jobs.c.working_group.in_(list(part))).group_by(jobs.c.working_group)):
            found[group] = float(hs06 or 0.0)
    return found


def active_tasks(conn: Connection, statuses: Sequence[str]) -> list[dict[str, Any]]:
    """(gshare, work_queue, prod_source_label) of tasks in `statuses`, with how many there are."""
    rows = conn.execute(
        select(tasks.c.gshare, tasks.c.work_queue, tasks.c.prod_source_label, func.count())
        .where(tasks.c.status.in_(list(statuses)))
        .group_by(tasks.c.gshare, tasks.c.work_queue, tasks.c.prod_source_label)
    ).all()
    return [{"gshare": g, "work_queue": q, "prod_source_label": label, "tasks": int(n)} for g, q, label, n in rows]


def task_queues(conn: Connection, task_ids: Collection[int]) -> dict[int, tuple[str | None, str | None, str | None]]:
    """(gshare, work_queue, prod_source_label) of each task."""
    found: dict[int, tuple[str | None, str | None, str | None]] = {}
    for part in slices(sorted(task_ids)):
        for row in conn.execute(select(tasks.c.id, tasks.c.gshare, tasks.c.work_queue, tasks.c.prod_source_label)
                                .where(tasks.c.id.in_(list(part)))):
            found[row.id] = (row.gshare, row.work_queue, row.prod_source_label)
    return found
