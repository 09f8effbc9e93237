"""Time in one place: naive UTC datetimes everywhere, and a clock that tests and replays can fix.

Naive UTC (no tzinfo) is stored the same way by SQLite (ISO text that sorts correctly) and PostgreSQL
(`timestamp without time zone`), so comparisons in SQL behave identically on both backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, UTC


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def parse_time(text: str) -> datetime:
    """Parse an ISO-8601 time; an offset is converted to UTC, a naive time is taken as UTC."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


@dataclass(frozen=True)
class Clock:
    """`now()` is the wall clock unless a fixed time was injected (`--now`, `JEDICTL_NOW`)."""

    fixed: datetime | None = None

    def now(self) -> datetime:
        return self.fixed if self.fixed is not None else utcnow()
