"""Help and man pages read the same way for every command: word placeholders, defaults as values,
bounds in words, EXAMPLES that work, the glossary one step away, and no escapes under NO_COLOR."""

from __future__ import annotations

import io
import os
import pty
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.core

from jedictl import manpages
from jedictl.commands._examples import EXAMPLES, GLOSSARY
from tests.conftest import ROOT, click_command, invoke

TREE = manpages.command_tree(__import__("jedictl.cli", fromlist=["app"]).app)
def _all_nodes(node: manpages.Node) -> list[manpages.Node]:
    return [node, *(n for child in node.children for n in _all_nodes(child))]


NODES = _all_nodes(TREE)
LEAVES = [node for node in NODES if not node.is_group]


def help_text(node: manpages.Node) -> str:
    result = invoke([*node.path[1:], "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


# --------------------------------------------------------------------------------- placeholders

TYPER_WORDS = re.compile(r"<(int|float|str|bool|path|list\[|int range|float range)[^>]*>|\[x[<>]=|[<>]=x\]|x<=|\[default: [a-z_]+\.[a-z_]+\]")
PLACEHOLDER = re.compile(r"^(\{[^{}|]+(\|[^{}|]+)+\}|[A-Z][A-Z0-9_]*(\[?[:=][A-Z0-9_\[\]:]+)?(\|-)?(\.\.\.)?)$")


@pytest.mark.parametrize("node", NODES, ids=lambda node: node.name)
def test_help_speaks_in_words_not_typers_types(node):
    text = help_text(node)
    assert not TYPER_WORDS.search(text), TYPER_WORDS.search(text)


def test_every_option_has_a_word_placeholder_and_switches_have_none():
    seen = set()
    for node in NODES:
        for param in node.params():
            if param.param_type_name != "option":
                continue
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                assert param.metavar == "", f"{node.name} {param.opts[0]}: a switch takes no value"
                continue
            assert PLACEHOLDER.match(param.metavar or ""), f"{node.name} {param.opts[0]}: placeholder {param.metavar!r}"
            seen.add(param.metavar)
    assert {"INTEGER", "TEXT", "SITE", "TASK_ID", "STATUS", "{table|json|yaml|tsv}"} <= seen


def test_objects_are_named_the_same_everywhere():
    """An option naming a task is TASK_ID wherever it appears, a site SITE (the man pages say the same)."""
    by_name: dict[str, set[str]] = {}
    for node in LEAVES:
        for param in node.own_params():
            if param.param_type_name == "option" and param.name in ("task_id", "parent", "site", "sites", "cloud", "nucleus", "user"):
                by_name.setdefault(param.name, set()).add(param.metavar)
    assert by_name["task_id"] == by_name["parent"] == {"TASK_ID"}
    assert by_name["site"] | by_name["sites"] == {"SITE"}
    assert by_name["user"] == {"USER"}


def test_bounds_are_words_in_help_and_man_page():
    text = " ".join(help_text(next(n for n in LEAVES if n.name == "jedictl task list")).split())
    assert "At most this many tasks, newest first. At least 1. [default: 100]" in text
    page = (ROOT / "man" / "jedictl-task.1").read_text()
    assert "\\fB\\-\\-limit\\fR \\fIINTEGER\\fR\nAt most this many tasks, newest first. At least 1. Default: \\fB100\\fR.\n" in page
    pilot = " ".join(help_text(next(n for n in LEAVES if n.name == "jedictl pilot")).split())
    assert "Payloads run in parallel. From 1 to 256." in pilot


def test_a_default_from_the_configuration_is_shown_with_its_value():
    from jedictl.config import Settings

    text = " ".join(help_text(next(n for n in LEAVES if n.name == "jedictl refine")).split())
    assert f"(default: {Settings().refine.limit}, from config refine.limit)" in text
    for node in LEAVES:  # no help names a setting as its default without saying its value
        for param in node.params():
            assert not re.search(r"default: [a-z_]+\.[a-z_]+\)", param.help or ""), f"{node.name} {param.opts}: {param.help}"
    page = (ROOT / "man" / "jedictl-jobs.1").read_text()
    assert f"(default: {Settings().dispatch.count}, from config dispatch.count)" in page


def test_help_and_man_page_show_the_same_placeholder():
    for top in TREE.children:
        page = (ROOT / "man" / f"{top.page}.1").read_text()
        for node in top.leaves():
            for param in node.own_params():
                if param.param_type_name == "option" and param.metavar:
                    label = ", ".join(f"\\fB{manpages.esc(o)}\\fR" for o in sorted(param.opts, key=lambda o: (o.startswith("--"), o)))
                    assert f"{label} \\fI{manpages.esc(param.metavar)}\\fR" in page, (node.name, param.opts)


# ------------------------------------------------------------------------------------- examples

def test_every_command_has_examples_in_its_help_and_man_page():
    assert sorted(" ".join(leaf.path[1:]) for leaf in LEAVES if not EXAMPLES.get(" ".join(leaf.path[1:]))) == []
    known = {" ".join(node.path[1:]) for node in NODES}
    assert set(EXAMPLES) <= known, f"examples of commands that do not exist: {set(EXAMPLES) - known}"
    for node in [TREE, *LEAVES]:
        key = " ".join(node.path[1:])
        text = help_text(node)
        assert "Examples:" in text, node.name
        page = (ROOT / "man" / f"{'-'.join(node.path[:2])}.1").read_text()
        assert '\n.SH "EXAMPLES"\n' in page
        for example in EXAMPLES[key]:
            assert example.command in text, (node.name, example.command)
            assert f"\\fB{manpages.esc(example.command)}\\fR" in page, (node.name, example.command)


def jedictl_words(command: str) -> list[str]:
    """The words of the jedictl command of an example (`echo ... | jedictl ...` keeps the last part)."""
    words = shlex.split(command.rsplit(" | ", 1)[-1])
    assert words[0] == "jedictl", command
    return words[1:]


def parse(words: list[str]) -> str:
    """Parse a command line against the command tree as Click would, without running anything: every
    command, option and argument must exist and every value must convert. Returns the command's path."""
    root = click_command()
    from jedictl.commands._help import command_path

    with root.make_context("jedictl", list(words)) as ctx:
        args = ctx._protected_args + ctx.args
        while args:
            assert isinstance(ctx.command, typer.core.TyperGroup), f"extra arguments {args}"
            name, command, args = ctx.command.resolve_command(ctx, args)
            ctx = command.make_context(name, args, parent=ctx)
            args = ctx._protected_args + ctx.args
        return command_path(ctx)


ALL_EXAMPLES = [(key, example) for key, examples in EXAMPLES.items() for example in examples]


@pytest.mark.parametrize(("key", "example"), ALL_EXAMPLES, ids=[example.command for _, example in ALL_EXAMPLES])
def test_each_example_is_a_valid_invocation_of_its_command(key, example):
    try:
        path = parse(jedictl_words(example.command))
    except (typer.Exit, Exception) as exc:  # a usage error, in Click's words or jedictl's one line
        pytest.fail(f"{example.command!r} does not parse: {type(exc).__name__}: {exc}")
    assert path == key or key == "", f"{example.command!r} runs `{path}`, listed under `{key}`"  # the program's: any command


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "jedictl-demo.db"
    result = invoke(["demo", "--db", str(path), "-q", "--pace", "0"])
    assert result.exit_code == 0, result.stderr
    return path


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


READ_ONLY = [(key, example) for key, example in ALL_EXAMPLES if example.reads_only]


def test_the_read_only_examples_work_on_the_demo_store_and_change_nothing(demo_store, monkeypatch):
    """Every example marked reads_only runs as written (from the top of the repository, where examples/
    is) against the store `jedictl demo` leaves, exits 0, and leaves the store exactly as it was."""
    assert len(READ_ONLY) >= 30
    monkeypatch.chdir(ROOT)
    before = dump(demo_store)
    failed = []
    for _, example in READ_ONLY:
        result = invoke(jedictl_words(example.command), env={"JEDICTL_DB": str(demo_store)})
        if result.exit_code != 0 or not (result.stdout + result.stderr).strip():
            failed.append(f"{example.command}: exit {result.exit_code}: {result.stderr.strip()[:300]}")
    assert failed == []
    assert dump(demo_store) == before


# ------------------------------------------------------------------------------------- glossary

#: The words issue 17 named, and the others an operator meets in the output.
TERMS = ["avalanche", "scout", "toabort", "gshare", "splitRule", "HS06", "express lane", "nucleus", "satellite",
         "watermark", "nFilesToBeUsed", "lease", "pass", "pilot", "harvester", "merge job", "incexec", "exhausted",
         "work queue", "resource type", "attempt", "retry rule", "throttled", "brokerage", "prodSourceLabel",
         "task", "job", "dataset", "container", "site", "cloud", "storage endpoint", "broken", "finishing", "passed"]


def test_the_glossary_defines_each_term_and_is_linked_from_help_readme_and_man_page():
    text = (ROOT / GLOSSARY).read_text()
    entries = {m.group(1).lower() for m in re.finditer(r"^\*\*([^*]+)\*\*", text, re.M)}
    terms = {part.strip().lower() for entry in entries for part in re.split(r"[,/()]", entry)}
    missing = [term for term in TERMS if term.lower() not in terms]
    assert missing == [], f"{GLOSSARY} defines no {missing}"
    assert GLOSSARY in " ".join(invoke(["--help"], env={"COLUMNS": "200"}).stdout.split())
    assert f"]({GLOSSARY})" in (ROOT / "README.md").read_text()
    assert manpages.esc(GLOSSARY) in (ROOT / "man" / "jedictl.1").read_text()


def test_the_glossary_names_only_commands_and_options_that_exist():
    text = (ROOT / GLOSSARY).read_text()
    named = re.findall(r"`jedictl ([^`]+)`", text)
    assert len(named) >= 10
    by_path = {" ".join(node.path[1:]): node for node in NODES}
    for words in (shlex.split(command) for command in named):
        path = []
        while words and " ".join([*path, words[0]]) in by_path:
            path.append(words.pop(0))
        node = by_path[" ".join(path)]
        assert path and not node.is_group, f"{GLOSSARY}: `jedictl {' '.join(path + words)}` names no command"
        options = {opt for param in node.params() for opt in param.opts}
        assert {word for word in words if word.startswith("-")} <= options, f"{GLOSSARY}: `jedictl {' '.join(path + words)}`"


# ------------------------------------------------------------------------------------- NO_COLOR

def on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """Run jedictl with stdin, stdout and stderr on a pseudo-terminal; everything it wrote."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "jedictl", *args], stdin=terminal, stdout=terminal, stderr=terminal,
                               env=env, cwd=ROOT, close_fds=True)
    os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(controller)
    assert process.wait(timeout=120) == 0, out.decode(errors="replace")[-2000:]
    return out


@pytest.mark.parametrize("args", [["--help"], ["task", "list", "--help"], ["task", "list"], ["sites", "show", "MWT2"]],
                         ids=" ".join)
def test_no_color_means_no_escape_sequence_at_all(args, demo_store):
    env = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "TERM")}
    env.update(JEDICTL_DB=str(demo_store), TERM="xterm-256color", COLUMNS="120")
    assert b"\x1b[" in on_a_terminal(args, env), "on a terminal, without NO_COLOR, rich styles the output"
    assert b"\x1b" not in on_a_terminal(args, {**env, "NO_COLOR": "1"})


def test_the_console_of_progress_bars_and_the_demo_honours_no_color(monkeypatch):
    from jedictl.commands._help import console

    monkeypatch.setenv("TERM", "xterm-256color")
    for value, escapes in (("1", False), ("", True)):
        monkeypatch.setenv("NO_COLOR", value)
        stream = io.StringIO()
        console(file=stream, force_terminal=True).print("[bold]bold[/bold] [red]red[/red]")
        assert ("\x1b" in stream.getvalue()) is escapes
