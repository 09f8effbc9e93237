"""Many-time inputs and cvmfs in the job brokerage, pure (seed 000 "Different treatment of input datasets",
"Dataset attributes: manytime, cvmfs"; engine.brokerage.{model,filters,job_brokerage,analysis,loading}).

A many-time input counts by availability at a site, never by its size as a transfer per job; a file on
cvmfs needs no replica and is never transferred, but only a site that mounts cvmfs can read it.
"""

from __future__ import annotations

from dataclasses import replace

from jedictl.config import BrokerageSettings
from jedictl.engine.brokerage.job_brokerage import broker_job_sites, runnable_sites
from jedictl.engine.brokerage.loading import SecondaryRecords, chunk_of
from jedictl.engine.brokerage.model import ChunkInput, ManyTimeInput
from tests.engine.brokerage.test_job_brokerage import TASK, catalog, make_site

GB = 1024 ** 3
SETTINGS = BrokerageSettings()
IO_HEAVY = replace(TASK, io_intensity=300.0)
USER = replace(TASK, prod_source_label="user", processing_type="panda-client-jedi-run", priority=1000)
SITES = [make_site("A", cvmfs=True), make_site("B", cvmfs=True), make_site("C")]
GRID = catalog(*SITES)
BOTH = {"A_DATADISK": frozenset(range(4)), "B_DATADISK": frozenset(range(4))}
PILEUP_AT_A = ManyTimeInput("pileup", n_files=20, total_bytes=60 * GB, endpoints=frozenset({"A_DATADISK"}))


def chunk(**extra) -> ChunkInput:
    return ChunkInput(file_sizes=(GB,) * 4, file_events=(100,) * 4, replicas=BOTH, **extra)


def fates(task, given: ChunkInput) -> dict:
    return {fate.name: fate for fate in broker_job_sites(task, given, GRID, {}, SETTINGS).trail}


def test_a_many_time_input_adds_nothing_to_the_input_to_move():
    """60 GB of pile-up at A only: as one-time files B would have to move them (and is dropped); as a
    many-time input B only needs it placed once, so B weighs what A weighs."""
    one_time = ChunkInput(file_sizes=(GB,) * 4 + (3 * GB,) * 20, file_events=(100,) * 24,
                          replicas={"A_DATADISK": frozenset(range(24)), "B_DATADISK": frozenset(range(4))})
    charged = fates(IO_HEAVY, one_time)
    assert charged["B"].rule == "input" and charged["B"].numbers["move_gb"] == 60.0
    available = fates(IO_HEAVY, chunk(many_time=(PILEUP_AT_A,)))
    assert available["B"].kept and available["B"].weight == available["A"].weight
    assert available["B"].numbers["files_to_move"] == 0 and available["B"].numbers["many_time_missing"] == 1
    assert available["B"].message.endswith("; many-time pileup to be placed here once")
    assert "many_time_missing" not in available["A"].numbers


def test_availability_decides_the_queue_measure_and_favours_nobody_when_no_candidate_has_it():
    from jedictl.engine.brokerage.model import JobCounts, SiteLoad

    waiting = SiteLoad(JobCounts(running=10, activated=2, assigned=8))
    result = broker_job_sites(IO_HEAVY, chunk(many_time=(PILEUP_AT_A,)), GRID, {"A": waiting, "B": waiting}, SETTINGS)
    weights = {fate.name: fate.weight for fate in result.trail}
    assert weights["A"] > weights["B"]  # B's jobs would wait for the placement: its assigned jobs count
    nowhere = replace(PILEUP_AT_A, endpoints=frozenset({"FAR_DATADISK"}))
    result = broker_job_sites(IO_HEAVY, chunk(many_time=(nowhere,)), GRID, {"A": waiting, "B": waiting}, SETTINGS)
    weights = {fate.name: fate.weight for fate in result.trail}
    assert weights["A"] == weights["B"] and all("many-time" not in fate.message for fate in result.trail)


def test_cvmfs_drops_the_sites_that_do_not_mount_it_also_for_the_task_broker():
    needs = chunk(cvmfs_datasets=("ddo.DBRelease",), many_time=(ManyTimeInput("ddo.DBRelease", 1, GB, cvmfs=True),))
    found = fates(TASK, needs)
    assert found["C"].rule == "cvmfs" and found["C"].numbers == {"cvmfs_datasets": "ddo.DBRelease", "site_cvmfs": False}
    assert found["A"].kept and found["B"].kept and "many-time" not in found["A"].message  # available wherever cvmfs is
    runnable, _ = runnable_sites(TASK, needs, GRID, {}, SETTINGS)
    assert runnable == frozenset({"A", "B"})
    assert fates(TASK, chunk())["C"].kept  # nothing on cvmfs: C is as good as the others


def test_a_pre_assigned_site_without_cvmfs_is_dropped_too():
    pinned = replace(TASK, site="C")
    found = fates(pinned, chunk(cvmfs_datasets=("ddo.DBRelease",)))
    assert found["C"].rule == "cvmfs"


def test_analysis_prefers_data_sites_with_the_many_time_input_and_else_places_it_once():
    found = fates(USER, chunk(many_time=(PILEUP_AT_A,)))
    assert found["A"].kept and found["B"].rule == "data_locality"
    assert found["B"].message == "data_locality: many-time input pileup not available here (A has the data and it)"
    nowhere = replace(PILEUP_AT_A, endpoints=frozenset())
    result = broker_job_sites(USER, chunk(many_time=(nowhere,)), GRID, {}, SETTINGS)
    assert {c.site for c in result.candidates} == {"A", "B"}  # the data sites, though neither has the pile-up
    assert result.transfer_sites == {"A", "B"}  # their jobs wait for the one placement of the pile-up
    assert result.placement.mode == "data"


def test_analysis_files_on_cvmfs_need_no_replica():
    """Two of four files are on cvmfs: a site holding the other two holds the data."""
    half = ChunkInput(file_sizes=(GB,) * 4, file_events=(100,) * 4, cvmfs_files=frozenset({2, 3}), cvmfs_datasets=("conf",),
                      replicas={"A_DATADISK": frozenset({0, 1})})
    result = broker_job_sites(USER, half, GRID, {}, SETTINGS)
    assert [c.site for c in result.candidates] == ["A"] and result.transfer_sites == frozenset()
    assert result.placement.notes["A"] == "holds the data (2 input files on disk)"
    everything = replace(half, cvmfs_files=frozenset(range(4)), replicas={})
    assert broker_job_sites(USER, everything, GRID, {}, SETTINGS).placement.mode == "unknown"  # nothing to follow


class _Catalog:
    """A data catalog of three datasets: hits (A and B), pile-up (complete at A, half at B), DBRelease (cvmfs)."""

    def replica_map(self, dataset, lfns):
        held = {"hits": {"A_DATADISK": set(lfns), "B_DATADISK": set(lfns)},
                "pileup": {"A_DATADISK": set(lfns), "B_DATADISK": set(sorted(lfns)[:1])}}
        return held.get(dataset, {})

    def cvmfs_map(self, dataset, lfns):
        return {lfn: f"/cvmfs/atlas.cern.ch/DBRelease/{lfn}" for lfn in lfns} if dataset == "dbr" else {}


def test_chunk_of_charges_one_time_secondaries_and_weighs_many_time_ones_by_availability():
    masters = [(f"h{i}", GB, 100, "hits") for i in range(2)]
    pileup = SecondaryRecords("pileup", True, tuple((f"p{i}", 3 * GB, 10, "pileup") for i in range(2)))
    minbias = SecondaryRecords("hits", False, (("m1", 5 * GB, 5, "hits"),))
    dbr = SecondaryRecords("dbr", True, (("d1", GB, None, "dbr"),))
    built = chunk_of(masters, _Catalog(), secondaries=[pileup, minbias, dbr], files_per_job=2)
    assert built.file_sizes == (GB, GB, 5 * GB)  # the masters, then the one-time secondary's file
    assert built.max_atom_bytes == 2 * GB  # one job's atom is made of master files only
    assert built.many_time == (ManyTimeInput("pileup", 2, 6 * GB, frozenset({"A_DATADISK"}), False),
                               ManyTimeInput("dbr", 1, GB, frozenset(), True))
    assert built.cvmfs_datasets == ("dbr",) and built.cvmfs_files == frozenset()
    one_time_dbr = chunk_of(masters, _Catalog(), secondaries=[replace(dbr, many_time=False)])
    assert one_time_dbr.cvmfs_files == frozenset({2}) and one_time_dbr.n_files_on_storage == 2
