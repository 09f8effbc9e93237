"""The throttle's job budget over a WMCore plan (engine.generate.wmcore_tasks.within_budget): the first
jobs, cut where no job left out reads a record a kept job holds."""

from __future__ import annotations

from types import SimpleNamespace

from jedictl.engine.generate.wmcore_tasks import WMCorePlan, within_budget


def _plan(records: list[tuple[int, ...]], references: set[tuple[int, int]]) -> WMCorePlan:
    """One plan entry per job, reading these record ids; `references`: (job index, record held earlier)."""
    entries = [("SITE", SimpleNamespace(master=tuple(SimpleNamespace(file_id=r) for r in ids))) for ids in records]
    return WMCorePlan(entries, [f"job{i}" for i in range(len(records))], [None] * len(records), references,
                      [()] * len(records))


def _kept(plan: WMCorePlan) -> list[str]:
    return list(plan.jobs)


# Jobs 0-1 share record 1 (job 1 reads the lumis of record 1 that job 0 does not), jobs 3-4 share record 4.
SHARED = _plan([(1,), (1, 2), (3,), (4,), (4, 5)], {(1, 1), (4, 4)})


def test_no_budget_or_a_budget_above_the_plan_keeps_it_whole():
    assert within_budget(SHARED, None) is SHARED and within_budget(SHARED, 5) is SHARED


def test_the_cut_is_the_largest_whole_one_within_the_budget():
    assert _kept(within_budget(SHARED, 4)) == ["job0", "job1", "job2"]  # 4 would part jobs 3 and 4: record 4
    assert _kept(within_budget(SHARED, 3)) == ["job0", "job1", "job2"]
    cut = within_budget(SHARED, 2)
    assert _kept(cut) == ["job0", "job1"] and cut.references == {(1, 1)} and len(cut.plan) == len(cut.failed) == len(cut.parents) == 2


def test_without_a_whole_cut_within_the_budget_the_shortest_one_past_it():
    assert _kept(within_budget(SHARED, 1)) == ["job0", "job1"]
    chained = _plan([(1,), (1, 2), (2,)], {(1, 1), (2, 2)})
    assert _kept(within_budget(chained, 1)) == ["job0", "job1", "job2"]
