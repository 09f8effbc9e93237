"""The pilot: K slots, each a thread that takes one job at a time with the dispatch contract and drives
its payload, until the pilot has taken its `--jobs` or (with --once) finds no work.

The pilots row (JEDICTL_PILOT_ID, written by `jedictl harvest`) says when the pilot started, beats with
the heartbeat thread and says how it ended. SIGTERM or SIGINT (scancel, Ctrl-C) stops every payload,
reports its job failed (1201 / 1204) and ends the row `cancelled`. SIGKILL loses nothing either: the
jobs stay `sent`/`running` without heartbeats until `jedictl watch` closes them and their inputs are
retried.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from jedictl.engine.agent import PassReport
from jedictl.engine.jobs.dispatcher import DispatchRequest, dispatch_jobs
from jedictl.engine.pilot.codes import signal_failure
from jedictl.engine.pilot.context import JobOutcome, PilotContext
from jedictl.engine.pilot.heartbeat import Heartbeater, is_store_outage
from jedictl.errors import BadInput, NotFound
from jedictl.store import execution as execution_store
from jedictl.store import pilots as pilot_store

log = logging.getLogger("jedictl.pilot")


@dataclass(frozen=True)
class PilotOptions:
    site: str
    jobs: int | None = None  # jobs to take in all; None: no limit
    once: bool = False  # exit when no job is available instead of waiting
    slots: int = 1
    workdir: Path | None = None
    keep_workdir: bool = False
    executor: str | None = None
    pilot_id: int | None = None


def executor_name(pilot_id: int | None, host: str, pid: int, slot: int, base: str | None = None) -> str:
    """`pilot-<id or 0>@<host>:<pid>/slot<k>`: which pilot process, on which machine, ran the job."""
    return f"{base or f'pilot-{pilot_id or 0}@{host}:{pid}'}/slot{slot}"


def default_jobs(once: bool, jobs: int | None, slots: int) -> int | None:
    """--once without --jobs takes one job per slot (the harvest's one-shot pilot); without --once, no limit."""
    if jobs is not None:
        return jobs
    return slots if once else None


class Budget:
    """The jobs the pilot may still take, shared by its slots."""

    def __init__(self, total: int | None):
        self.left = total
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.left is None:
                return True
            if self.left <= 0:
                return False
            self.left -= 1
            return True

    def give_back(self) -> None:
        with self._lock:
            if self.left is not None:
                self.left += 1


class Pilot:
    def __init__(self, store: Any, settings: Any, now: Callable[[], Any], options: PilotOptions, environ: dict[str, str] | None = None):
        if options.slots < 1:
            raise BadInput("must be at least 1", "--slots")
        if options.jobs is not None and options.jobs < 1:
            raise BadInput("must be at least 1", "--jobs")
        self.store, self.settings, self.now, self.options = store, settings, now, options
        self.environ = dict(os.environ if environ is None else environ)
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.budget = Budget(default_jobs(options.once, options.jobs, options.slots))
        self.outcomes: list[JobOutcome] = []
        self._lock = threading.Lock()
        self.signal_name: str | None = None
        self.rng = random.Random()
        with store.read() as conn:
            site = execution_store.site_execution(conn, options.site)
            write_endpoint = execution_store.site_write_endpoint(conn, options.site)
        if site is None:
            raise NotFound(f"unknown site {options.site}")
        self.heartbeater = Heartbeater(store, settings, now, self._beat_row if options.pilot_id else None)
        base = options.workdir or (Path(settings.pilot.workdir) if settings.pilot.workdir else None)
        self.own_workdir = base is None
        if base is None:
            import tempfile

            base = Path(tempfile.mkdtemp(prefix="jedictl-pilot-"))
        self.ctx = PilotContext(store=store, settings=settings, now=now, site=options.site, direct_io=bool(site.direct_io),
                                container_runtime=site.container_runtime, workdir=Path(base), keep_workdir=options.keep_workdir,
                                heartbeater=self.heartbeater, environ=self.environ, write_endpoint=write_endpoint)

    # ------------------------------------------------------------------------------------ tallies

    def tally(self) -> tuple[int, int, int]:
        with self._lock:
            taken = len(self.outcomes) + len(self.heartbeater.all())
            finished = sum(1 for o in self.outcomes if o.outcome == "finished")
            return taken, finished, len(self.outcomes) - finished

    def _beat_row(self) -> None:
        taken, finished, failed = self.tally()
        with self.store.begin() as conn:
            pilot_store.pilot_beat(conn, self.options.pilot_id, self.now(), n_jobs=taken, n_finished=finished, n_failed=failed)

    def _row(self, write: Callable[[Any], Any]) -> None:
        if not self.options.pilot_id:
            return
        try:
            with self.store.begin() as conn:
                write(conn)
        except Exception as exc:  # noqa: BLE001 - the row is bookkeeping: a pilot runs its jobs without it
            if not is_store_outage(exc):
                raise
            log.warning("pilots row %s not updated: %s", self.options.pilot_id, str(exc).splitlines()[0])

    # --------------------------------------------------------------------------------------- run

    def run(self) -> PassReport:
        """Run the slots to the end; the pass report (one item per job)."""
        self._row(lambda conn: pilot_store.pilot_started(conn, self.options.pilot_id, executor_name(
            self.options.pilot_id, self.host, self.pid, 0, self.options.executor).rsplit("/", 1)[0], self.now()))
        previous = self._install_handlers()
        self.heartbeater.start()
        threads = [threading.Thread(target=self._slot, args=(k,), name=f"pilot-slot{k}", daemon=True)
                   for k in range(1, self.options.slots + 1)]
        error: BaseException | None = None
        try:
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                for thread in threads:
                    thread.join(0.2)  # short joins: the main thread must stay free to take a signal
        except BaseException as exc:  # noqa: BLE001 - recorded on the row, then raised again
            error = exc
            self.stop("SIGINT" if isinstance(exc, KeyboardInterrupt) else "SIGTERM")
            for thread in threads:
                thread.join()
        finally:
            self.heartbeater.close()
            self._restore_handlers(previous)
            if self.own_workdir:
                try:
                    self.ctx.workdir.rmdir()  # empty unless --keep-workdir or a report was not accepted
                except OSError:
                    pass
        report = self.report()
        taken, finished, failed = self.tally()
        state = "cancelled" if self.signal_name else "failed" if error is not None else "finished"
        exit_code = 128 + signal.Signals[self.signal_name].value if self.signal_name else 1 if (error or report.errors) else 0
        self._row(lambda conn: pilot_store.pilot_ended(conn, self.options.pilot_id, self.now(), state=state, exit_code=exit_code,
                                                       error=(f"stopped by {self.signal_name}" if self.signal_name else
                                                              str(error) if error else None),
                                                       n_jobs=taken, n_finished=finished, n_failed=failed))
        if error is not None:
            raise error
        return report

    def stop(self, name: str) -> None:
        """Stop taking jobs, stop every payload; their jobs are reported failed with the signal's code."""
        if self.signal_name is None:
            self.signal_name = name
        self.ctx.stop_failure = signal_failure(self.signal_name)
        self.ctx.stopping.set()
        for control in self.heartbeater.all():
            control.request_stop(signal_failure(name))

    def _install_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, _frame: Any) -> None:
            self.stop(signal.Signals(signum).name)

        return {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)}

    @staticmethod
    def _restore_handlers(previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def _slot(self, slot: int) -> None:
        name = executor_name(self.options.pilot_id, self.host, self.pid, slot, self.options.executor)
        idle_since = time.monotonic()
        while not self.ctx.stopping.is_set() and self.budget.take():
            try:
                payloads = dispatch_jobs(self.store, self.settings, DispatchRequest(self.options.site, 1, name), self.now(), self.rng)
            except Exception as exc:
                self.budget.give_back()
                if not is_store_outage(exc):
                    raise
                log.warning("slot %d: dispatch failed: %s", slot, str(exc).splitlines()[0])
                payloads = []
            else:
                if not payloads:
                    self.budget.give_back()
            if not payloads:
                if self.options.once or self._idle_too_long(idle_since):
                    return
                self.ctx.stopping.wait(self.settings.pilot.idle_poll_seconds)
                continue
            # Stage-in, payload and report are imported once a slot has a job: a pilot without work never
            # loads them (engine/pilot/context.py).
            from jedictl.engine.pilot.job import run_job

            # Counted as taken from now on: the heartbeat thread knows the job once run_job registers it.
            outcome = run_job(self.ctx, payloads[0])
            with self._lock:
                self.outcomes.append(outcome)
            log.info("job %s: %s%s", outcome.job_id, outcome.outcome, f" ({outcome.error})" if outcome.error else "")
            idle_since = time.monotonic()

    def _idle_too_long(self, since: float) -> bool:
        limit = self.settings.pilot.idle_exit_seconds
        return limit > 0 and time.monotonic() - since >= limit

    def report(self) -> PassReport:
        report = PassReport("pilot")
        for outcome in sorted(self.outcomes, key=lambda o: o.job_id):
            report.add("error" if outcome.outcome in ("refused", "unreported") else outcome.outcome, job_id=outcome.job_id,
                       task_job=outcome.task_job, error=outcome.error, wall_time=round(outcome.wall_time, 3) if outcome.wall_time else None,
                       reason=outcome.reason)
        finished = sum(1 for o in self.outcomes if o.outcome == "finished")
        errors = report.counts.get("error", 0)
        report.counts = {"jobs": len(self.outcomes), "finished": finished, "failed": len(self.outcomes) - finished}
        if errors:
            report.counts["error"] = errors
        return report
