"""A task's job summary and its aggregate state by Ganga's master/subjob precedence (seed 003)."""

from __future__ import annotations

import pytest

from jedictl.engine.views.job_summary import (
    CATEGORY,
    aggregate_state,
    summarise,
    summarise_statuses,
)
from jedictl.model import JobStatus


def test_every_job_status_has_a_category():
    assert set(CATEGORY) == set(JobStatus)


@pytest.mark.parametrize("counts,state", [
    ({}, "new"),
    ({"activated": 1, "running": 2, "failed": 3, "finished": 4}, "submitted"),  # 1. anything waiting to run
    ({"throttled": 1, "finished": 4}, "submitted"),
    ({"running": 2, "failed": 3, "finished": 4, "cancelled": 1}, "running"),  # 2. else anything running
    ({"holding": 1, "finished": 4}, "running"),  # completing counts as running
    ({"sent": 1}, "running"),
    ({"failed": 1, "finished": 40, "closed": 2}, "failed"),  # 3. else any failure
    ({"finished": 40, "cancelled": 2}, "completed"),  # 4. else anything completed
    ({"cancelled": 2, "closed": 1}, "killed"),  # 5. else everything was killed
    ({"finished": 0, "cancelled": 1}, "killed"),  # zero counts are ignored
])
def test_aggregate_state_by_precedence(counts, state):
    assert aggregate_state(counts) == state


def test_summary_counts_in_job_status_order():
    summary = summarise({"finished": 5, "running": 3, "failed": 1, "defined": 0, "activated": 2})
    assert list(summary.counts.items()) == [("activated", 2), ("running", 3), ("finished", 5), ("failed", 1)]
    assert (summary.total, summary.state) == (11, "submitted")
    assert summary.as_dict() == {"state": "submitted", "total": 11,
                                 "by_status": {"activated": 2, "running": 3, "finished": 5, "failed": 1}}


def test_summary_from_statuses_keeps_unknown_ones_and_treats_them_as_unfinished():
    summary = summarise_statuses(["finished", "finished", "waiting"])
    assert dict(summary.counts) == {"finished": 2, "waiting": 1}
    assert summary.state == "running"
    assert summarise_statuses([]).state == "new"
