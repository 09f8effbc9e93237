"""The heartbeat thread: every pilot.heartbeat_seconds, one heartbeat per running job (one transaction
for them all) and a beat of the pilots row; the replies' commands stop jobs.

- `tobekilled` (jobs kill, task kill, an attempt mismatch): stop the payload, report it failed with 1144;
  the report of a job told to die ends it `cancelled`.
- `alreadydone` (the job was closed, e.g. by a timeout): stop the payload and drop the job, no report.
- No successful heartbeat for pilot.lost_heartbeat_seconds (the store unreachable): stop every payload
  (1317), as PanDA's pilot does after config.Pilot.lost_heartbeat. The server has closed those jobs by
  then (job_timeouts.heartbeat_hours < 3 h), so whatever they would write is of no use.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

from jedictl.engine.pilot.codes import Failure, kill_failure, lost_heartbeat_failure

log = logging.getLogger("jedictl.pilot")


def is_store_outage(exc: BaseException) -> bool:
    """A database error (connection refused, server gone, lock timeout) rather than a bug of ours: worth
    retrying. Told by the module of its class, because the engine does not import the database layer."""
    return type(exc).__module__.split(".")[0] in ("sqlalchemy", "psycopg", "sqlite3")


class JobControl:
    """What the heartbeat thread (and the pilot's signal handler) tells the thread running a job."""

    def __init__(self, payload: Mapping[str, Any]):
        self.payload = payload
        self.job_id: int = payload["job_id"]
        self.status = "starting"
        self.failure: Failure | None = None
        self.drop = False
        self.wake = threading.Event()
        self._lock = threading.Lock()

    def request_stop(self, failure: Failure | None, drop: bool = False) -> None:
        """The first reason wins: a job killed by the server stays killed when the pilot is then stopped."""
        with self._lock:
            if self.failure is None and not self.drop:
                self.failure, self.drop = failure, drop
        self.wake.set()

    @property
    def stopped(self) -> bool:
        return self.failure is not None or self.drop


def act_on(control: JobControl, command: str | None) -> None:
    if command == "tobekilled":
        control.request_stop(kill_failure())
    elif command == "alreadydone":
        control.request_stop(None, drop=True)


class Heartbeater:
    def __init__(self, store: Any, settings: Any, now: Callable[[], Any], beat_pilot: Callable[[], None] | None = None):
        self.store, self.settings, self.now = store, settings, now
        self.beat_pilot = beat_pilot
        self.controls: dict[int, JobControl] = {}
        self.last_ok = time.monotonic()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pilot-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)

    def add(self, control: JobControl) -> None:
        with self._lock:
            self.controls[control.job_id] = control

    def remove(self, control: JobControl) -> None:
        with self._lock:
            self.controls.pop(control.job_id, None)

    def all(self) -> list[JobControl]:
        with self._lock:
            return list(self.controls.values())

    def beat(self, controls: list[JobControl]) -> bool:
        """One round of heartbeats for `controls`; False when the store could not be reached."""
        try:
            if controls:
                # Imported with the first job (engine/pilot/context.py): a pilot's rounds without jobs beat its row only.
                from jedictl.engine.jobs.outcomes import take_heartbeats
                from jedictl.engine.jobs.reports import Heartbeat

                replies = take_heartbeats(self.store, [Heartbeat(None, c.job_id, c.status, c.payload.get("attempt_nr")) for c in controls],
                                          self.now(), self.settings.report.batch_size)
                by_id = {c.job_id: c for c in controls}
                for reply in replies:
                    if reply.job_id in by_id:
                        act_on(by_id[reply.job_id], reply.command)
            if self.beat_pilot is not None:
                self.beat_pilot()
        except Exception as exc:  # noqa: BLE001 - a failed round is retried next period; the loss rule below decides
            if is_store_outage(exc):
                log.warning("heartbeat failed: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            else:  # a bug: say it loudly, but a pilot whose heartbeats fail must still end its payloads in time
                log.exception("heartbeat failed")
            return False
        self.last_ok = time.monotonic()
        return True

    def _run(self) -> None:
        period = max(self.settings.pilot.heartbeat_seconds, 0.1)
        while not self._done.wait(period):
            controls = self.all()
            if self.beat(controls):
                continue
            silent = time.monotonic() - self.last_ok
            if silent > self.settings.pilot.lost_heartbeat_seconds:
                for control in controls:
                    control.request_stop(lost_heartbeat_failure(self.settings.pilot.lost_heartbeat_seconds))
