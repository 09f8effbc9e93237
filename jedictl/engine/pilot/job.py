"""One job, from its dispatch to an accepted report: work directory, stage-in, payload, stage-out, report.

The order makes the report atomic: outputs are written only for a payload that ended well, reported in
one `ingest_reports` call, and removed again unless that report was applied and left the job finished.
Whatever goes wrong before, the job is reported failed with the step's code; a job the server says is
already done is dropped without a report.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from jedictl.engine.jobs.outcomes import EndResult, ingest_reports, take_heartbeats
from jedictl.engine.jobs.reports import Heartbeat
from jedictl.engine.pilot import events as es_pilot
from jedictl.engine.pilot import monitor, staging
from jedictl.engine.pilot.codes import (
    GENERAL_ERROR,
    LOST_HEARTBEAT,
    MKDIR,
    SIGINT,
    SIGTERM,
    Failure,
    PilotError,
    exit_failure,
    walltime_failure,
)
from jedictl.engine.pilot.context import JobOutcome, PilotContext
from jedictl.engine.pilot.heartbeat import JobControl, act_on, is_store_outage
from jedictl.engine.pilot.payload import Process, container_argv, job_environment, payload_argv, stderr_tail
from jedictl.engine.pilot.report import Metrics, failed_report, finished_report
from jedictl.store import execution as execution_store

log = logging.getLogger("jedictl.pilot")
#: The longest the payload's own end may go unnoticed while a kill or a walltime is awaited.
WAKE_SECONDS = 0.25
#: How long a payload that died of a signal waits for the pilot's own handler before it counts as the
#: payload's failure: a batch system's cancel (scancel, a time limit) signals every process of the batch
#: job at once, and the payload's end may be seen before the pilot's handler (main thread) has run.
SIGNAL_SETTLE_SECONDS = 1.0


class JobLog:
    """The pilot's log of one job: into the job's log tarball, and to the pilot's own log."""

    def __init__(self, job_id: int):
        self.job_id = job_id
        self.path: Path | None = None

    def __call__(self, message: str, *args: Any) -> None:
        text = message % args if args else message
        log.info("job %s: %s", self.job_id, text)
        if self.path is not None:
            with open(self.path, "a") as handle:
                handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")


def run_job(ctx: PilotContext, payload: Mapping[str, Any]) -> JobOutcome:
    control = JobControl(payload)
    ctx.heartbeater.add(control)
    if ctx.stopping.is_set():  # dispatched just as the pilot was told to stop
        control.request_stop(ctx.stop_failure)
    try:
        return _run(ctx, payload, control)
    finally:
        ctx.heartbeater.remove(control)


def _run(ctx: PilotContext, payload: Mapping[str, Any], control: JobControl) -> JobOutcome:
    job_log = JobLog(payload["job_id"])
    workdir = ctx.workdir / f"job-{payload['job_id']}.{payload.get('attempt_nr')}"
    metrics = Metrics(started_at=ctx.now())
    staged: list[staging.StagedOut] = []
    failure: Failure | None = None
    try:
        workdir = _make_workdir(workdir)
        job_log.path = workdir / staging.PILOT_LOG
        job_log("dispatched to %s as attempt %s", ctx.site, payload.get("attempt_nr"))
        payload = staging.with_destinations(payload, ctx.write_endpoint)
        urls = _endpoint_urls(ctx, payload)
        roots, on_cvmfs = staging.stage_in(payload, workdir, urls, ctx.direct_io, ctx.settings.pilot.cvmfs_root)
        staged_in = sum(1 for i in payload.get("inputs", []) if i.get("type") not in staging.NOTHING_TO_STAGE and not i.get("cvmfs"))
        job_log("staged in %d input(s)%s", staged_in, " (symlinks: direct I/O)" if ctx.direct_io else "")
        if on_cvmfs:
            job_log("read %d input(s) in place from cvmfs (no stage-in)", on_cvmfs)
        argv = _argv(ctx, payload, workdir, roots)
        kind = payload.get("kind")
        if kind == "jumbo":
            # A jumbo job's ranges span the task's files, which the pilot would stage in range by range:
            # not done; the job fails at once and its ranges go back to their co-jumbo jobs.
            raise PilotError(GENERAL_ERROR, "jedictl pilot does not run jumbo jobs (docs/event-service.md)")
        merge_env = es_pilot.stage_in_premerged(ctx, payload, workdir) if kind == "esmerge" else None
        if not control.stopped:
            _beat_running(ctx, control)
        if not control.stopped and kind == "es":
            metrics, failure = es_pilot.run_ranges(ctx, payload, control, workdir, job_log,
                                                   lambda extra_env: _execute(ctx, payload, control, argv, workdir, job_log, extra_env))
            payload = {**payload, "outputs": []}  # an event-service job's outputs are its ES merge job's to write
        elif not control.stopped:
            metrics, failure = _execute(ctx, payload, control, argv, workdir, job_log, merge_env)
    except PilotError as exc:
        failure = exc.failure
        job_log("failed: %s %s: %s", failure.source, failure.code, failure.diag)
    except Exception as exc:  # noqa: BLE001 - a bug must still end the job, not leave it to the timeouts
        log.exception("job %s: pilot error", payload["job_id"])
        failure = Failure("pilot", GENERAL_ERROR, f"pilot error: {type(exc).__name__}: {exc}")
    if control.drop:
        job_log("dropped: the server says the job is already done")
        return JobOutcome(payload["job_id"], payload["task_job"], "dropped", reason="alreadydone")
    failure = control.failure or failure
    if failure is None:
        try:
            staged = staging.stage_out(payload, workdir, urls)
            job_log("staged out %s", ", ".join(f"{s.lfn} ({s.size} B, {s.checksum})" for s in staged))
        except PilotError as exc:
            failure = exc.failure
            job_log("stage-out failed: %s: %s", failure.code, failure.diag)
    if control.stopped:  # killed while its outputs were being written
        staging.undo(staged)
        staged = []
        if control.drop:
            return JobOutcome(payload["job_id"], payload["task_job"], "dropped", reason="alreadydone")
        failure = control.failure
    report = failed_report(payload, metrics, failure) if failure else finished_report(payload, metrics, staged)
    result = deliver(ctx, report, retry=not (failure and failure.code == LOST_HEARTBEAT))
    accepted = result is not None and result.outcome in ("applied", "duplicate")
    if staged and not (accepted and result.status == "finished"):
        staging.undo(staged)  # no accepted report: none of its outputs may stay behind
        job_log("report not accepted: outputs removed")
    if accepted and not ctx.keep_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    error = f"{failure.source}:{failure.code}" if failure else None
    if result is None:
        return JobOutcome(payload["job_id"], payload["task_job"], "unreported", error, "the store could not be reached", metrics.wall_time)
    if not accepted:
        return JobOutcome(payload["job_id"], payload["task_job"], "refused", error, result.reason, metrics.wall_time)
    return JobOutcome(payload["job_id"], payload["task_job"], result.status or "failed", error,
                      failure.diag if failure else None, metrics.wall_time)


def _make_workdir(path: Path) -> Path:
    try:
        if path.exists():  # left by a pilot that died on this very attempt
            shutil.rmtree(path)
        path.mkdir(parents=True)
    except OSError as exc:
        raise PilotError(MKDIR, f"Failed to create the work directory {path}: {exc.strerror or exc}") from exc
    return path


def _endpoint_urls(ctx: PilotContext, payload: Mapping[str, Any]) -> dict[str, str | None]:
    names = {e for item in payload.get("inputs", []) for e in item.get("replicas") or ()}
    names |= {item["destination"] for item in payload.get("outputs", []) if item.get("destination")}
    with ctx.store.read() as conn:
        return execution_store.endpoint_urls(conn, names)


def _argv(ctx: PilotContext, payload: Mapping[str, Any], workdir: Path, binds: list[str]) -> list[str]:
    argv = payload_argv(payload.get("transformation"), payload.get("job_parameters"))
    image = payload.get("container_name")
    if ctx.container_runtime and image:
        return container_argv(ctx.container_runtime, image, str(workdir), argv, binds)
    return argv


def _beat_running(ctx: PilotContext, control: JobControl) -> None:
    """`running` as the payload starts (the job's started_at); the reply may already say stop."""
    try:
        reply = take_heartbeats(ctx.store, [Heartbeat(None, control.job_id, "running", control.payload.get("attempt_nr"))], ctx.now())[0]
    except Exception as exc:
        if not is_store_outage(exc):
            raise
        control.status = "running"  # the heartbeat thread says it as soon as the store answers
        return
    control.status = "running"
    act_on(control, reply.command)


def _execute(ctx: PilotContext, payload: Mapping[str, Any], control: JobControl, argv: list[str], workdir: Path,
             job_log: JobLog, extra_env: Mapping[str, str] | None = None) -> tuple[Metrics, Failure | None]:
    """Run the payload to its end, a kill or its walltime, sampling its tree; its metrics and failure."""
    settings = ctx.settings.pilot
    started_at = ctx.now()
    job_log("starting %s", " ".join(argv))
    process = Process(argv, workdir, job_environment(payload, {**ctx.environ, **extra_env} if extra_env else ctx.environ))
    peaks = monitor.Peaks()
    delays = monitor.sample_delays(settings.poll_seconds)
    next_sample = process.started + next(delays)
    limit = float(payload.get("max_walltime") or 0)
    deadline = process.started + limit if limit > 0 else float("inf")
    failure: Failure | None = None
    while True:
        timeout = min(next_sample, deadline) - time.monotonic()
        if process.wait(min(max(timeout, 0.0), WAKE_SECONDS)):
            break
        if control.stopped:
            job_log("stopping the payload: %s", control.failure.diag if control.failure else "already done")
            process.stop(_grace(settings.kill_grace_seconds, control.failure))
            break
        if time.monotonic() >= deadline:
            failure = walltime_failure(limit)
            job_log("walltime of %g s reached: stopping the payload", limit)
            process.stop(settings.kill_grace_seconds)
            break
        if time.monotonic() >= next_sample:
            peaks.add(monitor.sample(process.pid))
            next_sample = time.monotonic() + next(delays)
    wall = time.monotonic() - process.started
    peaks.add_rusage(process.rusage)
    metrics = Metrics(wall_time=wall, cpu_time=peaks.cpu_s, max_rss=peaks.rss_kb, max_pss=peaks.pss_kb or None,
                      started_at=started_at, ended_at=ctx.now())
    job_log("payload ended: exit %s after %.3f s (cpu %.3f s, max RSS %d kB, max PSS %d kB)", process.exit_code, wall,
            peaks.cpu_s, peaks.rss_kb, peaks.pss_kb)
    if failure is None and not control.stopped and process.exit_code != 0:
        if _signalled(process.exit_code or 0) and ctx.stopping.wait(SIGNAL_SETTLE_SECONDS):
            # The pilot was signalled too: the same signal killed the payload, and the job's report says
            # why the pilot stopped (1201 / 1204), not how its payload died.
            failure = ctx.stop_failure
            job_log("payload ended by the signal that stops the pilot: %s", failure.diag if failure else "")
        else:
            failure = exit_failure(process.exit_code or 0, stderr_tail(workdir))
    return metrics, failure


def _signalled(exit_code: int) -> bool:
    """Killed by a signal (-N), or a shell's report of a child killed by one (128 + N)."""
    return exit_code < 0 or exit_code > 128


def _grace(configured: float, failure: Failure | None) -> float:
    """A pilot that is itself being terminated (scancel) has little time left before its own SIGKILL:
    it gives its payloads a short grace so that it can still report them."""
    if failure is not None and failure.code in (SIGINT, SIGTERM):
        return min(configured, 3.0)
    return configured


def deliver(ctx: PilotContext, report: Any, retry: bool = True) -> EndResult | None:
    """Report the job; while the store is unreachable try again (up to pilot.lost_heartbeat_seconds,
    when the server has long closed the job anyway); None when it never answered."""
    delay, deadline = 1.0, time.monotonic() + ctx.settings.pilot.lost_heartbeat_seconds
    while True:
        try:
            return ingest_reports(ctx.store, [report], ctx.settings, ctx.now())[0]
        except Exception as exc:
            if not is_store_outage(exc):
                raise
            if not retry or time.monotonic() + delay > deadline or ctx.stopping.is_set():
                log.error("job %s: the report could not be delivered: %s", report.job_id, str(exc).splitlines()[0])
                return None
            time.sleep(delay)
            delay = min(delay * 2, max(ctx.settings.pilot.heartbeat_seconds, 1.0))
