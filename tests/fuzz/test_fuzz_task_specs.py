"""Fuzzing `jedictl submit` with task specs in both formats: valid ones are taken (and the agents
process them without a crash), broken ones are refused with one line, exit 2, and the store untouched."""

from __future__ import annotations

import json
import re

import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import EXAMPLES, ROOT
from tests.fuzz.conftest import SEED_TASK
from tests.fuzz.strategies import broken_documents, panda_params, serialise, task_specs
from tests.fuzz.support import assert_no_crash, assert_one_error_line, changed_tables, dump, fuzz, invoke

#: The examples of docs/task-spec.md and PanDA's own task parameters: what mutations start from.
DOC_EXAMPLES = [yaml.safe_load(block) for block in re.findall(r"<!-- example: [\w-]+ -->\n```yaml\n(.*?)```",
                                                               (ROOT / "docs" / "task-spec.md").read_text(), re.S)]
PANDA_EXAMPLES = [json.loads(path.read_text()) for path in sorted(EXAMPLES.glob("*.json"))] + [SEED_TASK]
KNOWN_DOCUMENTS = st.sampled_from(DOC_EXAMPLES + PANDA_EXAMPLES) | task_specs() | panda_params()
#: What a successful submit writes; anything else changing is a bug.
SUBMIT_TABLES = ["task_outputs", "task_params", "task_status_history", "tasks"]


def test_the_examples_are_there():
    assert len(DOC_EXAMPLES) >= 5 and len(PANDA_EXAMPLES) >= 3


def _submit_and_run(stores, text: str) -> None:
    url = stores.fresh()
    try:
        outcome = invoke(["submit", "-", "--db", url, "-o", "json"], input=text)
        assert_no_crash(outcome, codes=(0,))
        assert json.loads(outcome.stdout)["status"] == "registered"
        assert changed_tables(stores.template_dump, dump(url)) == SUBMIT_TABLES
        # The agents take a valid task as far as it goes without a crash (a pass that met errors exits 1),
        # and the store stays consistent.
        assert_no_crash(invoke(["run", "--seed", "1", "--db", url]), codes=(0, 1))
        assert_no_crash(invoke(["check", "--db", url]), codes=(0,))
    finally:
        stores.discard(url)


@fuzz(15)
@given(data=st.data())
def test_valid_task_specs_are_taken(stores, data):
    _submit_and_run(stores, serialise(data.draw, data.draw(task_specs())))


@fuzz(10)
@given(data=st.data())
def test_valid_panda_task_parameters_are_taken(stores, data):
    _submit_and_run(stores, serialise(data.draw, data.draw(panda_params())))


@fuzz(150)
@given(text=broken_documents(KNOWN_DOCUMENTS))
def test_broken_task_specs_are_refused_cleanly(stores, text):
    url = stores.fresh()
    try:
        outcome = invoke(["submit", "-", "--db", url], input=text)
        assert_no_crash(outcome, codes=(0, 2))
        after = dump(url)
        if outcome.exit_code == 2:
            assert_one_error_line(outcome)
            assert after == stores.template_dump, f"refused, but {changed_tables(stores.template_dump, after)} changed"
        else:  # the mutation left a valid task
            assert changed_tables(stores.template_dump, after) == SUBMIT_TABLES
    finally:
        stores.discard(url)


@fuzz(30)
@given(text=broken_documents(KNOWN_DOCUMENTS))
def test_dry_run_of_broken_specs_never_crashes(text, tmp_path_factory):
    missing = tmp_path_factory.getbasetemp() / "no-store-here.db"
    outcome = invoke(["submit", "-", "--dry-run", "--db", f"sqlite:///{missing}", "-o", "json"], input=text)
    assert_no_crash(outcome, codes=(0, 2))
    if outcome.exit_code == 2:
        assert_one_error_line(outcome)
    else:
        assert json.loads(outcome.stdout)["name"]
    assert not missing.exists()
