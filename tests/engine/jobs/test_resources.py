"""What is written for each job (jedi-inventory §6.7, §6.8, §6.10): values computed by hand."""

from __future__ import annotations

import pytest

from jedictl.config import Settings
from jedictl.engine.jobs.resources import (
    ChunkFile,
    OutputTemplate,
    SeedRecord,
    SiteResources,
    TaskResources,
    allocate_output_names,
    assign_random_seeds,
    job_attempt_nr,
    job_core_count,
    job_max_attempt,
    job_max_disk_count,
    job_max_walltime,
    job_min_ram_count,
    job_priority,
    middle_name,
    output_file_name,
    plan_job_resources,
    retry_relations,
)
from jedictl.engine.task.templates import TemplateError, UnresolvedPlaceholder

MB = 1024 * 1024
GB = 1024 * MB
SETTINGS = Settings()
SITE8 = SiteResources("SITE8", core_count=8, core_power=10.0, max_walltime=86400, max_scratch_mb=20000)


def task(**values) -> TaskResources:
    return TaskResources(**{"current_priority": 500, **values})


# ---------------------------------------------------------------------------------------- attempts

def test_attempt_is_one_more_than_the_largest_master_attempt():
    files = [ChunkFile(attempt_nr=0), ChunkFile(attempt_nr=2), ChunkFile(attempt_nr=1),
             ChunkFile(attempt_nr=5, is_master=False)]
    assert job_attempt_nr(files) == 3
    assert job_attempt_nr([ChunkFile()]) == 1
    assert job_max_attempt(3) == 3  # executors never retry: JEDI regenerates
    assert job_max_attempt(3, disable_auto_retry=True) == -1


# -------------------------------------------------------------------------------------------- cores

@pytest.mark.parametrize("task_cores,site_cores,expected", [
    (1, 8, 1),  # single-core task stays single-core
    (8, 8, 8),
    (0, 8, 8),  # 0 = any: the site's
    (8, None, 1),  # single-core site
    (8, 0, 1),
    (4, -1, 4),  # dynamic site: the task's
    (0, -1, 1),
])
def test_core_count(task_cores, site_cores, expected):
    assert job_core_count(task(core_count=task_cores), SiteResources("S", core_count=site_cores)) == expected


def test_merge_jobs_use_merge_cores_or_one():
    assert job_core_count(task(core_count=8), SITE8, is_merge=True) == 1
    assert job_core_count(task(core_count=8, merge_core_count=4), SITE8, is_merge=True) == 4


# ---------------------------------------------------------------------------------------------- RAM

def test_min_ram_count_per_core_units():
    per_core = task(ram_count=2000, ram_unit="MBPerCore", base_ram_count=1000)
    assert job_min_ram_count(per_core, None, 8, False, 0.9) == 15300  # (2000 x 8 + 1000) x 0.9
    assert job_min_ram_count(per_core, 3000, 8, False, 0.9) == 22500  # a retried file needs 3000 per core
    assert job_min_ram_count(per_core, 1000, 8, False, 0.9) == 15300  # never below the task's


def test_min_ram_count_whole_job_units_and_merge_default():
    assert job_min_ram_count(task(ram_count=4000, ram_unit="MB", base_ram_count=1000), None, 8, False, 0.9) == 3600
    assert job_min_ram_count(task(ram_count=None), None, 1, False, 0.9) is None
    assert job_min_ram_count(task(ram_count=4000, ram_unit="MBPerCore"), None, 8, True, 0.9) == 2000
    assert job_min_ram_count(task(merge_ram_count=3000), None, 1, True, 0.9) == 3000


# ---------------------------------------------------------------------------------------- walltime

def test_walltime_from_cpu_time():
    hs06 = task(cpu_time=10, cpu_time_unit="HS06sPerEvent", cpu_efficiency=90, base_walltime=600)
    # 10 HS06 s x 1000 events / 8 cores / 10 HS06 / 0.9 + 600 = 138.9 + 600
    assert job_max_walltime(hs06, SITE8, 8, 1000) == (738, 738)
    milli = task(cpu_time=10000, cpu_time_unit="mHS06sPerEvent", cpu_efficiency=90, base_walltime=600)
    assert job_max_walltime(milli, SITE8, 8, 1000) == (738, 738)


def test_walltime_without_cpu_time_or_with_efficiency_zero():
    assert job_max_walltime(task(base_walltime=600), SITE8, 8, 1000) == (86400, 86400)
    assert job_max_walltime(task(cpu_time=10, cpu_efficiency=0, base_walltime=600), SITE8, 8, 1000) == (600, 600)
    assert job_max_walltime(task(base_walltime=600), SITE8, 8, 1000, is_merge=True) == (86400, 0)
    assert job_max_walltime(task(base_walltime=600), SITE8, 8, 1000, is_merge=True, merge_max_walltime_hours=2) == (7800, 7200)


# -------------------------------------------------------------------------------------------- disk

def test_disk_output_work_and_input():
    t = task(out_disk_count=0.5, out_disk_unit="B", work_disk_count=1000, work_disk_unit="MB")
    files = [ChunkFile(size=GB), ChunkFile(size=GB)]
    # 0.5 x 2048 MB output + (1000 + 300 margin) MB work + 2048 MB input
    assert job_max_disk_count(t, SITE8, files) == 1024 + 1300 + 2048
    assert job_max_disk_count(t, SITE8, files, direct_io=True) == 1024 + 1300
    assert job_max_disk_count(t, SiteResources("SMALL", max_scratch_mb=3000), files) == 3000


def test_disk_per_event_output_and_event_ranges():
    per_event = task(out_disk_count=100, out_disk_unit="kBPerEvent")
    files = [ChunkFile(size=2 * GB, n_events=1000)]
    assert job_max_disk_count(per_event, SITE8, files) == 97 + 2048  # 100 kB x 1000 events = 97.7 MB
    ratio = task(out_disk_count=1.0)
    quarter = [ChunkFile(size=GB, n_events=1000, start_event=0, end_event=249)]
    assert job_max_disk_count(ratio, SITE8, quarter) == 256 + 1024  # output scales with the range read


def test_merge_disk():
    files = [ChunkFile(size=500 * MB), ChunkFile(size=500 * MB)]
    assert job_max_disk_count(task(), SITE8, files, is_merge=True) == 1200 + 500 + 1000
    assert job_max_disk_count(task(work_disk_count=1000, work_disk_unit="MB"), SITE8, files, is_merge=True) == 1200 + 1300 + 1000


# -------------------------------------------------------------------------------------- priorities

@pytest.mark.parametrize("current,scout,merge,expected", [
    (500, False, False, 500),
    (500, True, False, 901),
    (900, True, False, 901),
    (950, True, False, 951),
    (950, False, True, 5000),
])
def test_priority(current, scout, merge, expected):
    assert job_priority(current, scout, merge, SETTINGS.brokerage.scout_priority_floor,
                        SETTINGS.generate.merge_priority) == expected


def test_plan_job_resources_for_a_scout():
    t = task(current_priority=800, core_count=8, ram_count=2000, ram_unit="MBPerCore", base_ram_count=1000,
             cpu_time=10, cpu_time_unit="HS06sPerEvent", cpu_efficiency=90, base_walltime=600,
             out_disk_count=0.5, work_disk_count=1000, work_disk_unit="MB")
    files = [ChunkFile(attempt_nr=1, size=GB, n_events=500), ChunkFile(attempt_nr=0, size=GB, n_events=500)]
    plan = plan_job_resources(t, SITE8, files, SETTINGS, is_scout=True)
    assert (plan.attempt_nr, plan.max_attempt, plan.core_count) == (2, 2, 8)
    assert plan.min_ram_count == 15300
    assert (plan.max_walltime, plan.max_cpu_count) == (738, 738)
    assert plan.max_disk_count == 1024 + 1300 + 2048
    assert (plan.assigned_priority, plan.current_priority) == (901, 901)


# ---------------------------------------------------------------------------------- output names

def test_output_file_names():
    assert output_file_name("EVNT.$JEDITASKID._${SN/P}.pool.root", 7, 4242) == "EVNT.4242._000007.pool.root"
    assert output_file_name("log.${JEDITASKID}.${SN}.tgz", 1234567, 1) == "log.1.1234567.tgz"
    assert output_file_name("x${MIDDLENAME}._${SN:08d}.root", 12, 1, ".data18") == "x.data18._00000012.root"
    with pytest.raises(UnresolvedPlaceholder, match=r"\$\{RNDMSEED\}"):
        output_file_name("x.${RNDMSEED}.${SN}", 1, 1)


def test_serials_are_consumed_in_lock_step_and_bounded():
    templates = [OutputTemplate(1, 10, "a.${SN}", 5, "OUTPUT0", "output"),
                 OutputTemplate(2, 11, "b.${SN}", 5, "LOG0", "log", max_serial_nr=6)]
    allocation = allocate_output_names(templates, 2, 1)
    assert [[n.lfn for n in job] for job in allocation.jobs] == [["a.000005", "b.000005"], ["a.000006", "b.000006"]]
    assert allocation.next_serial_nr == ((1, 7), (2, 7))
    with pytest.raises(TemplateError, match="no serial number left"):
        allocate_output_names(templates, 3, 1)


def test_middle_name():
    assert middle_name("mc23:mc23_13p6TeV.601229.PhPy8EG.simul.HITS.e8514_tid01234567_00", [2, 3]) == ".601229.PhPy8EG"
    assert middle_name("data.run", [5]) == ""
    assert middle_name("anything", []) == ""


# ----------------------------------------------------------------------------------- random seeds

def test_released_seeds_are_reused_lowest_first_then_new_ones():
    released = [SeedRecord(10, 7), SeedRecord(11, 3), SeedRecord(12, 5)]
    two = assign_random_seeds(2, released, max_value=9, offset=100)
    assert [(s.value, s.file_id, s.rndmseed) for s in two] == [(3, 11, 103), (5, 12, 105)]
    five = assign_random_seeds(5, released, max_value=9)
    assert [(s.value, s.file_id) for s in five] == [(3, 11), (5, 12), (7, 10), (10, None), (11, None)]


def test_first_seeds_of_a_task_and_the_seed_000_example():
    assert [s.value for s in assign_random_seeds(3, [], None)] == [1, 2, 3]
    # A job with seed 42 failed; its two files now go to two jobs: the first reuses 42, the other is new.
    retried = assign_random_seeds(2, [SeedRecord(99, 42)], max_value=57)
    assert [(s.value, s.file_id) for s in retried] == [(42, 99), (58, None)]


def test_retry_relations():
    rows = retry_relations(500, [100, None, 100, 101], origins={100: 7})
    assert [(r.old_job_id, r.new_job_id, r.relation_type, r.origin_job_id) for r in rows] == [
        (100, 500, "retry", 7), (101, 500, "retry", 101)]
    assert retry_relations(600, [200], is_merge=True)[0].relation_type == "merge"
