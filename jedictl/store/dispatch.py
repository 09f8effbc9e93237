"""Named queries behind `jobs dispatch`: claim activated jobs for an executor and load what it needs.

The claim is one statement (PanDA's getJobs, panda-server.md §2.2, §3.5): the candidates are picked in
dispatch order inside a MATERIALIZED CTE with `FOR UPDATE SKIP LOCKED`, and an `UPDATE ... FROM` moves
them `activated -> sent`. Two dispatchers on PostgreSQL never wait on each other's rows and never
take the same row; on SQLite the store's BEGIN IMMEDIATE makes the statement exclusive. The
`status = 'activated'` guard in the UPDATE makes a double hand-out impossible either way.

A site with running caps (`max_running`, `job_caps.<label>.max_running`) is dispatched under a lock
on its `sites` row (`SELECT ... FOR UPDATE`; SQLite's BEGIN IMMEDIATE already is one): two dispatchers
of one site take turns, and each counts the jobs the other handed out before it claims, so together
they never exceed the cap. The claim then takes at most the room left, per job type too (a window
`row_number() OVER (PARTITION BY prod_source_label ...)` keeps each type within its room in the same
single statement). Sites without running caps keep the lock-free SKIP LOCKED claim.

The store does not import the engine: filters arrive as any object with the attributes of
`DispatchFilterValues` (the engine's `DispatchFilters`), with the label family already resolved into
the prod_source_labels it stands for.
"""

from __future__ import annotations

from collections import defaultdict, namedtuple
from datetime import datetime
from typing import Any, Mapping, Protocol, Sequence

from sqlalchemy import Connection, Row, case, func, or_, select, update

from jedictl.model import SLOT_RUNNING, JobStatus
from jedictl.store.bulk import slices
from jedictl.store.data_catalog import StoreDataCatalog
from jedictl.store.leases import claim_candidates
from jedictl.store.set_based import ids_in
from jedictl.store.schema import datasets, job_files, jobs, sites

#: Statuses whose jobs count as executing for the share order (panda-server.md §3.4: sent/running;
#: starting is between the two and runs on the same cores).
EXECUTING = (JobStatus.SENT.value, JobStatus.STARTING.value, JobStatus.RUNNING.value)
#: HS06 per core of a site that gives no core power (PanDA's default corepower).
DEFAULT_CORE_POWER = 10.0


class DispatchFilterValues(Protocol):
    memory_mb: int | None
    disk_mb: int | None
    walltime_s: int | None
    resource_type: str | None
    task_id: int | None

    @property
    def prod_source_labels(self) -> tuple[str, ...] | None: ...


def site_caps(conn: Connection, site: str, *, lock: bool = False) -> Row | None:
    """The site's running caps (None: no such site). With `lock`, its row is locked until the
    transaction ends (PostgreSQL: FOR UPDATE; SQLite holds the write lock already), so dispatchers of
    one capped site take turns; a site without caps is read without a lock."""
    query = select(sites.c.name, sites.c.max_running, sites.c.job_caps).where(sites.c.name == site)
    return conn.execute(query.with_for_update() if lock else query).first()


def has_running_caps(caps: Row) -> bool:
    return caps.max_running is not None or bool(caps.job_caps)


def running_at(conn: Connection, site: str) -> dict[str, int]:
    """Jobs holding a running slot of `site` (handed to a pilot: sent, starting, running) per job type."""
    rows = conn.execute(select(jobs.c.prod_source_label, func.count()).where(jobs.c.site == site, jobs.c.status.in_(SLOT_RUNNING))
                        .group_by(jobs.c.prod_source_label))
    return {label or "": int(n) for label, n in rows}


def _within(column: Any, limit: int) -> Any:
    """PanDA's construct_where_clause: a job that states no need (NULL or 0) fits any offer."""
    return or_(column.is_(None), column == 0, column <= limit)


def filter_clauses(filters: DispatchFilterValues | None) -> list[Any]:
    if filters is None:
        return []
    clauses = []
    if filters.memory_mb is not None:
        clauses.append(_within(jobs.c.min_ram_count, filters.memory_mb))
    if filters.disk_mb is not None:
        clauses.append(_within(jobs.c.max_disk_count, filters.disk_mb))
    if filters.walltime_s is not None:
        clauses.append(_within(jobs.c.max_walltime, filters.walltime_s))
    if filters.resource_type is not None:
        clauses.append(jobs.c.resource_type == filters.resource_type)
    labels = filters.prod_source_labels
    if labels is not None:
        clauses.append(jobs.c.prod_source_label.in_(list(labels)))
    if filters.task_id is not None:
        clauses.append(jobs.c.task_id == filters.task_id)
    return clauses


def dispatch_order(ranks: Mapping[str, int] | None) -> list[Any]:
    """ORDER BY of the candidates: share rank (unknown shares last), priority high first, oldest first;
    `ranks` None is PanDA's sloppy dispatch (getCriteriaByAge): the oldest job whatever its share."""
    if ranks is None:
        return [jobs.c.id]
    order: list[Any] = []
    if ranks:
        order.append(case(dict(ranks), value=jobs.c.gshare, else_=len(ranks)))
    return order + [jobs.c.current_priority.desc(), jobs.c.id]


def claim_jobs(conn: Connection, site: str, count: int, executor: str, now: datetime, ranks: Mapping[str, int] | None,
               filters: DispatchFilterValues | None = None, label_room: Mapping[str, int] | None = None) -> list[int]:
    """Move up to `count` activated jobs of `site` to `sent` for `executor`, in one statement; their ids
    (ascending: RETURNING keeps no order, the caller re-sorts by the dispatch key). `label_room` caps
    the jobs of a job type (prodSourceLabel) the claim may take; the caller holds the site's lock
    (`site_caps(..., lock=True)`) when it passes one."""
    if count <= 0:
        return []
    where = [jobs.c.status == JobStatus.ACTIVATED.value, jobs.c.site == site, *filter_clauses(filters)]
    room = {label: max(n, 0) for label, n in (label_room or {}).items() if n < count}
    if room:
        # Within each type the dispatch order decides which jobs fit its room; then the order across types.
        order = dispatch_order(ranks)
        ranked = select(jobs.c.id, jobs.c.prod_source_label.label("label"),
                        func.row_number().over(partition_by=jobs.c.prod_source_label, order_by=order).label("in_type"),
                        func.row_number().over(order_by=order).label("position")).where(*where).subquery("ranked")
        allowed = case(room, value=ranked.c.label, else_=count)
        candidates = (select(ranked.c.id).where(ranked.c.in_type <= allowed).order_by(ranked.c.position).limit(count)
                      .cte("candidates").prefix_with("MATERIALIZED", dialect="postgresql"))
    else:
        candidates = claim_candidates(select(jobs.c.id).where(*where).order_by(*dispatch_order(ranks)).limit(count))
    statement = (
        update(jobs)
        # The site too: a job moved to another site after it was chosen is not handed to this one's executor.
        .where(jobs.c.id == candidates.c.id, jobs.c.status == JobStatus.ACTIVATED.value, jobs.c.site == site)
        .values(status=JobStatus.SENT.value, executor=executor, dispatched_at=now, state_changed_at=now, modified_at=now,
                heartbeat_at=now, command_to_pilot=None)
        .returning(jobs.c.id)
    )
    return sorted(conn.execute(statement).scalars().all())


def executing_hs06(conn: Connection) -> dict[str, float]:
    """HS06 executing per global share: cores x the site's core power over sent/starting/running jobs
    (what PanDA's jobs_share_stats measures, §3.4). Jobs without a share are left out."""
    power = func.coalesce(func.nullif(sites.c.core_power, 0), DEFAULT_CORE_POWER)
    cores = func.coalesce(func.nullif(jobs.c.core_count, 0), 1)
    rows = conn.execute(
        select(jobs.c.gshare, func.sum(cores * power))
        .select_from(jobs.outerjoin(sites, sites.c.name == jobs.c.site))
        .where(jobs.c.status.in_(EXECUTING), jobs.c.gshare.is_not(None))
        .group_by(jobs.c.gshare)
    ).all()
    return {gshare: float(total or 0.0) for gshare, total in rows}


# ---------------------------------------------------------------------------------------- payload

FILE_COLUMNS = (job_files.c.job_id, job_files.c.lfn, job_files.c.scope, job_files.c.guid, job_files.c.size, job_files.c.checksum,
                job_files.c.type, job_files.c.attempt_nr, job_files.c.destination, datasets.c.name.label("dataset"),
                datasets.c.container_name)
#: A job file of a payload as a named tuple: a dispatch reads ten fields of each of thousands of files,
#: and a SQLAlchemy Row's attribute access costs ten times a named tuple's.
PayloadFile = namedtuple("PayloadFile", [column.name for column in FILE_COLUMNS])  # type: ignore[misc]
_FILES_SQL = ("SELECT jf.job_id, jf.lfn, jf.scope, jf.guid, jf.size, jf.checksum, jf.type, jf.attempt_nr, jf.destination, "
              f"d.name, d.container_name FROM {job_files.name} jf LEFT OUTER JOIN {datasets.name} d ON d.id = jf.dataset_id "
              "WHERE jf.job_id IN ({ids}) ORDER BY jf.job_id, jf.id")


def load_jobs(conn: Connection, job_ids: Sequence[int]) -> list[Row]:
    rows: list[Row] = []
    for part in slices(sorted(job_ids)):
        rows.extend(conn.execute(select(jobs).where(jobs.c.id.in_(list(part)))))
    return sorted(rows, key=lambda row: row.id)


def load_files(conn: Connection, job_ids: Sequence[int]) -> dict[int, list[PayloadFile]]:
    """The job files of `job_ids` with their task dataset's name and container, per job in file order."""
    per_job: dict[int, list[PayloadFile]] = defaultdict(list)
    make = PayloadFile._make
    for row in ids_in(conn, _FILES_SQL, sorted(job_ids)):
        per_job[row[0]].append(make(row))
    return dict(per_job)


def input_replicas(conn: Connection, wanted: Mapping[str, Sequence[str]]) -> dict[tuple[str, str], tuple[str, ...]]:
    """Endpoints holding each input, sorted, keyed (dataset, lfn): `wanted` maps a task dataset's name (a
    dataset or a container, which the catalog resolves) to the lfns asked about. One catalog look-up per
    dataset; the endpoints holding every file asked about (complete replicas) are sorted once for all of
    them, and files held nowhere are left out."""
    catalog = StoreDataCatalog(conn)
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for dataset, lfns in wanted.items():
        everywhere: list[str] = []
        partly: dict[str, list[str]] = {}
        for endpoint, held in catalog.replica_map(dataset, lfns).items():
            if len(held) >= len(lfns) and held.issuperset(lfns):
                everywhere.append(endpoint)
            else:
                for lfn in held:
                    partly.setdefault(lfn, []).append(endpoint)
        common = tuple(sorted(everywhere))
        for lfn in lfns:
            extra = partly.get(lfn)
            endpoints = tuple(sorted(everywhere + extra)) if extra else common
            if endpoints:
                found[(dataset, lfn)] = endpoints
    return found


def input_cvmfs(conn: Connection, wanted: Mapping[str, Sequence[str]]) -> dict[tuple[str, str], str]:
    """The cvmfs path of each input read from cvmfs, keyed (dataset, lfn) as `input_replicas`: the files
    of cvmfs-resident catalog datasets (one look-up per dataset)."""
    catalog = StoreDataCatalog(conn)
    return {(dataset, lfn): path for dataset, lfns in wanted.items() for lfn, path in catalog.cvmfs_map(dataset, lfns).items()}
