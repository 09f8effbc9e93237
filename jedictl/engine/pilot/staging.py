"""Files in and out of a job's work directory, at their deterministic paths on the endpoints.

Stage-in reads each real input from the first endpoint (in the payload's order) that holds it and has a
URL; a site with direct_io gets a symlink instead of a copy. An input on cvmfs is not staged in at all:
the job reads it at its cvmfs path (a symlink in the work directory names it). Stage-out first checks that every output
exists (a missing one fails the job before anything is written), then copies each to its destination;
if one fails, those already written are removed again. Outputs are only ever written for a finished
job, and removed again if its report is not accepted (`undo`): a job either has its files registered
and on disk or neither.
"""

from __future__ import annotations

import io
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence

from jedictl.engine.pilot.codes import MISSING_OUTPUT, NO_REPLICA, STAGE_IN_FAILED, STAGE_OUT_FAILED, PilotError
from jedictl.engine.storage import transfer
from jedictl.engine.storage.paths import endpoint_root, replica_path, replica_scope
from jedictl.engine.storage.transfer import StorageError
from jedictl.model.catalog import CVMFS_ROOT

LOG_TYPES = frozenset({"log", "trn_log"})
OUTPUT_TYPES = frozenset({"output", "trn_output"})
#: Inputs that are values, not files (random seeds, event-range placeholders): nothing to fetch.
NOTHING_TO_STAGE = frozenset({"pseudo_input", "pp_input"})
PILOT_LOG = "pilot.log"


@dataclass(frozen=True)
class StagedOut:
    lfn: str
    dest: Path
    size: int
    checksum: str
    created: bool  # False: the same content was there already (a resent stage-out); never removed then


def input_source(item: Mapping[str, Any], urls: Mapping[str, str | None]) -> Path:
    """Where an input is read from: its replica on the first endpoint that holds it and has a URL."""
    for endpoint in item.get("replicas") or ():
        url = urls.get(endpoint)
        if url:
            try:
                return replica_path(url, replica_scope(item.get("scope"), item.get("dataset")), item["lfn"])
            except StorageError as exc:
                raise PilotError(STAGE_IN_FAILED, f"endpoint {endpoint}: {exc.diag}") from exc
    held = ", ".join(item.get("replicas") or ()) or "no endpoint"
    raise PilotError(NO_REPLICA, f"No replica of {item['lfn']} on an endpoint with a URL (held by {held})")


def cvmfs_source(item: Mapping[str, Any], cvmfs_root: str) -> Path:
    """Where this worker node has an input that lives on cvmfs: its `/cvmfs/REPO/...` path with /cvmfs
    replaced by the node's mount point (`pilot.cvmfs_root`, /cvmfs unless the node mounts it elsewhere)."""
    relative = PurePosixPath(item["cvmfs"]).relative_to(CVMFS_ROOT)
    return Path(cvmfs_root) / relative


def stage_in(payload: Mapping[str, Any], workdir: Path, urls: Mapping[str, str | None], direct_io: bool,
             cvmfs_root: str = CVMFS_ROOT) -> tuple[list[str], int]:
    """Every real input into `workdir`; the endpoint roots read directly (a container must mount them)
    and how many inputs were read in place from cvmfs. An input on cvmfs is not staged in: no replica,
    no copy, no checksum -- a symlink to its cvmfs path, which must exist (1331 if cvmfs is not there)."""
    roots: set[str] = set()
    done: set[str] = set()
    on_cvmfs = 0
    for item in payload.get("inputs", []):
        if item.get("type") in NOTHING_TO_STAGE or item["lfn"] in done:
            continue
        if item.get("cvmfs"):
            try:
                transfer.link_in_place(cvmfs_source(item, cvmfs_root), workdir / item["lfn"])
            except (StorageError, ValueError) as exc:
                code, diag = (exc.code, exc.diag) if isinstance(exc, StorageError) else (STAGE_IN_FAILED, f"bad cvmfs path {item['cvmfs']}")
                raise PilotError(code, diag) from exc
            done.add(item["lfn"])
            roots.add(cvmfs_root)
            on_cvmfs += 1
            continue
        source = input_source(item, urls)
        try:
            transfer.stage_in(source, workdir / item["lfn"], size=item.get("size"), checksum=item.get("checksum"), link=direct_io)
        except StorageError as exc:
            raise PilotError(exc.code, exc.diag) from exc
        done.add(item["lfn"])
        if direct_io:
            roots.add(str(source.parent))
    return sorted(roots), on_cvmfs


def with_destinations(payload: Mapping[str, Any], write_endpoint: str | None) -> Mapping[str, Any]:
    """The payload with every output that names no destination sent to the site's write endpoint: a
    task whose outputs have no destination (no nucleus endpoint chosen, e.g. analysis) gets its files
    registered at the job's site's first write endpoint (store.job_outcomes), so that is where they go."""
    outputs = payload.get("outputs") or []
    if write_endpoint is None or all(item.get("destination") for item in outputs):
        return payload
    return {**payload, "outputs": [item if item.get("destination") else {**item, "destination": write_endpoint} for item in outputs]}


def destination(item: Mapping[str, Any], urls: Mapping[str, str | None]) -> Path:
    """An output's path on its destination endpoint; the endpoint must have a URL whose root is a
    writable folder (else the job fails with 1137 before anything is copied). The scope is the output
    dataset's, as the catalog registers the file (store.job_outcomes.scope_of), so a child task reads it
    back from the same path."""
    endpoint = item.get("destination")
    url = urls.get(endpoint) if endpoint else None
    if not url:
        raise PilotError(STAGE_OUT_FAILED, f"Output {item['lfn']}: destination endpoint {endpoint or '(none)'} has no URL")
    try:
        root = endpoint_root(url)
        path = replica_path(url, replica_scope(None, item.get("dataset")), item["lfn"])
        transfer.check_root(root)  # never created: a missing root is storage that is not mounted
    except StorageError as exc:
        raise PilotError(STAGE_OUT_FAILED, f"endpoint {endpoint}: {exc.diag}") from exc
    return path


def make_log(workdir: Path, lfn: str) -> Path:
    """The job's log file as PanDA's pilot makes it: a tar.gz of the payload's stdout and stderr and the
    pilot's own log of the job, under a folder named after the log file."""
    target = workdir / lfn
    folder = lfn.removesuffix(".1").removesuffix(".tgz").removesuffix(".tar.gz") or "log"
    with tarfile.open(target, "w:gz") as archive:
        for name in ("payload.stdout", "payload.stderr", PILOT_LOG):
            path = workdir / name
            if path.is_file():
                archive.add(path, arcname=f"{folder}/{name}")
            else:  # still say it was empty, rather than leave a reader guessing
                info = tarfile.TarInfo(f"{folder}/{name}")
                info.mtime = int(time.time())
                archive.addfile(info, io.BytesIO(b""))
    return target


def stage_out(payload: Mapping[str, Any], workdir: Path, urls: Mapping[str, str | None]) -> list[StagedOut]:
    items = payload.get("outputs", [])
    missing = [item["lfn"] for item in items if item.get("type") not in LOG_TYPES and not (workdir / item["lfn"]).is_file()]
    if missing:
        raise PilotError(MISSING_OUTPUT, f"Output file(s) not produced by the payload: {', '.join(missing)}")
    plans = [(item, destination(item, urls)) for item in items]  # every destination checked before the first copy
    staged: list[StagedOut] = []
    try:
        for item, dest in plans:
            source = make_log(workdir, item["lfn"]) if item.get("type") in LOG_TYPES else workdir / item["lfn"]
            existed = dest.exists()
            size, checksum = transfer.stage_out(source, dest, root=endpoint_root(urls[item["destination"]]))
            staged.append(StagedOut(item["lfn"], dest, size, checksum, created=not existed))
    except StorageError as exc:
        undo(staged)
        raise PilotError(exc.code, exc.diag) from exc
    except BaseException:
        undo(staged)
        raise
    return staged


def undo(staged: Sequence[StagedOut]) -> None:
    """Remove what this job wrote (its report was not accepted): never a file that was there before."""
    for item in staged:
        if item.created:
            transfer.remove(item.dest)
