"""One focused test per bug the fuzz and hostile-input suites found in the parsers and readers: each
input below used to crash a command ("internal error"), overflow a column, hang, or slip through."""

from __future__ import annotations

import json
import math
import pathlib
import time
from contextlib import contextmanager

import pytest
import yaml

from jedictl.clock import parse_time
from jedictl.engine.input import fields
from jedictl.engine.input.documents import load_document, parse_json, parse_text
from jedictl.engine.input.expressions import evaluate, parse, parse_variables
from jedictl.engine.jobs.resources import job_max_walltime
from jedictl.engine.task.options import BY_NAME, coerce
from jedictl.engine.jobs.reports import parse_reports
from jedictl.engine.jobs.retry_rules import parse_rules_text
from jedictl.engine.task.submission import parse_definition
from jedictl.engine.task.definition import NAME_RE, STREAM_RE, USER_RE, check_placeholders
from jedictl.engine.task.templates import placeholder_problem
from jedictl.errors import BadInput
from jedictl.safe_yaml import UniqueKeyLoader, unique_key_loader
from jedictl.redact import mask_url

SPEC = {"name": "t.1", "command": "--in=${IN} --out=${OUTPUT0}", "inputs": [{"dataset": "ds.in"}],
        "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}]}


def refused(function, *args, **kwargs) -> str:
    with pytest.raises(BadInput) as error:
        function(*args, **kwargs)
    return str(error.value)


# -------------------------------------------------------------------------------------------- documents

LOADERS = [pytest.param(unique_key_loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)), id="libyaml",
                        marks=pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")),
           pytest.param(unique_key_loader(yaml.SafeLoader), id="pyyaml")]


@pytest.fixture(params=LOADERS)
def yaml_loader(request, monkeypatch):
    """The YAML tests run with libyaml's parser (what jedictl uses where it exists) and PyYAML's own."""
    from jedictl.engine.input import documents

    monkeypatch.setattr(documents, "SAFE_LOADER", request.param)
    return request.param


def test_libyaml_is_used_where_it_exists_and_reads_what_pyyaml_reads():
    from jedictl.engine.input import documents

    assert documents.SAFE_LOADER is UniqueKeyLoader
    assert issubclass(UniqueKeyLoader, yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)
    for path in sorted((pathlib.Path(__file__).parents[3] / "examples").glob("*.yaml")):
        assert parse_text(path.read_text(), path.name) == yaml.safe_load(path.read_text()), path

def test_yaml_flow_style_is_yaml_not_broken_json(yaml_loader):
    """`{name: x, ...}` starts like JSON; it used to be refused as invalid JSON."""
    text = yaml.safe_dump(SPEC, default_flow_style=True)
    assert text.startswith("{") and load_document(text, "f") == SPEC
    assert "(invalid JSON)" in refused(parse_text, '{"a": 1,,}', "f")  # broken JSON still says so


@pytest.mark.parametrize("text", ["[" * 5000, "a: " + "[" * 5000, '{"a": ' * 3000])
def test_deep_nesting_is_refused_not_a_recursion_error(text, yaml_loader):
    assert refused(parse_text, text, "f") == "f: is nested too deeply"


@pytest.mark.parametrize("text,message", [
    ("a: " + "9" * 5000, "Exceeds the limit (4300 digits)"),
    ('{"a": ' + "9" * 5000 + "}", "Exceeds the limit (4300 digits)"),
    ("a: 2024-13-45", "month must be in 1..12"),
    ("<\x97", "characters are not allowed"),  # "special" (PyYAML's reader) or "control" (libyaml)
])
def test_values_the_parsers_cannot_build_are_refused(text, message, yaml_loader):
    assert message in refused(parse_text, text, "f")


def test_yaml_alias_cycles_and_bombs_are_refused(yaml_loader):
    assert "refers to the node that contains it" in refused(parse_text, "a: &x [*x]", "f")
    levels = ["a: &a [x,x,x,x,x,x,x,x,x]"] + [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(7)]
    started = time.monotonic()
    assert "aliases expand" in refused(parse_text, "\n".join(levels), "f")
    assert time.monotonic() - started < 5
    assert parse_text("base: &b {x: 1}\nitems: [*b, *b]", "f") == {"base": {"x": 1}, "items": [{"x": 1}, {"x": 1}]}  # plain aliases are fine


def test_a_key_given_twice_is_refused_in_yaml_and_json(yaml_loader):
    """PyYAML and json keep the last of two equal keys without a word: a sites file with `nuclei:` twice
    lost its first list."""
    assert refused(parse_text, "nuclei: []\nsites: []\nnuclei: [{name: N}]\n", "f") == \
        "f: line 3 column 1: found duplicate key 'nuclei' (first at line 1) (invalid YAML)"
    assert "found duplicate key 'a' (first at line 2)" in refused(parse_text, "x:\n - {a: 1, b: 2, a: 3}\n", "f")
    assert "found duplicate key 1" in refused(parse_text, "1: a\n1: b\n", "f")
    assert refused(parse_text, '{"nuclei": [], "nuclei": [1]}', "f") == "f: duplicate key 'nuclei' in an object (invalid JSON)"
    assert "duplicate key 'a'" in refused(parse_json, '[{"b": {"a": 1, "a": 1}}]', "f")
    # A merge key may still be overridden: that is what it is for.
    assert parse_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n", "f") == {"base": {"x": 1, "y": 2}, "d": {"x": 3, "y": 2}}
    assert parse_text("a: {x: 1}\nb: {x: 1}\n", "f") == {"a": {"x": 1}, "b": {"x": 1}}


def test_json_only_reader_names_the_line():
    assert refused(parse_json, "{not json", "stdin") == "stdin: line 1 column 2: Expecting property name enclosed in double quotes (invalid JSON)"


def test_retry_rules_in_json_keep_escaped_emoji():
    """Read by YAML, JSON's surrogate-pair escapes became two lone surrogates that no store can keep."""
    rules = [{"error_source": "pilot", "error_code": 1, "action": "no_retry", "description": "memory 🙂"}]
    assert parse_rules_text(json.dumps(rules))[0].description == "memory 🙂"


# ----------------------------------------------------------------------------------------------- fields

@pytest.mark.parametrize("value,message", [
    ("a\x00b", "must not contain control characters"), ("a\ud800b", "lone surrogate"), ("a\x1b[31m", "must not contain control characters"),
])
def test_text_a_store_cannot_keep_is_refused(value, message):
    assert message in refused(fields.text, value, "p")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e308 * 10])
def test_numbers_must_be_finite(value):
    assert refused(fields.number, value, "p") == "p: must be a finite number"


def test_integers_fit_a_bigint_by_default():
    assert fields.integer(2**63 - 1, "p") == 2**63 - 1
    assert refused(fields.integer, 2**63, "p") == f"p: must be at most {2**63 - 1}"
    assert refused(fields.integer, -(2**63) - 1, "p") == f"p: must be at least {-(2**63 - 1)}"


def test_names_in_lists_are_checked_like_text():
    assert fields.names(["a", "b"], "p") == ["a", "b"]
    assert "p[1]: must not contain control characters" == refused(fields.names, ["a", "b\x00"], "p")


@pytest.mark.parametrize("value,message", [
    ({"k": "a\x00"}, "a.k: must not contain NUL characters"), ({"k": [1, math.nan]}, "a.k[1]: must be a finite number"),
    ({"k": 10**30}, "a.k: is too large a number"), ({"\ud800": 1}, "a: a key must be valid Unicode text"),
    ({"k": yaml.safe_load("2024-01-01")}, "a.k: holds a date, which JSON cannot"), ({1: 2}, "a: key 1 must be a string"),
])
def test_free_form_values_must_be_storable(value, message):
    assert message in refused(fields.free_form, value, "a")


def test_free_form_values_nest_at_most_32_deep():
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["k"] = {}
        node = node["k"]
    assert "nests more than 32 levels deep" in refused(fields.free_form, deep, "attributes")


def test_the_submitted_document_must_be_storable():
    """PanDA's unknown keys are stored as given: a NUL or NaN in one broke the insert on PostgreSQL."""
    document = {"taskName": "t.1", "vo": "wlcg", "prodSourceLabel": "managed", "usePrefetcher": {"x": "\x00"},
                "jobParameters": [{"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=o.${SN}"}]}
    assert refused(parse_definition, document, user=None, default_user="me") == "usePrefetcher.x: must not contain NUL characters"


@pytest.mark.parametrize("pattern,text", [(NAME_RE, "ds.in\n"), (USER_RE, "bob\n"), (STREAM_RE, "IN\n")])
def test_names_with_a_trailing_newline_do_not_match(pattern, text):
    """`$` matches before a final newline: "ds.in\\n" used to pass as a dataset name."""
    assert pattern.match(text[:-1]) and not pattern.match(text)


# ------------------------------------------------------------------------------------ options, priority

@pytest.mark.parametrize("name,value,message", [
    ("ram_count", 2**31, "must be at most 2147483647"), ("walltime", "inf", "must be an integer"), ("cpu_time", "inf", "must be a finite number"),
    ("n_files", math.inf, "must be an integer"), ("cpu_time", "nan", "must be a finite number"), ("n_gb_per_job", math.inf, "finite"),
])
def test_options_fit_their_columns_and_are_finite(name, value, message):
    assert message in refused(coerce, BY_NAME[name], value, name)


@pytest.mark.parametrize("field,document", [("priority", {**SPEC, "priority": 2**31}), ("--priority", SPEC)])
def test_priorities_leave_room_in_their_integer_column(field, document):
    line = refused(parse_definition, document, user=None, default_user="me", priority=2**31 if field == "--priority" else None)
    assert line == f"{field}: must be at most 1000000000"


def test_a_job_walltime_past_any_clock_is_clamped_not_an_overflow():
    from dataclasses import dataclass

    @dataclass
    class Task:
        base_walltime: int = 0
        cpu_time: float = 1e300
        cpu_time_unit: str = "HS06sPerEvent"
        cpu_efficiency: int = 90

    @dataclass
    class Site:
        max_walltime: int | None = None
        core_power: float | None = None

    walltime, cpu = job_max_walltime(Task(), Site(), 1, 10**9)  # type: ignore[arg-type]
    assert walltime == cpu == 2**63 - 1


# -------------------------------------------------------------------------- templates and placeholders

@pytest.mark.parametrize("body,problem", [
    ("IN[__import__('os')]", "has a slice that is not [start:stop:step]"), ("IN/X", "unknown decorator /X"),
    ("SN/L", "decorator /L, which does not apply to SN"), ("IN/M[#.real]", "has /M arithmetic that cannot read"),
    ("SEQNUMBER/M[#;1]", "has /M arithmetic that cannot read"), ("IN/L x", "is not a placeholder jedictl can render"),
])
def test_placeholders_that_can_never_render_are_named_at_submission(body, problem):
    assert problem in placeholder_problem(body)
    assert problem in refused(check_placeholders, "${" + body + "}", {"IN", "IN2", "SEQNUMBER"}, "command", strict=False)


@pytest.mark.parametrize("body", ["IN", "IN/L", "IN[0:2]/T", "IN,IN2/L", "SN/P", "SEQNUMBER/M[#*10+1]", "IN/M[#/0]", "TRN_OUTPUT0:OUTPUT0"])
def test_renderable_placeholders_pass(body):
    assert placeholder_problem(body) is None


# ------------------------------------------------------------------------------------- queue criteria

def test_like_matching_is_not_exponential():
    """`%a%a...%b` as a regex backtracks exponentially: 10 of them took seconds, 30 would never end."""
    node = parse("workingGroup LIKE '" + "%a" * 30 + "%b'")
    started = time.monotonic()
    assert evaluate(node, {"workingGroup": "a" * 64}) is False
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("pattern,value,expected", [
    ("GP\\_%", "GP_TOP", True), ("GP\\_%", "GPxTOP", False), ("%%a", "ba", True), ("_", "", False), ("%", "", True),
    ("a%b%c", "abbbc", True), ("a%b%c", "acb", False), ("100\\%", "100%", True), ("x_z", "x\nz", True),
])
def test_like_semantics(pattern, value, expected):
    assert evaluate(parse(f"workingGroup LIKE '{pattern}'"), {"workingGroup": value}) is expected


@pytest.mark.parametrize("text", ["NOT " * 60 + "vo IS NULL", "(" * 60 + "vo IS NULL" + ")" * 60])
def test_criteria_nesting_is_bounded(text):
    assert "nests parentheses and NOTs more than 50 deep" in refused(parse, text, None, "c")


@pytest.mark.parametrize("variables,message", [({"p1": [1]}, "c.p1: must be a string or a number"), ({"p1": math.nan}, "c.p1: must be a finite number"),
                                               ({"p1": "a\x00"}, "c.p1: must not contain control characters")])
def test_bind_variables_are_scalars(variables, message):
    assert message in refused(parse_variables, variables, "c")


# ------------------------------------------------------------------------------------------- reports

@pytest.mark.parametrize("line,reason", [
    ('{"job_id": 1, "status": "failed", "ended_at": 9223372036854775807}', "line 1.ended_at: must be an ISO-8601 time or epoch seconds"),
    ('{"job_id": 1, "status": "failed", "ended_at": 1e300}', "line 1.ended_at: must be an ISO-8601 time or epoch seconds"),
    ('{"job_id": 1, "status": "failed", "started_at": NaN}', "line 1.started_at: must be an ISO-8601 time or epoch seconds"),
    ('{"job_id": 1, "status": "failed", "ended_at": -99999999999999}', "line 1.ended_at: must be an ISO-8601 time or epoch seconds"),
    ('{"job_id": 1, "status": "failed", "ended_at": "0001-01-01T00:00:00"}', "line 1.ended_at: must lie between 1970-01-01 and 9000-01-01"),
    ('{"job_id": 1, "status": "failed", "error_source": "pilot", "error_code": 2147483648}', "line 1.error_code: must be at most 2147483647"),
    ('{"job_id": 1, "status": "failed", "trans_exit_code": -2147483649}', "line 1.trans_exit_code: must be at least -2147483648"),
    ('{"job_id": 1, "status": "failed", "max_pss": 1099511627777}', "line 1.max_pss: must be at most 1099511627776"),
    ('{"job_id": 1, "status": "failed", "wall_time": 1e12}', "line 1.wall_time: must be at most 2147483647 seconds"),
    ("[" * 3000, "not JSON (nested too deeply)"),
    ('{"job_id": ' + "9" * 5000 + "}", "not JSON (Exceeds the limit (4300 digits)"),
])
def test_report_lines_that_crashed_the_reader_are_refused(line, reason):
    reports, refused_lines = parse_reports(line)
    assert reports == [] and refused_lines[0].reason.startswith(reason)


def test_times_near_the_ends_of_the_calendar_are_value_errors():
    with pytest.raises(ValueError, match="out of range"):
        parse_time("0001-01-01T00:00:00+01:00")


# ------------------------------------------------------------------------------------------ passwords

@pytest.mark.parametrize("url,masked", [
    ("postgresql://u:SECRET@h/db", "postgresql://u:***@h/db"),
    ("postgresql://:SECRET@h/db", "postgresql://:***@h/db"),
    ("postgresql://u:SE@CRET@h:1/db", "postgresql://u:***@h:1/db"),
    ("postgresql://u@h/db?password=SECRET", "postgresql://u@h/db?password=***"),
    ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
])
def test_mask_url(url, masked):
    assert mask_url(url) == masked


def test_a_report_keeps_line_separators_inside_its_strings():
    """JSON keeps U+2028 and NEL raw inside strings; splitting at them cut one report into refused pieces.
    (The diag keeps them written as escapes, as every control character: it is printed on terminals.)"""
    line = json.dumps({"job_id": 1, "status": "failed", "error_source": "pilot", "error_code": 1, "error_diag": "a\u2028b\x85c"},
                      ensure_ascii=False)
    reports, refused_lines = parse_reports(line + "\r\n" + line + "\n")
    assert refused_lines == [] and [r.error_diag for r in reports] == ["a\\u2028b\\x85c"] * 2


def test_a_null_global_share_is_refused():
    from jedictl.engine.shares.fair_share import load_sections

    assert refused(load_sections, [], [{"name": "A", "value": 1}, None]) == "global_shares[1]: must be a mapping"


# --------------------------------------------------------------- templates and criteria never run code

HOSTILE_TEMPLATE = ("--in=${IN} ${__import__('os').system('touch PWNED')} $(touch PWNED) `touch PWNED` {{7*7}} {0.__class__} "
                    "%s%n --seed=${SEQ/M[#*10+1]} ${SN/P}")


@contextmanager
def no_code_execution():
    """eval, exec, compile and __import__ raise inside the block. A context manager, not a monkeypatch
    fixture: pytest's own teardown imports modules, and must run after the builtins are restored."""
    import builtins

    def forbidden(*args, **kwargs):
        raise AssertionError(f"code execution attempted with {args[:1]!r}")

    saved = {name: getattr(builtins, name) for name in ("eval", "exec", "compile", "__import__")}
    try:
        for name in saved:
            setattr(builtins, name, forbidden)
        yield
    finally:
        for name, value in saved.items():
            setattr(builtins, name, value)


def test_rendering_hostile_templates_runs_no_code():
    from jedictl.engine.task.templates import InputFile, InputStream, JobContext, UnresolvedPlaceholder, render_job_parameters

    job = JobContext(task_id=12, serial_nr=7, inputs=(InputStream("IN", "ds.in", (InputFile("f.1.root"),), is_master=True),
                                                       InputStream("SEQ", "seq_number", (InputFile("4"),), is_master=False)))
    with no_code_execution():
        text = render_job_parameters(HOSTILE_TEMPLATE, job).text
        for hostile in ("${IN.__class__}", "${SEQ/M[__import__('os')]}"):  # refused, never evaluated
            with pytest.raises(UnresolvedPlaceholder):
                render_job_parameters(hostile, job)
    assert text == ("--in=f.1.root ${__import__('os').system('touch PWNED')} $(touch PWNED) `touch PWNED` {{7*7}} {0.__class__} "
                    "%s%n --seed=41 000007")


@pytest.mark.parametrize(("criteria", "matches"), [("processingType = '__import__(\"os\")'", False),
                                                   ("workingGroup LIKE '%{{7*7}}%' OR campaign IS NULL", True),
                                                   ("processingType IN ('a''; DROP TABLE tasks; --', 'b')", True)])
def test_evaluating_criteria_runs_no_code(criteria, matches):
    node = parse(criteria, None)
    with no_code_execution():
        assert evaluate(node, {"processingType": "a'; DROP TABLE tasks; --", "workingGroup": "{{7*7}}"}) is matches
