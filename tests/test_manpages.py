"""Man pages and completion scripts: generated from the CLI, current, valid roff, working in real shells."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import pytest
import typer

from jedictl import manpages
from jedictl.commands._common import DbOpt, QuietOpt
from tests.cli.test_completion_values import COMPLETE
from tests.conftest import ROOT

BIN = Path(sys.executable).parent  # the virtualenv's bin/, where the `jedictl` console script is
GENERATED_DIRS = (manpages.MAN_DIR, manpages.COMPLETIONS_DIR)
PAGES = sorted((ROOT / manpages.MAN_DIR).glob("*.1"))


def tree_files(root: Path) -> dict[str, str]:
    return {f"{d}/{p.name}": p.read_text() for d in GENERATED_DIRS if (root / d).is_dir() for p in sorted((root / d).iterdir())}


# ------------------------------------------------------------------------------- (a) files are current

def test_committed_files_are_exactly_what_the_cli_generates(tmp_path):
    manpages.write(tmp_path)
    generated, committed = tree_files(tmp_path), tree_files(ROOT)
    differ = sorted(rel for rel in generated.keys() | committed.keys() if generated.get(rel) != committed.get(rel))
    assert differ == [], f"stale: {differ}; run `python -m jedictl.manpages` and commit man/ and completions/"
    assert manpages.main(["--check"]) == 0


class Mode(str, Enum):
    fast = "fast"
    slow = "slow"


def demo_app(frob_help: str = "Frobnicate the tasks.", extra: bool = False) -> typer.Typer:
    """A small CLI shaped like jedictl's: global options, a command, a nested group, hidden things."""
    app = typer.Typer(name="jedictl", help="Demo root.", add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    group, inner = typer.Typer(help="Group of things."), typer.Typer(help="Inner group.")

    @app.callback()
    def _root(db: DbOpt = None, quiet: QuietOpt = False) -> None:
        """Demo root."""

    @app.command("frob", help=frob_help)
    def frob(db: DbOpt = None) -> None: ...

    @app.command("secret", hidden=True)
    def secret() -> None: ...

    @group.command("one")
    def one(
        name: Annotated[str, typer.Argument(metavar="NAME", help="The thing.")],
        limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 5,
        mode: Annotated[Mode, typer.Option("--mode", "-m", help="How.")] = ...,  # type: ignore[assignment]
        tags: Annotated[list[str] | None, typer.Option("--tag", help="A tag.")] = None,
        token: Annotated[str | None, typer.Option("--token", envvar="DEMO_TOKEN", help="A token.")] = None,
        ghost: Annotated[bool, typer.Option("--ghost", hidden=True)] = False,
        db: DbOpt = None, quiet: QuietOpt = False,
    ) -> None:
        """Do one thing -- with care.

        .starts with a dot; arrows -> \u2192 and a back\\slash.
        """

    @inner.command("deep")
    def deep(files: Annotated[list[str] | None, typer.Argument(help="Files.")] = None, db: DbOpt = None) -> None:
        """Go deep."""

    group.add_typer(inner, name="sub")
    app.add_typer(group, name="grp")
    if extra:
        @app.command("twiddle")
        def twiddle() -> None:
            """Twiddle."""
    return app


def test_a_help_change_or_a_new_command_makes_the_files_stale(tmp_path):
    assert sorted(manpages.write(tmp_path, demo_app())) == [
        "completions/_jedictl", "completions/jedictl.bash", "completions/jedictl.fish",
        "man/jedictl-frob.1", "man/jedictl-grp.1", "man/jedictl.1",
    ]
    assert manpages.stale(tmp_path, demo_app()) == []
    assert manpages.stale(tmp_path, demo_app("Frobnicate every task.")) == ["man/jedictl-frob.1", "man/jedictl.1"]
    assert manpages.stale(tmp_path, demo_app(extra=True)) == ["man/jedictl-twiddle.1", "man/jedictl.1"]
    manpages.write(tmp_path, demo_app(extra=True))
    # A command that disappears takes its page with it.
    assert manpages.write(tmp_path, demo_app()) == ["man/jedictl-twiddle.1", "man/jedictl.1"]
    assert not (tmp_path / "man/jedictl-twiddle.1").exists()


def test_pages_document_the_tree():
    files = manpages.render(demo_app())
    root, group = files["man/jedictl.1"], files["man/jedictl-grp.1"]
    assert "secret" not in "".join(files.values()) and "ghost" not in group
    assert '.TH "JEDICTL\\-GRP" 1 "" "jedictl ' in group and "jedictl\\-grp \\- Group of things\n" in group
    assert "\\fBjedictl grp one\\fR [\\fIOPTIONS\\fR] \\fINAME\\fR\n.br\n\\fBjedictl grp sub deep\\fR [\\fIOPTIONS\\fR] [\\fIFILES\\fR]...\n" in group
    assert '.SS "jedictl grp one"\nDo one thing \\-\\- with care.\n.PP\n\\&.starts with a dot; arrows \\-> \\[u2192] and a back\\eslash.\n' in group
    assert '.SS "jedictl grp sub deep"' in group
    assert "\\fB\\-\\-limit\\fR \\fIINTEGER\\fR\nAt most this many. At least 1. Default: \\fB5\\fR.\n" in group
    assert "\\fB\\-m\\fR, \\fB\\-\\-mode\\fR \\fI{fast|slow}\\fR\nHow. Required.\n" in group
    assert "\\fB\\-\\-token\\fR \\fITEXT\\fR\nA token. Environment: DEMO_TOKEN.\n" in group
    assert ".TP\n\\fBDEMO_TOKEN\\fR\nAs \\fB\\-\\-token\\fR of \\fBjedictl grp one\\fR.\n" in group
    # Global options are listed once per page, not under every command that re-declares them.
    assert group.count("\\fB\\-\\-db\\fR \\fIURL\\fR") == 1 and group.index('.SH "GLOBAL OPTIONS"') > group.index('.SS "jedictl grp sub deep"')
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", '"EXIT STATUS"', '"ENVIRONMENT"', '"SEE ALSO"'):
        assert f"\n.SH {section}\n" in root and f"\n.SH {section}\n" in group
    assert '.SH "FILES"' in root and "\n.SH OPTIONS\n" in root
    assert ".BR jedictl\\-frob (1),\n.BR jedictl\\-grp (1)\n" in root
    assert ".TP\n\\fBgrp\\fR \\fICOMMAND\\fR\nGroup of things. Commands: one, sub deep.\nSee \\fBjedictl\\-grp\\fR(1).\n" in root
    for code in ("0", "1", "2", "3"):
        assert f".TP\n\\fB{code}\\fR\n" in group


def test_every_command_and_option_of_the_cli_is_in_its_page():
    from jedictl.cli import app

    tree = manpages.command_tree(app)
    for top in tree.children:
        page = (ROOT / "man" / f"{top.page}.1").read_text()
        for node in [top, *top.leaves()]:
            assert manpages.esc(node.name) in page
            for param in node.params():
                for opt in param.opts if param.param_type_name == "option" else []:
                    assert f"\\fB{manpages.esc(opt)}\\fR" in page, f"{opt} of {node.name} missing from {top.page}.1"


# ------------------------------------------------------------------------------------ (b) valid roff

def test_there_is_a_page_for_the_program_and_each_command():
    from jedictl.cli import app

    names = {p.name for p in PAGES}
    assert "jedictl.1" in names
    assert {f"{child.page}.1" for child in manpages.command_tree(app).children} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_renders_without_warnings(page):
    groff, man = shutil.which("groff"), shutil.which("man")
    if not groff and not man:
        pytest.skip("neither groff nor man is installed")
    if groff:
        result = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", str(page)], check=False, capture_output=True, text=True)
        assert (result.returncode, result.stderr) == (0, "")
    if man:
        env = {**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80", "LC_ALL": "C.UTF-8"}
        result = subprocess.run([man, "--warnings", "-l", str(page)], check=False, capture_output=True, text=True, env=env)
        assert (result.returncode, result.stderr) == (0, "")
        text = re.sub(r".\x08", "", result.stdout)
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"):
            assert f"\n{section}\n" in text
    if shutil.which("lexgrog"):  # the NAME line must parse for whatis/apropos
        result = subprocess.run(["lexgrog", str(page)], check=False, capture_output=True, text=True)
        assert result.returncode == 0 and f'"{page.stem} - ' in result.stdout, result.stdout + result.stderr


# ---------------------------------------------------------------------------- (c) completion in shells

@pytest.fixture
def shell_env(tmp_path: Path) -> dict[str, str]:
    """The console script on PATH, a fresh HOME, and a store that must never be created."""
    if not (BIN / "jedictl").exists():
        pytest.skip(f"the jedictl console script is not installed in {BIN} (pip install -e .)")
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "dumb", "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
        "JEDICTL_DB": str(tmp_path / "never.db"), "JEDICTL_CONFIG": str(tmp_path / "missing.yaml"),
    }


def blocks(output: str) -> list[list[str]]:
    """Completion answers separated by lines of `--`; each answer's first column (fish adds help)."""
    answers = output.split("--\n")[:-1]
    return [[item.split("\t")[0] for item in answer.splitlines() if item] for answer in answers]


def check_answers(answers: list[list[str]], env: dict[str, str]) -> None:
    """The same five TABs for every shell: a command, a subcommand, options, a global option, choices."""
    assert len(answers) == 5, answers
    assert "submit" in answers[0] and all(word.startswith("su") for word in answers[0])
    assert answers[1] == ["show"]
    assert {"--status", "--limit", "--db", "--output", "--help"} <= set(answers[2])
    assert "--db" in answers[3]
    assert sorted(answers[4]) == ["json", "table", "tsv", "yaml"]
    assert not Path(env["JEDICTL_DB"]).exists(), "completion created the store"


TABS = [["jedictl", "su"], ["jedictl", "task", "sh"], ["jedictl", "task", "list", "--"], ["jedictl", "--d"], ["jedictl", "-o", ""]]


def test_bash_completes_commands_and_options(shell_env):
    script = ROOT / "completions" / "jedictl.bash"
    calls = "\n".join(f"comp {' '.join(repr(word) for word in words)}" for words in TABS)
    program = f"""
source {script}
function=$(complete -p jedictl | sed -E 's/.*-F ([^ ]+).*/\\1/')
comp() {{ COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); "$function" jedictl; printf '%s\\n' "${{COMPREPLY[@]}}" --; }}
{calls}
"""
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], check=False, capture_output=True, text=True, env=shell_env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    check_answers(blocks(result.stdout), shell_env)


ZSH_STUBS = """
autoload -Uz compinit && compinit -u -D
# Outside the line editor, print what the completion function hands to zsh instead of completing.
_arguments() { print -r -- "$@"; print -- -- }
_files() { print -- -- }
comp() { words=("$@"); CURRENT=$#; "$_comps[jedictl]" }
"""


def zsh_items(output: str) -> list[list[str]]:
    """`*: :(("submit":"help" "sites":"help"))` -> [["submit", "sites"], ...]"""
    item = r'"((?:[^"\\]|\\.)*)"(?::"(?:[^"\\]|\\.)*")?'  # "value" or "value":"help"
    return [re.findall(item, answer) for answer in output.split("--\n")[:-1]]


@pytest.mark.parametrize("how", ["fpath", "source"])
def test_zsh_completes_commands_and_options(shell_env, how):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed")
    load = f"fpath=({ROOT / 'completions'} $fpath)" if how == "fpath" else ""
    after = f"source {ROOT / 'completions' / '_jedictl'}" if how == "source" else ""
    calls = "\n".join(f"comp {' '.join(repr(word) for word in words)}" for words in TABS)
    # With fpath, the first TAB autoloads the file: it must complete that TAB already.
    program = f"{load}\n{ZSH_STUBS}\n{after}\nprint -r -- registered=$_comps[jedictl]\n{calls}\n"
    result = subprocess.run(["zsh", "-f", "-c", program], check=False, capture_output=True, text=True, env=shell_env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    first, _, rest = result.stdout.partition("\n")
    assert first == ("registered=_jedictl" if how == "fpath" else "registered=_jedictl_completion")
    check_answers(zsh_items(rest), shell_env)


@pytest.mark.parametrize("how", ["autoload", "source"])
def test_fish_completes_commands_and_options(shell_env, tmp_path, how):
    if not shutil.which("fish"):
        pytest.skip("fish is not installed")
    if how == "autoload":  # where `jedictl completion install` puts it; fish loads it on the first TAB
        target = Path(shell_env["XDG_CONFIG_HOME"]) / "fish" / "completions" / "jedictl.fish"
        target.parent.mkdir(parents=True)
        shutil.copy(ROOT / "completions" / "jedictl.fish", target)
    calls = "; ".join(f"complete -C {' '.join(words)!r}; echo -- --" for words in TABS)
    command = ["fish", "-c", calls] if how == "autoload" else ["fish", "--no-config", "-c", f"source {ROOT / 'completions' / 'jedictl.fish'}; {calls}"]
    result = subprocess.run(command, check=False, capture_output=True, text=True, env=shell_env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    check_answers(blocks(result.stdout), shell_env)


def test_completion_never_loads_the_database_layer_nor_touches_the_store(tmp_path):
    """TAB after every command of the live CLI, for its subcommands, arguments and options."""
    from jedictl.cli import app

    tree = manpages.command_tree(app)
    nodes = [tree, *(node for child in tree.children for node in [child, *child.leaves()])]
    words = [f"{node.name} {tail}" for node in nodes for tail in ("", "--")]
    store = tmp_path / "never.db"
    env = {**os.environ, "JEDICTL_DB": str(store), "HOME": str(tmp_path)}
    # The per-command tests' completion driver: each answer's words, then a `--` line.
    result = subprocess.run([sys.executable, "-c", COMPLETE, *words], check=False, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.endswith("database layer: []")
    assert "--help" in result.stdout.split() and "submit" in result.stdout.split()
    assert not store.exists()
