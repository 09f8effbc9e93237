"""File checksums as the catalog writes them: "ad:" + 8 lower-case hex digits of adler32 (what Rucio
and PanDA keep for every file) or "md5:" + 32 hex digits; files are read in 1 MiB blocks, so a 10 GB
file costs no memory."""

from __future__ import annotations

import hashlib
import os
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Union

BLOCK = 1 << 20  # 1 MiB: large enough that the per-call overhead vanishes, small enough for any pilot

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Checksum:
    """A parsed checksum: `algorithm` "ad" or "md5", `value` normalised lower-case hex (adler32 padded to 8)."""

    algorithm: str
    value: str

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.value}"


def parse_checksum(text: str) -> Checksum:
    """"ad:0A1B2C3D" / "md5:..." -> Checksum; a bare value is adler32 when it has at most 8 hex digits
    and md5 with 32 (PanDA's own files carry both forms). Anything else is a ValueError."""
    algorithm, sep, value = text.strip().partition(":")
    if not sep:
        algorithm, value = ("ad" if len(text.strip()) <= 8 else "md5"), text.strip()
    algorithm = algorithm.lower()
    value = value.lower()
    try:
        int(value, 16)
    except ValueError:
        raise ValueError(f"checksum {text!r} is not hexadecimal") from None
    if algorithm == "ad" and len(value) <= 8:
        return Checksum("ad", value.rjust(8, "0"))  # adler32 written without its leading zeros is the same sum
    if algorithm == "md5" and len(value) == 32:
        return Checksum("md5", value)
    raise ValueError(f"checksum {text!r} is neither ad:<8 hex digits> nor md5:<32 hex digits>")


def format_adler32(value: int) -> str:
    return f"ad:{value & 0xFFFFFFFF:08x}"


class Digester:
    """Size, adler32 and (when asked) md5 of a stream fed block by block: a copy computes the checksum
    of what it writes in the same pass instead of reading the file a second time."""

    def __init__(self, md5: bool = False):
        self.size = 0
        self._adler = 1  # adler32's initial value
        self._md5 = hashlib.md5() if md5 else None  # noqa: S324 - a file checksum, not security

    def update(self, block: bytes) -> None:
        self.size += len(block)
        self._adler = zlib.adler32(block, self._adler)
        if self._md5 is not None:
            self._md5.update(block)

    @property
    def adler32(self) -> str:
        return format_adler32(self._adler)

    @property
    def md5(self) -> str | None:
        return f"md5:{self._md5.hexdigest()}" if self._md5 is not None else None

    def matches(self, expected: Checksum) -> bool:
        actual = self.adler32 if expected.algorithm == "ad" else self.md5
        return actual is not None and parse_checksum(actual) == expected

    def feed(self, stream: BinaryIO) -> "Digester":
        while block := stream.read(BLOCK):
            self.update(block)
        return self


def digest(path: PathLike) -> tuple[int, str]:
    """(size, "ad:...") of a file, read once."""
    with open(path, "rb") as stream:
        result = Digester().feed(stream)
    return result.size, result.adler32


def adler32_of(path: PathLike) -> str:
    """"ad:0a1b2c3d" of a file."""
    return digest(path)[1]


def md5_of(path: PathLike) -> str:
    with open(path, "rb") as stream:
        return Digester(md5=True).feed(stream).md5 or ""


def same_checksum(expected: str | None, actual_path_or_value: "PathLike | str") -> bool:
    """Whether a file (an os.PathLike: its content is read) or a checksum value (a str) has the expected
    checksum; None expected: nothing to check, True. The comparison is by algorithm and number, so
    "ad:0000abcd", "ad:ABCD" and "abcd" are the same adler32. An expected value that is no checksum
    raises ValueError; a str actual of the other algorithm is not the same."""
    if expected is None:
        return True
    want = parse_checksum(expected)
    if isinstance(actual_path_or_value, str):
        try:
            return parse_checksum(actual_path_or_value) == want
        except ValueError:
            return False
    actual = adler32_of(actual_path_or_value) if want.algorithm == "ad" else md5_of(actual_path_or_value)
    return parse_checksum(actual) == want
