"""Documentation generated from the program must be current; README and CI must agree."""

from __future__ import annotations

import re

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
    from jedictl.engine.catalogs import sites as site_catalog
    sites = (ROOT / "docs" / "sites.md").read_text()
    for spec in (site_catalog.NUCLEUS_FIELDS, site_catalog.ENDPOINT_FIELDS, site_catalog.SITE_FIELDS):
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
