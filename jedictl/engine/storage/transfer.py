"""Moving files between a storage endpoint and a job's work directory, with the PanDA pilot's error codes.

Every failure is a StorageError(code, diag): the pilot reports it as the job's error as it stands.
Stage-out writes atomically (a temporary name in the destination folder, fsync, rename), so a reader
never sees half a file and a crash leaves only a `.part-<pid>` that is not the replica.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from jedictl.engine.storage.checksums import adler32_of, md5_of, same_checksum

MISSING_INPUT = 1331  # MISSINGINPUTFILE
STAGE_IN_FAILED = 1099  # STAGEINFAILED
GET_AD_MISMATCH = 1171  # GETADMISMATCH
GET_MD5_MISMATCH = 1145  # GETMD5MISMATCH
MISSING_OUTPUT = 1165  # MISSINGOUTPUTFILE
STAGE_OUT_FAILED = 1137  # STAGEOUTFAILED
PUT_AD_MISMATCH = 1172  # PUTADMISMATCH
FILE_EXISTS = 1221  # FILEEXISTS


class StorageError(Exception):
    def __init__(self, code: int, diag: str):
        super().__init__(diag)
        self.code = code
        self.diag = diag


def stage_in(source: Path, dest: Path, *, size: int | None, checksum: str | None, link: bool) -> None:
    """Copy (or symlink, for a site that reads directly) `source` to `dest`, then verify it."""
    source, dest = Path(source), Path(dest)
    if not source.is_file():
        raise StorageError(MISSING_INPUT, f"Input file is missing in storage element: {source}")
    try:
        if link:
            os.symlink(source, dest)
        else:
            shutil.copyfile(source, dest)
        actual = os.stat(dest).st_size
    except OSError as exc:
        raise StorageError(STAGE_IN_FAILED, f"Failed to stage-in {source}: {exc.strerror or exc}") from exc
    if size is not None and actual != size:
        raise StorageError(GET_AD_MISMATCH, f"Input file {source.name} has {actual} bytes, the catalog says {size}")
    if checksum and not same_checksum(checksum, dest):
        code = GET_MD5_MISMATCH if checksum.lower().startswith("md5:") else GET_AD_MISMATCH
        found = md5_of(dest) if code == GET_MD5_MISMATCH else adler32_of(dest)
        raise StorageError(code, f"Input file {source.name} has checksum {found}, the catalog says {checksum}")


def stage_out(source: Path, dest: Path) -> tuple[int, str]:
    """Write `source` to `dest` atomically and verify it; (size, "ad:...")."""
    source, dest = Path(source), Path(dest)
    if not source.is_file():
        raise StorageError(MISSING_OUTPUT, f"Output file {source.name} was not produced by the payload")
    size, checksum = os.stat(source).st_size, adler32_of(source)
    if dest.exists():
        if os.stat(dest).st_size == size and adler32_of(dest) == checksum:
            return size, checksum  # the same content: a resent stage-out is not an error
        raise StorageError(FILE_EXISTS, f"Output file {dest} already exists with other content")
    part = dest.with_name(f"{dest.name}.part-{os.getpid()}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(source, "rb") as reader, open(part, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
            writer.flush()
            os.fsync(writer.fileno())
        os.replace(part, dest)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise StorageError(STAGE_OUT_FAILED, f"Failed to stage-out {source.name} to {dest}: {exc.strerror or exc}") from exc
    if os.stat(dest).st_size != size or adler32_of(dest) != checksum:
        remove(dest)
        raise StorageError(PUT_AD_MISMATCH, f"Output file {dest} differs from {source.name} after the copy")
    return size, checksum


def remove(dest: Path) -> None:
    """Undo a stage-out whose report was refused; a file already gone is fine."""
    try:
        os.unlink(dest)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
