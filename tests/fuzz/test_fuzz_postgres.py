"""A few fuzz examples on PostgreSQL, which checks what SQLite lets through: INTEGER widths, NUL
characters, JSON values. Refused input leaves the store as it was; valid input goes through the
agents without an overflow."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ROOT
from tests.fuzz.conftest import DS_IN, SEED_TASK
from tests.fuzz.strategies import broken_documents, serialise, task_specs
from tests.fuzz.support import assert_no_crash, assert_one_error_line, assert_refused, changed_tables, dump, fuzz, invoke
from tests.fuzz.test_fuzz_catalogs import SITES_EXAMPLE, resource_catalogs
from tests.fuzz.test_fuzz_errors import GLOBAL_OPTIONS, REFERENCE_COMMANDS, REFERENCES
from tests.fuzz.test_fuzz_job_reports import report_line
from tests.fuzz.test_fuzz_refusals import CONFIG_TEXT, FIXED_VALUES, ISSUE_INPUTS, typos
from tests.fuzz.test_fuzz_task_specs import KNOWN_DOCUMENTS

pytestmark = pytest.mark.postgres


@pytest.fixture
def seeded_pg(prepared_store) -> str:
    """A PostgreSQL store with the example grid and catalog and one task with jobs at executors (seeded
    once per session, a copy for each test)."""

    def seed(url: str) -> None:
        db = ["--db", url]
        for argv, text in ((["db", "init"], None), (["sites", "import", str(ROOT / "examples" / "sites.yaml")], None),
                           (["data", "import", str(ROOT / "examples" / "data.yaml")], None), (["data", "import", "-"], yaml.safe_dump(DS_IN)),
                           (["submit", "-"], json.dumps(SEED_TASK)), (["run", "--seed", "1"], None)):
            outcome = invoke([*argv, *db], input=text)
            assert outcome.exit_code == 0, outcome

    return prepared_store("postgresql", "fuzz seed", seed)


def _refused_or_taken(url: str, argv: list[str], text: str, allowed: set[str]) -> None:
    before = dump(url)
    outcome = invoke([*argv, "--db", url], input=text)
    assert_no_crash(outcome, codes=(0, 1, 2))
    changed = changed_tables(before, dump(url))
    if outcome.exit_code == 2:
        assert_one_error_line(outcome)
        assert changed == [], f"refused, but {changed} changed\n{outcome}"
    else:
        assert set(changed) <= allowed, outcome


@fuzz(12)
@given(text=broken_documents(KNOWN_DOCUMENTS))
def test_broken_task_specs_change_nothing_on_postgres(seeded_pg, text):
    _refused_or_taken(seeded_pg, ["submit", "-"], text, {"tasks", "task_params", "task_status_history", "task_outputs"})


@fuzz(8)
@given(text=broken_documents(st.just(SITES_EXAMPLE) | resource_catalogs()))
def test_broken_sites_files_change_nothing_on_postgres(seeded_pg, text):
    _refused_or_taken(seeded_pg, ["sites", "import", "-"], text, {"nuclei", "storage_endpoints", "sites", "site_storage"})


@fuzz(6)
@given(data=st.data())
def test_valid_task_specs_run_on_postgres(seeded_pg, data):
    spec = data.draw(task_specs())
    spec["unique_name"] = False  # the store lives across examples
    # ... and two examples may draw the same output name (decision 23: one task per output dataset)
    spec.setdefault("dependencies", {})["allow_task_duplication"] = True
    outcome = invoke(["submit", "-", "--db", seeded_pg], input=serialise(data.draw, spec))
    assert_no_crash(outcome, codes=(0,))
    assert_no_crash(invoke(["run", "--seed", "1", "--db", seeded_pg]), codes=(0, 1))
    assert_no_crash(invoke(["check", "--db", seeded_pg]), codes=(0,))


@pytest.fixture
def dispatched_pg(seeded_pg: str) -> tuple[str, list[dict]]:
    """The seeded PostgreSQL store with every activated job handed to an executor, and their payloads."""
    jobs = []
    for site in ("CERN-PROD_GRID", "CERN-PROD_MCORE", "BNL_PROD", "BNL_PROD_MCORE", "DESY-HH", "MWT2"):
        outcome = invoke(["jobs", "dispatch", "--site", site, "--count", "50", "-o", "json", "--db", seeded_pg])
        assert outcome.exit_code == 0, outcome
        jobs += json.loads(outcome.stdout)["jobs"]
    assert jobs
    return seeded_pg, jobs


@fuzz(8)
@given(data=st.data())
def test_job_reports_on_postgres(dispatched_pg, data):
    url, jobs = dispatched_pg
    lines = data.draw(st.lists(report_line(jobs), min_size=1, max_size=4))
    assert_no_crash(invoke(["jobs", "report", "-", "--db", url], input="\n".join(lines) + "\n"), codes=(0, 1, 2))
    assert_no_crash(invoke(["run", "--seed", "1", "--db", url]), codes=(0, 1))
    assert_no_crash(invoke(["check", "--db", url]), codes=(0,))


def test_every_input_of_the_trial_is_refused_on_postgres(seeded_pg, tmp_path):
    """The inputs of tests/fuzz/test_fuzz_refusals.py, one after the other on one PostgreSQL store."""
    assert invoke(["task", "kill", "1", "--db", seeded_pg]).exit_code == 0  # what the incexec inputs need
    for _, argv, stdin in ISSUE_INPUTS:
        before = dump(seeded_pg)
        for index, part in enumerate(argv):
            if part.startswith("{config}"):
                config = tmp_path / "config.yaml"
                config.write_text(CONFIG_TEXT[part[len("{config}"):]])
                argv = [*argv[:index], str(config), *argv[index + 1:]]
        outcome = invoke([*argv, *([] if "--db" in argv else ["--db", seeded_pg])], input=stdin)
        assert_refused(outcome)
        assert changed_tables(before, dump(seeded_pg)) == [], outcome


@fuzz(10)
@given(data=st.data())
def test_fixed_values_and_like_patterns_on_postgres(seeded_pg, data):
    template, allowed = data.draw(st.sampled_from(FIXED_VALUES))
    value = data.draw(typos(allowed))
    before = dump(seeded_pg)
    outcome = invoke([*(value if part == "{}" else part for part in template), "--db", seeded_pg])
    assert_no_crash(outcome)
    if value not in allowed:
        assert_refused(outcome)
        assert changed_tables(before, dump(seeded_pg)) == []
    pattern = data.draw(st.sampled_from(["%", "_", "d_cs", "ds%", "%in", "ds.in", "ds.i*", "DS.IN"]))
    listed = json.loads(invoke(["data", "list", pattern, "-o", "json", "--db", seeded_pg]).stdout)
    assert [d["name"] for d in listed] == (["ds.in"] if pattern in ("ds.in", "ds.i*") else [])


@fuzz(20)
@given(command=st.sampled_from(REFERENCE_COMMANDS), reference=st.sampled_from(REFERENCES),
       option=st.sampled_from([[], *GLOBAL_OPTIONS]), at=st.integers(0, 4))
def test_references_and_global_options_on_postgres(seeded_pg, command, reference, option, at):
    """Ids past INTEGER and BIGINT (NumericValueOutOfRange on PostgreSQL, where SQLite would take them),
    with a global option, right or wrong, anywhere on the line."""
    argv = [*command, reference]
    argv[min(at, len(argv)):min(at, len(argv))] = option
    before = dump(seeded_pg)
    outcome = invoke(argv, env={"JEDICTL_DB": seeded_pg})
    assert "internal error" not in outcome.stderr and outcome.exit_code in (0, 1, 2, 3), outcome
    if outcome.exit_code in (2, 3):
        if "Traceback" not in outcome.stderr:
            assert_one_error_line(outcome)
        assert changed_tables(before, dump(seeded_pg)) == [], outcome
