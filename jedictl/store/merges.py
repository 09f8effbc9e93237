"""Reads and claims for merge jobs: unmerged records waiting (`merging`) for a merge job at their site.

A finished pre-merge job leaves its unmerged log (the merge master) and outputs (the secondaries) in
`merging`, tagged with the producer in `boundary_id`. The generator reads them grouped by the
producer's site, plans merge jobs, then claims exactly the records it used with a guarded UPDATE
(`merging -> running`): the task's lease keeps other generators away, the guard makes a double
claim impossible anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from jedictl.model import FileStatus
from jedictl.store.bulk import slices
from jedictl.store.jobs import CLAIM_COLUMNS, attemptable
from jedictl.store.schema import files, jobs


def waiting_masters(conn: Connection, dataset_id: int, limit: int) -> list[Any]:
    """Unmerged master records waiting for a merge job, with the site their producer ran at, in
    producer order (CLAIM_COLUMNS + `site`)."""
    return list(conn.execute(
        select(*CLAIM_COLUMNS, jobs.c.site)
        .join(jobs, jobs.c.id == files.c.boundary_id)
        .where(files.c.dataset_id == dataset_id, files.c.status == FileStatus.MERGING.value, attemptable())
        .order_by(files.c.boundary_id, files.c.id).limit(limit)))


def waiting_secondaries(conn: Connection, dataset_id: int, boundary_ids: Sequence[int]) -> list[Any]:
    """Unmerged outputs of the given producers waiting in one secondary dataset, in producer order."""
    rows: list[Any] = []
    for part in slices(sorted(set(boundary_ids))):
        rows.extend(conn.execute(
            select(*CLAIM_COLUMNS).where(files.c.dataset_id == dataset_id, files.c.status == FileStatus.MERGING.value,
                                         files.c.boundary_id.in_(list(part)))))
    return sorted(rows, key=lambda row: (row.boundary_id, row.id))


def claim(conn: Connection, record_ids: Sequence[int]) -> int:
    """`merging -> running` for exactly these records; returns how many moved."""
    moved = 0
    for part in slices(sorted(record_ids)):
        moved += conn.execute(update(files).where(files.c.id.in_(list(part)), files.c.status == FileStatus.MERGING.value)
                              .values(status=FileStatus.RUNNING.value)).rowcount
    return moved
