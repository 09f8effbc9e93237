"""TAB on an option's value offers the allowed values (statuses, kinds, algorithms, actions, resource
types, formats) and the names in the store (sites, clouds, nuclei, endpoints) instead of file names --
without loading the database layer, and without creating, migrating or writing any store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jedictl import manpages
from jedictl.commands import _complete
from jedictl.model import FileStatus, DatasetStatus, JobStatus, ResourceType, TaskStatus
from tests.conftest import ROOT

COMPLETE = """
import os, sys
import typer.main
from jedictl.cli import app
command = typer.main.get_command(app)
for words in sys.argv[1:]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    os.environ.update(_JEDICTL_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword))
    try:
        command.main(args=[], prog_name="jedictl")
    except SystemExit:
        pass
    print("--", flush=True)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "alembic", "psycopg"))
sys.stderr.write(f"database layer: {loaded}")
"""


def complete(*lines: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> list[list[str]]:
    """What bash would offer for each command line (a TAB at its end), asked of a real jedictl process."""
    environ = {**os.environ, **(env or {})}
    result = subprocess.run([sys.executable, "-c", COMPLETE, *lines], capture_output=True, text=True, env=environ,
                            cwd=cwd, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.endswith("database layer: []"), result.stderr
    return [answer.split() for answer in result.stdout.split("--\n")[:-1]]


def values(enum) -> list[str]:  # noqa: ANN001
    return [member.value for member in enum]


def test_statuses_kinds_actions_algorithms_and_resource_types(tmp_path):
    answers = complete(
        "jedictl task list --status ",
        "jedictl jobs list --status ",
        "jedictl jobs list --status fin",
        "jedictl jobs heartbeat --status ",
        "jedictl data list --kind ",
        "jedictl data list --state ",
        "jedictl retry-rules list --action ",
        "jedictl retry-rules match --source p",
        "jedictl split --algorithm Lumi",
        "jedictl jobs dispatch --site X --resource-type ",
        "jedictl sites set-status MWT2 ",
        "jedictl pilots list --state ",
        "jedictl -o ",
        "jedictl task list -o j",
        env={"JEDICTL_DB": str(tmp_path / "never.db")},
    )
    assert set(values(TaskStatus)) <= set(answers[0])
    assert set(values(JobStatus)) <= set(answers[1])
    assert answers[2] == ["finished"]
    assert answers[3] == ["starting", "running", "holding", "transferring", "merging"]
    assert answers[4] == ["dataset", "container"] and answers[5] == ["open", "closed"]
    assert "increase_memory" in answers[6] and "no_retry" in answers[6]
    assert answers[7] == ["pilot"]
    assert answers[8] == ["LumiBased"]
    assert answers[9] == values(ResourceType)
    assert answers[10] == ["online", "brokeroff", "offline", "test"]
    assert "lost" in answers[11]
    assert answers[12] == ["table", "json", "yaml", "tsv"] and answers[13] == ["json"]
    assert not (tmp_path / "never.db").exists()


def test_a_comma_list_completes_its_last_item():
    assert complete("jedictl run --agents ", "jedictl run --agents refine,f", "jedictl run --agents refine,feed,")[1:] == [
        ["refine,feed", "refine,finalize"], ["refine,feed,periodic", "refine,feed,broker", "refine,feed,generate", "refine,feed,harvest", "refine,feed,finalize",
                                            "refine,feed,watch"]]


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.fixture
def sites_store(tmp_path, cli) -> Path:
    """A SQLite store with the example grid, every connection to it closed (no -wal, no -shm)."""
    path = tmp_path / "store" / "jedictl.db"
    path.parent.mkdir()
    cli("db", "init", db=str(path))
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=str(path))
    assert sorted(p.name for p in path.parent.iterdir()) == ["jedictl.db"]
    return path


def test_sites_clouds_nuclei_and_endpoints_come_from_the_store_which_is_left_untouched(sites_store):
    before = files_of(sites_store.parent)
    answers = complete(
        f"jedictl --db {sites_store} jobs dispatch --site ",
        f"jedictl jobs list --db {sites_store} --site M",
        f"jedictl --db sqlite:///{sites_store} sites show B",
        f"jedictl --db {sites_store} task reassign 1 --cloud ",
        f"jedictl --db {sites_store} task reassign 1 --nucleus ",
        f"jedictl --db {sites_store} data import --scan d --endpoint CERN",
        f"jedictl --db {sites_store} simulate --site D",
    )
    assert answers[0] == ["AGLT2_TEST", "BNL_PROD", "BNL_PROD_MCORE", "CERN-PROD_GRID", "CERN-PROD_MCORE", "DESY-HH", "MWT2"]
    assert answers[1] == ["MWT2"] and answers[2] == ["BNL_PROD", "BNL_PROD_MCORE"]
    assert answers[3] == ["CERN", "US"] and answers[4] == ["BNL-ATLAS", "CERN-PROD"]
    assert answers[5] == ["CERN-PROD_DATADISK", "CERN-PROD_DATATAPE"] and answers[6] == ["DESY-HH"]
    assert files_of(sites_store.parent) == before, "completion wrote to the store or left files beside it"


def test_the_store_comes_from_the_environment_the_configuration_or_a_relative_path(sites_store, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"db: {sites_store}\n")
    assert complete("jedictl pilot --site MW", env={"JEDICTL_DB": str(sites_store)}) == [["MWT2"]]
    assert complete("jedictl pilot --site MW", env={"JEDICTL_CONFIG": str(config)}) == [["MWT2"]]
    assert complete("jedictl --config " + str(config) + " pilot --site MW") == [["MWT2"]]
    assert complete("jedictl --db jedictl.db pilot --site MW", cwd=sites_store.parent) == [["MWT2"]]
    assert complete("jedictl --db sqlite:///jedictl.db pilot --site MW", cwd=sites_store.parent) == [["MWT2"]]


def test_a_store_being_written_is_read_too(sites_store, tmp_path):
    """With a write-ahead log beside it (another process has the store open), it is read in read-only mode."""
    import sqlite3

    writer = sqlite3.connect(sites_store)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert complete(f"jedictl --db {sites_store} pilot --site MW") == [["MWT2"]]
    finally:
        writer.rollback()
        writer.close()


def test_no_store_no_names_and_nothing_created(tmp_path):
    missing, empty, broken = tmp_path / "missing.db", tmp_path / "empty.db", tmp_path / "broken.db"
    empty.write_bytes(b"")
    broken.write_bytes(b"not a database at all" * 100)
    config = tmp_path / "bad.yaml"
    config.write_text("db: [unclosed\n")
    answers = complete(
        f"jedictl --db {missing} jobs dispatch --site ",
        f"jedictl --db {empty} jobs dispatch --site ",
        f"jedictl --db {broken} jobs dispatch --site ",
        "jedictl --db postgresql+psycopg://nobody@127.0.0.1:1/none jobs dispatch --site ",
        f"jedictl --config {config} jobs dispatch --site ",
        f"jedictl --config {tmp_path / 'nowhere.yaml'} jobs dispatch --site ",
        env={"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    assert answers == [[]] * 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "broken.db", "empty.db"]
    assert empty.read_bytes() == b""


def test_every_value_of_every_command_completes_without_the_database_layer(sites_store):
    """A TAB after every option of every command of the live CLI, with a store that holds sites."""
    from jedictl.cli import app

    tree = manpages.command_tree(app)
    lines = []
    for top in tree.children:
        for node in top.leaves():
            for param in node.params():
                if param.param_type_name == "option" and not (getattr(param, "is_flag", False) or getattr(param, "count", False)):
                    lines.append(f"{node.name} {param.opts[0]} ")
    before = files_of(sites_store.parent)
    answers = complete(*lines, env={"JEDICTL_DB": str(sites_store)})
    assert len(answers) == len(lines) > 100
    assert files_of(sites_store.parent) == before


# ------------------------------------------------------------ the copies are the engine's sets

def test_the_sets_copied_for_speed_are_the_engines():
    from jedictl.engine import pipeline
    from jedictl.engine.catalogs import sites
    from jedictl.engine.generate.splitters import registry
    from jedictl.engine.jobs import retry_rules, states

    assert _complete.SITE_STATUSES == sites.SITE_STATUSES
    assert _complete.RETRY_ACTIONS == retry_rules.ACTIONS
    assert _complete.SPLIT_ALGORITHMS == tuple(registry.NAMES)
    assert _complete.AGENTS == pipeline.AGENTS
    assert set(_complete.HEARTBEAT_STATUSES) == {status.value for status in states.HEARTBEAT_STATUSES}
    from jedictl.model import choices

    assert _complete.PILOT_STATES == choices.PILOT_STATES


def test_statuses_come_from_the_model():
    assert _complete.values_for("task list", "status")(None) == values(TaskStatus)
    assert _complete.values_for("jobs list", "status")(None) == values(JobStatus)
    assert _complete.values_for("x", "file_status")(None) == values(FileStatus)
    assert _complete.values_for("x", "dataset_status")(None) == values(DatasetStatus)
    assert _complete.values_for("task list", "user") is None


def test_completion_is_documented():
    text = (ROOT / "docs" / "completion.md").read_text()
    assert "read-only" in text and "--status <TAB>" in text
