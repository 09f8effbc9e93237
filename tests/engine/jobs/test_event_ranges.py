"""The event-service policy, pure (engine.jobs.event_ranges, engine.jobs.event_reports)."""

from __future__ import annotations

import pytest

from jedictl.engine.jobs import event_ranges as policy
from jedictl.engine.jobs.event_reports import EventReport, RangeState, decide, parse_event_report


def test_ranges_cover_a_record_exactly():
    assert policy.ranges_of(100, None, None, 30) == [(0, 29), (30, 59), (60, 89), (90, 99)]
    assert policy.ranges_of(None, 200, 249, 20) == [(200, 219), (220, 239), (240, 249)]  # a record with its own event range
    assert policy.ranges_of(None, None, None, 10) == [(0, 0)]  # events unknown: one range of one event
    assert policy.ranges_of(5, None, None, 100) == [(0, 4)]


def test_a_failure_uses_an_attempt_and_the_last_one_is_fatal():
    assert policy.after_report("failed", 0, 3) == ("failed", 1)
    assert policy.after_report("failed", 2, 3) == ("fatal", 3)
    assert policy.after_report("finished", 1, 3) == ("finished", 1)


@pytest.mark.parametrize("ending, counts, retryable, expected", [
    ("finished", {"done": 4}, True, ("merging", "es_merge", "merge", False)),
    ("finished", {"done": 2, "ready": 2}, True, ("closed", "es_retry", "retry", False)),
    ("failed", {"ready": 4}, True, ("failed", "es_inaction", "retry", False)),
    ("finished", {"done": 2, "ready": 2}, False, ("merging", "es_merge", "merge", True)),  # out of attempts: merge what was done
    ("finished", {"fatal": 4}, True, ("failed", "es_fatal", "failed", False)),
    ("failed", {"ready": 1, "fatal": 3}, False, ("failed", "es_fatal", "failed", True)),
    ("cancelled", {"discarded": 4}, True, ("cancelled", "es_aborted", "failed", False)),
])
def test_how_an_event_service_job_ends(ending, counts, retryable, expected):
    assert tuple(policy.end_es_job(ending, counts, retryable)) == expected


def test_how_an_es_merge_job_ends():
    assert policy.end_merge_job("finished", 1, {"done": 4}) == ("finished", None, "finished", "merged", False)
    assert policy.end_merge_job("finished", 1, {"done": 3, "fatal": 1}).record == "partial"
    assert policy.end_merge_job("failed", 1, {"done": 4}).retry_merge
    assert policy.end_merge_job("failed", 3, {"done": 4}) == ("failed", "es_merge_failed", "failed", "discarded", False)
    assert not policy.end_merge_job("cancelled", 1, {"done": 4}).retry_merge  # a person's kill is not retried


def test_range_reports_are_parsed_strictly():
    report = parse_event_report({"eventRangeID": 3, "PandaID": 7, "eventStatus": "failed", "errorCode": 1220}, 1)
    assert (report.event_id, report.job_id, report.status, report.error_code) == (3, 7, "failed", 1220)
    for bad, reason in (({"event_id": 1, "job_id": 1}, "status is required"), ({"event_id": 1, "job_id": 1, "status": "done"}, "status must be"),
                        ({"event_id": "1", "job_id": 1, "status": "running"}, "must be an integer"),
                        ({"event_id": 1, "job_id": 1, "status": "running", "colour": 1}, "unknown key")):
        with pytest.raises(ValueError, match=reason):
            parse_event_report(bad, 1)


def test_the_guards_of_a_range_report():
    sent = RangeState(7, "sent", 0, 2)
    job = ("running", "es", 1)
    report = EventReport(1, 3, 7, "finished")
    assert decide(report, sent, job).state == RangeState(7, "finished", 0, 2)
    assert decide(report, RangeState(7, "finished", 0, 2), job).outcome == "duplicate"
    assert decide(report, RangeState(8, "sent", 0, 2), job).outcome == "refused"  # another job holds it
    assert decide(report, RangeState(7, "ready", 0, 2), job).outcome == "refused"  # never handed out
    assert decide(report, sent, ("finished", "es", 1)).outcome == "refused"  # its job ended
    assert decide(report._replace(attempt_nr=2), sent, job).outcome == "refused"
    assert decide(report._replace(status="failed"), RangeState(7, "running", 1, 2), job).state.status == "fatal"
    assert decide(report._replace(status="failed"), RangeState(7, "finished", 0, 2), job).outcome == "refused"
