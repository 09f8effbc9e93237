"""`--help` and completion must be fast and never load the database layer or touch the store."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_does_not_load_sqlalchemy():
    code = "import sys, jedictl.cli; print(any(m.startswith(('sqlalchemy', 'alembic', 'psycopg')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_help_works_with_an_unreachable_store():
    env_db = "postgresql+psycopg://x:y@127.0.0.1:1/none"
    for args in (["--help"], ["refine", "--help"], ["--db", env_db, "task", "show", "--help"]):
        result = subprocess.run([sys.executable, "-m", "jedictl", *args], capture_output=True, text=True, env={"JEDICTL_DB": env_db, "PATH": ""})
        assert result.returncode == 0, result.stderr
        assert "Usage" in result.stdout


def test_version(cli):
    assert cli("--version").stdout.startswith("jedictl ")
