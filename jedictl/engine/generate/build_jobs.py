"""Build jobs of a task that ships sources (docs/build-jobs.md; jedi-inventory.md §6.13 "Build").

When the generator writes run jobs of such a task at a site, it asks here for the site's lib file:
the newest one there that is built or being built, or -- when there is none (the first jobs at the
site, or every build there failed) -- a new one, made by a new build job written in the same
transaction: the lib dataset of the task at that site (made once), a lib file record (`defined`) and
the build job (kind `build`, activated) whose one output it is. The run jobs then reference the lib
file (job file type `lib`, `${LIB}` in their parameters) and wait `defined` until it is built
(engine.task.build.run_job_status).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from jedictl.engine.shares.resource_types import match_resource_type
from jedictl.engine.task.build import (
    DEFAULT_BUILD_TRANSFORMATION,
    lib_dataset_name,
    lib_file_name,
    parse_build_spec,
    parse_panda_build_spec,
    render_build_parameters,
)
from jedictl.model import BUILD_JOB_KIND, DatasetType, FileStatus, JobStatus
from jedictl.store import builds as build_store
from jedictl.store import jobs as job_store
from jedictl.store import tasks as task_store


@dataclass(frozen=True)
class SiteLib:
    """The lib file the run jobs at one site read."""

    dataset_id: int
    file_id: int
    lfn: str
    built: bool


def site_libs(conn: Any, ctx: Any, sites: Mapping[str, Any], now: datetime) -> tuple[dict[str, SiteLib], int]:
    """The lib file of each site in `sites` (name -> catalog site), writing a build job for each site that
    has none; returns the libs and the number of build jobs written."""
    task = ctx.task
    found = build_store.site_libs(conn, task.id, sites)
    libs = {site: SiteLib(row.dataset_id, row.file_id, row.lfn, row.status == FileStatus.FINISHED.value) for site, row in found.items()}
    missing = sorted(site for site in sites if site not in libs)
    if not missing:
        return libs, 0
    build = _build_def(conn, task.id)
    existing = build_store.lib_datasets(conn, task.id, missing)
    first_index = job_store.next_task_job_index(conn, task.id)
    job_ids = job_store.reserve_ids(conn, "jobs", len(missing))
    record_ids = job_store.reserve_ids(conn, "files", len(missing))
    rtype = match_resource_type(ctx.rtypes, 1, 0) or task.resource_type
    job_rows, file_rows, output_rows = [], [], []
    for index, (name, job_id, record_id) in enumerate(zip(missing, job_ids, record_ids, strict=True)):
        site = sites[name]
        dataset_name = lib_dataset_name(task.id, name)
        dataset_id = existing.get(name) or build_store.add_lib_dataset(conn, task.id, name, dataset_name, now)
        lfn = lib_file_name(dataset_name, record_id)
        params = render_build_parameters(ctx.build_template, archive=build.archive if build else None, lib_lfn=lfn,
                                         source_url=task.source_url, task_id=task.id, job_id=job_id)
        priority = task.current_priority
        # One attempt: a failed build job is never retried as such; the generator makes a new one.
        job_rows.append((job_id, first_index + index, JobStatus.ACTIVATED.value, False, 1, 1, priority, priority, name, site.cloud,
                         rtype, params, 1, None, None, None, None,
                         task.id, BUILD_JOB_KIND, task.nucleus, task.work_queue, task.gshare, task.prod_source_label, task.processing_type,
                         task.vo, task.working_group, (build.trans_path if build else None) or DEFAULT_BUILD_TRANSFORMATION,
                         task.architecture, task.trans_uses, task.trans_home, task.container_name, now, now, now))
        output_rows.append((record_id, task.id, dataset_id, lfn, DatasetType.LIB.value, FileStatus.DEFINED.value, 0, 0, True, job_id, None, now))
        file_rows.append((job_id, task.id, dataset_id, record_id, lfn, "output", 0, FileStatus.DEFINED.value, None, None, None, None, None))
        libs[name] = SiteLib(dataset_id, record_id, lfn, False)
    job_store.write_jobs(conn, job_rows, file_rows, output_rows, [], [])
    return libs, len(missing)


def _build_def(conn: Any, task_id: int) -> Any:
    """The task's build section as submitted (its transformation and source archive)."""
    params = task_store.get_params(conn, task_id)
    document = params.document if params is not None else {}
    if document.get("buildSpec") is not None:
        return parse_panda_build_spec(document["buildSpec"])
    if document.get("build") is not None:
        return parse_build_spec(document["build"])
    return None
