"""The global options the README promises -- `--db`, `--config`, `--output`/`-o`, `--now`, `-v`, `-q` --
work before the command, between a group and its command, and after the command; `JEDICTL_DB` and the
global `--db` reach every command, `demo` included (tests/cli/test_demo.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ROOT


def _at(position: str, words: list[str], option: list[str]) -> list[str]:
    """`words` (a group and its command, or one command) with `option` placed at `position`."""
    if position == "before":
        return [*option, *words]
    if position == "between":
        return [words[0], *option, *words[1:]]
    return [*words, *option]


def _settings(cli, argv: list[str]) -> dict[str, tuple[object, str]]:  # noqa: ANN001
    rows = json.loads(cli(*argv).stdout)
    return {row["key"]: (row["value"], row["source"]) for row in rows}


@pytest.mark.parametrize("position", ["before", "between", "after"])
def test_every_global_option_in_every_position(cli, tmp_path, position):
    config = tmp_path / "jedictl.yaml"
    config.write_text("throttle:\n  threshold: 0.25\n")
    cases = [
        (["--db", str(tmp_path / "x.db")], "db", (f"sqlite:///{tmp_path / 'x.db'}", "flag")),
        (["--config", str(config)], "throttle.threshold", (0.25, f"file {config}")),
        (["--now", "2026-01-01T00:00:00"], "now", ("2026-01-01T00:00:00", "flag")),
        (["-v"], "verbose", (1, "flag")),
        (["--verbose"], "verbose", (1, "flag")),
        (["-vv"], "verbose", (2, "flag")),
    ]
    for option, key, expected in cases:
        settings = _settings(cli, _at(position, ["config", "show"], [*option, "-o", "json"]))
        assert settings[key] == expected, (position, option)
    for option in (["--output", "yaml"], ["-o", "yaml"]):
        rows = yaml.safe_load(cli(*_at(position, ["config", "show"], option)).stdout)
        assert isinstance(rows, list) and {"key": "output", "value": "yaml", "source": "flag"} in [
            {k: row[k] for k in ("key", "value", "source")} for row in rows]


@pytest.mark.parametrize("position", ["before", "between", "after"])
def test_db_output_and_quiet_reach_a_command_in_every_position(cli, store, position):
    sites = str(ROOT / "examples" / "sites.yaml")
    loud = cli(*_at(position, ["sites", "import"], ["--db", store]), sites)
    assert loud.stderr == "sites import: created 16\n"
    quiet = cli(*_at(position, ["sites", "import"], ["--db", store, "-q"]), sites)
    assert quiet.stderr == ""
    listed = json.loads(cli(*_at(position, ["sites", "list"], ["--db", store, "-o", "json"])).stdout)
    assert len(listed) == 7


@pytest.mark.parametrize("position", ["before", "after"])
def test_global_options_before_and_after_a_command_without_a_group(cli, store, position):
    result = cli(*_at(position, ["refine"], ["--db", store, "-o", "json", "--now", "2026-01-01T00:00:00"]))
    assert json.loads(result.stdout)["pass"] == "refine"


def test_jedictl_db_reaches_every_kind_of_command(cli, store):
    env = {"JEDICTL_DB": store}
    assert json.loads(cli("task", "list", "-o", "json", env=env).stdout) == []
    assert json.loads(cli("refine", "-o", "json", env=env).stdout)["pass"] == "refine"
    assert json.loads(cli("db", "current", "-o", "json", env=env).stdout)["up_to_date"] is True

