"""The data catalog as the engine sees it (JEDI's DDM): an interface and the import file format
(docs/data-catalog.md); its value types are `jedictl.model.catalog`'s, which the store shares.

The feeder and the brokers only talk to `DataCatalog`. The store-backed catalog
(`jedictl.store.data_catalog.StoreDataCatalog`) is the first implementation; one backed by Rucio would
implement the same methods and slot in without touching the engine.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping, Protocol, Sequence

from jedictl.engine.input import fields
from jedictl.engine.task.definition import check_name
from jedictl.errors import BadInput
from jedictl.model.choices import CATALOG_STATES
from jedictl.model.catalog import (  # noqa: F401 (file_as_dict: re-exported)
    CVMFS_ROOT,
    CatalogDataset,
    CatalogFile,
    CatalogImport,
    ContainerImport,
    DatasetImport,
    Replica,
    file_as_dict,
)

STATES = CATALOG_STATES


class DataCatalog(Protocol):
    """What the engine needs from a data-management system."""

    def dataset(self, name: str) -> CatalogDataset | None:
        """The dataset or container, or None when the catalog does not know it."""

    def constituents(self, container: str) -> list[str]:
        """The datasets of a container, in a stable order; [name] for a plain dataset."""

    def iter_files(self, dataset: str, batch_size: int) -> Iterator[list[CatalogFile]]:
        """All files of a dataset (not a container), ordered by LFN, in batches."""

    def replicas(self, dataset: str) -> list[Replica]:
        """Where the dataset has replicas."""

    def replica_map(self, dataset: str, lfns: Sequence[str]) -> dict[str, set[str]]:
        """Endpoint -> those of `lfns` it holds (a dataset or a container)."""

    def cvmfs_map(self, dataset: str, lfns: Sequence[str]) -> dict[str, str]:
        """LFN -> its path on cvmfs, for those of `lfns` in a cvmfs-resident dataset (of a container)."""


# ------------------------------------------------------------------------------------ import file

_DATASET_KEYS = ("name", "scope", "state", "files", "replicas", "attributes", "cvmfs")
#: A cvmfs directory: absolute, under /cvmfs/<repository>/, plain path segments only.
_CVMFS_SEGMENT = re.compile(r"^[A-Za-z0-9_.+\-]+\Z")
_FILE_KEYS = ("lfn", "scope", "guid", "size", "checksum", "events", "run", "lumi_blocks", "parents")


def parse_catalog_import(document: Mapping[str, Any], known_endpoints: set[str], known_datasets: set[str]) -> CatalogImport:
    """Validate a data-catalog file against the endpoints and datasets already known."""
    for key in document:
        if key not in ("datasets", "containers"):
            raise BadInput("unknown section (use datasets, containers)", str(key))
    datasets = [parse_dataset(raw, f"datasets[{i}]", known_endpoints) for i, raw in enumerate(fields.sequence(document.get("datasets"), "datasets"))]
    names = [d.name for d in datasets]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise BadInput(f"dataset {name!r} is listed twice", f"datasets[{index}].name")
    defined = set(names) | known_datasets
    containers = []
    for index, raw in enumerate(fields.sequence(document.get("containers"), "containers")):
        path = f"containers[{index}]"
        body = fields.mapping(raw, path)
        for key in body:
            if key not in ("name", "datasets", "state"):
                raise BadInput("unknown field", f"{path}.{key}")
        state = fields.text(body.get("state"), f"{path}.state") or "closed"
        if state not in STATES:
            raise BadInput(f"must be one of {', '.join(STATES)}", f"{path}.state")
        name = check_name(fields.text(body.get("name"), f"{path}.name", required=True), f"{path}.name", "container name")
        members = fields.names(body.get("datasets"), f"{path}.datasets")
        for position, member in enumerate(members):
            if member not in defined:
                raise BadInput(f"unknown dataset {member!r}", f"{path}.datasets[{position}]")
            if member == name:
                raise BadInput("a container cannot contain itself", f"{path}.datasets[{position}]")
        if name in set(names):
            raise BadInput(f"{name!r} is also listed as a dataset", f"{path}.name")
        containers.append(ContainerImport(name=name, datasets=list(dict.fromkeys(members)), state=state))
    return CatalogImport(datasets=datasets, containers=containers)


def parse_dataset(raw: Any, path: str, known_endpoints: set[str]) -> DatasetImport:
    body = fields.mapping(raw, path)
    for key in body:
        if key not in _DATASET_KEYS:
            raise BadInput("unknown field", f"{path}.{key}")
    name = check_name(fields.text(body.get("name"), f"{path}.name", required=True), f"{path}.name", "dataset name")
    state = fields.text(body.get("state"), f"{path}.state")
    if state is not None and state not in STATES:
        raise BadInput(f"must be one of {', '.join(STATES)}", f"{path}.state")
    files = parse_files(body.get("files"), f"{path}.files")
    lfns = {f.lfn for f in files}
    replicas = []
    for index, replica in enumerate(fields.sequence(body.get("replicas"), f"{path}.replicas")):
        where = f"{path}.replicas[{index}]"
        entry = fields.mapping(replica, where)
        for key in entry:
            if key not in ("endpoint", "complete", "files"):
                raise BadInput("unknown field", f"{where}.{key}")
        endpoint = fields.text(entry.get("endpoint"), f"{where}.endpoint", required=True, max_length=128) or ""
        if endpoint not in known_endpoints:
            raise BadInput(f"unknown storage endpoint {endpoint!r} (import it with `jedictl sites import` first)", f"{where}.endpoint")
        complete = entry.get("complete", True) is not False
        present = fields.names(entry.get("files"), f"{where}.files")
        if complete and present:
            raise BadInput("a complete replica holds every file; list files only for an incomplete one", f"{where}.files")
        for position, lfn in enumerate(present):
            if lfn not in lfns:
                raise BadInput(f"{lfn!r} is not a file of this dataset", f"{where}.files[{position}]")
        replicas.append((endpoint, complete, tuple(present) if not complete else None))
    return DatasetImport(name=name, scope=fields.text(body.get("scope"), f"{path}.scope", max_length=64), state=state,
                         files=files, replicas=replicas, attributes=fields.free_form(body.get("attributes"), f"{path}.attributes"),
                         cvmfs_path=parse_cvmfs_path(body.get("cvmfs"), f"{path}.cvmfs"))


def parse_cvmfs_path(value: Any, path: str) -> str | None:
    """A dataset's cvmfs directory, `/cvmfs/REPOSITORY/...`: its files are read there, at every site
    that mounts cvmfs, with no replica and no stage-in (docs/data-catalog.md)."""
    text = fields.text(value, path, max_length=1024)
    if text is None:
        return None
    parts = text.rstrip("/").split("/")
    if parts[:2] != ["", CVMFS_ROOT.strip("/")] or len(parts) < 3:
        raise BadInput(f"must be a directory under {CVMFS_ROOT}/, e.g. {CVMFS_ROOT}/atlas-condb.cern.ch/repo/conditions", path)
    if not all(_CVMFS_SEGMENT.match(part) and part not in (".", "..") for part in parts[2:]):
        raise BadInput("must be a plain path: letters, digits and . _ - + between single slashes, no . or ..", path)
    return "/".join(parts)


def parse_files(raw: Any, path: str) -> list[CatalogFile]:
    """File entries; a duplicate LFN, a negative size or a bad field is refused with its path."""
    files = []
    seen: set[str] = set()
    for index, item in enumerate(fields.sequence(raw, path)):
        where = f"{path}[{index}]"
        entry = fields.mapping(item, where)
        for key in entry:
            if key not in _FILE_KEYS:
                raise BadInput("unknown field", f"{where}.{key}")
        lfn = check_name(fields.text(entry.get("lfn"), f"{where}.lfn", required=True), f"{where}.lfn", "file name")
        if lfn in seen:
            raise BadInput(f"duplicate file name {lfn!r} in the dataset", f"{where}.lfn")
        seen.add(lfn)
        lumis = entry.get("lumi_blocks")
        if lumis is not None:
            if not isinstance(lumis, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in lumis):
                raise BadInput("must be a list of non-negative integers", f"{where}.lumi_blocks")
        parents = entry.get("parents")
        if parents is not None:
            if not isinstance(parents, list) or not all(isinstance(name, str) and name.strip() for name in parents):
                raise BadInput("must be a list of file names (the files this one was made from)", f"{where}.parents")
            for position, parent in enumerate(parents):
                check_name(parent, f"{where}.parents[{position}]", "file name")
                if parent == lfn:
                    raise BadInput("a file cannot be its own parent", f"{where}.parents[{position}]")
        files.append(CatalogFile(
            lfn=lfn,
            scope=fields.text(entry.get("scope"), f"{where}.scope", max_length=64),
            guid=fields.text(entry.get("guid"), f"{where}.guid", max_length=64),
            size=fields.integer(entry.get("size"), f"{where}.size", minimum=0),
            checksum=fields.text(entry.get("checksum"), f"{where}.checksum", max_length=64),
            n_events=fields.integer(entry.get("events"), f"{where}.events", minimum=0),
            run=fields.integer(entry.get("run"), f"{where}.run", minimum=0),
            lumi_blocks=tuple(lumis) if lumis is not None else None,
            parents=tuple(dict.fromkeys(parents or ())),
        ))
    return files
