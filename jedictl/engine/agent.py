"""What every agent pass shares: a report of what it did, and the leased claim-and-handle loop.

A pass claims a small batch of tasks at a time (so concurrent processes share the work), handles
each one, and goes on until its limit or until nothing is left. One task's failure never stops the
pass: a LeaseLost is reported as skipped (someone else took the task over), anything else as an error
with the lease released so another pass can retry.

A pass ends holding no lease (`ending_leases`): the passes of one process run one after another, so
whatever its owner still holds when a pass returns is a path that forgot to let go -- released and
reported as an error -- and when a signal stops the pass midway, what it held is released before
the process exits.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

from jedictl.clock import PassClock
from jedictl.errors import LeaseLost, StoreUnavailable
from jedictl.redact import mask_url
from jedictl.store import task_leases
from jedictl.store.database import open_store


#: Who wants to hear about each object a pass finishes (a progress display); see `watching`.
_LISTENERS: list[Callable[["PassReport", str], None]] = []


@contextmanager
def watching(listener: Callable[["PassReport", str], None]) -> Iterator[None]:
    """Call `listener(report, outcome)` for every object any pass reports while the block runs."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


_LEASED = ("skipped", "error")
_HARVEST = ("submitted", "lost", "failed", "cancelled", "pilots_off", "pilots_on")
_WATCH = ("release_lease", "rescue_picked", "reactivate", "pending_timeout", "kick_exhausted", "activate", "job_timeout", "throttle_jobs",
          "release_jobs", "throttle", "throttle_transfers", "release_transfers", "release_throttled", "boost", "pause", "goal_reached",
          "settle", "build_failed", "broken_by_build", "killed_by_build", "preprocessed", "broken_by_preprocess",
          "overloaded", "reassign",
          "jumbo_on", "jumbo_off", "jumbo_job", "jumbo_closed", "cojumbo_end")

#: What each pass counts -- the outcomes of its items, then the totals some passes add (generate's jobs
#: made, simulate's and pilot's jobs run) -- every key present in its report, 0 when nothing happened,
#: so that scripts read `.counts.X` without guessing (docs/json-output.md lists them, generated from here).
PASS_COUNTS: dict[str, tuple[str, ...]] = {
    "refine": ("defined", "pending", "broken", *_LEASED, "ready", "topreprocess"),
    "feed": ("ready", "assigning", "defined", "pending", "finishing", "broken", "rescanned", *_LEASED),
    "broker": ("ready", "waiting", *_LEASED),
    "generate": ("generated", "nothing", "throttled", "pending", *_LEASED, "jobs"),
    "harvest": (*_HARVEST, "idle", *(f"would_{outcome}" for outcome in ("submit", *_HARVEST[1:])), "error", "failed_before_work"),
    "finalize": ("waiting", "measured", "scouted", "running", "exhausted", "defined", "prepared", "done", "finished", "failed", "passed",
                 "broken", "aborted", "kick_child", "kill_child", *_LEASED, "notified", "notify_failed", "notify_given_up", "paused"),
    "watch": (*_WATCH, *_LEASED),
    "simulate": ("ran", "idle", "error", "jobs", "finished", "failed"),
    "pilot": ("jobs", "finished", "failed", "error"),
    "report": ("applied", "duplicate", "conflict", "refused"),
    "heartbeat": ("alive", "tobekilled", "alreadydone"),
    "kill": ("killed", "tobekilled", "refused", "not_attempted"),
    "settle": ("applied", "waiting", "unchanged"),
    "listen": ("applied", "duplicate", "refused", "rejected", "error", "published"),
    "periodic": ("instantiated", "capped", "refused", "skipped", "error", "missed"),
    "reassign": ("moved", "refused"),
    "events": ("applied", "duplicate", "refused"),
    "resubmit": ("resubmitted", "refused", "not_attempted"),
    "acquire": ("acquired", "taken", "left", "released", "held", "done", "failed", "canceled", "requeued", "error"),
    "locations": ("updated", "unchanged", "skipped", "done", "failed", "canceled", "requeued", "error"),
}
#: The outcomes that are failures (the command exits 1 when any is counted); "error" for the others.
PASS_FAILURES: dict[str, tuple[str, ...]] = {"report": ("refused", "conflict"), "kill": ("refused",), "heartbeat": (),
                                              "reassign": ("refused",), "events": ("refused",), "resubmit": ("refused",)}


@dataclass
class PassReport:
    """Counts per outcome and one line per object; printed by the command, JSON with -o json
    (docs/json-output.md: the same keys for every pass)."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    #: The exceptions behind the "error" items, with their SQL and tracebacks: shown only at -vv.
    failures: list[BaseException] = field(default_factory=list, repr=False, compare=False)

    def add(self, outcome: str, **item: Any) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        self.items.append({"outcome": outcome, **item})
        for listener in _LISTENERS:
            listener(self, outcome)

    def add_items(self, items: Iterable[dict[str, Any]]) -> None:
        """Many items at once, each already shaped as `add` shapes one (its outcome first)."""
        counts, kept = self.counts, self.items
        for item in items:
            outcome = item["outcome"]
            counts[outcome] = counts.get(outcome, 0) + 1
            kept.append(item)
            for listener in _LISTENERS:
                listener(self, outcome)

    def add_failure(self, exc: BaseException, **item: Any) -> None:
        """An "error" item for an object (or the whole pass) that raised `exc`: its reason is one line,
        the exception is kept in `failures` for -vv.

        A store that refuses this process (read-only, unreachable) is no object's failure: it is raised
        on, and ends the command as a store problem (exit 3)."""
        if isinstance(exc, StoreUnavailable):
            raise exc
        self.failures.append(exc)
        self.add("error", **item, reason=error_line(exc))

    @property
    def errors(self) -> int:
        return sum(self.counts.get(outcome, 0) for outcome in PASS_FAILURES.get(self.name, ("error",)))

    def all_counts(self) -> dict[str, int]:
        """Every count of the pass: the declared ones first (0 when none), then any other met."""
        declared = PASS_COUNTS.get(self.name, ("error",))
        return {**{key: self.counts.get(key, 0) for key in declared}, **{k: v for k, v in sorted(self.counts.items()) if k not in declared}}

    def as_dict(self, duration: float | None = None) -> dict[str, Any]:
        """The report's one shape: pass, counts (all of them), errors, duration_s, items."""
        return {"pass": self.name, "counts": self.all_counts(), "errors": self.errors,
                "duration_s": round(duration, 3) if duration is not None else None, "items": self.items}


def leased_pass(
    store: Any,
    report: PassReport,
    candidates: Any,
    order_by: Any,
    handle: Callable[[int], tuple[str, str | None]],
    *,
    owner: str,
    now: datetime,
    lease_seconds: float,
    limit: int,
    claim_batch: int,
    handle_batch: Callable[[list[int]], dict[int, tuple[str, str | None]]] | None = None,
) -> PassReport:
    """Claim tasks matching `candidates` in batches and call `handle(task_id) -> (outcome, reason)`.

    `candidates` and `order_by` are a task filter and an order the store names (store.task_leases,
    store.completion.candidates); the pass hands them to the store's claim without reading them. Each
    batch is claimed from the pass's current moment (`PassClock`): a batch claimed late in a long pass
    holds its leases for `lease_seconds` from then, not from the pass's start.

    `handle_batch(ids) -> {task_id: (outcome, reason)}`, if given, first takes the whole claimed batch
    (finalize: many tasks in one transaction); the tasks it leaves out, or all of them if it fails,
    go through `handle` one by one.

    The candidates are found once (up to `limit`, in order) and claimed `claim_batch` at a time by id,
    each claim checking the filter again for its few; only when that list is used up with budget left
    is the filter looked at again (tasks another process took meanwhile are not waited for). So a pass
    reads its filter's tasks once, not once per batch."""
    budget = limit
    seen: set[int] = set()
    clock = PassClock(now)
    while budget > 0:
        with store.read() as conn:
            queue = task_leases.candidate_ids(conn, candidates, order_by, seen, clock.current(), budget)
        if not queue:
            break
        seen.update(queue)
        for start in range(0, len(queue), claim_batch):
            if budget <= 0:
                break
            with store.begin() as conn:
                ids = task_leases.claim_listed(conn, queue[start:start + min(budget, claim_batch)], candidates, owner, clock.current(),
                                               lease_seconds)
            budget -= len(ids)
            _handle_claimed(store, report, ids, handle, handle_batch, owner)
    return report


def _handle_claimed(store: Any, report: PassReport, ids: list[int], handle: Callable[[int], tuple[str, str | None]],
                    handle_batch: Callable[[list[int]], dict[int, tuple[str, str | None]]] | None, owner: str) -> None:
    """One claimed batch through `handle_batch`, then what it left through `handle`, each outcome reported."""
    done: dict[int, tuple[str, str | None]] = {}
    if handle_batch is not None and ids:
        try:
            done = handle_batch(ids)
        except Exception:  # noqa: BLE001 - rolled back: every task goes the one-task way, which reports its fault
            done = {}
    for task_id, (outcome, reason) in done.items():
        report.add(outcome, task_id=task_id, reason=reason)
    for task_id in (i for i in ids if i not in done):
        try:
            outcome, reason = handle(task_id)
            report.add(outcome, task_id=task_id, reason=reason)
        except LeaseLost as exc:
            # Someone took it over -- or its status moved under our lease (an operator's command):
            # then the lease is still ours and must not outlive the pass.
            with store.begin() as conn:
                task_leases.release(conn, task_id, owner)
            report.add("skipped", task_id=task_id, reason=str(exc))
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - one task's failure must not stop the pass
            with store.begin() as conn:
                task_leases.release(conn, task_id, owner)
            report.add_failure(exc, task_id=task_id)


def error_line(exc: BaseException) -> str:
    """`exc` as one line for a report: its type and first line. A driver's error is named as the driver
    said it, without the SQL statement and parameters SQLAlchemy's wrapper appends (those are -vv's)."""
    cause = getattr(exc, "orig", None)
    shown = cause if isinstance(cause, BaseException) else exc
    text = str(shown).strip()
    return mask_url(f"{type(shown).__name__}: {text.splitlines()[0]}" if text else type(shown).__name__)


def ending_leases(store: Any, owner: str, report: PassReport | None) -> list[int]:
    """Release every task lease `owner` still holds once its pass has ended; the ids.

    With `report` (the pass returned normally) a leftover is a bug of that pass's paths and is
    reported as an error, so it is seen rather than left to block the tasks for the lease time.
    (After a signal, `release_after_stop` does the release on a fresh engine instead.)"""
    with store.begin() as conn:
        left = task_leases.release_all(conn, owner)
    if left and report is not None:
        report.add("error", reason=f"{len(left)} task leases still held when the pass ended, released: {left[:20]}")
    return left


def release_after_stop(store: Any, owner: str) -> list[int]:
    """The leases of `owner` given back after a signal stopped its pass midway; the ids.

    On a fresh engine: the interrupted connection may have been cut in the middle of a statement. Its
    transaction was rolled back as the exception unwound, so the old engine is disposed first (on
    SQLite that also lets go of any lock it still had)."""
    store.engine.dispose()
    fresh = open_store(store.url, check_schema=False)
    try:
        with fresh.begin() as conn:
            return task_leases.release_all(conn, owner)
    finally:
        fresh.close()
