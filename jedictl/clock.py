"""Time in one place: naive UTC datetimes everywhere, and a clock that tests and replays can fix.

Naive UTC (no tzinfo) is stored the same way by SQLite (ISO text that sorts correctly) and PostgreSQL
(`timestamp without time zone`), so comparisons in SQL behave identically on both backends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC


#: Times a clock may be set to, and times executors may report: agents add and subtract days and years
#: from them, which near datetime's own limits (years 1 and 9999) overflows.
EARLIEST = datetime(1970, 1, 1)
LATEST = datetime(9000, 1, 1)


def in_range(moment: datetime) -> bool:
    return EARLIEST <= moment < LATEST


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def parse_time(text: str) -> datetime:
    """Parse an ISO-8601 time; an offset is converted to UTC, a naive time is taken as UTC."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        except OverflowError as exc:  # 0001-01-01T00:00+01:00 is before the first representable time
            raise ValueError(f"{text.strip()!r} is out of range") from exc
    return moment


@dataclass(frozen=True)
class Clock:
    """`now()` is the wall clock unless a fixed time was injected (`--now`, `JEDICTL_NOW`)."""

    fixed: datetime | None = None

    def now(self) -> datetime:
        return self.fixed if self.fixed is not None else utcnow()


@dataclass(frozen=True)
class PassClock:
    """A pass's time: `now`, frozen when the pass starts (every decision of the pass uses it), and
    `current()`, that moment moved on by the time the pass has run -- what a lease renewal counts from.

    Not the wall clock: under `--now T` (tests, replays) or a simulated clock (the demo, the chaos
    test's settling) the pass claimed its leases until T + lease. Renewing from `utcnow()` would move
    them to wall time -- years before or after T -- so processes on the same simulated time would see
    them expired at once or held for ever. T + elapsed is the wall time when T was, and otherwise lets
    the simulated time advance at the wall's pace; renewing from the frozen T alone (as before) let a
    pass longer than the lease lose its lease however often it renewed.
    """

    now: datetime
    started: float = field(default_factory=lambda: time.monotonic())

    def current(self) -> datetime:
        return self.now + timedelta(seconds=max(0.0, time.monotonic() - self.started))
