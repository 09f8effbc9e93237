"""When a periodic template is due, and what its instance is called (pure: no store, no clock).

A schedule is an interval (`--every 1h30m`) or a cron expression (`--cron "*/15 * * * *"`, five
numeric fields, UTC), both in whole minutes, never before the template's start. A pass that finds a
template due acts on the *latest* due time that has passed; earlier ones it finds behind it were
missed (no pass ran then) and are counted, not made up for. The cap on active instances is decided
here too: a due time that finds the cap reached is skipped, not deferred (docs/periodic-tasks.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from jedictl.clock import LATEST
from jedictl.errors import BadInput

#: The placeholder a template's strings use for its instance's due time (`${DUE}` -> 20261127T2300).
DUE = "${DUE}"
STAMP = "%Y%m%dT%H%M"
MINUTE = timedelta(minutes=1)
#: The longest interval (and the farthest a cron expression may look for its next minute): 8 years
#: covers every 29 February; an expression that matches no day in that span never matches.
LONGEST = timedelta(days=366)
_HORIZON_DAYS = 366 * 8
_EVERY_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?\Z")


def stamp(due_at: datetime) -> str:
    return due_at.strftime(STAMP)


def floor_minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def ceil_minute(moment: datetime) -> datetime:
    floor = floor_minute(moment)
    return floor if floor == moment else floor + MINUTE


def parse_every(text: str, path: str = "--every") -> timedelta:
    """`90m`, `1h30m`, `2h`, `1d`: a whole number of minutes, from 1 minute to 366 days."""
    match = _EVERY_RE.match(text.strip().lower()) if isinstance(text, str) else None
    if not match or not any(match.groups()):
        raise BadInput(f"{text!r} is not an interval: write days, hours and minutes as 1d, 2h, 30m or 1h30m", path)
    days, hours, minutes = (int(group or 0) for group in match.groups())
    if max(days, hours, minutes) > 10**6:
        raise BadInput(f"{text!r} is longer than {LONGEST.days} days", path)
    every = timedelta(days=days, hours=hours, minutes=minutes)
    if every < MINUTE:
        raise BadInput("must be at least 1m", path)
    if every > LONGEST:
        raise BadInput(f"{text!r} is longer than {LONGEST.days} days", path)
    return every


def format_every(every: timedelta) -> str:
    minutes = int(every.total_seconds()) // 60
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    return "".join(f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n) or "0m"


# ----------------------------------------------------------------------------------------------- cron

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_ITEM_RE = re.compile(r"^(\*|\d+(?:-\d+)?)(?:/(\d+))?\Z")


@dataclass(frozen=True)
class CronSpec:
    """Five cron fields as sets of values. As in Vixie cron, when both the day of month and the day of
    the week are restricted, a day matching either is a day to run; 0 and 7 are both Sunday."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is *
    any_weekday: bool  # day of week is *

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_day, by_weekday = day.day in self.days, (day.weekday() + 1) % 7 in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return by_weekday
        if self.any_weekday:
            return by_day
        return by_day or by_weekday

    def minutes_of_day(self) -> int:
        return len(self.hours) * len(self.minutes)

    def at_or_after(self, moment: datetime) -> datetime | None:
        """The first matching minute at or after `moment`, or None within the horizon."""
        start = ceil_minute(moment)
        day = start.date()
        for offset in range(_HORIZON_DAYS):
            current = day + timedelta(days=offset)
            if not self.day_matches(current):
                continue
            for hour in self.hours:
                for minute in self.minutes:
                    candidate = datetime(current.year, current.month, current.day, hour, minute)
                    if candidate >= start:
                        return candidate
        return None

    def at_or_before(self, moment: datetime) -> datetime | None:
        """The last matching minute at or before `moment`, or None within the horizon."""
        end = floor_minute(moment)
        day = end.date()
        for offset in range(_HORIZON_DAYS):
            current = day - timedelta(days=offset)
            if not self.day_matches(current):
                continue
            for hour in reversed(self.hours):
                for minute in reversed(self.minutes):
                    candidate = datetime(current.year, current.month, current.day, hour, minute)
                    if candidate <= end:
                        return candidate
        return None

    def count(self, low: datetime, high: datetime) -> int:
        """How many matching minutes lie in [low, high)."""
        if high <= low:
            return 0
        total, day = 0, low.date()
        while day <= high.date():
            if self.day_matches(day):
                midnight = datetime(day.year, day.month, day.day)
                if midnight >= low and midnight + timedelta(days=1) <= high:
                    total += self.minutes_of_day()
                else:
                    total += sum(1 for hour in self.hours for minute in self.minutes
                                 if low <= midnight + timedelta(hours=hour, minutes=minute) < high)
            day += timedelta(days=1)
        return total


def parse_cron(text: str, path: str = "--cron") -> CronSpec:
    """`m h dom mon dow`, each a list of `*`, `N`, `A-B`, with an optional `/STEP`; numbers only (no
    month or day names, no @hourly)."""
    parts = text.split() if isinstance(text, str) else []
    if len(parts) != 5:
        raise BadInput(f"{text!r} is not a cron expression: give five fields, minute hour day-of-month month day-of-week", path)
    values = [_field(part, name, low, high, path) for part, (name, low, high) in zip(parts, _FIELDS)]
    weekdays = frozenset(0 if day == 7 else day for day in values[4])
    spec = CronSpec(" ".join(parts), tuple(sorted(values[0])), tuple(sorted(values[1])), frozenset(values[2]), frozenset(values[3]),
                    weekdays, parts[2] == "*", parts[4] == "*")
    if spec.at_or_after(datetime(2000, 1, 1)) is None or not any(
            spec.day_matches(date(2000, 1, 1) + timedelta(days=offset)) for offset in range(_HORIZON_DAYS)):
        raise BadInput(f"{text!r} never matches a day of the calendar", path)
    return spec


def _field(text: str, name: str, low: int, high: int, path: str) -> set[int]:
    found: set[int] = set()
    for item in text.split(","):
        match = _ITEM_RE.match(item)
        if not match:
            raise BadInput(f"{name} {item!r}: write *, N, A-B or a list of them, with /STEP if needed", path)
        span, step_text = match.groups()
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = (int(n) for n in span.split("-"))
        else:
            first = int(span)
            last = high if step_text else first
        if not (low <= first <= high and low <= last <= high) or first > last:
            raise BadInput(f"{name} {item!r} is outside {low}-{high}", path)
        if not 1 <= step <= high:
            raise BadInput(f"{name} {item!r}: the step must be 1-{high}", path)
        found.update(range(first, last + 1, step))
    return found


# ------------------------------------------------------------------------------------------ schedules

@dataclass(frozen=True)
class Schedule:
    """Due times: `start + k * every` (k >= 0), or the cron expression's minutes from `start` on."""

    start: datetime
    every: timedelta | None = None
    cron: CronSpec | None = None

    def __post_init__(self) -> None:
        if (self.every is None) == (self.cron is None):
            raise ValueError("a schedule is an interval or a cron expression")

    @property
    def text(self) -> str:
        return f"every {format_every(self.every)}" if self.every is not None else f"cron {self.cron.text}"  # type: ignore[union-attr]

    def at_or_after(self, moment: datetime) -> datetime | None:
        """The first due time at or after `moment` (None past the clock's range)."""
        if self.every is not None:
            if moment <= self.start:
                found = self.start
            else:
                steps = -((self.start - moment) // self.every)  # ceil
                found = self.start + steps * self.every
        else:
            found = self.cron.at_or_after(max(moment, self.start))  # type: ignore[union-attr]
        return found if found is not None and found < LATEST else None

    def after(self, moment: datetime) -> datetime | None:
        """The first due time strictly after `moment`."""
        return self.at_or_after(floor_minute(moment) + MINUTE)

    def at_or_before(self, moment: datetime) -> datetime | None:
        """The last due time at or before `moment` (None before the start)."""
        if moment < self.start:
            return None
        if self.every is not None:
            return self.start + ((moment - self.start) // self.every) * self.every
        found = self.cron.at_or_before(moment)  # type: ignore[union-attr]
        return found if found is not None and found >= self.start else None

    def count(self, low: datetime, high: datetime) -> int:
        """How many due times lie in [low, high)."""
        if high <= low:
            return 0
        if self.every is not None:
            first = self.at_or_after(low)
            return 0 if first is None or first >= high else (high - first - timedelta(microseconds=1)) // self.every + 1
        return self.cron.count(max(low, self.start), high)  # type: ignore[union-attr]

    def upcoming(self, moment: datetime, n: int) -> list[datetime]:
        """The next `n` due times at or after `moment`."""
        found: list[datetime] = []
        current = self.at_or_after(moment)
        while current is not None and len(found) < n:
            found.append(current)
            current = self.after(current)
        return found


def build_schedule(every: str | None, cron: str | None, start: datetime) -> Schedule:
    """The schedule of `periodic add`: exactly one of --every and --cron."""
    if (every is None) == (cron is None):
        raise BadInput("give --every or --cron (one of them)", "--every")
    return Schedule(start=ceil_minute(start), every=parse_every(every) if every is not None else None,
                    cron=parse_cron(cron) if cron is not None else None)


def stored_schedule(start: datetime, every_minutes: int | None, cron: str | None) -> Schedule:
    """A template's schedule from its row."""
    return Schedule(start=start, every=timedelta(minutes=every_minutes) if every_minutes else None,
                    cron=parse_cron(cron, "cron") if cron else None)


@dataclass(frozen=True)
class Due:
    """What a pass does with a template whose next due time has passed: act on `at` (the latest due
    time not after now), count `missed` due times before it that no pass acted on, and wait for
    `following` next (None: the schedule has no further time in the clock's range)."""

    at: datetime
    missed: int
    following: datetime | None


def due(schedule: Schedule, next_due_at: datetime, now: datetime) -> Due | None:
    """None when `next_due_at` is still ahead of `now`."""
    if next_due_at > now:
        return None
    latest = schedule.at_or_before(now)
    at = next_due_at if latest is None or latest < next_due_at else latest
    return Due(at=at, missed=schedule.count(next_due_at, at), following=schedule.after(at))


@dataclass(frozen=True)
class CapDecision:
    instantiate: bool
    reason: str | None = None


def decide_cap(active: int, max_active: int) -> CapDecision:
    """An instance is made only while fewer than `max_active` instances are active (not in a final
    status). At the cap the due time is skipped, not deferred: the instance a periodic test would
    have made then measures nothing once late, and deferring would queue instances up behind a stuck
    one, to start back to back when it ends."""
    if active < max_active:
        return CapDecision(True)
    return CapDecision(False, f"{active} instance{'s' if active != 1 else ''} still active (max_active {max_active}): this due time is skipped")


# ------------------------------------------------------------------------------------------ instances

def render(document: Any, due_at: datetime) -> Any:
    """The template's document with `${DUE}` replaced by the due time's stamp in every string value."""
    if isinstance(document, str):
        return document.replace(DUE, stamp(due_at))
    if isinstance(document, list):
        return [render(item, due_at) for item in document]
    if isinstance(document, dict):
        return {key: render(value, due_at) for key, value in document.items()}
    return document


def template_name(task_name: str) -> str:
    """The default name of a template: its task name without `${DUE}` and the separators around it."""
    name = re.sub(r"[._\-:/+]*" + re.escape(DUE) + r"[._\-:/+]*", ".", task_name).strip("._-:/+")
    return re.sub(r"\.{2,}", ".", name)
