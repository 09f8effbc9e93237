"""The harvest policy: how many pilots (PanDA Harvester's pull-mode rule), what a batch state means for
a pilot's row, and when a site's pilots count as failing."""

from __future__ import annotations

import pytest

from jedictl.engine.harvest.policy import (
    ENDED,
    QUEUED,
    RUNNING,
    BatchView,
    EndedPilot,
    PilotView,
    SiteDemand,
    failing_streak,
    pilots_to_submit,
    reconcile,
)


@pytest.mark.parametrize("demand, limit, count, words", [
    (SiteDemand(activated=0, queued=0, running=0), None, 0, "no activated jobs"),
    (SiteDemand(activated=7, queued=0, running=0), None, 7, "7 queued pilots wanted"),
    (SiteDemand(activated=25, queued=0, running=0, jobs_per_pilot=10), None, 3, "= 3 queued"),  # ceil(25/10)
    (SiteDemand(activated=25, queued=2, running=5, jobs_per_pilot=10), None, 1, "2 queued"),  # only the difference
    (SiteDemand(activated=25, queued=3, running=0, jobs_per_pilot=10), None, 0, "already queued"),
    (SiteDemand(activated=100, queued=1, running=0, max_queued=4), None, 3, "capped by max_queued 4"),
    (SiteDemand(activated=100, queued=4, running=0, max_queued=4), None, 0, "4 queued pilots >= max_queued 4"),
    (SiteDemand(activated=100, queued=1, running=6, max_pilots=10), None, 3, "capped by max_pilots 10"),
    (SiteDemand(activated=100, queued=2, running=8, max_pilots=10), None, 0, ">= max_pilots 10"),
    # the site's own running-jobs cap: 8 jobs at 4 slots a pilot -> 2 pilots at most
    (SiteDemand(activated=100, queued=0, running=1, slots=4, site_max_running=8), None, 1, "max_pilots 2"),
    (SiteDemand(activated=100, queued=0, running=0), 5, 5, "--limit 5"),
    # a site turned off after failures gets one probe at a time, work or not
    (SiteDemand(activated=0, queued=0, running=0, probe=True), None, 1, "probe"),
    (SiteDemand(activated=50, queued=1, running=0, probe=True), None, 0, "probe pilot already live"),
])
def test_pilots_to_submit(demand, limit, count, words):
    decision = pilots_to_submit(demand, limit)
    assert decision.count == count
    assert words in decision.reason


def test_pilots_to_submit_never_exceeds_either_cap():
    for activated in range(0, 40, 3):
        for queued in range(6):
            for running in range(6):
                demand = SiteDemand(activated=activated, queued=queued, running=running, jobs_per_pilot=2, max_queued=4, max_pilots=8)
                n = pilots_to_submit(demand).count
                assert n >= 0
                assert queued + n <= max(4, queued)
                assert queued + running + n <= max(8, queued + running)
                assert queued + n <= max(-(-activated // 2), queued)  # no more queued than the jobs need


def pilot(state="submitted", batch_id="7", age=600.0, silent=None):
    return PilotView(id=1, state=state, batch_id=batch_id, age_s=age, silent_s=silent)


def verdict(p, view):
    return reconcile(p, view, grace_s=120, quiet_s=300)


def test_reconcile_leaves_live_pilots_alone():
    assert verdict(pilot(), BatchView(QUEUED)) is None
    assert verdict(pilot("running", silent=5000), BatchView(RUNNING)) is None


def test_reconcile_vanished_pilot_that_never_started_is_lost():
    assert verdict(pilot(), None).state == "lost"
    assert verdict(pilot(age=30), None) is None  # just submitted: the batch may not list it yet
    no_id = verdict(pilot(batch_id=None), None)
    assert no_id.state == "lost" and "never reached the batch system" in no_id.error
    assert verdict(pilot(batch_id=None, age=10), None) is None  # another pass is submitting it


def test_reconcile_ended_without_saying_so_is_failed_with_the_exit_code():
    result = verdict(pilot("running", silent=900), BatchView(ENDED, 137, "FAILED"))
    assert (result.state, result.exit_code) == ("failed", 137)
    assert "without the pilot saying it ended" in result.error
    assert verdict(pilot("running", silent=900), None).state == "failed"  # started, then vanished


def test_reconcile_cancelled_while_queued_is_cancelled():
    assert verdict(pilot(), BatchView(ENDED, 143, "CANCELLED")).state == "cancelled"
    assert verdict(pilot("running", silent=900), BatchView(ENDED, 143, "CANCELLED")).state == "failed"


def test_reconcile_trusts_a_pilot_that_still_beats():
    assert verdict(pilot("running", silent=10), BatchView(ENDED, 1, "FAILED")) is None
    assert verdict(pilot("running", silent=10), None) is None


def test_failing_streak():
    bad = EndedPilot("failed", 0, "sbatch not found")
    lost = EndedPilot("lost", 0)
    assert failing_streak([bad, lost, bad], 3) == "harvest: the last 3 pilots failed before taking work; last: sbatch not found"
    assert failing_streak([bad, lost], 3) is None  # not enough history yet
    assert failing_streak([bad, EndedPilot("failed", 2), bad], 3) is None  # one took work: the site works
    assert failing_streak([bad, EndedPilot("finished", 0), bad], 3) is None  # ended well without work
    assert failing_streak([EndedPilot("finished", 1), bad, bad, bad], 3) is None  # newest first
    assert failing_streak([bad, bad, bad], 0) is None  # off
