"""The data catalog's values (JEDI's DDM): datasets, files and replicas as a catalog lists them, and a
parsed catalog import. The engine's `catalogs.data` reads and validates them; the store's
`data_catalog` writes and returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class CatalogFile(NamedTuple):
    """One file of a dataset. A NamedTuple: the feeder streams millions of them."""

    lfn: str
    scope: str | None = None
    guid: str | None = None
    size: int | None = None
    checksum: str | None = None
    n_events: int | None = None
    run: int | None = None
    lumi_blocks: tuple[int, ...] | None = None
    parents: tuple[str, ...] = ()  # LFNs of the files it was made from (catalog_file_parents)


@dataclass(frozen=True)
class CatalogDataset:
    name: str
    kind: str  # dataset | container
    state: str  # open | closed
    scope: str | None = None
    cvmfs_path: str | None = None  # the cvmfs directory its files are read from (no replica needed)


@dataclass(frozen=True)
class Replica:
    endpoint: str
    complete: bool
    kind: str  # disk | tape (the endpoint's)


@dataclass(frozen=True)
class DatasetImport:
    name: str
    scope: str | None
    state: str | None  # None: leave an existing dataset's state alone (new datasets are open)
    files: list[CatalogFile]
    replicas: list[tuple[str, bool, tuple[str, ...] | None]]  # (endpoint, complete, files present if incomplete)
    attributes: dict[str, Any]
    cvmfs_path: str | None = None  # None: leave an existing dataset's alone (new datasets are on storage)


@dataclass(frozen=True)
class ContainerImport:
    name: str
    datasets: list[str]
    state: str = "closed"


@dataclass(frozen=True)
class CatalogImport:
    datasets: list[DatasetImport]
    containers: list[ContainerImport]


CVMFS_ROOT = "/cvmfs"


def cvmfs_file(directory: str, lfn: str) -> str:
    """Where a file of a cvmfs-resident dataset is read: its dataset's cvmfs directory, then its name."""
    return f"{directory.rstrip('/')}/{lfn}"


def file_as_dict(file: CatalogFile) -> dict[str, Any]:
    data = {"lfn": file.lfn, "scope": file.scope, "guid": file.guid, "size": file.size, "checksum": file.checksum,
            "events": file.n_events, "run": file.run, "lumi_blocks": list(file.lumi_blocks) if file.lumi_blocks is not None else None}
    return {k: v for k, v in data.items() if v is not None}
