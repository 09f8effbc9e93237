"""Job throttling (JEDI) and site thresholds (WMCore).

References: seed 000 "Job throttling"; jedi-inventory.md §6.2 (JobThrottlerBase.toBeThrottledBase);
panda-server.md §3.7 (counts, limits, defaults, the high-priority exception, lack of jobs);
peers.md §1.5 and seed 002 (WMCore JobSubmitter thresholds and the 20 % priority overflow).
"""

from __future__ import annotations

import pytest

from jedictl.config import ThrottleSettings
from jedictl.engine.shares.throttler import (
    QueueCounts,
    QueueLimits,
    SiteThresholds,
    SiteUsage,
    ThrottleInput,
    resolve_limit,
    site_slot_decision,
    throttle_decision,
)

SETTINGS = ThrottleSettings()
NO_LIMITS = QueueLimits()


def decide(counts: QueueCounts, limits: QueueLimits = NO_LIMITS, **kw):
    return throttle_decision(ThrottleInput("evgensimul", "SCORE", kw.pop("label", "managed"), counts, limits, **kw),
                             SETTINGS)


@pytest.mark.parametrize("running,not_running,bunch,queue_limit,max_jobs", [
    # §3.7: bunch = clamp(running x 2.0 - notRunning, 500, 600); queue limit 4 x bunch; maxNumJobs bunch/2
    (100, 0, 500, 2000, 250),
    (280, 10, 550, 2200, 275),
    (1000, 500, 600, 2400, 300),
])
def test_bunch_size_and_queue_limit(running, not_running, bunch, queue_limit, max_jobs):
    decision = decide(QueueCounts(running=running, not_running=not_running))
    assert (decision.n_jobs_in_bunch, decision.queue_limit) == (bunch, queue_limit)
    assert decision.max_num_jobs >= max_jobs  # lack of jobs may raise it, never lower it


DECISIONS = [
    # (case, counts, limits, walltime, throttled, rule, max_num_jobs, lack_of_jobs)
    # seed 000: normal case, plenty queued relative to running -> PASS with bunch/2 jobs
    ("enough queued", QueueCounts(2000, 3000, 500), QueueLimits(), None, False, "unthrottled", 300, False),
    # §6.2: queued < 0.9 x queue limit -> lack of jobs, maxNumJobs = max(maxNumJobs, queueLimit/20)
    ("short queue", QueueCounts(100, 50), QueueLimits(), None, False, "lack_of_jobs", 250, True),
    # seed 000: "min queued limit and below 0.9*queue limit: max(queue limit/20, normal case)"
    ("configured limit", QueueCounts(100, 50), QueueLimits(queue_limit=10000), None, False, "lack_of_jobs", 500, True),
    # §6.2 b: queued/running > 2.0 and queued > queue limit -> merge only (level 5)
    ("queued over running", QueueCounts(1000, 2500), QueueLimits(), None, True, "queued_over_running", 0, False),
    # ... but not while the queue holds little work (total walltime <= 50 000 000 s)
    ("little work", QueueCounts(1000, 2500), QueueLimits(), 1e6, False, "unthrottled", 250, False),
    ("much work", QueueCounts(1000, 2500), QueueLimits(), 6e7, True, "queued_over_running", 0, False),
    # §6.2 a: nothing running and more queued than the limit
    ("nothing running", QueueCounts(0, 2500), QueueLimits(), None, True, "no_running", 0, False),
    ("nothing running, short", QueueCounts(0, 100), QueueLimits(), None, False, "lack_of_jobs", 250, True),
    # §6.2 c: defined > queue limit ("brokerage stuck")
    ("defined stuck", QueueCounts(2000, 0, 2500), QueueLimits(), None, True, "defined_stuck", 0, False),
    # §6.2 d: waiting > max(4 x running, 2 x bunch)
    ("too many waiting", QueueCounts(100, 1900, 0, 1500), QueueLimits(), None, True, "too_many_waiting", 0, False),
    # §6.2 e, f: running cap and queued cap
    ("running cap", QueueCounts(5000, 9000), QueueLimits(running_cap=4000), None, True, "running_cap", 0, False),
    ("queued cap", QueueCounts(1000, 1200), QueueLimits(queued_cap=1000), None, True, "queued_cap", 0, False),
    # seed 000: "A max queued cap exists: cap/5"
    ("cap sizes the pass", QueueCounts(1000, 2000), QueueLimits(queued_cap=5000), None, False, "unthrottled", 1000, False),
]


@pytest.mark.parametrize("case,counts,limits,walltime,throttled,rule,max_jobs,lack", DECISIONS,
                         ids=[case[0] for case in DECISIONS])
def test_decisions(case, counts, limits, walltime, throttled, rule, max_jobs, lack):
    decision = decide(counts, limits, total_walltime_s=walltime)
    assert (decision.throttled, decision.merge_only, decision.rule) == (throttled, throttled, rule), decision.message
    assert (decision.max_num_jobs, decision.lack_of_jobs) == (max_jobs, lack)
    assert decision.as_dict()["queued"] == counts.queued


HIGH_PRIORITY = [
    # §6.2: the highest waiting task priority beats the highest not-running job priority -> pass for >= it
    ("beats queued jobs", {"highest_waiting_priority": 900, "highest_queued_job_priority": 800}, False, 900),
    # ... or equals it while fewer than 500 jobs sit at that priority
    ("equal, few jobs", {"highest_waiting_priority": 800, "highest_queued_job_priority": 800,
                         "n_jobs_at_highest_priority": 100}, False, 800),
    ("equal, many jobs", {"highest_waiting_priority": 800, "highest_queued_job_priority": 800,
                          "n_jobs_at_highest_priority": 600}, True, None),
    ("lower", {"highest_waiting_priority": 700, "highest_queued_job_priority": 800}, True, None),
    # §3.7: not for user labels
    ("analysis", {"highest_waiting_priority": 900, "highest_queued_job_priority": 800, "label": "user"}, True, None),
]


@pytest.mark.parametrize("case,inputs,throttled,min_priority", HIGH_PRIORITY, ids=[c[0] for c in HIGH_PRIORITY])
def test_high_priority_exception(case, inputs, throttled, min_priority):
    decision = decide(QueueCounts(1000, 2500), **inputs)
    assert decision.throttled is throttled
    assert decision.min_priority == min_priority
    if not throttled:
        assert decision.rule == "high_priority" and decision.max_num_jobs == 250
        assert "queued/running 2500/1000 > 2" in decision.message


def test_the_running_cap_has_no_high_priority_exception():
    # panda-server §3.7: "every condition except the running cap lets the cycle pass"
    decision = decide(QueueCounts(5000, 20000), QueueLimits(running_cap=4000),
                      highest_waiting_priority=2000, highest_queued_job_priority=100)
    assert (decision.throttled, decision.rule) == (True, "running_cap")


def test_unthrottled_global_shares_are_never_throttled():
    # §6.2: global shares with throttled='N'
    decision = decide(QueueCounts(0, 100000), share_throttled=False)
    assert (decision.throttled, decision.rule, decision.max_num_jobs) == (False, "share_not_throttled", 250)


@pytest.mark.parametrize("config,expected", [
    # §6.2: looked up most specific first: queue_RT, queue_MCORE*/SCORE*, queue
    ({"NQUEUELIMIT_evgensimul_MCORE_HIMEM": 10, "NQUEUELIMIT_evgensimul_MCORE*": 20, "NQUEUELIMIT_evgensimul": 30}, (10, "rt")),
    ({"NQUEUELIMIT_evgensimul_MCORE*": 20, "NQUEUELIMIT_evgensimul": 30}, (20, "ms")),
    ({"NQUEUELIMIT_evgensimul_SCORE*": 20, "NQUEUELIMIT_evgensimul": 30}, (30, "gs")),
    ({}, (None, "gs")),
])
def test_limits_most_specific_first(config, expected):
    assert resolve_limit(config, "NQUEUELIMIT", "evgensimul", "MCORE_HIMEM") == expected


# ------------------------------------------------------------------------------------------- WMCore

THRESHOLDS = SiteThresholds("T2_CH_CERN", pending_slots=100, running_slots=1000,
                            type_pending_slots={"Production": 50, "Merge": 50},
                            type_running_slots={"Production": 500, "Merge": 500})


def usage(pending=0, running=0, type_pending=0, type_running=0, highest=10, job_type="Production", **kw):
    return SiteUsage(pending=pending, running=running, type_pending={job_type: type_pending},
                     type_running={job_type: type_running}, type_highest_priority={job_type: highest}, **kw)


SLOT_CASES = [
    # peers.md §1.5: the first of NoPendingSlot, NoTaskPendingSlot, NoRunningSlot, NoTaskRunningSlot that applies
    ("room", usage(40, 300, 20, 100), "Production", 5, True, "ok", 30),
    ("site pending full", usage(100, 300, 20, 100), "Production", 5, False, "NoPendingSlot", 0),
    ("type pending full", usage(60, 300, 50, 100), "Production", 5, False, "NoTaskPendingSlot", 0),
    ("site running full", usage(50, 950, 20, 100), "Production", 5, False, "NoRunningSlot", 0),
    ("type running full", usage(40, 300, 20, 480), "Production", 5, False, "NoTaskRunningSlot", 0),
    # priority overflow: a job beating everything there may exceed the pending limits by 20 % of the slots
    ("overflow", usage(100, 300, 40, 100), "Production", 20, True, "ok", 20),
    ("overflow from cycle start", usage(100, 300, 40, 100, pending_at_start=110), "Production", 20, True, "ok", 20),
    ("overflow exhausted", usage(120, 300, 40, 100), "Production", 20, False, "NoPendingSlot", 0),
    # ... but never for I/O-bound types (LogCollect, Merge, Cleanup, Harvesting)
    ("merge never overflows", usage(100, 300, 40, 100, job_type="Merge"), "Merge", 20, False, "NoPendingSlot", 0),
]


@pytest.mark.parametrize("case,site_usage,job_type,priority,allowed,rule,free", SLOT_CASES, ids=[c[0] for c in SLOT_CASES])
def test_wmcore_site_thresholds(case, site_usage, job_type, priority, allowed, rule, free):
    decision = site_slot_decision(THRESHOLDS, site_usage, job_type, priority, SETTINGS)
    assert (decision.allowed, decision.rule, decision.free) == (allowed, rule, free), decision.message


def test_overflow_limits_are_recorded():
    decision = site_slot_decision(THRESHOLDS, usage(100, 300, 40, 100, pending_at_start=110), "Production", 20, SETTINGS)
    assert decision.overflow and decision.pending_limit == pytest.approx(110 + 20) and decision.type_pending_limit == 60
    assert decision.running_limit == 1000 and decision.type_running_limit == 500


def test_zero_threshold_removes_the_site_and_rows_load():
    # peers.md §1.5: sites whose task-type threshold is 0 are removed
    # (a site's caps become thresholds in engine/brokerage/site_slots.thresholds_of)
    thresholds = SiteThresholds("SITE", pending_slots=10, running_slots=100, type_pending_slots={"managed": 5},
                                type_running_slots={"managed": 0})
    decision = site_slot_decision(thresholds, SiteUsage(), "managed", 1, SETTINGS)
    assert (decision.allowed, decision.rule) == (False, "ZeroThreshold")
    unlimited = site_slot_decision(SiteThresholds("FREE"), SiteUsage(pending=10**6), "managed", 1, SETTINGS)
    assert unlimited.allowed and unlimited.free > 10**6
