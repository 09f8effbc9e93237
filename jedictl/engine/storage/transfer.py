"""Moving files between storage and a job's work directory, as PanDA's pilot does, verified by size and
checksum; every failure is a `StorageError` with the pilot's error code (`errors.py`).

Stage-out writes a temporary name in the destination directory, fsyncs it, checks what landed, then
publishes it with a hard link (which, unlike rename, never replaces a file another writer put there
meanwhile) and fsyncs the directory: a reader sees the whole file or none, and a crash leaves at worst a
`*.part-*` file, never a partial replica under the real name. Writing the same content again is a no-op.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from jedictl.engine.storage.checksums import BLOCK, Digester, digest, parse_checksum
from jedictl.engine.storage.errors import (  # noqa: F401 (StorageError and the codes: re-exported)
    FILEEXISTS,
    GETADMISMATCH,
    GETMD5MISMATCH,
    MISSINGINPUTFILE,
    MISSINGOUTPUTFILE,
    PUTADMISMATCH,
    STAGEINFAILED,
    STAGEOUTFAILED,
    StorageError,
)
from jedictl.engine.storage.paths import layout_root

MODES = ("copy", "move", "link", "none")  # how `place` puts a file at its replica path


def _temporary(dest: Path) -> Path:
    # pid and thread: two pilots, or two slots of one pilot, never share a temporary file.
    return dest.with_name(f"{dest.name}.part-{os.getpid()}-{threading.get_native_id()}")


def _copy(source: Path, target: Path, *, md5: bool = False, sync: bool = True) -> Digester:
    """Copy source to target (created or truncated), returning the digest of the bytes written."""
    result = Digester(md5)
    with open(source, "rb") as reader, open(target, "wb") as writer:
        while block := reader.read(BLOCK):
            result.update(block)
            writer.write(block)
        if sync:
            writer.flush()
            os.fsync(writer.fileno())
    return result


def _sync_directory(directory: Path) -> None:
    """Make a new directory entry durable (the rename/link itself); best effort where unsupported."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------ stage in

def stage_in(source: Path, dest: Path, *, size: int | None, checksum: str | None, link: bool) -> None:
    """Copy (or, with `link`, symlink) an input from storage to dest, verifying size and checksum
    against the catalog's. A symlink is made only after the source itself was verified: a job that reads
    its input directly must not read a corrupt file. dest never holds a partial or unverified copy.

    1331 the source is missing; 1171 size or adler32 mismatch (1145 for md5); 1099 any other failure."""
    source, dest = Path(source), Path(dest)
    try:
        expected = parse_checksum(checksum) if checksum else None
    except ValueError as exc:
        raise StorageError(STAGEINFAILED, f"the catalog's checksum of {source.name} is unusable: {exc}") from None
    try:
        if not source.is_file():
            raise StorageError(MISSINGINPUTFILE, f"Input file is missing in storage element: {source}")
        if size is not None and source.stat().st_size != size:  # cheap: before reading a byte
            raise StorageError(GETADMISMATCH, f"size of {source} is {source.stat().st_size}, the catalog says {size}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        temporary = _temporary(dest)
        try:
            if link:
                with open(source, "rb") as reader:
                    result = Digester(md5=expected is not None and expected.algorithm == "md5").feed(reader)
                os.symlink(source.absolute(), temporary)
            else:
                result = _copy(source, temporary, md5=expected is not None and expected.algorithm == "md5", sync=False)
            _verify_input(source, result, size, expected)
            os.replace(temporary, dest)  # a retry in the same work directory replaces the old copy
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
    except StorageError:
        raise
    except FileNotFoundError as exc:
        if not source.exists():  # vanished between the check and the read
            raise StorageError(MISSINGINPUTFILE, f"Input file is missing in storage element: {source}") from None
        raise StorageError(STAGEINFAILED, f"stage-in of {source} to {dest} failed: {exc.strerror}: {exc.filename}") from None
    except OSError as exc:
        raise StorageError(STAGEINFAILED, f"stage-in of {source} to {dest} failed: {exc.strerror or exc}") from None


def link_in_place(source: Path, dest: Path) -> None:
    """An input read in place (a file on cvmfs): no copy and no read -- the file system it lives on
    serves and verifies it -- only a symlink at dest, so the payload finds it by name.

    1331 the file is not there (cvmfs not mounted, or not at that path); 1099 any other failure."""
    source, dest = Path(source), Path(dest)
    try:
        if not source.is_file():
            raise StorageError(MISSINGINPUTFILE, f"Input file is missing on cvmfs: {source}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        temporary = _temporary(dest)
        try:
            os.symlink(source.absolute(), temporary)
            os.replace(temporary, dest)
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(STAGEINFAILED, f"linking {source} to {dest} failed: {exc.strerror or exc}") from None


def _verify_input(source: Path, result: Digester, size: int | None, expected) -> None:  # noqa: ANN001
    if size is not None and result.size != size:
        raise StorageError(GETADMISMATCH, f"size of {source} is {result.size}, the catalog says {size}")
    if expected is not None and not result.matches(expected):
        code = GETMD5MISMATCH if expected.algorithm == "md5" else GETADMISMATCH
        actual = result.md5 if expected.algorithm == "md5" else result.adler32
        raise StorageError(code, f"checksum of {source} is {actual}, the catalog says {expected}")


# ----------------------------------------------------------------------------------------- stage out

def check_root(root: Path) -> None:
    """The endpoint's root must exist and be writable: 1137 naming it. Never created here -- a missing
    root is a storage that is not mounted, and writing there would fill the local disk instead."""
    root = Path(root)
    if not root.is_dir():
        raise StorageError(STAGEOUTFAILED, f"storage root {root} does not exist or is not a directory")
    if not os.access(root, os.W_OK | os.X_OK):
        raise StorageError(STAGEOUTFAILED, f"storage root {root} is not writable")


def _root_of(dest: Path, root: Path | None) -> Path:
    """The root under which stage-out may create directories: the one given, the layout's, else only
    dest's own directory (which must then exist)."""
    found = Path(root) if root is not None else (layout_root(dest) or dest.parent)
    if found != dest.parent and found not in dest.parents:
        raise StorageError(STAGEOUTFAILED, f"{dest} is not under the storage root {found}")
    return found


def _already_there(source: Path, dest: Path) -> tuple[int, str] | None:
    """None when dest is free; the digest when it already holds source's content (idempotent);
    1221 when something else is there."""
    if not os.path.lexists(dest):
        return None
    if dest.is_symlink() or not dest.is_file():
        raise StorageError(FILEEXISTS, f"{dest} already exists and is not a regular file")
    if os.path.samefile(source, dest):
        return digest(dest)
    if dest.stat().st_size == source.stat().st_size:
        wanted = digest(source)
        if digest(dest) == wanted:
            return wanted
    raise StorageError(FILEEXISTS, f"another file is already at {dest} (different size or adler32)")


def stage_out(source: Path, dest: Path, *, root: Path | None = None) -> tuple[int, str]:
    """Write source to dest atomically and verified; returns (size, "ad:..."). The directories between
    the endpoint's root (`root`, else found from the layout) and dest are created; the root is not.

    1165 source missing; 1221 dest holds other content (the same content: returned, nothing written);
    1137 root missing or not writable, or any I/O error; 1172 what landed differs from what was read."""
    source, dest = Path(source), Path(dest)
    if not source.is_file():
        raise StorageError(MISSINGOUTPUTFILE, f"Output file is missing: {source}")
    try:
        check_root(_root_of(dest, root))
        existing = _already_there(source, dest)
        if existing is not None:
            return existing
        dest.parent.mkdir(parents=True, exist_ok=True)
        return _publish(source, dest)
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(STAGEOUTFAILED, f"stage-out of {source} to {dest} failed: {exc.strerror or exc}") from None


def _publish(source: Path, dest: Path) -> tuple[int, str]:
    temporary = _temporary(dest)
    try:
        written = _copy(source, temporary)
        landed = digest(temporary)  # read back: a short write or a corrupting file system shows here
        if landed != (written.size, written.adler32):
            raise StorageError(PUTADMISMATCH, f"{dest}: wrote {written.size} bytes {written.adler32}, storage has {landed[0]} bytes {landed[1]}")
        try:
            os.link(temporary, dest)  # fails if dest appeared meanwhile: never replaces another's file
        except FileExistsError:
            existing = _already_there(source, dest)
            if existing is None or existing != landed:
                raise StorageError(FILEEXISTS, f"another file is already at {dest}") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            os.replace(temporary, dest)  # a file system without hard links: rename, atomic all the same
        _sync_directory(dest.parent)
        return landed
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def remove(dest: Path) -> None:
    """Undo a stage-out whose report was refused (so no output stays unregistered); missing is fine."""
    try:
        Path(dest).unlink(missing_ok=True)
    except OSError as exc:
        raise StorageError(STAGEOUTFAILED, f"cannot remove {dest}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------------- placing existing data

def place(source: Path, dest: Path, *, mode: str = "copy", root: Path | None = None) -> tuple[int, str]:
    """Put a file the user has at its replica path (`data import --scan`); returns (size, "ad:...") of
    the replica. copy: `stage_out`; move: a rename where source and dest share a file system, else copy
    and delete; link: a hard link, else a copy (another file system); none: the file must already be
    there (1331 otherwise). A dest with the same content is kept (nothing written, a re-run is free);
    other content is 1221."""
    source, dest = Path(source), Path(dest)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    if mode == "none":
        return _in_place(source, dest)
    if mode == "copy":
        return stage_out(source, dest, root=root)
    if not source.is_file():
        raise StorageError(MISSINGOUTPUTFILE, f"file is missing: {source}")
    try:
        check_root(_root_of(dest, root))
        existing = _already_there(source, dest)
        if existing is None:
            dest.parent.mkdir(parents=True, exist_ok=True)
            existing = digest(source)
            try:
                os.link(source, dest)  # move and link alike: dest appears whole, source stays until then
            except FileExistsError:
                existing = _already_there(source, dest) or existing
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                existing = stage_out(source, dest, root=root)  # another file system: copy
            _sync_directory(dest.parent)
        if mode == "move" and source.resolve() != dest.resolve():  # dest holds the content now: drop source
            source.unlink()
        return existing
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(STAGEOUTFAILED, f"{mode} of {source} to {dest} failed: {exc.strerror or exc}") from None


def _in_place(source: Path, dest: Path) -> tuple[int, str]:
    if not dest.is_file():
        raise StorageError(MISSINGINPUTFILE, f"{source.name} is not at its replica path {dest}")
    try:
        if source.exists() and not os.path.samefile(source, dest) and source.stat().st_size != dest.stat().st_size:
            raise StorageError(FILEEXISTS, f"another file is already at {dest} (its size differs from {source})")
        return digest(dest)
    except OSError as exc:
        raise StorageError(STAGEINFAILED, f"cannot read {dest}: {exc.strerror or exc}") from None
