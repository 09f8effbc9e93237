"""Shared fixtures: a frozen environment, stores on both backends, and a CLI runner.

PostgreSQL tests use `JEDICTL_TEST_PG_URL` (default: the local trust-auth server) and get a schema of
their own, dropped afterwards. Without a server they are skipped -- unless `JEDICTL_REQUIRE_PG=1`
(set by `.ci/run`), which turns that skip into a failure and fails the session if no PostgreSQL test
passed.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jedictl.cli import app

PG_URL = os.environ.get("JEDICTL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("JEDICTL_REQUIRE_PG") == "1"
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "panda-taskparams"  # task parameters written by PanDA's own client

_pg_state: dict[str, Any] = {"available": None, "passed": 0}


# ------------------------------------------------------------------------------------- environment

@pytest.fixture(autouse=True, scope="session")
def isolation(tmp_path_factory: pytest.TempPathFactory):
    """No JEDICTL_* from the developer's shell; config and data directories in a temp dir."""
    home = tmp_path_factory.mktemp("home")
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith("JEDICTL_") and name not in ("JEDICTL_TEST_PG_URL", "JEDICTL_REQUIRE_PG"):
            del os.environ[name]
    os.environ.update({
        "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
        "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb",
    })
    yield
    os.environ.clear()
    os.environ.update(saved)


# ------------------------------------------------------------------------------------------ stores

def pg_available() -> bool:
    if _pg_state["available"] is None:
        try:
            import psycopg

            with psycopg.connect(_libpq(PG_URL), connect_timeout=3):
                _pg_state["available"] = True
        except Exception:  # noqa: BLE001 - any failure means "not available"
            _pg_state["available"] = False
    return bool(_pg_state["available"])


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def require_pg() -> None:
    if not pg_available():
        message = f"PostgreSQL not reachable at {PG_URL}"
        if REQUIRE_PG:
            pytest.fail(message + " (JEDICTL_REQUIRE_PG=1)")
        pytest.skip(message)


@pytest.fixture
def pg_url() -> Any:
    """A fresh, empty PostgreSQL schema as a store URL; dropped after the test."""
    require_pg()
    import psycopg

    schema = f"jt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(PG_URL), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{separator}options=-csearch_path%3D{schema}"
    with psycopg.connect(_libpq(PG_URL), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store location on each backend (not yet initialised)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_url: str, cli: "Cli") -> str:
    """An initialised store on each backend."""
    cli("db", "init", db=store_url)
    return store_url


# --------------------------------------------------------------------------------------------- CLI

class Cli:
    """Run jedictl in-process; `check` asserts the exit code and shows stderr when it differs."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, db: str | None = None, input: str | None = None, code: int | None = 0,
                 env: dict[str, str] | None = None) -> Any:
        argv = list(args) + (["--db", db] if db else [])
        result = self.runner.invoke(app, argv, input=input, env=env, catch_exceptions=False)
        if code is not None:
            assert result.exit_code == code, f"exit {result.exit_code} != {code}\nargs: {argv}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        return result

    def json(self, *args: str, db: str | None = None, input: str | None = None, env: dict[str, str] | None = None) -> Any:
        import json

        return json.loads(self(*args, "-o", "json", db=db, input=input, env=env).stdout)


@pytest.fixture
def cli() -> Cli:
    return Cli()


# ------------------------------------------------------------------ PostgreSQL must run under CI

def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed and "postgres" in report.keywords:
        _pg_state["passed"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if REQUIRE_PG and session.testscollected and _pg_state["passed"] == 0 and exitstatus == 0:
        session.config.get_terminal_writer().line("JEDICTL_REQUIRE_PG=1 but no PostgreSQL test passed", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
