"""What each job must wait for before it can run where the brokerage put it (docs/analysis.md): per site
chosen without (all of) a chunk's input, the input files the site already has and the endpoint the
others are to be transferred to. Pure: decided from the brokerage's verdict and the chunk's records.

A file on cvmfs is never transferred: every candidate mounts cvmfs. A many-time input available at a
site (whole on a disk endpoint it reads, or on cvmfs) is held there whole; one that is not is placed
there once, so its files are awaited like any other missing input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jedictl.engine.brokerage.analysis import transfer_endpoint
from jedictl.engine.brokerage.model import ChunkInput, SecondaryRecords, Site, StorageEndpoint


@dataclass(frozen=True)
class InputTransfer:
    """A site chosen without (all of) the chunk's input (analysis brokerage): the input files it already
    has -- on a disk endpoint it reads, on cvmfs, or in a many-time input available there -- and the
    endpoint the others are to be transferred to. Its jobs that lack a file wait `assigned`; the missing
    files' job_files rows name the endpoint (`destination`)."""

    endpoint: str
    held: frozenset[str]  # LFNs the site has


def one_time_lfns(master_lfns: Sequence[str], read_by_jobs: Sequence[SecondaryRecords]) -> list[str]:
    """The brokerage chunk's file order (loading.chunk_of): the master's LFNs, then the one-time secondaries'."""
    return list(dict.fromkeys([*master_lfns, *(record[0] for secondary in read_by_jobs if not secondary.many_time
                                               for record in secondary.records)]))


def cvmfs_lfns(chunk: ChunkInput, master_lfns: Sequence[str], read_by_jobs: Sequence[SecondaryRecords]) -> frozenset[str]:
    """The chunk's inputs read from cvmfs: its one-time files on cvmfs and the files of its many-time inputs on cvmfs."""
    lfns = one_time_lfns(master_lfns, read_by_jobs)
    on_cvmfs = {item.name for item in chunk.many_time if item.cvmfs}
    return frozenset(lfns[i] for i in chunk.cvmfs_files).union(
        record[0] for secondary in read_by_jobs if secondary.name in on_cvmfs for record in secondary.records)


def input_transfers(brokerage: Any, chunk: ChunkInput, master_lfns: Sequence[str], read_by_jobs: Sequence[SecondaryRecords],
                    sites: Mapping[str, Site], endpoints: Mapping[str, StorageEndpoint]) -> dict[str, InputTransfer]:
    """Per transfer site of `brokerage` (a BrokerageResult): what it has and where the rest goes. A site that
    reads no endpoint reads its input remotely: nothing to wait for there."""
    if not brokerage.transfer_sites:
        return {}
    lfns = one_time_lfns(master_lfns, read_by_jobs)
    on_cvmfs = cvmfs_lfns(chunk, master_lfns, read_by_jobs)
    many_time = {secondary.name: frozenset(record[0] for record in secondary.records) for secondary in read_by_jobs if secondary.many_time}
    found = {}
    for candidate in brokerage.candidates:
        if candidate.site not in brokerage.transfer_sites:
            continue
        endpoint = transfer_endpoint(sites[candidate.site], endpoints)
        if endpoint is not None:
            held = frozenset(lfns[i] for i in candidate.local_disk_files).union(
                on_cvmfs, *(many_time.get(name, frozenset()) for name in candidate.many_time_held))
            found[candidate.site] = InputTransfer(endpoint, held)
    return found
