"""Documentation generated from the program must be current; README and CI must agree."""

from __future__ import annotations

import re

import pytest

from jedictl import docgen
from tests.conftest import ROOT


def test_generated_regions_are_current():
    for name, (relative, generate) in docgen.GENERATORS.items():
        text = (ROOT / relative).read_text()
        assert docgen.region(text, name) == generate(), f"{relative} is stale: run `python -m jedictl.docgen`"


def test_every_option_is_documented():
    from jedictl.engine.task.options import SPECS

    text = (ROOT / "docs" / "task-spec.md").read_text()
    missing = [spec.name for spec in SPECS if f"`{spec.name}`" not in text]
    assert missing == []


def _block_after(text: str, marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```(?:sh|bash)\n(.*?)```", text, re.S)
    assert match, f"README has no block after <!-- {marker} -->"
    return match.group(1).strip()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme.index("<!-- main-command -->") < readme.index("<!-- test-command -->") < 2000, "the two commands open the README"
    assert _block_after(readme, "test-command")
    assert "test-command" in ci and "JEDICTL_REQUIRE_PG=1" in ci


def test_the_main_command_installs_and_runs_the_demo():
    main = _block_after((ROOT / "README.md").read_text(), "main-command")
    assert "pip install" in main and main.endswith("jedictl demo")  # tests/cli/test_demo.py runs the demo itself


def test_catalog_fields_are_documented():
    from jedictl.engine.catalogs import data as data_catalog
    from jedictl.engine.catalogs import network as network_matrix
    from jedictl.engine.catalogs import sites as site_catalog
    sites = (ROOT / "docs" / "sites.md").read_text()
    for spec in (site_catalog.NUCLEUS_FIELDS, site_catalog.ENDPOINT_FIELDS, site_catalog.SITE_FIELDS, network_matrix.LINK_FIELDS):
        assert [name for name in spec if f"`{name}`" not in sites] == []
    assert all(f"`{key}`" in sites for key in site_catalog.SITE_STORAGE_KEYS)
    catalog = (ROOT / "docs" / "data-catalog.md").read_text()
    assert [key for key in data_catalog._DATASET_KEYS + data_catalog._FILE_KEYS if f"`{key}`" not in catalog] == []


def test_architecture_names_every_engine_module_and_no_missing_one():
    """docs/architecture.md names every module of the engine, the store and the model (the generated
    regions), and every `engine/...py` path or `engine.x.y` name written by hand still exists."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "jedictl"
    for top in ("engine", "store", "model"):
        for path in (package / top).rglob("*.py"):
            if path.name == "__init__.py" or "migrations" in path.parts:
                continue
            relative = path.relative_to(package / top)
            within = relative.relative_to(relative.parts[0]) if top == "engine" and len(relative.parts) > 1 else relative
            assert f"`{within.as_posix()}`" in text or f"`{top}/{within.as_posix()}`" in text or f"`engine/{path.name}`" in text, path
    for match in re.finditer(r"(?<![\w/.])(engine|store|model)([./])([a-z_]+(?:[./][a-z_]+)*)", text):
        top, separator, rest = match.groups()
        if rest == "py":
            continue  # a room's own `model.py`, named in its table
        parts = [top, *rest.removesuffix(".py").split(separator)]
        module = package.joinpath(*parts)
        if not (module.is_dir() or module.with_suffix(".py").exists()):
            # `engine.jobs.results.propagate`: a name inside an existing module
            assert separator == "." and package.joinpath(*parts[:-1]).with_suffix(".py").exists(), \
                f"docs/architecture.md names {match.group(0)!r}, which does not exist"


def test_task_spec_says_how_in_renders_several_files():
    """docs/task-spec.md's table of `${IN}` for several files is what the template renderer writes."""
    from jedictl.engine.task.templates import InputFile, InputStream, JobContext, render_job_parameters

    text = (ROOT / "docs" / "task-spec.md").read_text()
    table = text.split("<!-- compact-form examples", 1)[1].split("\n\n", 1)[0]
    rows = [re.findall(r"`([^`]+)`", line) for line in table.splitlines() if line.strip().startswith("| `")]
    assert len(rows) >= 4
    for *names, expected in rows:
        stream = InputStream("IN", "a.dataset", tuple(InputFile(name) for name in reversed(names)), is_master=True)
        assert render_job_parameters("${IN}", JobContext(task_id=1, inputs=(stream,))).text == expected, names


def test_the_executor_example_reports_the_payloads_exit_code(tmp_path):
    """docs/executor-protocol.md's executor runs the payload and keeps its exit code for the report
    (`$?` read after an assignment would be 0): its line, run with a payload that exits 3."""
    import shutil
    import subprocess

    if not shutil.which("jq") or not shutil.which("bash"):
        pytest.skip("bash and jq are needed to run the example")
    script = (ROOT / "docs" / "executor-protocol.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    line = next(line.strip() for line in script.splitlines() if 'eval "$program' in line)
    program = f"""set -euo pipefail
workdir={tmp_path}; job='{{"job_parameters": "3"}}'; program='exit'
status=finished; code=0
{line}
echo "$status $code"
"""
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=False)
    assert result.stdout.split() == ["failed", "3"], result.stdout + result.stderr
    program = program.replace("\"3\"", "\"0\"")
    assert subprocess.run(["bash", "-c", program], capture_output=True, text=True).stdout.split() == ["finished", "0"]


def test_the_readme_tour_runs_jedictl_from_the_virtual_environment():
    """The install leaves jedictl in .venv/bin without activating anything: the tour and every shell block
    after it must activate the venv (or name .venv/bin/jedictl) before a bare `jedictl`."""
    readme = (ROOT / "README.md").read_text()
    tour = readme[readme.index("## A five-minute tour"):]
    activated = tour.index(". .venv/bin/activate")
    first_bare = re.search(r"^\$ jedictl |^jedictl ", tour, re.M)
    assert first_bare and activated < first_bare.start()
    before_tour = readme[:readme.index("## A five-minute tour")]
    for block in re.findall(r"```(?:sh|console|bash)\n(.*?)```", before_tour, re.S):
        assert not re.search(r"(^|&& |\$ )jedictl ", block, re.M), block


def _console_sessions(text: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines the README shows after it) for each `$ ` line of the console blocks."""
    sessions: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                sessions.append((line[2:], []))
            elif sessions:
                sessions[-1][1].append(line)
    return sessions


def test_the_readme_tour_prints_what_it_shows(tmp_path):
    """Every command of the tour (and of its bad-input example) run in order in one shell, each printing
    the lines the README shows after it (stdout and stderr together; a command shown without output is
    run but not compared). A stale tour -- the prun task's analysis jobs once ran past the sites'
    walltime in the simulator and the task ended `finished` 8/20 -- fails here."""
    import os
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    sessions = _console_sessions(readme[readme.index("## A five-minute tour"):readme.index("## Cron")])
    assert len(sessions) >= 10
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "bin").symlink_to(os.path.dirname(sys.executable))
    marker = "@@@ next command @@@"
    script = "\n".join(f"echo '{marker}'\n{{ {command}\n}} 2>&1" for command, _ in sessions)
    env = {key: value for key, value in os.environ.items() if not key.startswith("JEDICTL_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"), USER="root", LOGNAME="root",
               NO_COLOR="1", COLUMNS="200")
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    outputs = [chunk.strip("\n").splitlines() for chunk in result.stdout.split(marker + "\n")[1:]]
    assert len(outputs) == len(sessions), result.stdout + result.stderr
    for (command, shown), printed in zip(sessions, outputs):
        if shown:
            # stdout and stderr are two streams: their lines may interleave differently, so compare the lines.
            assert sorted(printed) == sorted(shown), f"$ {command}\nREADME shows:\n" + "\n".join(shown) + "\nprinted:\n" + "\n".join(printed)
