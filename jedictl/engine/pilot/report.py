"""The report of one job, from what the pilot measured and staged (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

from jedictl.engine.jobs.reports import MAX_MEMORY_KB, MAX_SECONDS, ExecutorReport
from jedictl.engine.jobs.results import OutputReport
from jedictl.engine.pilot.codes import Failure
from jedictl.engine.pilot.staging import StagedOut


@dataclass(frozen=True)
class Metrics:
    wall_time: float | None = None  # s, the payload's
    cpu_time: float | None = None  # s, user + system of the whole tree
    max_rss: int | None = None  # kB
    max_pss: int | None = None  # kB
    started_at: datetime | None = None
    ended_at: datetime | None = None


def _bounded(metrics: Metrics) -> dict[str, Any]:
    """The report's limits (jobs.reports) hold whatever /proc said."""
    def seconds(value: float | None) -> float | None:
        return None if value is None else round(min(max(value, 0.0), MAX_SECONDS), 3)

    def kb(value: int | None) -> int | None:
        return None if value is None else min(max(int(value), 0), MAX_MEMORY_KB)

    return dict(wall_time=seconds(metrics.wall_time), cpu_time=seconds(metrics.cpu_time), max_rss=kb(metrics.max_rss),
                max_pss=kb(metrics.max_pss), started_at=metrics.started_at, ended_at=metrics.ended_at)


def finished_report(payload: Mapping[str, Any], metrics: Metrics, staged: Sequence[StagedOut]) -> ExecutorReport:
    outputs = tuple(OutputReport(lfn=item.lfn, size=item.size, checksum=item.checksum) for item in staged)
    return ExecutorReport(line=0, job_id=payload["job_id"], status="finished", attempt_nr=payload.get("attempt_nr"),
                          trans_exit_code=0, outputs=outputs, **_bounded(metrics))


def failed_report(payload: Mapping[str, Any], metrics: Metrics, failure: Failure) -> ExecutorReport:
    return ExecutorReport(line=0, job_id=payload["job_id"], status="failed", attempt_nr=payload.get("attempt_nr"),
                          error_source=failure.source, error_code=failure.code, error_diag=failure.diag[:4000],
                          trans_exit_code=failure.trans_exit_code, **_bounded(metrics))
