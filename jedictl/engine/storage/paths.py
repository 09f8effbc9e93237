"""Where a file's replica lives under a storage endpoint: Rucio's deterministic layout
`ROOT/SCOPE/xx/yy/LFN` with xx, yy the first two byte pairs of md5("SCOPE:LFN") (docs/data-catalog.md).

The path is a pure function of the endpoint URL, the scope and the file name, so every pilot, `data import
--scan` and an operator with a shell find the same file without asking the catalog for a path.
"""

from __future__ import annotations

import hashlib
import pathlib
from urllib.parse import unquote, urlsplit

from jedictl.engine.storage.errors import NOSTORAGE, StorageError

DEFAULT_SCOPE = "jedictl"  # a file with neither a scope nor a dataset (Rucio needs some scope)
_SPLIT_SCOPES = ("user", "group")  # Rucio: user.NAME and group.NAME scopes become two directories


def replica_scope(scope: str | None, dataset: str | None) -> str:
    """The file's scope, else the one Rucio's `extract_scope` reads from the dataset name:
    "user.alice.x" -> "user.alice", "group.phys.x" -> "group.phys", "mc23_13p6TeV.601229.x" ->
    "mc23_13p6TeV", "SCOPE:NAME" -> "SCOPE"; neither -> "jedictl"."""
    if scope:
        return scope
    if not dataset:
        return DEFAULT_SCOPE
    if ":" in dataset:
        return dataset.split(":", 1)[0] or DEFAULT_SCOPE
    parts = dataset.split(".")
    if parts[0] in _SPLIT_SCOPES and len(parts) > 1:
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def endpoint_root(url: str) -> pathlib.Path:
    """The directory a `file:///x/y` URL names (/x/y). Another scheme, a host, or a relative path is
    NOSTORAGE (1133): the endpoint gives no place a pilot on this host can reach."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unbalanced [ in the host part
        raise StorageError(NOSTORAGE, f"storage URL {url!r} is not a URL: {exc}") from None
    if parts.scheme != "file":
        raise StorageError(NOSTORAGE, f"storage URL {url!r}: only file:// URLs are supported")
    if parts.netloc not in ("", "localhost"):
        raise StorageError(NOSTORAGE, f"storage URL {url!r}: a file:// URL must not name a host")
    path = unquote(parts.path)
    if not path.startswith("/") or parts.query or parts.fragment:
        raise StorageError(NOSTORAGE, f"storage URL {url!r} must name an absolute path (file:///srv/data/DATADISK)")
    return pathlib.Path(path)


def relative_path(scope: str, lfn: str) -> pathlib.PurePosixPath:
    """SCOPE/xx/yy/LFN (user./group. scopes as two directories), the part below the endpoint's root.

    A name that could leave its directory (empty, ".", "..", containing "/" or a NUL) has no place in the
    layout: NOSTORAGE (1133), never a path outside the root."""
    for what, value in (("scope", scope), ("file name", lfn)):
        if not value or value in (".", "..") or "/" in value or "\0" in value:
            raise StorageError(NOSTORAGE, f"{what} {value!r} cannot be stored: it must be a plain name (no '/', not '.' or '..')")
    digest = hashlib.md5(f"{scope}:{lfn}".encode()).hexdigest()  # noqa: S324 - a layout hash, not security
    directories = scope.split(".", 1) if scope.split(".", 1)[0] in _SPLIT_SCOPES and "." in scope else [scope]
    if any(part in ("", ".", "..") for part in directories):
        raise StorageError(NOSTORAGE, f"scope {scope!r} cannot be stored: it must be a plain name")
    return pathlib.PurePosixPath(*directories, digest[0:2], digest[2:4], lfn)


def replica_path(url: str, scope: str, lfn: str) -> pathlib.Path:
    """file:///root + SCOPE/xx/yy/LFN, e.g. ("file:///srv/DATADISK", "user.alice", "hits.root") ->
    /srv/DATADISK/user/alice/xx/yy/hits.root."""
    return endpoint_root(url) / relative_path(scope, lfn)


def layout_root(path: "pathlib.Path | str") -> pathlib.Path | None:
    """The endpoint root of a path `replica_path` made (ROOT/SCOPE/xx/yy/LFN), found by checking the md5
    directories against each possible scope; None when the path does not follow the layout. Stage-out
    uses it so that it never creates a missing root (an unmounted file system must fail, not fill /)."""
    parts = pathlib.Path(path).parts
    lfn, xx_yy = parts[-1] if parts else "", "".join(parts[-3:-1])
    for depth in (2, 1):  # user/alice (two directories) before a one-directory scope
        if len(parts) < depth + 4:  # the root ("/" at least), the scope, xx, yy, the name
            continue
        directories = parts[-3 - depth:-3]
        if depth == 2 and directories[0] not in _SPLIT_SCOPES:
            continue
        scope = ".".join(directories)
        if hashlib.md5(f"{scope}:{lfn}".encode()).hexdigest()[:4] == xx_yy:  # noqa: S324
            return pathlib.Path(*parts[:-3 - depth])
    return None
