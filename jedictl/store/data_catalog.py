"""The data catalog inside the store: the first implementation of engine.catalogs.data.DataCatalog, and
the named operations behind `jedictl data ...`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy import Connection, delete, func, insert, select, update

from jedictl.errors import BadInput, NotFound
from jedictl.model.catalog import CatalogDataset, CatalogFile, CatalogImport, Replica, cvmfs_file, file_as_dict
from jedictl.store.bulk import insert_tuples, slices
from jedictl.store.schema import (
    catalog_container_members,
    catalog_datasets,
    catalog_file_parents,
    catalog_file_replicas,
    catalog_files,
    catalog_replicas,
    storage_endpoints,
)

@dataclass(frozen=True)
class CopyTarget:
    """Where and how `StoreDataCatalog.copy_records` writes a dataset's records (the values the
    feeder's bulk path gives every record of it)."""

    task_id: int
    dataset_id: int
    type: str
    status: str
    max_attempt: int | None
    max_failure: int | None
    keep_track: bool
    first_event: int
    created_at: datetime
    events_per_file: int | None = None
    use_real_num_events: bool = False
    max_files: int | None = None


FILE_COLUMNS = ("dataset_id", "scope", "lfn", "guid", "size", "checksum", "n_events", "run", "lumi_blocks", "created_at")


class StoreDataCatalog:
    """DataCatalog over the catalog tables, bound to one connection (and so to its transaction)."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def dataset(self, name: str) -> CatalogDataset | None:
        row = self.conn.execute(select(catalog_datasets).where(catalog_datasets.c.name == name)).first()
        return CatalogDataset(name=row.name, kind=row.kind, state=row.state, scope=row.scope, cvmfs_path=row.cvmfs_path) if row else None

    def constituents(self, container: str) -> list[str]:
        row = self.conn.execute(select(catalog_datasets.c.id, catalog_datasets.c.kind).where(catalog_datasets.c.name == container)).first()
        if row is None:
            return []
        if row.kind != "container":
            return [container]
        member = catalog_datasets.alias("member")
        return list(self.conn.execute(
            select(member.c.name).join(catalog_container_members, catalog_container_members.c.dataset_id == member.c.id)
            .where(catalog_container_members.c.container_id == row.id).order_by(member.c.name)
        ).scalars())

    def iter_files(self, dataset: str, batch_size: int = 10_000) -> Iterator[list[CatalogFile]]:
        dataset_id = self.conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == dataset)).scalar_one_or_none()
        if dataset_id is None:
            return
        last = ""
        c = catalog_files.c
        while True:
            # Keyset pagination on the (dataset_id, lfn) unique index: constant memory, no OFFSET scans.
            rows = self.conn.execute(
                select(c.lfn, c.scope, c.guid, c.size, c.checksum, c.n_events, c.run, c.lumi_blocks)
                .where(c.dataset_id == dataset_id, c.lfn > last).order_by(c.lfn).limit(batch_size)
            ).all()
            if not rows:
                return
            yield [CatalogFile(*row[:7], tuple(row[7]) if row[7] is not None else None) for row in rows]
            last = rows[-1][0]

    def copy_records(self, dataset: str, into: CopyTarget) -> int:
        """Write the file records of catalog dataset `dataset` straight into the task's `files`, in one
        `INSERT ... SELECT` inside the store (no row crosses into Python); returns how many.

        The store-backed catalog's fast path for a first feed (engine.feed.feeder): the records are what
        engine.feed.records.expand makes of the files in LFN order for a plain spec -- a file's events
        (`events_per_file` when given, the catalog's count only with `use_real_num_events`), its first
        lumi block, the task-wide ${FIRSTEVENT} numbering continued from `first_event` (a running sum of
        the events before it), at most `max_files` files."""
        from jedictl.store.files import RECORD_COLUMNS

        dataset_id = self.conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == dataset)).scalar_one_or_none()
        if dataset_id is None or into.max_files == 0:
            return 0
        pg = self.conn.dialect.name == "postgresql"

        def bound(sql_type: str) -> str:  # PostgreSQL is told each parameter's type (a NULL would be text)
            return f"CAST(%s AS {sql_type})" if pg else "?"

        per_file = bound("BIGINT")
        if into.events_per_file is None:
            events, event_params = "n_events", ()
        elif into.use_real_num_events:
            events, event_params = f"COALESCE(n_events, {per_file})", (into.events_per_file,)
        else:
            events, event_params = per_file, (into.events_per_file,)
        lumi = "CAST(lumi_blocks ->> 0 AS BIGINT)" if pg else "json_extract(lumi_blocks, '$[0]')"
        limit = f" LIMIT {bound('BIGINT')}" if into.max_files is not None else ""
        before = "COALESCE(SUM(COALESCE(events, 0)) OVER (ORDER BY lfn ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)"
        integer, name = bound("INTEGER"), bound("VARCHAR")
        statement = (
            f"INSERT INTO files ({', '.join(RECORD_COLUMNS)}) "
            f"SELECT {bound('BIGINT')}, {bound('BIGINT')}, lfn, guid, scope, size, checksum, {name}, {name}, 0, {integer}, 0, {integer}, "
            f"{bound('BOOLEAN')}, events, NULL, NULL, "
            f"CASE WHEN events IS NULL THEN NULL ELSE {bound('BIGINT')} + {'CAST(' + before + ' AS BIGINT)' if pg else before} END, "
            f"lumi, {bound('TIMESTAMP')} "
            f"FROM (SELECT lfn, guid, scope, size, checksum, {events} AS events, {lumi} AS lumi FROM catalog_files "
            f"WHERE dataset_id = {bound('BIGINT')} ORDER BY lfn{limit}) picked ORDER BY lfn"
        )
        params = (into.task_id, into.dataset_id, into.type, into.status, into.max_attempt, into.max_failure, into.keep_track,
                  into.first_event, into.created_at, *event_params, dataset_id, *((into.max_files,) if limit else ()))
        return self.conn.exec_driver_sql(statement, params).rowcount

    def replicas(self, dataset: str) -> list[Replica]:
        rows = self.conn.execute(
            select(catalog_replicas.c.endpoint, catalog_replicas.c.complete, storage_endpoints.c.kind)
            .join(catalog_datasets, catalog_datasets.c.id == catalog_replicas.c.dataset_id)
            .join(storage_endpoints, storage_endpoints.c.name == catalog_replicas.c.endpoint)
            .where(catalog_datasets.c.name == dataset).order_by(catalog_replicas.c.endpoint)
        )
        return [Replica(endpoint=r.endpoint, complete=r.complete, kind=r.kind) for r in rows]


    def replica_map(self, dataset: str, lfns: Sequence[str]) -> dict[str, set[str]]:
        wanted = set(lfns)
        found: dict[str, set[str]] = {}
        members = self.constituents(dataset)
        for name in members:
            row = self.conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == name)).first()
            if row is None:
                continue
            if members == [dataset]:  # a plain dataset: the files asked about are its own
                in_dataset = wanted
            else:  # a container: which of its datasets holds which file
                in_dataset = set()
                for part in slices(sorted(wanted)):
                    in_dataset.update(self.conn.execute(select(catalog_files.c.lfn).where(
                        catalog_files.c.dataset_id == row.id, catalog_files.c.lfn.in_(part))).scalars())
            for replica in self.conn.execute(select(catalog_replicas).where(catalog_replicas.c.dataset_id == row.id)):
                if replica.complete:
                    held = in_dataset
                else:
                    held = set(self.conn.execute(
                        select(catalog_files.c.lfn).join(catalog_file_replicas, catalog_file_replicas.c.file_id == catalog_files.c.id)
                        .where(catalog_files.c.dataset_id == row.id, catalog_file_replicas.c.endpoint == replica.endpoint))
                        .scalars()) & in_dataset if in_dataset else set()
                found.setdefault(replica.endpoint, set()).update(held)
        return found

    def cvmfs_map(self, dataset: str, lfns: Sequence[str]) -> dict[str, str]:
        wanted = set(lfns)
        found: dict[str, str] = {}
        members = self.constituents(dataset)
        rows = self.conn.execute(select(catalog_datasets.c.id, catalog_datasets.c.name, catalog_datasets.c.cvmfs_path).where(
            catalog_datasets.c.name.in_(members), catalog_datasets.c.cvmfs_path.is_not(None))).all() if members else []
        for row in rows:
            if members == [dataset]:  # a plain dataset: the files asked about are its own
                in_dataset = wanted
            else:
                in_dataset = set()
                for part in slices(sorted(wanted)):
                    in_dataset.update(self.conn.execute(select(catalog_files.c.lfn).where(
                        catalog_files.c.dataset_id == row.id, catalog_files.c.lfn.in_(part))).scalars())
            found.update({lfn: cvmfs_file(row.cvmfs_path, lfn) for lfn in in_dataset})
        return found


# ------------------------------------------------------------------------------------- operations

def known_endpoints(conn: Connection) -> set[str]:
    return set(conn.execute(select(storage_endpoints.c.name)).scalars())


def known_datasets(conn: Connection) -> set[str]:
    return set(conn.execute(select(catalog_datasets.c.name).where(catalog_datasets.c.kind == "dataset")).scalars())


def _dataset_row(conn: Connection, name: str, kind: str | None = None, lock: bool = False) -> Any:
    query = select(catalog_datasets).where(catalog_datasets.c.name == name)
    if lock and conn.dialect.name == "postgresql":  # its state read again once a finalize closing it has committed
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None or (kind and row.kind != kind):
        raise NotFound(f"{kind or 'dataset'} {name} is not in the data catalog")
    return row


def import_catalog(conn: Connection, data: CatalogImport, now: datetime) -> list[dict[str, Any]]:
    """Create new datasets and containers, add new files and replicas to existing ones."""
    report = []
    for dataset in data.datasets:
        row = conn.execute(select(catalog_datasets).where(catalog_datasets.c.name == dataset.name)).first()
        if row is not None and row.kind != "dataset":
            raise BadInput(f"{dataset.name} is a container in the catalog, not a dataset")
        if row is None:
            dataset_id = conn.execute(insert(catalog_datasets).values(
                name=dataset.name, scope=dataset.scope, kind="dataset", state=dataset.state or "open",
                cvmfs_path=dataset.cvmfs_path, attributes=dataset.attributes, created_at=now, modified_at=now,
            ).returning(catalog_datasets.c.id)).scalar_one()
            added = _insert_files(conn, dataset_id, dataset.files, now)
            action = "created"
        else:
            dataset_id = row.id
            new = _new_files(conn, dataset_id, dataset.files, dataset.name, row.state)
            added = _insert_files(conn, dataset_id, new, now)
            changes = {}
            if dataset.state and dataset.state != row.state:
                changes["state"] = dataset.state
            if dataset.cvmfs_path and dataset.cvmfs_path != row.cvmfs_path:
                changes["cvmfs_path"] = dataset.cvmfs_path
            if changes:
                conn.execute(update(catalog_datasets).where(catalog_datasets.c.id == dataset_id).values(**changes, modified_at=now))
            action = "updated" if added or changes else "unchanged"
        replicas_changed = _set_replicas(conn, dataset_id, dataset.name, dataset.replicas)
        if replicas_changed and action == "unchanged":
            action = "updated"
        report.append({"kind": "dataset", "name": dataset.name, "action": action, "files_added": added})
    for container in data.containers:
        report.append(_upsert_container(conn, container.name, container.datasets, container.state, now))
    return report


def _new_files(conn: Connection, dataset_id: int, files: Sequence[CatalogFile], name: str, state: str) -> list[CatalogFile]:
    existing = set(conn.execute(select(catalog_files.c.lfn).where(catalog_files.c.dataset_id == dataset_id)).scalars())
    new = [f for f in files if f.lfn not in existing]
    if new and state == "closed":
        raise BadInput(f"dataset {name} is closed: no files can be added")
    return new


def _insert_files(conn: Connection, dataset_id: int, files: Sequence[CatalogFile], now: datetime) -> int:
    added = insert_tuples(conn, catalog_files, FILE_COLUMNS, [
        (dataset_id, f.scope, f.lfn, f.guid, f.size, f.checksum, f.n_events, f.run,
         list(f.lumi_blocks) if f.lumi_blocks is not None else None, now) for f in files
    ])
    with_parents = {f.lfn: f.parents for f in files if f.parents}
    if with_parents:
        # A file's parentage is recorded with the file (Rucio/DBS): once, when it joins the catalog.
        ids = dict(conn.execute(select(catalog_files.c.lfn, catalog_files.c.id).where(
            catalog_files.c.dataset_id == dataset_id, catalog_files.c.lfn.in_(list(with_parents)))).all())
        insert_tuples(conn, catalog_file_parents, ("file_id", "parent_lfn"),
                      [(ids[lfn], parent) for lfn, parents in with_parents.items() for parent in parents])
    return added


def _set_replicas(conn: Connection, dataset_id: int, name: str, replicas: Sequence[tuple[str, bool, tuple[str, ...] | None]]) -> bool:
    changed = False
    for endpoint, complete, present in replicas:
        current = conn.execute(select(catalog_replicas.c.complete).where(
            catalog_replicas.c.dataset_id == dataset_id, catalog_replicas.c.endpoint == endpoint)).scalar_one_or_none()
        if current is None:
            conn.execute(insert(catalog_replicas).values(dataset_id=dataset_id, endpoint=endpoint, complete=complete))
            changed = True
        elif current != complete:
            conn.execute(update(catalog_replicas).where(catalog_replicas.c.dataset_id == dataset_id, catalog_replicas.c.endpoint == endpoint)
                         .values(complete=complete))
            changed = True
        if present:
            ids = dict(conn.execute(select(catalog_files.c.lfn, catalog_files.c.id).where(
                catalog_files.c.dataset_id == dataset_id, catalog_files.c.lfn.in_(list(present)))).all())
            have = set(conn.execute(select(catalog_file_replicas.c.file_id).where(
                catalog_file_replicas.c.endpoint == endpoint, catalog_file_replicas.c.file_id.in_(list(ids.values())))).scalars())
            rows = [{"file_id": ids[lfn], "endpoint": endpoint} for lfn in present if ids[lfn] not in have]
            if rows:
                conn.execute(insert(catalog_file_replicas), rows)
                changed = True
    return changed


def _upsert_container(conn: Connection, name: str, members: Sequence[str], state: str, now: datetime) -> dict[str, Any]:
    row = conn.execute(select(catalog_datasets).where(catalog_datasets.c.name == name)).first()
    if row is not None and row.kind != "container":
        raise BadInput(f"{name} is a dataset in the catalog, not a container")
    if row is None:
        container_id = conn.execute(insert(catalog_datasets).values(
            name=name, kind="container", state=state, attributes={}, created_at=now, modified_at=now,
        ).returning(catalog_datasets.c.id)).scalar_one()
        action = "created"
    else:
        container_id, action = row.id, "unchanged"
    member_ids = dict(conn.execute(select(catalog_datasets.c.name, catalog_datasets.c.id).where(catalog_datasets.c.name.in_(list(members)))).all())
    have = set(conn.execute(select(catalog_container_members.c.dataset_id).where(catalog_container_members.c.container_id == container_id)).scalars())
    rows = [{"container_id": container_id, "dataset_id": member_ids[m]} for m in members if member_ids[m] not in have]
    if rows:
        conn.execute(insert(catalog_container_members), rows)
        action = "updated" if action == "unchanged" else action
    return {"kind": "container", "name": name, "action": action, "files_added": 0}


def add_files(conn: Connection, name: str, files: Sequence[CatalogFile], now: datetime) -> int:
    row = _dataset_row(conn, name, "dataset", lock=True)
    new = _new_files(conn, row.id, files, name, row.state)
    if len(new) != len(files):
        duplicate = next(f.lfn for f in files if f not in new)
        raise BadInput(f"{duplicate!r} is already a file of dataset {name}")
    added = _insert_files(conn, row.id, new, now)
    conn.execute(update(catalog_datasets).where(catalog_datasets.c.id == row.id).values(modified_at=now))
    return added


def remove_files(conn: Connection, name: str, lfns: Sequence[str], now: datetime) -> int:
    row = _dataset_row(conn, name, "dataset")
    present = set(conn.execute(select(catalog_files.c.lfn).where(catalog_files.c.dataset_id == row.id, catalog_files.c.lfn.in_(list(lfns)))).scalars())
    missing = [lfn for lfn in lfns if lfn not in present]
    if missing:
        raise BadInput(f"{missing[0]!r} is not a file of dataset {name}")
    result = conn.execute(delete(catalog_files).where(catalog_files.c.dataset_id == row.id, catalog_files.c.lfn.in_(list(lfns))))
    conn.execute(update(catalog_datasets).where(catalog_datasets.c.id == row.id).values(modified_at=now))
    return result.rowcount


def set_state(conn: Connection, name: str, state: str, now: datetime) -> str:
    row = _dataset_row(conn, name)
    conn.execute(update(catalog_datasets).where(catalog_datasets.c.id == row.id).values(state=state, modified_at=now))
    return row.state


def list_datasets(conn: Connection, kind: str | None = None, state: str | None = None, pattern: str | None = None) -> list[dict[str, Any]]:
    counts = (select(catalog_files.c.dataset_id, func.count().label("n_files"), func.coalesce(func.sum(catalog_files.c.size), 0).label("bytes"),
                     func.coalesce(func.sum(catalog_files.c.n_events), 0).label("n_events"))
              .group_by(catalog_files.c.dataset_id).subquery())
    query = (select(catalog_datasets.c.name, catalog_datasets.c.kind, catalog_datasets.c.state, catalog_datasets.c.scope,
                    func.coalesce(counts.c.n_files, 0).label("n_files"), func.coalesce(counts.c.bytes, 0).label("bytes"),
                    func.coalesce(counts.c.n_events, 0).label("n_events"), catalog_datasets.c.cvmfs_path.label("cvmfs"),
                    catalog_datasets.c.modified_at)
             .outerjoin(counts, counts.c.dataset_id == catalog_datasets.c.id).order_by(catalog_datasets.c.name))
    if kind:
        query = query.where(catalog_datasets.c.kind == kind)
    if state:
        query = query.where(catalog_datasets.c.state == state)
    if pattern:
        query = query.where(catalog_datasets.c.name.like(like_pattern(pattern), escape="\\"))
        exact = name_matcher(pattern)  # SQLite's LIKE ignores case; names do not
        return [dict(r._mapping) for r in conn.execute(query) if exact(r.name)]
    return [dict(r._mapping) for r in conn.execute(query)]


def like_pattern(pattern: str) -> str:
    """A name pattern whose only wildcard is `*` as a LIKE pattern (ESCAPE '\\'): `%`, `_` and the
    backslash are literal characters of a name, never LIKE's own wildcards."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def name_matcher(pattern: str) -> Callable[[str], bool]:
    """Does a name match `pattern` (`*`: any run of characters), case and all? Linear in the name for
    each part (a greedy match that goes back only to the last `*`), so no pattern can make it hang."""
    if "*" not in pattern:
        return lambda name: name == pattern
    head, *middle, tail = pattern.split("*")

    def matches(name: str) -> bool:
        if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
            return False
        position, end = len(head), len(name) - len(tail)
        for part in middle:
            found = name.find(part, position, end)
            if found < 0:
                return False
            position = found + len(part)
        return True
    return matches


def show_dataset(conn: Connection, name: str, with_files: bool) -> dict[str, Any]:
    row = _dataset_row(conn, name)
    catalog = StoreDataCatalog(conn)
    data: dict[str, Any] = {"name": row.name, "kind": row.kind, "state": row.state, "scope": row.scope, "cvmfs": row.cvmfs_path,
                            "created_at": row.created_at, "modified_at": row.modified_at}
    if row.kind == "container":
        data["datasets"] = catalog.constituents(name)
        return data
    summary = next(d for d in list_datasets(conn, pattern=name) if d["name"] == name)
    data.update(n_files=summary["n_files"], bytes=summary["bytes"], n_events=summary["n_events"])
    data["replicas"] = [{"endpoint": r.endpoint, "complete": r.complete, "kind": r.kind} for r in catalog.replicas(name)]
    member = catalog_datasets.alias("container")
    data["containers"] = list(conn.execute(
        select(member.c.name).join(catalog_container_members, catalog_container_members.c.container_id == member.c.id)
        .where(catalog_container_members.c.dataset_id == row.id).order_by(member.c.name)).scalars())
    # Every file with the same keys (null where the catalog has no value); no list at all without --files.
    data["files"] = [dict.fromkeys(FILE_KEYS) | file_as_dict(f) for batch in catalog.iter_files(name) for f in batch] if with_files else None
    # Files declared lost (`data mark-lost`, docs/recovery.md): still listed above, as Rucio lists a lost file.
    data["lost_files"] = list(conn.execute(select(catalog_files.c.lfn).where(
        catalog_files.c.dataset_id == row.id, catalog_files.c.availability == "lost").order_by(catalog_files.c.lfn)).scalars())
    return data


#: The keys of a file in `data show --files`.
FILE_KEYS = ("lfn", "scope", "guid", "size", "checksum", "events", "run", "lumi_blocks")


def dataset_lfns(conn: Connection, name: str) -> tuple[str, set[str]] | None:
    """(state, file names) of a dataset, None when the catalog does not have it (a container is refused)."""
    row = conn.execute(select(catalog_datasets).where(catalog_datasets.c.name == name)).first()
    if row is None:
        return None
    if row.kind != "dataset":
        raise BadInput(f"{name} is a container in the catalog, not a dataset")
    return row.state, set(conn.execute(select(catalog_files.c.lfn).where(catalog_files.c.dataset_id == row.id)).scalars())
