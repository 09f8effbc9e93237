"""The schedule of a periodic template, pure: intervals, cron expressions, the due time a pass acts on,
the missed ones, the cap, and the instance's document."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jedictl.engine.periodic.schedule import (
    Schedule, build_schedule, decide_cap, due, format_every, parse_cron, parse_every, render, stamp, template_name,
)
from jedictl.errors import BadInput

T0 = datetime(2026, 11, 27, 23, 10)


@pytest.mark.parametrize(("text", "minutes"), [("1m", 1), ("90m", 90), ("1h30m", 90), ("2h", 120), ("1d", 1440), ("1d2h3m", 1563),
                                               (" 15M ", 15), ("366d", 366 * 1440)])
def test_an_interval_is_days_hours_and_minutes(text, minutes):
    assert parse_every(text) == timedelta(minutes=minutes)
    assert parse_every(format_every(parse_every(text))) == parse_every(text)


@pytest.mark.parametrize(("text", "message"), [("", "not an interval"), ("30s", "not an interval"), ("1.5h", "not an interval"),
                                               ("0m", "at least 1m"), ("h", "not an interval"), ("367d", "longer than 366 days"),
                                               ("m1", "not an interval"), ("99999999999d", "longer than")])
def test_a_bad_interval_is_refused_naming_the_option(text, message):
    with pytest.raises(BadInput, match=message) as caught:
        parse_every(text)
    assert str(caught.value).startswith("--every: ")


def test_interval_due_times_run_from_the_start():
    schedule = Schedule(start=T0, every=timedelta(hours=1))
    assert schedule.at_or_after(T0 - timedelta(days=3)) == T0
    assert schedule.at_or_after(T0) == T0
    assert schedule.at_or_after(T0 + timedelta(minutes=1)) == T0 + timedelta(hours=1)
    assert schedule.after(T0) == T0 + timedelta(hours=1)
    assert schedule.at_or_before(T0 - timedelta(minutes=1)) is None
    assert schedule.at_or_before(T0 + timedelta(minutes=179)) == T0 + timedelta(hours=2)
    assert schedule.count(T0, T0 + timedelta(hours=3)) == 3  # [T0, T0+3h): T0, +1h, +2h
    assert schedule.count(T0 + timedelta(minutes=1), T0 + timedelta(hours=3, minutes=1)) == 3
    assert schedule.upcoming(T0 + timedelta(minutes=5), 2) == [T0 + timedelta(hours=1), T0 + timedelta(hours=2)]


@pytest.mark.parametrize(("text", "moment", "expected"), [
    ("*/15 * * * *", datetime(2026, 11, 27, 23, 1), datetime(2026, 11, 27, 23, 15)),
    ("*/15 * * * *", datetime(2026, 11, 27, 23, 15), datetime(2026, 11, 27, 23, 15)),
    ("*/15 * * * *", datetime(2026, 11, 27, 23, 59, 30), datetime(2026, 11, 28, 0, 0)),
    ("0 6 * * *", datetime(2026, 11, 27, 6, 0, 1), datetime(2026, 11, 28, 6, 0)),
    ("30 2 1 * *", datetime(2026, 12, 5), datetime(2027, 1, 1, 2, 30)),
    ("0 0 29 2 *", datetime(2026, 3, 1), datetime(2028, 2, 29)),  # the next 29 February
    ("0 12 * * 1-5", datetime(2026, 11, 28, 13), datetime(2026, 11, 30, 12)),  # Saturday -> Monday
    ("0 12 * * 7", datetime(2026, 11, 27), datetime(2026, 11, 29, 12)),  # 7 is Sunday, like 0
    ("0 0 13 * 5", datetime(2026, 11, 14), datetime(2026, 11, 20)),  # both days restricted: either matches (Friday the 20th)
    ("5,10-12,50-59/5 1 * 1,11 *", datetime(2026, 11, 27, 1, 11), datetime(2026, 11, 27, 1, 11)),
    ("5,10-12,50-59/5 1 * 1,11 *", datetime(2026, 11, 27, 1, 13), datetime(2026, 11, 27, 1, 50)),
])
def test_cron_finds_the_next_matching_minute(text, moment, expected):
    spec = parse_cron(text)
    assert spec.at_or_after(moment) == expected
    assert spec.at_or_before(expected + timedelta(seconds=59)) == expected


def test_cron_counts_its_minutes_between_two_times():
    spec = parse_cron("*/15 * * * *")
    assert spec.count(datetime(2026, 11, 27), datetime(2026, 11, 28)) == 96
    assert spec.count(datetime(2026, 11, 27, 23, 1), datetime(2026, 11, 28, 0, 31)) == 6  # 23:15 23:30 23:45 0:00 0:15 0:30
    assert spec.count(datetime(2026, 11, 27, 23, 15), datetime(2026, 11, 28, 0, 30)) == 5  # [23:15, 0:30)
    assert spec.count(datetime(2026, 11, 27, 0, 0), datetime(2026, 11, 27, 0, 0)) == 0
    weekly = parse_cron("0 12 * * 1")
    assert weekly.count(datetime(2026, 1, 1), datetime(2027, 1, 1)) == 52


@pytest.mark.parametrize(("text", "message"), [
    ("* * * *", "five fields"), ("60 * * * *", "outside 0-59"), ("* 24 * * *", "outside 0-23"), ("* * 0 * *", "outside 1-31"),
    ("* * * 13 *", "outside 1-12"), ("* * * * 8", "outside 0-7"), ("5-1 * * * *", "outside"), ("*/0 * * * *", "step"),
    ("@hourly * * * *", "write"), ("* * * JAN *", "write"), ("0 0 31 2 *", "never matches"), ("0 0 30 2 *", "never matches"),
])
def test_a_bad_cron_expression_is_refused_naming_the_option(text, message):
    with pytest.raises(BadInput, match=message) as caught:
        parse_cron(text)
    assert str(caught.value).startswith("--cron: ")


def test_a_schedule_is_an_interval_or_a_cron_expression_not_both():
    with pytest.raises(BadInput, match="give --every or --cron"):
        build_schedule("1h", "* * * * *", T0)
    with pytest.raises(BadInput, match="give --every or --cron"):
        build_schedule(None, None, T0)
    cron = build_schedule(None, "0 * * * *", datetime(2026, 11, 27, 23, 10))
    assert cron.at_or_after(datetime(2026, 1, 1)) == datetime(2026, 11, 28, 0, 0)  # never before the start
    assert cron.at_or_before(datetime(2026, 11, 27, 23, 50)) is None
    assert cron.text == "cron 0 * * * *" and build_schedule("90m", None, T0).text == "every 1h30m"


def test_a_pass_acts_on_the_latest_due_time_and_counts_the_missed_ones():
    schedule = Schedule(start=T0, every=timedelta(hours=1))
    assert due(schedule, T0, T0 - timedelta(seconds=1)) is None
    on_time = due(schedule, T0, T0 + timedelta(minutes=4))
    assert (on_time.at, on_time.missed, on_time.following) == (T0, 0, T0 + timedelta(hours=1))
    late = due(schedule, T0, T0 + timedelta(hours=3, minutes=20))  # nobody ran at +0h, +1h, +2h
    assert (late.at, late.missed, late.following) == (T0 + timedelta(hours=3), 3, T0 + timedelta(hours=4))
    cron = Schedule(start=T0, cron=parse_cron("*/15 * * * *"))
    behind = due(cron, datetime(2026, 11, 27, 23, 15), datetime(2026, 11, 28, 1, 7))
    assert (behind.at, behind.missed, behind.following) == (datetime(2026, 11, 28, 1, 0), 7, datetime(2026, 11, 28, 1, 15))


def test_at_the_cap_the_due_time_is_skipped():
    assert decide_cap(0, 1).instantiate and decide_cap(1, 2).instantiate
    full = decide_cap(2, 2)
    assert not full.instantiate and full.reason == "2 instances still active (max_active 2): this due time is skipped"
    assert not decide_cap(3, 2).instantiate


def test_the_instance_document_has_its_due_time_in_every_string():
    document = {"name": "hc.${DUE}", "outputs": [{"dataset": "hc.${DUE}.out", "offset": 3}], "no_input": True, "x": None}
    at = datetime(2026, 11, 27, 23, 0)
    assert stamp(at) == "20261127T2300"
    assert render(document, at) == {"name": "hc.20261127T2300", "outputs": [{"dataset": "hc.20261127T2300.out", "offset": 3}],
                                    "no_input": True, "x": None}
    assert document["name"] == "hc.${DUE}"  # the template is left as it was


@pytest.mark.parametrize(("task_name", "expected"), [("hc.test.ANALY_X.${DUE}", "hc.test.ANALY_X"), ("${DUE}_hc_x", "hc_x"),
                                                     ("a.${DUE}.b", "a.b"), ("hc${DUE}", "hc")])
def test_a_template_is_named_after_its_task_without_the_due_time(task_name, expected):
    assert template_name(task_name) == expected
