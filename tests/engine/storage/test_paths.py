"""Replica paths: Rucio's deterministic layout, pinned to known md5 values."""

from __future__ import annotations

from pathlib import Path

import pytest

from jedictl.engine.storage.errors import NOSTORAGE, StorageError
from jedictl.engine.storage.paths import endpoint_root, layout_root, replica_path, replica_scope


@pytest.mark.parametrize(("scope", "dataset", "expected"), [
    ("mc23_13p6TeV", "user.alice.x", "mc23_13p6TeV"),  # the file's own scope wins
    (None, "user.alice.test.v1", "user.alice"),
    (None, "group.phys-higgs.ntup.v2", "group.phys-higgs"),
    (None, "mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.evgen.EVNT.e8514", "mc23_13p6TeV"),
    (None, "data24:data24.periodA.DAOD", "data24"),
    (None, "user", "user"),
    ("", None, "jedictl"),
    (None, None, "jedictl"),
])
def test_replica_scope_follows_rucio_extract_scope(scope, dataset, expected):
    assert replica_scope(scope, dataset) == expected


def test_replica_path_known_md5_examples():
    # md5("mc23_13p6TeV:EVNT.01._000001.pool.root.1") = 6945689e..., md5("user.alice:hits.root") = c32ec51c...
    assert replica_path("file:///srv/DATADISK", "mc23_13p6TeV", "EVNT.01._000001.pool.root.1") == \
        Path("/srv/DATADISK/mc23_13p6TeV/69/45/EVNT.01._000001.pool.root.1")
    assert replica_path("file:///srv/DATADISK", "user.alice", "hits.root") == Path("/srv/DATADISK/user/alice/c3/2e/hits.root")
    # group. scopes split too; other dotted scopes stay one directory
    assert replica_path("file:///d", "group.phys", "a.root").parts[2:4] == ("group", "phys")
    assert replica_path("file:///d", "mc23.x", "a.root").parts[2] == "mc23.x"


def test_endpoint_root():
    assert endpoint_root("file:///srv/data/DATADISK") == Path("/srv/data/DATADISK")
    assert endpoint_root("file://localhost/srv/data%20disk") == Path("/srv/data disk")
    for bad in ("https://host/x", "file://host/x", "file:relative/x", "/plain/path", "file:///x?y=1"):
        with pytest.raises(StorageError) as caught:
            endpoint_root(bad)
        assert caught.value.code == NOSTORAGE and bad in caught.value.diag


@pytest.mark.parametrize(("scope", "lfn"), [("mc23", "../etc/passwd"), ("mc23", ".."), ("mc23", ""), ("../x", "a.root"),
                                            ("user.", "a.root"), ("mc23", "a/b.root")])
def test_names_that_would_leave_the_root_have_no_path(scope, lfn):
    with pytest.raises(StorageError) as caught:
        replica_path("file:///srv/DATADISK", scope, lfn)
    assert caught.value.code == NOSTORAGE


@pytest.mark.parametrize("scope", ["user.alice", "group.phys", "mc23_13p6TeV", "user"])
def test_layout_root_finds_the_endpoint_root_back(scope):
    path = replica_path("file:///srv/x/DATADISK", scope, "f.1.root")
    assert layout_root(path) == Path("/srv/x/DATADISK")


def test_layout_root_of_a_path_outside_the_layout_is_none():
    assert layout_root(Path("/srv/x/mc23/00/00/f.1.root")) is None
    assert layout_root(Path("/f.root")) is None
