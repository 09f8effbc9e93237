"""What a job sent with a transfer waits for (engine.generate.input_transfers; docs/analysis.md): the
files its site lacks -- never a file on cvmfs, never a many-time input available there."""

from __future__ import annotations

from types import SimpleNamespace

from jedictl.engine.brokerage.model import ChunkInput, ManyTimeInput, SecondaryRecords, Site, StorageEndpoint
from jedictl.engine.generate.input_transfers import InputTransfer, cvmfs_lfns, input_transfers, one_time_lfns

SITES = {name: Site(name, read_endpoints=(f"{name}_DISK",), cvmfs=True) for name in ("A", "B")}
ENDPOINTS = {f"{name}_DISK": StorageEndpoint(f"{name}_DISK") for name in SITES}
MASTER = ["h1", "h2"]
READ = [SecondaryRecords("minbias", False, (("m1", 1, 1, "minbias"),)),  # one-time, consumed
        SecondaryRecords("pileup", True, (("p1", 1, 1, "pileup"), ("p2", 1, 1, "pileup"))),  # many-time on storage
        SecondaryRecords("dbr", True, (("d1", 1, 1, "dbr"),))]  # many-time on cvmfs
# The brokerage chunk: h1, h2, m1 -- m1 on cvmfs; the pile-up at A only, the DBRelease on cvmfs.
CHUNK = ChunkInput(file_sizes=(1, 1, 1), cvmfs_files=frozenset({2}),
                   many_time=(ManyTimeInput("pileup", 2, 2, frozenset({"A_DISK"})), ManyTimeInput("dbr", 1, 1, cvmfs=True)))


def candidate(site: str, local: set[int], many_time: set[str]) -> SimpleNamespace:
    return SimpleNamespace(site=site, local_disk_files=frozenset(local), many_time_held=frozenset(many_time))


def test_the_order_is_the_brokerage_chunk_s_and_cvmfs_files_are_known():
    assert one_time_lfns(MASTER, READ) == ["h1", "h2", "m1"]
    assert cvmfs_lfns(CHUNK, MASTER, READ) == frozenset({"m1", "d1"})


def test_a_transfer_site_has_its_local_files_cvmfs_and_the_many_time_inputs_available_there():
    brokerage = SimpleNamespace(transfer_sites=frozenset({"A", "B"}),
                                candidates=(candidate("A", {0}, {"pileup", "dbr"}), candidate("B", set(), {"dbr"})))
    found = input_transfers(brokerage, CHUNK, MASTER, READ, SITES, ENDPOINTS)
    assert found == {"A": InputTransfer("A_DISK", frozenset({"h1", "m1", "d1", "p1", "p2"})),
                     "B": InputTransfer("B_DISK", frozenset({"m1", "d1"}))}
    assert input_transfers(SimpleNamespace(transfer_sites=frozenset(), candidates=()), CHUNK, MASTER, READ, SITES, ENDPOINTS) == {}
