"""Stage-in, stage-out, remove and place on a real file system: every error code and the atomicity."""

from __future__ import annotations

import errno
import os
import zlib
from pathlib import Path

import pytest

from jedictl.engine.storage import transfer
from jedictl.engine.storage.paths import replica_path
from jedictl.engine.storage.transfer import (
    FILEEXISTS,
    GETADMISMATCH,
    GETMD5MISMATCH,
    MISSINGINPUTFILE,
    MISSINGOUTPUTFILE,
    PUTADMISMATCH,
    STAGEINFAILED,
    STAGEOUTFAILED,
    StorageError,
    place,
    remove,
    stage_in,
    stage_out,
)

DATA = os.urandom(300_000)
AD = f"ad:{zlib.adler32(DATA):08x}"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "payload" / "out.root"
    path.parent.mkdir()
    path.write_bytes(DATA)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "DATADISK"
    path.mkdir()
    return path


def dest_in(root: Path, scope: str = "user.alice", lfn: str = "out.root") -> Path:
    return replica_path(f"file://{root}", scope, lfn)


def code_of(call, *args, **kwargs) -> int:
    with pytest.raises(StorageError) as caught:
        call(*args, **kwargs)
    assert caught.value.diag and "\n" not in caught.value.diag
    return caught.value.code


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.is_file() or p.is_symlink())


# ----------------------------------------------------------------------------------------- stage out

def test_stage_out_creates_the_layout_and_is_idempotent(source, root):
    dest = dest_in(root)
    assert stage_out(source, dest) == (len(DATA), AD)
    assert dest.read_bytes() == DATA and dest.parent.parent.parent.parent == root / "user"
    before = dest.stat().st_mtime_ns, dest.stat().st_ino
    assert stage_out(source, dest) == (len(DATA), AD)  # the same content again: nothing written
    assert (dest.stat().st_mtime_ns, dest.stat().st_ino) == before
    assert leftovers(root) == ["out.root"]  # no temporary file left


def test_stage_out_of_other_content_is_file_exists(source, root, tmp_path):
    dest = dest_in(root)
    stage_out(source, dest)
    other = tmp_path / "other.root"
    other.write_bytes(DATA[:-1] + bytes([DATA[-1] ^ 1]))  # same size, other adler32
    assert code_of(stage_out, other, dest) == FILEEXISTS
    assert dest.read_bytes() == DATA


def test_stage_out_errors(source, root, tmp_path):
    assert code_of(stage_out, tmp_path / "never-written.root", dest_in(root)) == MISSINGOUTPUTFILE
    missing = tmp_path / "not-mounted"
    with pytest.raises(StorageError) as caught:
        stage_out(source, dest_in(missing))
    assert caught.value.code == STAGEOUTFAILED and str(missing) in caught.value.diag
    assert not missing.exists()  # a missing root is never created
    assert code_of(stage_out, source, dest_in(root), root=tmp_path / "elsewhere") == STAGEOUTFAILED  # dest not under root


def test_stage_out_to_a_root_that_is_not_writable(source, root, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == root else real_access(path, mode))  # root ignores modes
    with pytest.raises(StorageError) as caught:
        stage_out(source, dest_in(root))
    assert caught.value.code == STAGEOUTFAILED and f"storage root {root} is not writable" in caught.value.diag


def test_a_copy_failing_midway_leaves_no_partial_file(source, root, monkeypatch):
    real_fsync = os.fsync

    def broken_fsync(fd: int) -> None:  # the copy wrote bytes, then the disk failed
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    dest = dest_in(root)
    assert code_of(stage_out, source, dest) == STAGEOUTFAILED
    assert leftovers(root) == []
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert stage_out(source, dest) == (len(DATA), AD)


def test_a_corrupting_storage_is_put_mismatch(source, root, monkeypatch):
    real = transfer.digest
    monkeypatch.setattr(transfer, "digest", lambda path: (0, "ad:00000001") if ".part-" in str(path) else real(path))
    assert code_of(stage_out, source, dest_in(root)) == PUTADMISMATCH
    assert leftovers(root) == []


def test_remove(source, root):
    dest = dest_in(root)
    stage_out(source, dest)
    remove(dest)
    assert not dest.exists()
    remove(dest)  # missing is fine
    dest.mkdir(parents=True)
    assert code_of(remove, dest) == STAGEOUTFAILED


# ------------------------------------------------------------------------------------------ stage in

@pytest.mark.parametrize("link", [False, True])
def test_stage_in_copies_or_links_verified(source, tmp_path, link):
    work = tmp_path / "work" / "job1"
    stage_in(source, work / "in.root", size=len(DATA), checksum=AD, link=link)
    assert (work / "in.root").read_bytes() == DATA and (work / "in.root").is_symlink() == link
    stage_in(source, work / "in.root", size=None, checksum=None, link=link)  # again: replaced, no error
    assert leftovers(work) == ["in.root"]


@pytest.mark.parametrize("link", [False, True])
def test_stage_in_errors(source, tmp_path, link):
    dest = tmp_path / "work" / "in.root"
    assert code_of(stage_in, tmp_path / "gone.root", dest, size=None, checksum=None, link=link) == MISSINGINPUTFILE
    assert code_of(stage_in, source, dest, size=len(DATA) + 1, checksum=None, link=link) == GETADMISMATCH
    assert code_of(stage_in, source, dest, size=len(DATA), checksum="ad:00000002", link=link) == GETADMISMATCH
    assert code_of(stage_in, source, dest, size=None, checksum="md5:" + "0" * 32, link=link) == GETMD5MISMATCH
    assert code_of(stage_in, source, dest, size=None, checksum="sha1:zz", link=link) == STAGEINFAILED
    assert not os.path.lexists(dest) and leftovers(tmp_path / "work") == []  # a corrupt source is never linked


def test_stage_in_io_error_is_stage_in_failed(source, tmp_path):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    assert code_of(stage_in, source, blocker / "in.root", size=None, checksum=None, link=False) == STAGEINFAILED


# -------------------------------------------------------------------------------------------- place

@pytest.mark.parametrize("mode", ["copy", "link", "move"])
def test_place_modes(source, root, mode):
    dest = dest_in(root)
    assert place(source, dest, mode=mode) == (len(DATA), AD)
    assert dest.read_bytes() == DATA
    assert source.exists() == (mode != "move")
    if mode == "link":
        assert os.path.samefile(source, dest)
        assert place(source, dest, mode=mode) == (len(DATA), AD)  # again: the same file, nothing to do


def test_place_link_across_file_systems_copies(source, root, monkeypatch):
    def cross_device(src, dst):  # noqa: ANN001
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    real_link = os.link
    monkeypatch.setattr(os, "link", lambda src, dst: cross_device(src, dst) if Path(src) == source else real_link(src, dst))
    dest = dest_in(root)
    assert place(source, dest, mode="link") == (len(DATA), AD)
    assert not os.path.samefile(source, dest) and dest.read_bytes() == DATA


def test_place_none_needs_the_file_there(source, root):
    dest = dest_in(root)
    assert code_of(place, source, dest, mode="none") == MISSINGINPUTFILE
    stage_out(source, dest)
    assert place(source, dest, mode="none") == (len(DATA), AD)
    dest.write_bytes(b"short")
    assert code_of(place, source, dest, mode="none") == FILEEXISTS
