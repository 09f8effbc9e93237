"""adler32 and md5 of files, against zlib and hashlib, streamed in blocks."""

from __future__ import annotations

import hashlib
import os
import zlib

import pytest

from jedictl.engine.storage import checksums
from jedictl.engine.storage.checksums import adler32_of, digest, md5_of, parse_checksum, same_checksum


def test_adler32_of_a_multi_block_file_matches_zlib(tmp_path, monkeypatch):
    data = os.urandom(3 * checksums.BLOCK + 12345)  # several blocks and a partial last one
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    expected = f"ad:{zlib.adler32(data):08x}"
    assert adler32_of(path) == expected
    assert digest(path) == (len(data), expected)
    monkeypatch.setattr(checksums, "BLOCK", 4096)  # small blocks chain the running sum the same way
    assert adler32_of(path) == expected
    assert md5_of(path) == f"md5:{hashlib.md5(data).hexdigest()}"


def test_adler32_of_an_empty_file_is_1(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert adler32_of(path) == "ad:00000001" == f"ad:{zlib.adler32(b''):08x}"
    assert digest(path) == (0, "ad:00000001")


def test_leading_zeros_are_kept(tmp_path):
    path = tmp_path / "a"
    path.write_bytes(b"a")  # adler32 = 0x00620062
    assert adler32_of(path) == "ad:00620062"


def test_parse_and_compare_checksums(tmp_path):
    assert parse_checksum("AD:620062") == parse_checksum("ad:00620062") == parse_checksum("620062")
    assert str(parse_checksum("d41d8cd98f00b204e9800998ecf8427e")) == "md5:d41d8cd98f00b204e9800998ecf8427e"
    for bad in ("ad:xyz", "sha1:00", "md5:1234", "ad:123456789"):
        with pytest.raises(ValueError):
            parse_checksum(bad)
    path = tmp_path / "a"
    path.write_bytes(b"a")
    assert same_checksum(None, path)
    assert same_checksum("ad:620062", path) and not same_checksum("ad:620063", path)
    assert same_checksum("md5:0cc175b9c0f1b6a831c399e269772661", path)
    assert not same_checksum("md5:0cc175b9c0f1b6a831c399e269772662", path)
    assert same_checksum("ad:00620062", "AD:620062") and not same_checksum("ad:00620062", "md5:0cc175b9c0f1b6a831c399e269772661")
    assert not same_checksum("ad:00620062", "garbage")
