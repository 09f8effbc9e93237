"""Named reads for the read models (engine.views: explain, metrics; the demo's display): counts and small
lists an operator looks at. They never write."""

from __future__ import annotations

from sqlalchemy import Connection, Row, func, inspect, select

from jedictl.store.database import create_store_engine
from jedictl.store.schema import datasets, files, job_files, job_retry_history, jobs, tasks

#: What `job_status_counts_by` may group jobs by, besides their status.
JOB_GROUPS = {"task": jobs.c.task_id, "site": jobs.c.site, "gshare": jobs.c.gshare}


def files_by_status(conn: Connection, task_id: int) -> list[Row]:
    """(dataset name, dataset type, file status, count, dataset id) of a task's files, by dataset name and status."""
    return list(conn.execute(
        select(datasets.c.name, datasets.c.type, files.c.status, func.count(), datasets.c.id)
        .join(datasets, datasets.c.id == files.c.dataset_id).where(datasets.c.task_id == task_id)
        .group_by(datasets.c.id, datasets.c.name, datasets.c.type, files.c.status).order_by(datasets.c.name, files.c.status)
    ))


def reads_of(conn: Connection, dataset_ids: list[int]) -> dict[int, tuple[int, int]]:
    """dataset id -> (file reads, distinct jobs) of these datasets' records in jobs, retries included:
    how often a many-time input has been read (through the file index of job_files)."""
    if not dataset_ids:
        return {}
    rows = conn.execute(
        select(files.c.dataset_id, func.count(), func.count(func.distinct(job_files.c.job_id)))
        .join(job_files, job_files.c.file_id == files.c.id)
        .where(files.c.dataset_id.in_(dataset_ids), job_files.c.dataset_id == files.c.dataset_id)
        .group_by(files.c.dataset_id))
    return {dataset_id: (int(reads), int(n_jobs)) for dataset_id, reads, n_jobs in rows}


def output_storage_tokens(conn: Connection, task_id: int) -> list[str]:
    """The distinct storage tokens of a task's output and log datasets ('' for none), sorted."""
    return sorted({row[0] or "" for row in conn.execute(select(datasets.c.storage_token).where(
        datasets.c.task_id == task_id, datasets.c.type.in_(["output", "log"])))})


def task_status_counts(conn: Connection) -> dict[str, int]:
    return dict(conn.execute(select(tasks.c.status, func.count()).group_by(tasks.c.status)).all())


def job_status_counts(conn: Connection) -> dict[str, int]:
    return dict(conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status)).all())


def holds_tasks(url: str) -> bool:
    """Whether the store at `url` exists with at least one task (read only; no schema check)."""
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("tasks"):
                return False
            return conn.execute(select(func.count()).select_from(tasks)).scalar_one() > 0
    finally:
        engine.dispose()


def task_names(conn: Connection) -> list[Row]:
    """(id, name, status) of every task, by id."""
    return conn.execute(select(tasks.c.id, tasks.c.name, tasks.c.status).order_by(tasks.c.id)).all()


def master_input_totals(conn: Connection) -> dict[int, Row]:
    """Per task: (task_id, files, done, failed) summed over its master input datasets."""
    masters = datasets.c.master_id.is_(None) & datasets.c.type.in_(("input", "pseudo_input"))
    return {r.task_id: r for r in conn.execute(
        select(datasets.c.task_id, func.sum(datasets.c.n_files).label("files"), func.sum(datasets.c.n_files_finished).label("done"),
               func.sum(datasets.c.n_files_failed).label("failed")).where(masters).group_by(datasets.c.task_id))}


def job_status_counts_by(conn: Connection, group: str) -> list[Row]:
    """(key, status, count) of the jobs per `group` (one of JOB_GROUPS: task, site, gshare) and status."""
    key = JOB_GROUPS[group]
    return list(conn.execute(select(key, jobs.c.status, func.count()).group_by(key, jobs.c.status)))


def job_sites_of_task(conn: Connection, task_id: int, kind: str = "normal") -> dict[str, int]:
    """How many jobs (of `kind`) of a task each site got, whatever became of them."""
    rows = conn.execute(select(jobs.c.site, func.count()).where(jobs.c.task_id == task_id, jobs.c.kind == kind, jobs.c.site.is_not(None))
                        .group_by(jobs.c.site))
    return {site: int(n) for site, n in rows}


def site_datasets_of_task(conn: Connection, task_id: int) -> dict[str, list[str]]:
    """A task's output containers -> the sites whose datasets are inside (docs/analysis.md, output containers)."""
    found: dict[str, list[str]] = {}
    rows = conn.execute(select(datasets.c.container_name, datasets.c.site).where(
        datasets.c.task_id == task_id, datasets.c.template_id.is_not(None)).order_by(datasets.c.container_name, datasets.c.site))
    for container, site in rows:
        found.setdefault(container, []).append(site)
    return found


def retry_count(conn: Connection) -> int:
    """How many job retries the retry history records."""
    return conn.execute(select(func.count()).select_from(job_retry_history).where(job_retry_history.c.relation_type == "retry")).scalar_one()
