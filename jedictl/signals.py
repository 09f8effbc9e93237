"""SIGINT and SIGTERM during agent passes: stop at once, but give the leases back first.

A pass holds task leases for `lease.seconds` (10 minutes by default). Killed by Ctrl-C or by a service
manager's SIGTERM without releasing them, the next run skips those tasks until the leases expire. So
while passes run, both signals raise `Interrupted` (not KeyboardInterrupt: nothing on the way may
swallow it), the pass unwinds -- its open transaction rolls back, so a chunk is written whole or not
at all -- and the command releases every lease of its owner before exiting 128 + the signal number
(130, 143). SIGKILL cannot be caught: the leases of a killed process expire, and `watch` then frees
them and rescues its picked files.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Any, Iterator

STOPPING = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A stopping signal arrived during passes."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM raise Interrupted; the previous handlers come back after."""
    previous = {signum: signal.signal(signum, _raise) for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def shielded() -> Iterator[None]:
    """Ignore further stopping signals while the leases are released: a second Ctrl-C must not leave
    them half given back. (SIGKILL still ends it; the watchdog covers that.)"""
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
