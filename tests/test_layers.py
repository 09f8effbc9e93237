"""The layers hold: `lint-imports` (import-linter) keeps every contract in pyproject.toml, and a planted wrong
arrow breaks the contract it crosses (so the check is not one that cannot fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
#: Engine imports of sqlalchemy or jedictl.store.schema allowed as exceptions: none since issue 15 moved the
#: last query into a named store operation. New SQL in the engine goes to the store, not into ignore_imports.
MAX_SQL_EXCEPTIONS = 0


def contracts() -> dict[str, dict]:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the `lint-imports` of this interpreter's environment in `cwd`: it reads the contracts from
    `cwd/pyproject.toml` and puts `cwd` first on the path, so a copy of the package there is the one analysed."""
    program = Path(sys.executable).with_name("lint-imports")
    command = [str(program)] if program.exists() else [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]
    return subprocess.run([*command, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120)


def verdicts(output: str) -> dict[str, str]:
    """Contract id -> KEPT or BROKEN, read from the summary (whose lines may wrap anywhere between words)."""
    flat = " ".join(output.split())
    found = {}
    for key, contract in contracts().items():
        name = " ".join(contract["name"].split())
        for verdict in ("KEPT", "BROKEN"):
            if f"{name} {verdict}" in flat:
                found[key] = verdict
    return found


def test_lint_imports_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in result.stdout
    assert set(verdicts(result.stdout).values()) == {"KEPT"}


def test_the_sql_exceptions_only_shrink():
    exceptions = contracts()["no-sql-in-engine"].get("ignore_imports", [])
    assert len(exceptions) <= MAX_SQL_EXCEPTIONS, "new SQL in the engine: add a named operation to the store instead"
    assert all(entry.startswith("jedictl.engine.") for entry in exceptions)


def _named(contract: dict) -> set[str]:
    return {name.strip() for layer in contract["layers"] for name in layer.split("|")}


def test_every_top_level_module_and_every_room_has_its_layer():
    """A module missing from a layers contract would be unconstrained: new modules must take a place."""
    package = ROOT / "jedictl"
    top = {f"jedictl.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    top |= {f"jedictl.{p.name}" for p in package.iterdir() if (p / "__init__.py").exists()}
    assert top == _named(contracts()["layers"])
    engine = package / "engine"
    rooms = {p.stem for p in engine.glob("*.py") if p.name != "__init__.py"} | {p.name for p in engine.iterdir() if (p / "__init__.py").exists()}
    assert rooms == _named(contracts()["rooms"])


# (file in the package, line planted at its end, the contracts that must break)
PLANTED = [
    ("store/tasks.py", "from jedictl.engine.task import options as _planted", {"layers"}),
    ("model/files.py", "import jedictl.config as _planted", {"layers"}),
    ("commands/feed.py", "import jedictl.cli as _planted", {"layers"}),
    ("engine/input/fields.py", "from jedictl.engine.jobs import states as _planted", {"rooms"}),
    ("engine/task/split_rule.py", "import sqlalchemy as _planted", {"pure-policy", "no-sql-in-engine"}),
    ("engine/brokerage/filters.py", "from jedictl.engine.agent import PassReport as _planted", {"pure-policy"}),
    ("engine/views/jobs.py", "import rich as _planted", {"no-ui-below-commands"}),
    ("commands/feed.py", "import sqlalchemy as _planted", {"no-sql-in-commands"}),
    ("engine/commando/commands.py", "from jedictl.store.schema import tasks as _planted", {"no-sql-in-engine"}),
]


@pytest.mark.parametrize(("path", "line", "broken"), PLANTED, ids=[f"{'+'.join(sorted(b))}:{p}" for p, _, b in PLANTED])
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, path: str, line: str, broken: set[str]):
    shutil.copytree(ROOT / "jedictl", tmp_path / "jedictl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    target = tmp_path / "jedictl" / path
    target.write_text(target.read_text() + f"\n{line}\n")

    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(result.stdout)
    assert set(found) == set(contracts()), result.stdout  # every contract was checked
    assert {key for key, verdict in found.items() if verdict == "BROKEN"} == broken, result.stdout
    module = "jedictl." + path.removesuffix(".py").replace("/", ".")
    assert module in result.stdout  # the report names the culprit: it read the planted copy


def test_engine_modules_import_the_store_at_the_top():
    """A store import inside a function hides a real dependency from the reader and from the linter's
    layer checks' eye alike; the engine is imported lazily by the commands, so the top costs nothing."""
    import ast

    hidden = []
    for path in sorted((ROOT / "jedictl" / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    module = inner.module if isinstance(inner, ast.ImportFrom) else None
                    names = [alias.name for alias in inner.names] if isinstance(inner, ast.Import) else []
                    if (module or "").startswith("jedictl.store") or any(name.startswith("jedictl.store") for name in names):
                        hidden.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert hidden == []
