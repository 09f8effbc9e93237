"""`jedictl data import --scan`: real files registered and placed at their replica paths, on both backends."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import pytest
import yaml

from jedictl.engine.storage.paths import replica_path

DATASET = "user.alice.scan.v1"


def dump_catalog(url: str) -> dict[str, list]:
    """Every row of the catalog tables (and the endpoints), for 'the store is unchanged' comparisons."""
    from sqlalchemy import select

    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import catalog_container_members, catalog_datasets, catalog_file_replicas, catalog_files, catalog_replicas, storage_endpoints

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return {table.name: sorted(map(repr, conn.execute(select(table)).all()))
                    for table in (catalog_datasets, catalog_files, catalog_replicas, catalog_file_replicas, catalog_container_members, storage_endpoints)}
    finally:
        engine.dispose()


@pytest.fixture
def disk(cli, store, tmp_path) -> Path:
    """Endpoints: LOCAL_DISK with a url (its root exists), NOURL_DISK catalog-only, GONE_DISK whose root is missing."""
    root = tmp_path / "DATADISK"
    root.mkdir()
    sites = tmp_path / "sites.yaml"
    sites.write_text(yaml.safe_dump({"storage_endpoints": [
        {"name": "LOCAL_DISK", "url": f"file://{root}"}, {"name": "NOURL_DISK"},
        {"name": "GONE_DISK", "url": f"file://{tmp_path / 'not-mounted'}"},
    ]}))
    cli("sites", "import", str(sites), db=store)
    return root


def make_files(directory: Path, names: dict[str, bytes]) -> None:
    for name, data in names.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def scan(cli, store, directory, *extra: str, code: int = 0):
    result = cli("data", "import", "--scan", str(directory), "--endpoint", "LOCAL_DISK", "--dataset", DATASET, *extra, "-o", "json", db=store, code=code)
    return json.loads(result.stdout) if code == 0 else result


def files_of(cli, store) -> dict[str, dict]:
    return {f["lfn"]: f for f in cli.json("data", "show", DATASET, "--files", db=store)["files"]}


def test_scan_registers_and_places_files_and_a_rescan_adds_only_new_ones(cli, store, disk, tmp_path):
    data = {"a.root": b"alpha" * 1000, "run1/b.root": os.urandom(70_000), "run1/deep/c.root": b""}
    make_files(tmp_path / "in", data)
    report = scan(cli, store, tmp_path / "in")
    assert (report["files_found"], report["files_added"], report["action"]) == (3, 3, "created")
    files = files_of(cli, store)
    for name, content in data.items():
        lfn = Path(name).name
        assert files[lfn]["size"] == len(content) and files[lfn]["checksum"] == f"ad:{zlib.adler32(content):08x}"
        assert files[lfn]["scope"] == "user.alice"
        assert replica_path(f"file://{disk}", "user.alice", lfn).read_bytes() == content
    assert (tmp_path / "in" / "a.root").exists()  # copy keeps the originals
    shown = cli.json("data", "show", DATASET, db=store)
    assert (shown["state"], shown["scope"], shown["replicas"]) == ("open", "user.alice", [{"endpoint": "LOCAL_DISK", "complete": True, "kind": "disk"}])

    placed = replica_path(f"file://{disk}", "user.alice", "a.root")
    stamp = placed.stat().st_mtime_ns
    make_files(tmp_path / "in", {"d.root": b"delta"})
    report = scan(cli, store, tmp_path / "in")
    assert (report["files_found"], report["files_known"], report["files_added"], report["bytes_added"]) == (4, 3, 1, 5)
    assert placed.stat().st_mtime_ns == stamp  # nothing re-copied
    assert scan(cli, store, tmp_path / "in")["files_added"] == 0
    assert sorted(files_of(cli, store)) == ["a.root", "b.root", "c.root", "d.root"]


def test_sidecar_fields_and_scope(cli, store, disk, tmp_path):
    make_files(tmp_path / "in", {"EVNT.1.root": b"1", "EVNT.2.root": b"22"})
    sidecar = tmp_path / "events.yaml"
    sidecar.write_text(yaml.safe_dump({"EVNT.1.root": {"events": 100, "guid": "A1B2", "run": 456, "lumi_blocks": [1, 2]},
                                       "EVNT.2.root": {"events": 50}}))
    scan(cli, store, tmp_path / "in", "--sidecar", str(sidecar), "--scope", "mc23_13p6TeV")
    files = files_of(cli, store)
    assert files["EVNT.1.root"] == {"lfn": "EVNT.1.root", "scope": "mc23_13p6TeV", "guid": "A1B2", "size": 1, "checksum": "ad:00320032",
                                         "events": 100, "run": 456, "lumi_blocks": [1, 2]}
    assert files["EVNT.2.root"]["events"] == 50
    assert replica_path(f"file://{disk}", "mc23_13p6TeV", "EVNT.2.root").read_bytes() == b"22"
    assert cli.json("data", "list", DATASET, db=store)[0]["n_events"] == 150


@pytest.mark.parametrize("transfer", ["move", "link"])
def test_move_and_link(cli, store, disk, tmp_path, transfer):
    make_files(tmp_path / "in", {"a.root": b"aaa", "b.root": b"bbbb"})
    assert scan(cli, store, tmp_path / "in", "--transfer", transfer)["files_added"] == 2
    dest = replica_path(f"file://{disk}", "user.alice", "a.root")
    assert dest.read_bytes() == b"aaa"
    if transfer == "move":
        assert list((tmp_path / "in").iterdir()) == []
    else:
        assert os.path.samefile(tmp_path / "in" / "a.root", dest)


def test_transfer_none_needs_the_files_at_their_paths(cli, store, disk, tmp_path):
    make_files(tmp_path / "in", {"a.root": b"aaa"})
    before = dump_catalog(store)
    result = scan(cli, store, tmp_path / "in", "--transfer", "none", code=2)
    assert "a.root is not at its replica path" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert dump_catalog(store) == before
    scan(cli, store, tmp_path / "in")  # copy them there, then a scan of the endpoint's own tree with none finds them
    other = "user.alice.other.v1"
    result = cli.json("data", "import", "--scan", str(disk), "--endpoint", "LOCAL_DISK", "--dataset", other, "--transfer", "none", db=store)
    assert result["files_added"] == 1


def bad_inputs(tmp_path: Path, disk: Path) -> list[tuple[str, list[str], str]]:
    make_files(tmp_path / "in", {"a.root": b"aaa", "x/b.root": b"b"})
    make_files(tmp_path / "dup", {"one/a.root": b"1", "two/a.root": b"2"})
    (tmp_path / "ghost.yaml").write_text(yaml.safe_dump({"nothere.root": {"events": 1}}))
    (tmp_path / "badfield.yaml").write_text(yaml.safe_dump({"a.root": {"events": -1}}))
    (tmp_path / "badsyntax.yaml").write_text("a.root: {events: 1\n")
    make_files(tmp_path / "badname", {"bad name.root": b"x"})
    IN = str(tmp_path / "in")
    return [
        ("missing dir", ["--scan", str(tmp_path / "nope"), "--endpoint", "LOCAL_DISK", "--dataset", DATASET], "is not a directory"),
        ("unknown endpoint", ["--scan", IN, "--endpoint", "MOON_DISK", "--dataset", DATASET], "storage endpoint MOON_DISK does not exist"),
        ("no url", ["--scan", IN, "--endpoint", "NOURL_DISK", "--dataset", DATASET], "storage endpoint NOURL_DISK has no url"),
        ("root missing", ["--scan", IN, "--endpoint", "GONE_DISK", "--dataset", DATASET], f"storage root {tmp_path / 'not-mounted'} does not exist"),
        ("duplicate names", ["--scan", str(tmp_path / "dup"), "--endpoint", "LOCAL_DISK", "--dataset", DATASET], "two files are named 'a.root'"),
        ("sidecar ghost", ["--scan", IN, "--endpoint", "LOCAL_DISK", "--dataset", DATASET, "--sidecar", str(tmp_path / "ghost.yaml")], "no file 'nothere.root'"),
        ("sidecar field", ["--scan", IN, "--endpoint", "LOCAL_DISK", "--dataset", DATASET, "--sidecar", str(tmp_path / "badfield.yaml")], "a.root.events: must be at least 0"),
        ("sidecar syntax", ["--scan", IN, "--endpoint", "LOCAL_DISK", "--dataset", DATASET, "--sidecar", str(tmp_path / "badsyntax.yaml")], "badsyntax.yaml: line"),
        ("bad file name", ["--scan", str(tmp_path / "badname"), "--endpoint", "LOCAL_DISK", "--dataset", DATASET], "bad name.root: file name must be"),
        ("bad dataset name", ["--scan", IN, "--endpoint", "LOCAL_DISK", "--dataset", "bad name"], "--dataset: dataset name must be"),
        ("bad transfer", ["--scan", IN, "--endpoint", "LOCAL_DISK", "--dataset", DATASET, "--transfer", "teleport"], "--transfer: must be one of"),
        ("no dataset", ["--scan", IN, "--endpoint", "LOCAL_DISK"], "--scan needs --dataset"),
        ("file and scan", [str(tmp_path / "ghost.yaml"), "--scan", IN, "--endpoint", "LOCAL_DISK", "--dataset", DATASET], "not both"),
        ("scan option alone", [str(tmp_path / "ghost.yaml"), "--endpoint", "LOCAL_DISK"], "--endpoint goes with --scan"),
    ]


def test_bad_input_is_one_line_and_changes_nothing(cli, store, disk, tmp_path):
    cases = bad_inputs(tmp_path, disk)
    before = dump_catalog(store)
    for name, args, message in cases:
        result = cli("data", "import", *args, db=store, code=2)
        assert message in result.stderr, (name, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, (name, result.stderr)
        assert dump_catalog(store) == before, name
    assert [p for p in disk.rglob("*") if p.is_file()] == []  # nothing was placed either


def test_a_closed_dataset_takes_no_new_files(cli, store, disk, tmp_path):
    make_files(tmp_path / "in", {"a.root": b"aaa"})
    scan(cli, store, tmp_path / "in")
    cli("data", "close", DATASET, db=store)
    assert scan(cli, store, tmp_path / "in")["files_added"] == 0  # nothing new: fine
    make_files(tmp_path / "in", {"b.root": b"b"})
    before = dump_catalog(store)
    result = scan(cli, store, tmp_path / "in", code=2)
    assert result.stderr.strip() == f"jedictl: error: dataset {DATASET} is closed: no files can be added"
    assert dump_catalog(store) == before
    assert not replica_path(f"file://{disk}", "user.alice", "b.root").exists()


def test_a_root_that_is_not_writable(cli, store, disk, tmp_path, monkeypatch):
    make_files(tmp_path / "in", {"a.root": b"aaa"})
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == disk else real_access(path, mode))  # tests run as root
    before = dump_catalog(store)
    result = scan(cli, store, tmp_path / "in", code=2)
    assert f"storage root {disk} is not writable" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert dump_catalog(store) == before


def test_a_failure_while_placing_registers_nothing_and_a_rerun_reuses_what_was_copied(cli, store, disk, tmp_path, monkeypatch):
    make_files(tmp_path / "in", {"a.root": b"aaa", "b.root": b"bbb", "c.root": b"ccc"})
    from jedictl.engine.storage import transfer

    real = transfer.stage_out
    copied = []

    def failing_third(source, dest, **kwargs):  # noqa: ANN001, ANN003
        if len(copied) == 2:
            raise transfer.StorageError(transfer.STAGEOUTFAILED, f"stage-out of {source} to {dest} failed: No space left on device")
        copied.append(dest)
        return real(source, dest, **kwargs)

    monkeypatch.setattr(transfer, "stage_out", failing_third)
    before = dump_catalog(store)
    result = scan(cli, store, tmp_path / "in", code=2)
    assert "No space left on device" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert dump_catalog(store) == before
    stamps = {dest: dest.stat().st_mtime_ns for dest in copied}
    monkeypatch.setattr(transfer, "stage_out", real)
    assert scan(cli, store, tmp_path / "in")["files_added"] == 3
    assert {dest: dest.stat().st_mtime_ns for dest in copied} == stamps  # the two copies were reused


def test_sites_endpoints_shows_the_url(cli, store, disk):
    rows = {r["name"]: r for r in cli.json("sites", "endpoints", db=store)}
    assert rows["LOCAL_DISK"]["url"] == f"file://{disk}" and rows["NOURL_DISK"]["url"] is None
    assert "url" in cli("sites", "endpoints", db=store).stdout.splitlines()[0]
