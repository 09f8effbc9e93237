"""The fuzz suite's machinery: hypothesis profiles, running jedictl in-process, the properties every
run must keep, a full dump of a store, and a seeded store that examples start from.

Profiles (`JEDICTL_FUZZ_PROFILE`):

- `ci` (the default): every test runs its stated number of examples, derandomized so that CI runs the
  same inputs each time; the whole suite takes well under two minutes on SQLite.
- `long`: 25 times as many examples, randomized, for a hunt on a developer's machine
  (`JEDICTL_FUZZ_PROFILE=long .venv/bin/python -m pytest tests/fuzz`).
"""

from __future__ import annotations

import os
import shutil
import sys
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import typer.main
from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

from jedictl.cli import app

PROFILE = os.environ.get("JEDICTL_FUZZ_PROFILE", "ci")
_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("jedictl-fuzz-ci", deadline=None, derandomize=True, database=None, print_blob=True,
                          suppress_health_check=_QUIET_CHECKS)
settings.register_profile("jedictl-fuzz-long", deadline=None, print_blob=True, suppress_health_check=_QUIET_CHECKS)
_SCALE = {"ci": 1, "long": 25}
if PROFILE not in _SCALE:
    raise RuntimeError(f"JEDICTL_FUZZ_PROFILE must be one of {', '.join(_SCALE)}, not {PROFILE!r}")


def fuzz(examples: int) -> settings:
    """Settings for one fuzz test: `examples` in CI, more under the long profile; never a deadline."""
    return settings(settings.get_profile(f"jedictl-fuzz-{PROFILE}"), max_examples=examples * _SCALE[PROFILE])


# ------------------------------------------------------------------------------------ running jedictl

@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"jedictl {list(self.argv)!r} -> exit {self.exit_code}\nstdout: {self.stdout[-3000:]}\nstderr: {self.stderr[-3000:]}"


_COMMAND = None


def invoke(argv: Sequence[str], input: str | bytes | None = None, env: dict[str, str] | None = None) -> Outcome:
    """Run jedictl in-process, as CliRunner does but with the Click command built once (building it is
    most of the cost of a short command). An exception escaping the CLI fails the test."""
    global _COMMAND
    if _COMMAND is None:
        _COMMAND = typer.main.get_command(app)
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as streams:
        exit_code = 0
        try:
            _COMMAND.main(args=list(argv), prog_name="jedictl")
        except SystemExit as exc:
            exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - anything past the error funnel is the finding
            trace = "".join(traceback.format_exception(exc))
            raise AssertionError(f"jedictl {list(argv)!r} let an exception escape:\n{trace}") from None
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = (stream.getvalue().decode(runner.charset, "replace") for stream in streams[:2])
    return Outcome(tuple(argv), exit_code, stdout, stderr)


# ------------------------------------------------------------------------------------------ properties

def assert_no_crash(outcome: Outcome, codes: Sequence[int] = (0, 1, 2, 3)) -> None:
    """Never a traceback, never an internal error, only the documented exit codes."""
    text = outcome.stdout + outcome.stderr
    assert "Traceback" not in text, outcome
    assert "internal error" not in text, outcome
    assert outcome.exit_code in codes, outcome


#: How the second line of a usage error (a bad command line) begins: the only second line an error has.
USAGE_HINTS = ("usage: ", "see '", "did you mean ", "commands: ")


def assert_one_error_line(outcome: Outcome) -> None:
    """A refusal says what is wrong in one line on stderr; a bad command line may add a hint line
    (never Typer's box of usage, "Try ..." and a framed message)."""
    lines = outcome.stderr.rstrip("\n").split("\n")
    assert 1 <= len(lines) <= 2 and lines[0].startswith("jedictl: error: "), outcome
    assert len(lines) == 1 or lines[1].startswith(USAGE_HINTS), outcome
    assert lines[0].strip() != "jedictl: error:", outcome
    assert not set("╭╮╰╯│") & set(outcome.stderr), outcome


def assert_refused(outcome: Outcome, code: int = 2) -> None:
    assert_no_crash(outcome)
    assert outcome.exit_code == code, outcome
    assert_one_error_line(outcome)


# ---------------------------------------------------------------------------------------------- stores

def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted: two dumps are equal when nothing was written."""
    from sqlalchemy import select

    from jedictl.store.database import create_store_engine
    from jedictl.store.schema import metadata

    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return {name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
                    for name, table in metadata.tables.items()}
    finally:
        engine.dispose()


class StoreFactory:
    """Fresh copies of one seeded SQLite store: every example starts from the same state."""

    def __init__(self, template: Path, workdir: Path):
        self.template = template
        self.workdir = workdir
        self.dispatched: list[dict[str, Any]] = []  # payloads of the jobs sent to executors in the template
        self._dump: dict[str, list[tuple[Any, ...]]] | None = None

    def fresh(self) -> str:
        path = self.workdir / f"{uuid.uuid4().hex}.db"
        shutil.copyfile(self.template, path)
        return f"sqlite:///{path}"

    @property
    def template_dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """The dump of every fresh copy before anything runs on it."""
        if self._dump is None:
            self._dump = dump(f"sqlite:///{self.template}")
        return self._dump

    def discard(self, url: str) -> None:
        path = Path(url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def changed_tables(before: dict[str, list[tuple[Any, ...]]], after: dict[str, list[tuple[Any, ...]]]) -> list[str]:
    return sorted(name for name in before if before[name] != after.get(name))
