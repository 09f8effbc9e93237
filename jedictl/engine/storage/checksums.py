"""Checksums as the data catalog writes them: `ad:` + 8 lower-case hex digits (adler32), or `md5:`."""

from __future__ import annotations

import hashlib
import os
import zlib

BLOCK = 1 << 20


def adler32_of(path: str | os.PathLike) -> str:
    """Streamed in 1 MiB blocks: a 10 GB input never sits in memory."""
    value = 1
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            value = zlib.adler32(block, value)
    return f"ad:{value & 0xFFFFFFFF:08x}"


def md5_of(path: str | os.PathLike) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return f"md5:{digest.hexdigest()}"


def digest(path: str | os.PathLike) -> tuple[int, str]:
    return os.stat(path).st_size, adler32_of(path)


def same_checksum(expected: str | None, actual_path_or_value: str | os.PathLike) -> bool:
    """Does the file (a path) or checksum (an `ad:`/`md5:` text) match `expected`? None: nothing to check.
    Compared case-insensitively and without leading zeros' ambiguity (ad:abc == ad:00000abc)."""
    if not expected:
        return True
    kind, _, value = expected.strip().lower().partition(":")
    if kind not in ("ad", "md5") or not value:
        return False
    actual = str(actual_path_or_value)
    if not actual.lower().startswith(("ad:", "md5:")):
        actual = adler32_of(actual_path_or_value) if kind == "ad" else md5_of(actual_path_or_value)
    other_kind, _, other = actual.lower().partition(":")
    if other_kind != kind:
        return False
    return value.zfill(8) == other.zfill(8) if kind == "ad" else value == other
