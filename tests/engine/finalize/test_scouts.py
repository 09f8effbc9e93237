"""Scout statistics and verdicts, with values worked out by hand from jedi-inventory.md §7.2."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from jedictl.config import ScoutSettings
from jedictl.engine.finalize.scouts import (
    MB,
    ScoutCounts,
    ScoutJob,
    ScoutRequest,
    ScoutThresholds,
    early_avalanche_due,
    evaluate,
    measure,
    percentile,
)

SETTINGS = ScoutSettings()
REQUEST = ScoutRequest(ram_count=2000, ram_unit="MBPerCore", base_ram_count=0, base_walltime=600, cpu_efficiency=90)
# 100 master files, 8 finished by the 4 scouts (2 files each), 10 released and used.
COUNTS = ScoutCounts(n_files=100, n_files_finished=8, n_files_used=10, n_jobs_ok=4)


def four_scouts() -> list[ScoutJob]:
    return [
        ScoutJob(1, input_bytes=1000 * MB, n_events=100, output_bytes=500 * MB, wall_time=7200, cpu_time=6000,
                 core_count=1, max_pss=1_500_000, core_power=10),
        ScoutJob(2, input_bytes=2000 * MB, n_events=200, output_bytes=800 * MB, wall_time=10800, cpu_time=9000,
                 core_count=1, max_pss=1_800_000, core_power=12),
        ScoutJob(3, input_bytes=1000 * MB, n_events=100, output_bytes=300 * MB, wall_time=3600, cpu_time=3000,
                 core_count=1, max_pss=1_200_000, core_power=10),
        ScoutJob(4, input_bytes=500 * MB, n_events=50, output_bytes=270 * MB, wall_time=1800, cpu_time=1700,
                 core_count=1, max_pss=2_000_000, core_power=8),
    ]


def test_percentile_interpolates_between_ranks():
    assert percentile([4, 1, 3, 2], 75) == (3.25, 3)
    assert percentile([10.0], 95) == (10.0, 0)
    assert percentile([1, 2, 3, 4, 5], 50) == (3.0, 2)


def test_statistics_of_four_scouts():
    stats, facts = measure(four_scouts(), REQUEST, SETTINGS)
    # output per input MB: ceil(bytes / MB of input) = 524288, 419431, 314573, 566232;
    # 75th percentile 524288 x 0.75 + 566232 x 0.25 = 534774 B per MB -> 522 kB
    assert (stats.out_disk_count, stats.out_disk_unit) == (522, "kB")
    # walltime: 1.5 x largest CPU consumption (9000 s) / largest input (2000 MB) = 6.75 -> 7
    assert (stats.walltime, stats.walltime_unit) == (7, "kSI2kseconds")
    # HS06 s per event = (wall - 600) x power x cores x 0.9 / events = 594, 550.8, 270, 172.8;
    # 95th percentile 550.8 x 0.15 + 594 x 0.85 = 587.52; x 1.5 = 881.28 -> 882
    assert (stats.cpu_time, stats.cpu_time_unit) == (882, "HS06sPerEvent")
    assert facts["cpu_time_exec"] == timedelta(seconds=7200)  # job 1 gave the upper rank
    # PSS per core 1.2/1.5/1.8/2.0 GB: 75th percentile 1 850 000 kB, +10 % = 2 035 000 kB -> 1987 MB
    assert (stats.ram_count, stats.ram_unit) == (1987, "MBPerCore")
    # (input kB + output kB) / wall / cores is largest for job 4: (512000 + 276480) / 1800 = 438.04 -> 439
    assert (stats.io_intensity, stats.io_intensity_unit) == (439, "kBPerS")
    # CPU efficiencies ceil(cpu / wall x 100) = 84, 84, 84, 95 -> median 84
    assert facts["median_efficiency"] == 84
    assert stats.work_disk_count is None


def test_four_good_scouts_are_scouted():
    result = evaluate(four_scouts(), REQUEST, COUNTS, SETTINGS)
    assert (result.outcome, result.reason) == ("scouted", None)
    # 100 files x 4 jobs / 8 finished files = 50 jobs in all, (100 - 10) x 4 / 8 = 45 still to come
    assert (result.expected_jobs, result.new_jobs) == (50, 45)
    assert result.statistics.columns() == {
        "walltime": 7, "walltime_unit": "kSI2kseconds", "cpu_time": 882, "cpu_time_unit": "HS06sPerEvent",
        "ram_count": 1987, "ram_unit": "MBPerCore", "out_disk_count": 522, "out_disk_unit": "kB",
        "io_intensity": 439, "io_intensity_unit": "kBPerS",
    }


def test_short_scouts_leave_walltime_at_zero_and_small_cpu_in_milli_hs06():
    job = ScoutJob(1, input_bytes=100 * MB, n_events=1000, wall_time=1200, cpu_time=1100, core_power=10)
    stats, _ = measure([job], ScoutRequest(base_walltime=600), SETTINGS)
    assert stats.walltime == 0  # the longest job consumed less than an hour
    # (1200 - 600) x 10 x 1 x 100 % / 1000 events = 6 HS06 s; x 1.5 = 9 < 10 -> 9000 mHS06 s
    assert (stats.cpu_time, stats.cpu_time_unit) == (9000, "mHS06sPerEvent")


def test_preset_walltime_wins_when_larger_and_fixed_units_are_kept():
    stats, _ = measure(four_scouts(), ScoutRequest(walltime=50, ram_unit="MBPerCoreFixed", cpu_time_unit="HS06sPerEventFixed",
                                                   out_disk_unit="kBFixed"), SETTINGS)
    assert stats.walltime == 50
    assert (stats.ram_count, stats.cpu_time, stats.out_disk_count) == (None, None, None)


def test_ram_count_per_core_takes_the_base_off_before_dividing_by_cores():
    """Seed 000 "Memory probe and brokerage": ramCount = (PSS - baseRamCount) / cores, so that brokerage's
    baseRamCount + ramCount x cores gives back the job's memory at any slot size; JEDI takes the 75th
    percentile of that over the scouts (SCOUT_RAMCOUNT_RANK) and adds 10 % (SCOUT_RAMCOUNT_MARGIN)."""
    jobs = [ScoutJob(1, input_bytes=MB, core_count=8, max_pss=9_500_000), ScoutJob(2, input_bytes=MB, core_count=8, max_pss=10_000_000)]
    per_core = ScoutRequest(ram_unit="MBPerCore", base_ram_count=1500)
    # (9 500 000 - 1500 x 1024) / 8 = 995 500 kB, (10 000 000 - 1 536 000) / 8 = 1 058 000 kB per core;
    # 75th percentile 995 500 x 0.25 + 1 058 000 x 0.75 = 1 042 375, +10 % = 1 146 612 kB -> 1119 MB per core
    assert (measure(jobs, per_core, SETTINGS)[0].ram_count, measure(jobs, per_core, SETTINGS)[0].ram_unit) == (1119, "MBPerCore")
    # without the base each core would carry an eighth of it: 1 234 375 kB, +10 % -> 1325 MB per core
    assert measure(jobs, ScoutRequest(ram_unit="MBPerCore", base_ram_count=0), SETTINGS)[0].ram_count == 1325
    # a whole-job unit (MB) keeps the base inside: 9 875 000 kB + 10 % -> 10 607 MB
    assert measure(jobs, ScoutRequest(ram_unit="MB", base_ram_count=1500), SETTINGS)[0].ram_count == 10607


def test_output_per_event_and_ram_per_job():
    stats, _ = measure(four_scouts(), ScoutRequest(out_disk_unit="kBPerEvent", ram_unit="MB"), SETTINGS)
    # bytes per event: 5242880, 4194304, 3145728, 5662311 (ceil); 75th percentile 5347737.75 -> /1024 = 5222 kB
    # ... capped at 10 MB (10240 kB) per unit: not reached
    assert (stats.out_disk_count, stats.out_disk_unit) == (5222, "kBPerEvent")
    assert (stats.ram_count, stats.ram_unit) == (1987, "MB")


def test_no_finished_scout_breaks_the_task():
    result = evaluate([], REQUEST, ScoutCounts(n_files=100, n_jobs_failed=10), SETTINGS)
    assert (result.outcome, result.reason) == ("tobroken", "no scout jobs succeeded")


def test_success_rate_below_scout_success_rate_breaks_the_task():
    counts = ScoutCounts(n_files=100, n_files_finished=4, n_files_used=10, n_jobs_ok=2, n_jobs_failed=3)
    request = ScoutRequest(scout_success_rate=5)
    result = evaluate(four_scouts()[:2], request, counts, SETTINGS)
    assert (result.outcome, result.reason, result.success_rate) == ("tobroken", "not enough scout jobs succeeded", 0.4)
    assert evaluate(four_scouts()[:2], ScoutRequest(scout_success_rate=4), counts, SETTINGS).outcome == "scouted"


def test_forced_avalanche_is_scouted_even_without_scouts():
    result = evaluate([], REQUEST, ScoutCounts(n_files=100), SETTINGS, forced=True)
    assert (result.outcome, result.reason) == ("scouted", "avalanche forced by command")


def long_scouts(cpu_time: float = 90_000) -> list[ScoutJob]:
    return [ScoutJob(i, input_bytes=1000 * MB, n_events=1000, wall_time=100_000, cpu_time=cpu_time, core_power=10) for i in (1, 2)]


LONG_COUNTS = ScoutCounts(n_files=100, n_files_finished=2, n_files_used=2, n_jobs_ok=2)  # 98 new jobs


@pytest.mark.parametrize("cpu_time,unit", [(500, "HS06sPerEvent"), (500_000, "mHS06sPerEvent")])
def test_cpu_time_twice_the_request_on_day_long_scouts_exhausts(cpu_time, unit):
    # (100000 - 600) x 10 x 0.9 / 1000 = 894.6 HS06 s/event, x 1.5 = 1341.9 > 2 x 500, and the scout ran 27.8 h
    request = ScoutRequest(cpu_time=cpu_time, cpu_time_unit=unit, base_walltime=600, cpu_efficiency=90)
    result = evaluate(long_scouts(), request, LONG_COUNTS, SETTINGS)
    assert result.outcome == "exhausted"
    assert result.reason.startswith("scout cpuTime (1341.9 HS06s/event) is larger than 2 x the requested cpuTime (500)")
    assert evaluate(long_scouts(), ScoutRequest(cpu_time=700, base_walltime=600, cpu_efficiency=90), LONG_COUNTS, SETTINGS).outcome == "scouted"


def test_exhausted_checks_need_more_than_twenty_new_jobs():
    request = ScoutRequest(cpu_time=500, base_walltime=600, cpu_efficiency=90)
    few = ScoutCounts(n_files=12, n_files_finished=2, n_files_used=2, n_jobs_ok=2)  # (12 - 2) x 2 / 2 = 10 new jobs
    assert evaluate(long_scouts(), request, few, SETTINGS).outcome == "scouted"
    assert evaluate(long_scouts(), request, LONG_COUNTS, SETTINGS, exhausted_checks=False).outcome == "scouted"


def test_ram_per_core_crossing_four_gb_exhausts():
    jobs = [ScoutJob(i, input_bytes=100 * MB, wall_time=3000, cpu_time=2900, max_pss=4_500_000, core_power=10) for i in (1, 2)]
    # 4 500 000 kB x 1.1 = 4 950 000 kB -> 4833 MB per core > 4000 while 3000 was requested
    result = evaluate(jobs, ScoutRequest(ram_count=3000, ram_unit="MBPerCore"), LONG_COUNTS, SETTINGS)
    assert result.outcome == "exhausted"
    assert result.reason == "scout ramCount 4833 MB per core is larger than 4000 MB while the requested 3000 MB is less"
    # a request already above the threshold is not a surprise
    assert evaluate(jobs, ScoutRequest(ram_count=5000, ram_unit="MBPerCore"), LONG_COUNTS, SETTINGS).outcome == "scouted"


def test_cpu_abuse_exhausts():
    jobs = [ScoutJob(1, input_bytes=100 * MB, wall_time=3600, cpu_time=8000, core_count=1, core_power=10)]
    result = evaluate(jobs, ScoutRequest(), ScoutCounts(n_files=100, n_files_finished=1, n_files_used=1, n_jobs_ok=1), SETTINGS)
    assert result.outcome == "exhausted"
    assert result.reason.startswith("CPU consumption 8000 s is larger than wall time x cores x 2 (3600 x 1 x 2)")


def test_low_cpu_efficiency_against_min_cpu_efficiency():
    request = ScoutRequest(ram_count=2000, ram_unit="MBPerCore", base_walltime=600, cpu_efficiency=90, min_cpu_efficiency=90)
    strict = ScoutThresholds(high_io_intensity=None)
    result = evaluate(four_scouts(), request, COUNTS, SETTINGS, thresholds=strict)
    assert (result.outcome, result.reason) == ("exhausted", "median CPU efficiency 84% is less than minCpuEfficiency 90%")
    # the scouts read 439 kB/s per core: IO-bound work is excused above 200 kB/s
    assert evaluate(four_scouts(), request, COUNTS, SETTINGS).outcome == "scouted"
    relaxed = ScoutRequest(ram_count=2000, ram_unit="MBPerCore", base_walltime=600, cpu_efficiency=90, min_cpu_efficiency=80)
    assert evaluate(four_scouts(), relaxed, COUNTS, SETTINGS, thresholds=strict).outcome == "scouted"


def test_cpu_inefficient_share_of_scouts_from_label_settings():
    thresholds = ScoutThresholds(low_cpu_efficiency=90, cpu_inefficient_tenths=7, cpu_inefficient_min_expected=40,
                                 high_io_intensity=None)
    # 3 of 4 scouts below 90 % (>= 7/10) and 50 jobs expected (> 40)
    result = evaluate(four_scouts(), REQUEST, COUNTS, SETTINGS, thresholds=thresholds)
    assert (result.outcome, result.reason) == ("exhausted", "3/4 scouts had a CPU efficiency below 90% and 50 jobs are expected")
    loose = ScoutThresholds(low_cpu_efficiency=90, cpu_inefficient_tenths=8, cpu_inefficient_min_expected=40, high_io_intensity=None)
    assert evaluate(four_scouts(), REQUEST, COUNTS, SETTINGS, thresholds=loose).outcome == "scouted"


def short_scouts() -> list[ScoutJob]:
    # 6 of 10 scouts ran 2 minutes, 4 ran 10 minutes
    return [ScoutJob(i, input_bytes=100 * MB, wall_time=120 if i <= 6 else 600) for i in range(1, 11)]


SHORT_COUNTS = ScoutCounts(n_files=10_000, n_files_finished=10, n_files_used=10, n_jobs_ok=10)  # 10 000 jobs expected
SHORT = ScoutThresholds(short_exec_minutes=4, short_job_tenths=5, short_job_min_expected=1000)


def test_many_short_jobs_exhaust_unless_full_size_jobs_would_be_long_enough():
    # without scouts the scouts' size is the real size: 6/10 >= 5/10 short and 10 000 >= 1000 jobs expected
    result = evaluate(short_scouts(), ScoutRequest(uses_scouts=False), SHORT_COUNTS, SETTINGS, thresholds=SHORT)
    assert (result.outcome, result.reason) == (
        "exhausted", "6/10 scout jobs ran shorter than 4 min and 10000 jobs are expected (at least 1000)")
    # scouts read 50 GB at most, later jobs 500 GB: 2 min x 10 = 20 min > 4 min, so no exhaustion
    assert evaluate(short_scouts(), ScoutRequest(), SHORT_COUNTS, SETTINGS, thresholds=SHORT).outcome == "scouted"
    few = ScoutCounts(n_files=500, n_files_finished=10, n_files_used=10, n_jobs_ok=10)  # 500 jobs expected
    assert evaluate(short_scouts(), ScoutRequest(uses_scouts=False), few, SETTINGS, thresholds=SHORT).outcome == "scouted"


def test_many_short_jobs_change_the_split_rule_when_allowed():
    thresholds = ScoutThresholds(short_exec_minutes=4, short_job_tenths=5, short_job_min_expected=1000, change_split_rule=True)
    request = ScoutRequest(uses_scouts=False, n_files_per_job=1, n_max_files_per_job=20)
    result = evaluate(short_scouts(), request, SHORT_COUNTS, SETTINGS, thresholds=thresholds)
    assert result.outcome == "scouted"
    assert result.split_rule_changes == {"n_files_per_job": None, "n_max_files_per_job": 200}


def test_jobs_forced_to_copy_to_scratch_are_excused():
    jobs = [ScoutJob(j.id, input_bytes=j.input_bytes, wall_time=j.wall_time, forced_copy_to_scratch=j.id <= 3)
            for j in short_scouts()]
    # 3 short jobs excused: 3 short of the 7 counted < 5/10
    assert evaluate(jobs, ScoutRequest(uses_scouts=False), SHORT_COUNTS, SETTINGS, thresholds=SHORT).outcome == "scouted"


def test_success_rate_between_the_lower_rate_and_the_request_exhausts():
    counts = ScoutCounts(n_files=100, n_files_finished=8, n_files_used=10, n_jobs_ok=6, n_jobs_failed=4)
    request = ScoutRequest(ram_count=2000, ram_unit="MBPerCore", base_walltime=600, cpu_efficiency=90, scout_success_rate=8)
    thresholds = ScoutThresholds(min_ok_rate_exhausted=5)
    result = evaluate(four_scouts(), request, counts, SETTINGS, thresholds=thresholds)
    assert (result.outcome, result.reason) == ("exhausted", "scout success rate 0.60 is below the requested 0.8")
    bad = ScoutCounts(n_files=100, n_files_finished=8, n_files_used=10, n_jobs_ok=4, n_jobs_failed=6)
    assert evaluate(four_scouts(), request, bad, SETTINGS, thresholds=thresholds).outcome == "tobroken"


@pytest.mark.parametrize("total,finished,assessed_minutes_ago,due", [
    (10, 5, None, True),
    (10, 4, None, False),
    (10, 10, 5, False),
    (10, 6, 10, True),
    (0, 0, None, False),
])
def test_early_avalanche_when_half_of_the_scouts_finished(total, finished, assessed_minutes_ago, due):
    now = datetime(2024, 5, 1, 12, 0)
    assessed = None if assessed_minutes_ago is None else now - timedelta(minutes=assessed_minutes_ago)
    assert early_avalanche_due(total, finished, assessed, now, SETTINGS) is due


# ------------------------------------------------------------------------------ tgtMaxOutputForNG

def _five_scouts(**extra) -> list[ScoutJob]:
    """Five scouts of 1 GiB input each writing k x 250 MiB (a 10 MiB log included): the 75th percentile
    of five ratios is exactly the fourth, so scout 4 -- not the one with the largest output -- sets
    outDiskCount. Scout 4's outputs: 990 MiB in two datasets of 660 and 330 MiB."""
    jobs = []
    for k in range(1, 6):
        total = (k * 250 - 10) * MB
        largest = 660 * MB if k == 4 else total
        jobs.append(ScoutJob(k, input_bytes=1024 * MB, n_events=1000, output_bytes=k * 250 * MB, output_file_bytes=total,
                             largest_output_bytes=largest, **extra))
    return jobs


def _target(jobs, request, thresholds=ScoutThresholds()):
    from jedictl.engine.finalize.scouts import target_n_gb_per_job

    stats, facts = measure(jobs, request, SETTINGS)
    return target_n_gb_per_job(jobs, request, stats, facts, thresholds), stats, facts


def test_tgt_max_output_for_ng_reads_the_scout_that_set_out_disk_count():
    value, stats, facts = _target(_five_scouts(), ScoutRequest(tgt_max_output_for_ng=5))
    assert facts["out_disk_job"] == 4 and stats.out_disk_count == 1000  # 1000 MiB per 1024 MB of input: 1000 kB per MB
    # its largest output reaching 5 GB means 990/660 x 5 GiB = 7.5 GiB of outputs, from 7.5 GiB / 1 024 000 B per MB
    # = 7864 MB of input; nGBPerJob = 7.5 GiB + 7864 MiB - the splitter's 1500 MiB default output = 13.7 -> 13
    assert value == 13
    # the default output is taken off because the splitter adds it on top of nGBPerJob (brokerage.default_output_size_mb)
    assert _target(_five_scouts(), ScoutRequest(tgt_max_output_for_ng=5), ScoutThresholds(default_output_mb=0))[0] == 15


def test_tgt_max_output_for_ng_per_event_adds_input_per_event_and_the_work_directory():
    request = ScoutRequest(tgt_max_output_for_ng=2, out_disk_unit="kBPerEvent", work_disk_count=200)
    value, stats, _ = _target(_five_scouts(), request)
    assert (stats.out_disk_count, stats.out_disk_unit) == (1024, "kBPerEvent")  # scout 4: 1000 MiB / 1000 events
    # 990/660 x 2 GiB = 3 GiB of outputs = 3072 events at 1 MiB each; their input 1 GiB x 3072/1000 = 3 298 534 883 B;
    # + 200 MB work directory - 1500 MiB default output = 5 156 611 555 B = 4.8 -> 4
    assert value == 4


def test_tgt_max_output_for_ng_bounds_and_when_it_says_nothing():
    tiny = [ScoutJob(1, input_bytes=MB, output_bytes=10 * MB, output_file_bytes=10 * MB, largest_output_bytes=10 * MB)]
    assert _target(tiny, ScoutRequest(tgt_max_output_for_ng=1))[0] == 1  # 1 GB of output from 102 MB: below 0 -> 1
    huge = [ScoutJob(1, input_bytes=1024 * MB, output_bytes=MB, output_file_bytes=MB, largest_output_bytes=MB)]
    assert _target(huge, ScoutRequest(tgt_max_output_for_ng=50))[0] == 100  # JEDI's maxNG
    assert _target(_five_scouts(), ScoutRequest())[0] is None  # no target
    assert _target(_five_scouts(), ScoutRequest(tgt_max_output_for_ng=5, out_disk_unit="kBFixed"))[0] is None  # no outDiskCount
    unknown = [dataclasses.replace(job, output_file_bytes=None, largest_output_bytes=None) for job in _five_scouts()]
    assert _target(unknown, ScoutRequest(tgt_max_output_for_ng=5))[0] is None  # sizes per dataset not read


def test_evaluate_writes_the_new_n_gb_per_job_unless_the_short_jobs_fix_drops_it():
    request = ScoutRequest(tgt_max_output_for_ng=5, n_gb_per_job=3)
    assert evaluate(_five_scouts(), request, COUNTS, SETTINGS).split_rule_changes == {"n_gb_per_job": 13}
    short = ScoutThresholds(short_exec_minutes=10, short_job_tenths=5, short_job_min_expected=1, change_split_rule=True)
    quick = _five_scouts(wall_time=60)
    counts = ScoutCounts(n_files=1000, n_files_finished=5, n_files_used=5, n_jobs_ok=5)
    assert evaluate(quick, request, counts, SETTINGS, thresholds=short).split_rule_changes == {"n_gb_per_job": None}
