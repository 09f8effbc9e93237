"""Named operations on file records (JEDI's dataset contents) used by the feeder."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Sequence

from sqlalchemy import Connection, case, func, select, update

from jedictl.model import FileStatus
from jedictl.store.bulk import insert_tuples
from jedictl.store.schema import datasets, files

RECORD_COLUMNS = (
    "task_id", "dataset_id", "lfn", "guid", "scope", "size", "checksum", "type", "status", "attempt_nr", "max_attempt",
    "failed_attempt", "max_failure", "keep_track", "n_events", "start_event", "end_event", "first_event", "lumi_block_nr", "created_at",
)
#: Records a generator has not taken yet: the only ones that can become lost.
UNUSED = (FileStatus.READY.value, FileStatus.PENDING.value)


def existing_keys(conn: Connection, dataset_id: int) -> dict[tuple[str, int | None, int | None], str]:
    """(lfn, start_event, end_event) -> status of every record of a dataset."""
    rows = conn.execute(select(files.c.lfn, files.c.start_event, files.c.end_event, files.c.status).where(files.c.dataset_id == dataset_id))
    return {(r[0], r[1], r[2]): r[3] for r in rows}


def record_events():  # noqa: ANN201 - a SQL expression
    """The events a record stands for: its event range, or the whole file (feed_records.record_events)."""
    return case((files.c.start_event.is_not(None), files.c.end_event - files.c.start_event + 1), else_=func.coalesce(files.c.n_events, 0))


def next_first_event(conn: Connection, dataset_id: int, base: int) -> int:
    """Where the task-wide first-event numbering continues for new records of this dataset."""
    value = conn.execute(select(func.max(files.c.first_event + record_events())).where(files.c.dataset_id == dataset_id)).scalar()
    return int(value) if value is not None else base


def insert_records(
    conn: Connection, task_id: int, dataset_id: int, dataset_type: str, records: Iterable[Sequence], status: str,
    max_attempt: int | None, max_failure: int | None, keep_track: bool, now: datetime,
) -> int:
    """Bulk-insert feeder records (engine.feed.records.Record tuples); returns how many."""
    rows = [
        (task_id, dataset_id, r[0], r[1], r[2], r[3], r[4], dataset_type, status, 0, max_attempt, 0, max_failure, keep_track,
         r[5], r[6], r[7], r[8], r[9], now)
        for r in records
    ]
    return insert_tuples(conn, files, RECORD_COLUMNS, rows)


def mark_lost(conn: Connection, dataset_id: int, lfns: Sequence[str]) -> int:
    """Records of files that vanished from the catalog and were never used become `lost` for good."""
    lost = 0
    for start in range(0, len(lfns), 500):
        chunk = list(lfns[start:start + 500])
        lost += conn.execute(
            update(files).where(files.c.dataset_id == dataset_id, files.c.lfn.in_(chunk), files.c.status.in_(UNUSED))
            .values(status=FileStatus.LOST.value)
        ).rowcount
    return lost


@dataclass(frozen=True)
class Counts:
    records: int  # not lost
    lost: int
    events: int  # events of records not lost


def count_records(conn: Connection, dataset_id: int) -> Counts:
    lost = files.c.status == FileStatus.LOST.value
    row = conn.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((lost, 1), else_=0)), 0),
            func.coalesce(func.sum(case((lost, 0), else_=record_events())), 0),
        ).where(files.c.dataset_id == dataset_id)
    ).one()
    return Counts(records=int(row[0]) - int(row[1]), lost=int(row[1]), events=int(row[2]))


def events_of_first(conn: Connection, dataset_id: int, count: int) -> int:
    """Events of the first `count` records of a dataset that are not lost, in id order."""
    first = (select(record_events().label("events")).where(files.c.dataset_id == dataset_id, files.c.status != "lost")
             .order_by(files.c.id).limit(count).subquery())
    return int(conn.execute(select(func.coalesce(func.sum(first.c.events), 0))).scalar_one())


def update_dataset(conn: Connection, dataset_id: int, **values: object) -> None:
    conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(**values))


def processed_keys(conn: Connection, task_ids: list[int]) -> tuple[frozenset[str], frozenset[tuple[str, int, int]]]:
    """Input files (and event ranges) the given tasks finished: what `skipFilesUsedBy` skips (JEDI reads
    the `finished` contents of the tasks' input datasets, by lfn.startEvent.endEvent)."""
    rows = conn.execute(select(files.c.lfn, files.c.start_event, files.c.end_event).where(
        files.c.task_id.in_(task_ids), files.c.type.in_(("input", "pseudo_input")), files.c.status == "finished"))
    lfns, ranges = set(), set()
    for lfn, start, end in rows:
        if start is None or end is None:
            lfns.add(lfn)
        else:
            ranges.add((lfn, int(start), int(end)))
    return frozenset(lfns), frozenset(ranges)
