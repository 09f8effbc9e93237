"""SIGINT and SIGTERM during agent passes: stop at once, but give the leases back first.

A pass holds task leases for `lease.seconds` (10 minutes by default). Killed by Ctrl-C or by a service
manager's SIGTERM without releasing them, the next run skips those tasks until the leases expire. So
while passes run, both signals raise `Interrupted` (a KeyboardInterrupt: no `except Exception` on the
way swallows it, and psycopg cancels a statement it interrupts), the pass unwinds -- its open
transaction rolls back, so a chunk is written whole or not at all -- and the command releases every lease of its owner before exiting 128 + the signal number
(130, 143). SIGKILL cannot be caught: the leases of a killed process expire, and `watch` then frees
them and rescues its picked files.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Any, Iterator

STOPPING = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stopping signal arrived during passes.

    A KeyboardInterrupt, so that `except Exception` never swallows it and psycopg, interrupted while it
    waits for the server, cancels the running statement: the connection can then roll back and the
    transaction's row locks go at once -- otherwise the release of the leases waits for them behind the
    statement. `previous` are the handlers to put back once the leases are released."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.previous: dict[int, Any] = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, _frame: Any) -> None:
    # Further stopping signals are ignored from this instant until the leases are given back (`shielded`):
    # a second Ctrl-C must not cut the release short.
    for stopping in STOPPING:
        signal.signal(stopping, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM raise Interrupted. The previous handlers come back after
    the block -- or, when a signal stopped it, after `shielded(stop.previous)` has let go."""
    previous = {signum: signal.signal(signum, _raise) for signum in STOPPING}
    try:
        yield
    except Interrupted as stop:
        stop.previous = previous  # the signals stay ignored until the caller's release is done
        raise
    except BaseException:
        _restore(previous)
        raise
    else:
        _restore(previous)


def stopped_by(exc: BaseException) -> Interrupted | None:
    """The signal behind `exc`: the Interrupted itself, or one that another error replaced while the
    pass unwound (a rollback that failed on the interrupted connection)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, Interrupted):
            return current
        seen.add(id(current))
        current = current.__context__
    return None


@contextmanager
def shielded(previous: dict[int, Any] | None = None) -> Iterator[None]:
    """Ignore further stopping signals while the leases are released, then put back `previous` (the
    handlers from before the passes) or what was there. (SIGKILL still ends it; the watchdog covers that.)"""
    before = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOPPING}
    try:
        yield
    finally:
        _restore(previous or before)


def _restore(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
