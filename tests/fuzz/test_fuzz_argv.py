"""Fuzzing command lines: random argv drawn from the command tree -- every command, options with random
values, random positional arguments -- against a seeded store. No traceback, only documented exit
codes, and a command that says "bad input" (exit 2) has written nothing."""

from __future__ import annotations

import enum
import typing
from pathlib import Path

import typer.main
from hypothesis import given
from hypothesis import strategies as st

from jedictl.cli import app
from tests.conftest import EXAMPLES, ROOT
from tests.fuzz.strategies import HOSTILE, free_text
from tests.fuzz.support import assert_no_crash, assert_one_error_line, changed_tables, dump, fuzz, invoke

GLOBAL = {"db", "config", "output", "now", "verbose", "quiet", "help"}
#: Commands left out: `demo` builds a whole grid (minutes), `completion install` writes the user's shell files.
SKIPPED_COMMANDS = {("demo",), ("completion", "install")}
#: Options left out: a loop never ends; --pace only slows the demo.
SKIPPED_OPTIONS = {"loop", "pace"}
#: Parameters naming a file the command writes: only plain names in the scratch directory.
WRITTEN_FILES = {"target", "metrics_file"}


def _leaves(command, path=()):  # noqa: ANN001, ANN202 - Click/Typer command objects
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            yield from _leaves(sub, path + (name,))
    elif path not in SKIPPED_COMMANDS:
        yield path, [p for p in command.params if p.name not in GLOBAL and p.name not in SKIPPED_OPTIONS]


COMMANDS = list(_leaves(typer.main.get_command(app)))

FILES = [str(EXAMPLES / "prun_files.json"), str(ROOT / "examples" / "sites.yaml"), str(ROOT / "examples" / "data.yaml"),
         str(ROOT / "examples" / "queue-shares.yaml"), str(ROOT / "examples" / "retry-rules.yaml"), "-", "/dev/null", "no-such-file.yaml", "."]
NAMES = ["1", "2", "3", "1.1", "2.3", "0", "-1", "99999", "CERN-PROD_GRID", "MWT2", "CERN-PROD", "ds.in", "f.001.root", "managed",
         "evgensimul", "Production", "pilot", "1212", "running", "finished", "failed", "online", "offline", "*", "%", "ds.%", "user",
         # issue 17: typos of fixed values, LIKE wildcards, names with path or SQL syntax
         "runing", "activ", "bogus", "NOPE", "SCORE", "score", "no_retry", "container", "open", "d_cs", "_", "../../etc",
         "X; DROP TABLE sites", "/tmp"]
INTEGERS = ["0", "1", "2", "-1", "7", "100", "2147483648", "9223372036854775808", "99999999999999999999999", "1.5", "abc", "", "nan"]
FLOATS = ["0", "0.5", "1", "-1", "1e400", "nan", "inf", "-inf", "abc", ""]
TIMES = ["2026-01-01T00:00:00", "2026-01-01T00:00:00Z", "2026-13-45", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
         "0001-01-01", "9999-12-31", "now", "", "yesterday"]
text = st.one_of(st.sampled_from(NAMES + FILES), free_text(30), st.sampled_from(HOSTILE))


def _base(annotation):  # noqa: ANN001, ANN202
    """int from Optional[int], List[int], ... ."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return _base(args[0]) if args else annotation


def _values(param) -> st.SearchStrategy[str]:  # noqa: ANN001
    kind = _base(param.type_descriptor.annotation)
    if param.name in WRITTEN_FILES:
        return st.sampled_from(["out.yaml", "metrics.prom", "sub/dir/x.txt", "", "."])
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return st.sampled_from([member.value for member in kind]) | text
    if kind is int:
        return st.sampled_from(INTEGERS) | st.integers(-3, 30).map(str)
    if kind is float:
        return st.sampled_from(FLOATS)
    if kind is Path or param.name in ("source", "config"):
        return st.sampled_from(FILES) | text
    return text


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    path, params = draw(st.sampled_from(COMMANDS))
    argv = list(path)
    options = [p for p in params if type(p).__name__ == "TyperOption"]
    arguments = [p for p in params if type(p).__name__ != "TyperOption"]
    for option in draw(st.lists(st.sampled_from(options), max_size=4, unique_by=lambda p: p.name)) if options else []:
        flags = option.opts + (getattr(option, "secondary_opts", None) or [])
        argv.append(draw(st.sampled_from(flags)))
        if not getattr(option, "is_flag", False) and not getattr(option, "count", False):
            argv.append(draw(_values(option)))
    for argument in arguments:
        if argument.nargs == -1:
            argv += draw(st.lists(_values(argument), max_size=3))
        elif argument.required or draw(st.booleans()):
            argv.append(draw(_values(argument)))
    if draw(st.integers(0, 4)) == 0:
        argv += ["-o", draw(st.sampled_from(["json", "yaml", "tsv", "table", "xml"]))]
    if draw(st.integers(0, 6)) == 0:
        argv += ["--now", draw(st.sampled_from(TIMES))]
    if draw(st.integers(0, 8)) == 0:
        argv.append(draw(st.sampled_from(["-q", "-v", "--help", "--no-such-option"])))
    return argv


def test_the_command_tree_is_covered():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"submit", "run", "jobs report", "sites import", "queue-shares set", "task incexec", "split"} <= names
    assert len(COMMANDS) > 50


@fuzz(200)
@given(argv=command_lines(), stdin=st.sampled_from(["", "{}", "[]", "- a\n", '{"job_id": 1, "status": "finished"}\n']) | text)
def test_random_command_lines(stores, in_tmp_dir, argv, stdin):
    url = stores.fresh()
    try:
        outcome = invoke([*argv, "--db", url], input=stdin)
        assert_no_crash(outcome)
        if outcome.exit_code in (2, 3):
            assert_one_error_line(outcome)
            changed = changed_tables(stores.template_dump, dump(url))
            assert changed == [], f"refused, but {changed} changed\n{outcome}"
    finally:
        stores.discard(url)
