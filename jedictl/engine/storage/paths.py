"""Rucio's deterministic layout: a replica's path follows from its endpoint's URL, its scope and its name.

Nothing is looked up: whoever writes a file (a pilot staging out, `data import --scan`) and whoever
reads it (a pilot staging in) compute the same path from the catalog's values alone.
"""

from __future__ import annotations

import hashlib
import pathlib
from urllib.parse import unquote, urlparse

from jedictl.engine.storage.transfer import StorageError

#: Rucio has no default scope; a file of no dataset gets this one.
DEFAULT_SCOPE = "jedictl"
#: The PanDA pilot's STAGEOUTFAILED: an endpoint whose URL cannot be used is where nothing can be written.
BAD_URL_CODE = 1137


def replica_scope(scope: str | None, dataset: str | None) -> str:
    """The file's scope, else the dataset's by Rucio's extract_scope: `user.alice.x` -> `user.alice`,
    `group.phys.x` -> `group.phys`, `mc23_13p6TeV.601229...` -> `mc23_13p6TeV`."""
    if scope:
        return scope
    if not dataset:
        return DEFAULT_SCOPE
    parts = dataset.rstrip("/").split(".")
    if parts[0] in ("user", "group") and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0]


def endpoint_root(url: str) -> pathlib.Path:
    """`file:///x/y` -> /x/y; any other scheme (or a relative path) is refused."""
    parsed = urlparse(url or "")
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
        raise StorageError(BAD_URL_CODE, f"endpoint URL {url!r} is not file:///ABSOLUTE/PATH")
    return pathlib.Path(unquote(parsed.path))


def replica_path(url: str, scope: str, lfn: str) -> pathlib.Path:
    """root / scope (dots -> "/" for user. and group. scopes) / md5("scope:lfn")[0:2] / [2:4] / lfn."""
    if not lfn or "/" in lfn or lfn in (".", ".."):
        raise StorageError(BAD_URL_CODE, f"{lfn!r} is not a file name")
    digest = hashlib.md5(f"{scope}:{lfn}".encode()).hexdigest()
    folder = scope.replace(".", "/") if scope.startswith(("user.", "group.")) else scope
    return endpoint_root(url) / folder / digest[0:2] / digest[2:4] / lfn
