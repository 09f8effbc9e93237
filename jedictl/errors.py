"""The exception hierarchy every layer raises and the CLI's one error funnel turns into exit codes.

Exit codes (DESIGN.md §5): 0 done, 1 the pass met errors, 2 bad usage or bad input (nothing written),
3 the store is unreachable or its schema does not match.
"""

from __future__ import annotations


class JedictlError(Exception):
    """Something went wrong; the message is one line for the operator."""

    exit_code = 1


class BadInput(JedictlError):
    """The input (a file, an option, an id, a status for a command) is wrong; nothing was written."""

    exit_code = 2

    def __init__(self, message: str, path: str | None = None):
        # `path` names the field at fault (e.g. "jobParameters[4].dataset"), so messages read the same
        # whichever parser raised them.
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class NotFound(BadInput):
    """An object named on the command line does not exist."""


class StoreUnavailable(JedictlError):
    """The store cannot be reached or opened."""

    exit_code = 3


class SchemaMismatch(JedictlError):
    """The store's schema revision is not the one this program was built for."""

    exit_code = 3


class LeaseLost(JedictlError):
    """Another process took over an object whose lease this process held (its lease expired)."""
