"""`jedictl data import --scan`: the real files under a directory registered as a dataset with a complete
replica at a storage endpoint that has a URL, each placed at its replica path (docs/data-catalog.md,
"Storage you can touch").

Three steps, so that a long copy never holds the store's write lock and bad input writes nothing:
`plan_scan` (read the directory, the sidecar and the catalog, check everything that can be checked before
a byte moves), `place_files` (copy, link or check the files; no store), `register_scan` (the same
validation and transaction as `data import FILE`). A failure after some files were placed leaves them at
their replica paths with their content verified, where a re-run finds them and copies nothing again.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from jedictl.engine.catalogs.importer import import_data_catalog
from jedictl.engine.input import fields
from jedictl.engine.storage.paths import endpoint_root, relative_path, replica_scope
from jedictl.engine.storage.transfer import StorageError, check_root, place
from jedictl.engine.task.definition import check_name
from jedictl.errors import BadInput
from jedictl.model.choices import TRANSFER_MODES
from jedictl.store import data_catalog as store_catalog
from jedictl.store import sites as site_store

TRANSFERS = TRANSFER_MODES
SIDECAR_KEYS = ("events", "guid", "run", "lumi_blocks")
# An interrupted stage-out's temporary file (engine/storage/transfer.py): never data to register.
_TEMPORARY = re.compile(r"\.part-\d+-\d+$")


@dataclass(frozen=True)
class ScannedFile:
    lfn: str
    path: Path


@dataclass
class ScanPlan:
    """What a scan will do, decided before any file moves."""

    dataset: str
    endpoint: str
    url: str
    root: Path
    scope: str
    transfer: str
    files: list[ScannedFile]                 # the new files: not yet in the dataset
    found: int                               # regular files under the directory
    known: int                               # of those, already in the dataset (skipped: files are immutable)
    skipped_links: int                       # symbolic links under the directory (not registered)
    sidecar: dict[str, dict[str, Any]] = field(default_factory=dict)


def scan_directory(directory: Path) -> tuple[list[ScannedFile], int]:
    """Every regular file under directory (recursively, symlinks not followed), by base name, and the
    number of symbolic links skipped. Two files of one name would be one file in the catalog: refused."""
    if not directory.is_dir():
        raise BadInput(f"{directory} is not a directory", "--scan")
    found: dict[str, Path] = {}
    links = 0
    for folder, subfolders, names in os.walk(directory, onerror=_raise):
        subfolders.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink():
                links += 1
                continue
            if not path.is_file() or _TEMPORARY.search(name):
                continue
            if name in found:
                raise BadInput(f"two files are named {name!r}: {found[name]} and {path} (a dataset's file names are unique)", "--scan")
            check_name(name, str(path), "file name")
            found[name] = path
    return [ScannedFile(lfn, found[lfn]) for lfn in sorted(found)], links


def _raise(error: OSError) -> None:
    raise BadInput(f"cannot read {error.filename}: {error.strerror}", "--scan")


def parse_sidecar(document: Mapping[str, Any], source: str, present: set[str]) -> dict[str, dict[str, Any]]:
    """The sidecar: lfn -> {events, guid, run, lumi_blocks}, each entry naming a file that is there."""
    entries: dict[str, dict[str, Any]] = {}
    for lfn, raw in document.items():
        where = f"{source}: {lfn}"
        if lfn not in present:
            raise BadInput(f"no file {lfn!r} under the scanned directory (nor in the dataset)", source)
        body = fields.mapping(raw, where)
        for key in body:
            if key not in SIDECAR_KEYS:
                raise BadInput(f"unknown field (use {', '.join(SIDECAR_KEYS)})", f"{where}.{key}")
        entry: dict[str, Any] = {
            "events": fields.integer(body.get("events"), f"{where}.events", minimum=0),
            "guid": fields.text(body.get("guid"), f"{where}.guid", max_length=64),
            "run": fields.integer(body.get("run"), f"{where}.run", minimum=0),
        }
        lumis = body.get("lumi_blocks")
        if lumis is not None:
            if not isinstance(lumis, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in lumis):
                raise BadInput("must be a list of non-negative integers", f"{where}.lumi_blocks")
            entry["lumi_blocks"] = lumis
        entries[str(lfn)] = {key: value for key, value in entry.items() if value is not None}
    return entries


def plan_scan(conn: Any, directory: Path, endpoint: str, dataset: str, scope: str | None, transfer: str,
              sidecar: tuple[Mapping[str, Any], str] | None = None) -> ScanPlan:
    """Check everything before a file moves: the names, the endpoint and its root, the dataset's state,
    the sidecar. Raises BadInput (one line) for anything wrong; reads the store only."""
    if transfer not in TRANSFERS:
        raise BadInput(f"must be one of {', '.join(TRANSFERS)}", "--transfer")
    check_name(dataset, "--dataset", "dataset name")
    scope = replica_scope(fields.text(scope, "--scope", max_length=64), dataset)
    row = site_store.get_endpoint(conn, endpoint)
    if not row.url:
        raise BadInput(f"storage endpoint {endpoint} has no url: give it one (url: file:///...) in `jedictl sites import` to store real files", "--endpoint")
    try:
        root = endpoint_root(row.url)
        relative_path(scope, "x")  # a scope that has no place in the layout is refused before any copy
        if transfer == "none":
            if not root.is_dir():
                raise BadInput(f"storage root {root} of endpoint {endpoint} does not exist", "--endpoint")
        else:
            check_root(root)
    except StorageError as exc:
        raise BadInput(f"{exc.diag} (endpoint {endpoint})") from None
    files, links = scan_directory(directory)
    state, known = store_catalog.dataset_lfns(conn, dataset) or ("open", set())
    new = [f for f in files if f.lfn not in known]
    if new and state == "closed":
        raise BadInput(f"dataset {dataset} is closed: no files can be added")
    entries = parse_sidecar(*sidecar, {f.lfn for f in files} | known) if sidecar else {}
    return ScanPlan(dataset=dataset, endpoint=endpoint, url=row.url, root=root, scope=scope, transfer=transfer,
                    files=new, found=len(files), known=len(files) - len(new), skipped_links=links, sidecar=entries)


def place_files(plan: ScanPlan) -> list[dict[str, Any]]:
    """Put each new file at its replica path; returns their catalog entries (size, adler32, sidecar
    fields). `move` hard-links (or copies) here and deletes the originals only once the files are
    registered (`finish_move`): a failed import must leave every file where a re-run finds it."""
    mode = "link" if plan.transfer == "move" else plan.transfer
    entries = []
    for scanned in plan.files:
        dest = plan.root / relative_path(plan.scope, scanned.lfn)
        try:
            size, checksum = place(scanned.path, dest, mode=mode, root=plan.root)
        except StorageError as exc:
            raise BadInput(f"{scanned.path}: {exc.diag} (storage error {exc.code})") from None
        entries.append({"lfn": scanned.lfn, "scope": plan.scope, "size": size, "checksum": checksum, **plan.sidecar.get(scanned.lfn, {})})
    return entries


def register_scan(conn: Any, plan: ScanPlan, entries: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """Register the placed files as `data import FILE` would a document listing them (one transaction)."""
    document = {"datasets": [{"name": plan.dataset, "scope": plan.scope, "files": entries, "replicas": [{"endpoint": plan.endpoint}]}]}
    report = import_data_catalog(conn, document, now)[0]
    return {"dataset": plan.dataset, "endpoint": plan.endpoint, "root": str(plan.root), "transfer": plan.transfer,
            "action": report["action"], "files_found": plan.found, "files_known": plan.known, "files_added": report["files_added"],
            "bytes_added": sum(e["size"] for e in entries), "symlinks_skipped": plan.skipped_links}


def finish_move(plan: ScanPlan) -> None:
    """After the files are registered: remove the originals of a `--transfer move` (not a file that is
    its own replica, as when the scanned directory is the endpoint's root)."""
    if plan.transfer != "move":
        return
    for scanned in plan.files:
        dest = plan.root / relative_path(plan.scope, scanned.lfn)
        if scanned.path.resolve() != dest.resolve():
            scanned.path.unlink(missing_ok=True)
