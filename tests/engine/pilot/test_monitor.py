"""Reading the payload tree's CPU and memory from /proc."""

from __future__ import annotations

import os
from types import SimpleNamespace

from jedictl.engine.pilot import monitor


def test_stat_lines_with_spaces_and_parentheses_in_the_name():
    text = "4242 (my (odd) prog) S 1 4242 4240 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 1 0 100 1000 200"
    line = monitor.parse_stat(text)
    assert (line.pid, line.session, line.cpu_ticks) == (4242, 4240, 150 + 50 + 7 + 3)


def test_rollup_gives_rss_and_pss_in_kb():
    text = "00400000-7fff [rollup]\nRss:              20480 kB\nPss:              10240 kB\nPss_Anon:  5 kB\nShared_Clean: 1 kB\n"
    assert monitor.parse_rollup(text) == (20480, 10240)


def test_a_sample_of_this_session_counts_this_process():
    current = monitor.sample(os.getsid(0))
    assert current.processes >= 1 and current.rss_kb > 1000 and current.cpu_s > 0


def test_peaks_keep_the_highest_and_take_the_rusage_cpu_as_a_floor():
    peaks = monitor.Peaks()
    peaks.add(monitor.Sample(1.0, 100, 80, 2))
    peaks.add(monitor.Sample(0.5, 300, 60, 3))
    assert (peaks.cpu_s, peaks.rss_kb, peaks.pss_kb) == (1.0, 300, 80)
    peaks.add_rusage(SimpleNamespace(ru_utime=2.0, ru_stime=0.5, ru_maxrss=900_000))  # maxrss: the pilot's, before exec
    assert (peaks.cpu_s, peaks.rss_kb, peaks.pss_kb) == (2.5, 300, 80)


def test_samples_start_soon_and_double_up_to_the_poll_interval():
    delays = monitor.sample_delays(1.0)
    assert [round(next(delays), 3) for _ in range(9)] == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]
