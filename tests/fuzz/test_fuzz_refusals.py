"""Fuzzing what cannot be right (issue 17): every input the trial found accepted silently is refused --
one `jedictl: error:` line, exit 2, the store exactly as it was -- and so are its neighbours drawn at
random: typos of fixed values, numbers outside a setting's range, catalog names with path or shell
syntax, documents with a key given twice, reports that contradict themselves or their job."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jedictl.config import Settings
from jedictl.engine.input.fields import CATALOG_NAME_RE
from jedictl.model.choices import CATALOG_KINDS, CATALOG_STATES, JOB_STATUSES, PILOT_STATES, RESOURCE_TYPES, RETRY_ACTIONS, SITE_STATUSES, TASK_STATUSES
from tests.conftest import ROOT
from tests.fuzz.strategies import EDGE_VALUES, HOSTILE, NASTY_CHARS, any_text, serialise, with_a_key_twice
from tests.fuzz.support import assert_no_crash, assert_one_error_line, assert_refused, changed_tables, dump, fuzz, invoke
from tests.fuzz.test_fuzz_catalogs import SITES_EXAMPLE
from tests.fuzz.test_fuzz_task_specs import KNOWN_DOCUMENTS

#: The seeded store's first site with jobs, and its first task (running: a kill makes it final).
SITE = "CERN-PROD_GRID"

#: (what to run first, the command, stdin) -> refused: each input of the issue, on the seeded store.
#: "{config}" is a configuration file holding CONFIG_TEXT[...] (the setting out of its range).
CONFIG_TEXT = {"lease": "lease:\n  seconds: -5\n", "sloppy": "dispatch:\n  sloppy_ratio: 5\n",
               "twice": "lease:\n  seconds: 60\nlease:\n  seconds: 30\n"}
ISSUE_INPUTS = [
    ([], ["task", "list", "--status", "runing"], None),
    ([], ["jobs", "list", "--status", "activ"], None),
    ([], ["data", "list", "--kind", "bogus"], None),
    ([], ["data", "list", "--state", "bogus"], None),
    ([], ["sites", "list", "--status", "bogus"], None),
    ([], ["retry-rules", "list", "--action", "bogus"], None),
    ([], ["pilots", "list", "--state", "bogus"], None),
    ([], ["jobs", "dispatch", "--site", SITE, "--resource-type", "NOPE"], None),
    ([], ["jobs", "dispatch", "--site", SITE, "--executor", "x" * 129], None),
    ([["task", "kill", "1"]], ["task", "incexec", "1", "-"], "site: NOWHERE\n"),
    ([["task", "kill", "1"]], ["task", "incexec", "1", "-"], "cloud: MARS\n"),
    ([["task", "kill", "1"]], ["task", "incexec", "1", "-"], "excludedSite: [CERN-PROD_GIRD]\n"),
    ([], ["task", "list", "--now", "yesterday"], None),
    ([], ["--config", "/tmp", "task", "list"], None),
    ([], ["--config", "{config}lease", "task", "list"], None),
    ([], ["--config", "{config}sloppy", "jobs", "dispatch", "--site", SITE], None),
    ([], ["--config", "{config}twice", "task", "list"], None),
    ([], ["--db", "", "task", "list"], None),
    ([], ["sites", "import", "-"], json.dumps({"sites": [{"name": "../../etc"}]})),
    ([], ["sites", "import", "-"], json.dumps({"sites": [{"name": "X; DROP TABLE sites"}]})),
    ([], ["sites", "import", "-"], json.dumps({"storage_endpoints": [{"name": "../DISK"}]})),
    ([], ["sites", "import", "-"], "nuclei:\n  - {name: N1}\nnuclei:\n  - {name: N2}\n"),
    ([], ["submit", "-"], '{"taskName": "t", "taskName": "u"}'),
    ([], ["task", "pause", "1", "--comment", "c" * 4001], None),
]


def _run(url: str, argv: list[str], stdin: str | None = None):  # noqa: ANN202 - an Outcome
    # `--db ''` is the input under test there: the store is not named again after it.
    db = [] if "--db" in argv else ["--db", url]
    return invoke([*argv, *db], input=stdin)


@pytest.mark.parametrize(("setup", "argv", "stdin"), ISSUE_INPUTS, ids=[" ".join(case[1])[:40] for case in ISSUE_INPUTS])
def test_every_input_of_the_trial_is_refused(stores, setup, argv, stdin, tmp_path):
    url = stores.fresh()
    try:
        for step in setup:
            assert _run(url, step).exit_code == 0
        before = dump(url)
        for index, part in enumerate(argv):
            if part.startswith("{config}"):
                config = tmp_path / "config.yaml"
                config.write_text(CONFIG_TEXT[part[len("{config}"):]])
                argv = [*argv[:index], str(config), *argv[index + 1:]]
        outcome = _run(url, argv, stdin)
        assert_refused(outcome)
        assert changed_tables(before, dump(url)) == [], outcome
    finally:
        stores.discard(url)


def test_like_wildcards_and_misspelt_keys_on_the_seeded_store(stores):
    url = stores.fresh()
    try:
        for pattern in ("%", "d_cs", "_", "ds%", "%in"):
            outcome = _run(url, ["data", "list", pattern, "-o", "json"])
            assert outcome.exit_code == 0 and json.loads(outcome.stdout) == [], outcome
        assert [d["name"] for d in json.loads(_run(url, ["data", "list", "ds.i*", "-o", "json"]).stdout)] == ["ds.in"]
        task = json.loads((ROOT / "examples" / "panda-taskparams" / "prun_files.json").read_text())
        task.update(taskName="fz.misspelt", nFilesPerjob=2, allowTaskDuplication=True)
        outcome = _run(url, ["submit", "-"], json.dumps(task))
        assert outcome.exit_code == 0 and "did you mean nFilesPerJob?" in outcome.stderr, outcome
    finally:
        stores.discard(url)


# --------------------------------------------------------------------------- typos of fixed values

#: (command line with {} for the value, the values it takes)
FIXED_VALUES = [
    (["task", "list", "--status", "{}"], TASK_STATUSES),
    (["jobs", "list", "--status", "{}"], JOB_STATUSES),
    (["data", "list", "--kind", "{}"], CATALOG_KINDS),
    (["data", "list", "--state", "{}"], CATALOG_STATES),
    (["sites", "list", "--status", "{}"], SITE_STATUSES),
    (["retry-rules", "list", "--action", "{}"], RETRY_ACTIONS),
    (["pilots", "list", "--state", "{}"], PILOT_STATES),
    (["jobs", "dispatch", "--site", SITE, "--resource-type", "{}"], RESOURCE_TYPES),
]


@st.composite
def typos(draw: st.DrawFn, allowed: tuple[str, ...]) -> str:
    """An allowed value with one character dropped, doubled, changed or its case flipped -- or any text."""
    value = draw(st.sampled_from(allowed))
    position = draw(st.integers(0, len(value) - 1))
    edit = draw(st.sampled_from(["drop", "double", "change", "case", "text", "same"]))
    if edit == "drop":
        return value[:position] + value[position + 1:]
    if edit == "double":
        return value[:position] + value[position] + value[position:]
    if edit == "change":
        return value[:position] + draw(st.sampled_from("aeiouxz_-%*")) + value[position + 1:]
    if edit == "case":
        return value.swapcase()
    if edit == "text":
        return draw(any_text.filter(lambda text: not text.startswith("-")))
    return value


@fuzz(60)
@given(data=st.data())
def test_a_fixed_value_is_taken_or_refused_naming_the_allowed_ones(stores, data):
    template, allowed = data.draw(st.sampled_from(FIXED_VALUES))
    value = data.draw(typos(allowed))
    argv = [value if part == "{}" else part for part in template]
    url = stores.fresh()
    try:
        outcome = _run(url, [*argv, "-o", "json"])
        assert_no_crash(outcome)
        if value in allowed:
            assert outcome.exit_code == 0, outcome
        else:
            assert_refused(outcome)
            assert "(allowed: " + ", ".join(allowed) in outcome.stderr, outcome
            assert changed_tables(stores.template_dump, dump(url)) == [], outcome
    finally:
        stores.discard(url)


# ------------------------------------------------------------------------------------- settings

def _numbers(cls: type, prefix: str = "") -> list[tuple[str, dict]]:
    import dataclasses
    from typing import get_type_hints

    hints = get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            found += _numbers(hints[f.name], f"{prefix}{f.name}.")
        elif hints[f.name] in (int, float):
            found.append((f"{prefix}{f.name}", dict(f.metadata)))
    return found


NUMBERS = _numbers(Settings)


@fuzz(80)
@given(setting=st.sampled_from(NUMBERS), value=st.sampled_from(EDGE_VALUES) | st.integers(-(10**12), 10**12) | st.floats(),
       through=st.sampled_from(["file", "env"]))
def test_a_number_outside_its_setting_s_range_is_refused_naming_the_key(setting, value, through, tmp_path_factory):
    key, limits = setting
    section, _, name = key.rpartition(".")
    if through == "file":
        config = tmp_path_factory.mktemp("config") / "c.yaml"
        document = {section: {name: value}} if section else {name: value}
        try:
            config.write_text(yaml.safe_dump(document))
        except yaml.YAMLError:
            return
        outcome = invoke(["config", "show", "--config", str(config), "-o", "json"])
    else:
        outcome = invoke(["config", "show", "-o", "json"], env={"JEDICTL_" + key.upper().replace(".", "__"): json.dumps(value)})
    assert_no_crash(outcome, codes=(0, 2))
    if outcome.exit_code == 2:
        assert_one_error_line(outcome)
        return
    shown = {row["key"]: row["value"] for row in json.loads(outcome.stdout)}[key]
    low, high, above = limits.get("low"), limits.get("high"), limits.get("above")
    assert (low is None or shown >= low) and (high is None or shown <= high) and (above is None or shown > above), (key, shown)


# ------------------------------------------------------------------------------- catalog names

catalog_names = st.one_of(
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]{0,70}\Z"),
    any_text,
    st.sampled_from(["../../etc", "X; DROP TABLE sites", "/etc", "a/b", "..", ".", "-rf", "$(touch PWNED)", *HOSTILE, *NASTY_CHARS]),
    st.lists(st.sampled_from(["a", "-", ".", "/", "..", "_", " ", "'", "9"]), min_size=1, max_size=8).map("".join),
)


@fuzz(60)
@given(name=catalog_names, kind=st.sampled_from(["sites", "nuclei", "storage_endpoints"]), field=st.sampled_from(["name", "cloud"]),
       data=st.data())
def test_catalog_names_are_letters_digits_and_dot_dash_underscore(stores, name, kind, field, data):
    if field == "cloud" and kind == "storage_endpoints":
        field = "nucleus"
    entry = {"name": name} if field == "name" else {"name": "FZ1", field: name}
    url = stores.fresh()
    try:
        outcome = _run(url, ["sites", "import", "-"], serialise(data.draw, {kind: [entry]}))
        assert_no_crash(outcome, codes=(0, 2))
        limit = 128 if kind == "storage_endpoints" and field == "name" else 64
        valid = isinstance(name, str) and CATALOG_NAME_RE.match(name) is not None and len(name) <= limit
        if field == "nucleus" and valid:
            valid = name in {n["name"] for n in SITES_EXAMPLE["nuclei"]}  # a reference: it must resolve too
        if field != "name" and name == "":
            valid = True  # an empty cloud or nucleus is none given
        if valid:
            assert outcome.exit_code == 0, outcome
        else:
            assert_refused(outcome)
            assert changed_tables(stores.template_dump, dump(url)) == [], outcome
    finally:
        stores.discard(url)


# ------------------------------------------------------------------------------ a key given twice

@fuzz(40)
@given(data=st.data(), target=st.sampled_from([(["submit", "-"], KNOWN_DOCUMENTS),
                                               (["sites", "import", "-"], st.just(SITES_EXAMPLE))]))
def test_a_document_with_a_key_given_twice_is_refused(stores, data, target):
    argv, documents = target
    document = data.draw(documents)
    text = serialise(data.draw, document)
    twice = with_a_key_twice(text)
    if twice == text:
        return  # flow-style YAML: no first key to give twice
    url = stores.fresh()
    try:
        outcome = _run(url, argv, twice)
        assert_refused(outcome)
        assert re.search(r"duplicate key", outcome.stderr), outcome
        assert changed_tables(stores.template_dump, dump(url)) == [], outcome
    finally:
        stores.discard(url)


def test_with_a_key_twice_gives_the_first_key_twice():
    assert with_a_key_twice('{"a": 1, "b": 2}') == '{"a": null, "a": 1, "b": 2}'
    assert with_a_key_twice("a: 1\nb: 2\n") == "a: 1\nb: 2\na: null\n"
    assert with_a_key_twice("{a: 1}") == "{a: 1}" and with_a_key_twice("- 1\n") == "- 1\n"


# ------------------------------------------------------------------------- free text is escaped

@fuzz(15)
@given(comment=any_text | st.text(st.characters(), max_size=30), user=st.sampled_from(["alice", "eve\x1b[2J", "bob\u202e", "c\nd"]))
def test_comments_are_stored_with_no_control_character(stores, comment, user):
    url = stores.fresh()
    try:
        outcome = _run(url, ["task", "pause", "1", "--comment", comment, "--user", user])
        assert_no_crash(outcome, codes=(0, 2))
        if outcome.exit_code == 2:
            assert_one_error_line(outcome)
            assert changed_tables(stores.template_dump, dump(url)) == [], outcome
            return
        unsafe = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
        after = dump(url)
        for table in ("task_commands", "task_status_history", "tasks"):
            for row in (row for row in after[table] if row not in stores.template_dump[table]):  # what the command wrote
                assert not any(isinstance(value, str) and unsafe.search(value) for value in row), (table, row)
        shown = _run(url, ["task", "show", "1"])
        assert not any(unsafe.search(line) for line in shown.stdout.split("\n")), shown
    finally:
        stores.discard(url)

