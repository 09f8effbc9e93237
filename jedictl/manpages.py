"""Man pages and shell completion scripts, generated from the live command tree.

`python -m jedictl.manpages` rewrites `man/` and `completions/`; `--check` only reports stale files
(exit 1). A test regenerates both into a temporary directory and compares them with the committed
files, so a command whose help changed without regenerating its page fails the tests.

Page naming rule: `jedictl.1` for the program, and one page per entry of `jedictl --help`'s command
list, named `jedictl-<entry>.1`. The page of a group (`jedictl-db.1`) documents all its subcommands,
at any depth; subcommands get no page of their own. Hidden commands and options are left out.

The tree is read through Typer's own objects (`typer.main.get_command(app)`): click-man cannot be used
because it filters parameters with `isinstance` checks against the real Click, which Typer vendors.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import typer
import typer.core
import typer.main

from jedictl import __version__, config
from jedictl.commands._common import GLOBAL_PANEL
from jedictl.commands._examples import EXAMPLES, GLOSSARY_NOTE
from jedictl.commands._help import bare_name, tidy
from jedictl.commands.completion import SCRIPT_FILES, completion_script

ROOT = Path(__file__).resolve().parent.parent
PROG = "jedictl"
MAN_DIR = "man"
COMPLETIONS_DIR = "completions"

# DESIGN.md section 5 and jedictl/errors.py; 130 comes from the error funnel in commands/_common.py.
EXIT_STATUS = [
    ("0", "Done, also when there was nothing to do."),
    ("1", "The pass met errors (each is reported), or an internal error."),
    ("2", "Bad usage or bad input: an unknown option, a malformed file, an unknown object. Nothing was written."),
    ("3", "The store is unreachable or its schema revision does not match (see `jedictl db upgrade`)."),
    ("130", "Interrupted."),
]
ENVIRONMENT = [
    (config.ENV_DB, "The store, as `--db`: a SQLite path or a database URL."),
    (config.ENV_CONFIG, "The configuration file, as `--config`."),
    (config.ENV_OUTPUT, "The output format, as `--output`."),
    (config.ENV_VERBOSE, "The verbosity, as a number of `-v`."),
    (config.ENV_NOW, "The time to act at, as `--now`."),
    (f"{config.ENV_PREFIX}<SECTION>__<KEY>", f"Any setting, e.g. `{config.ENV_PREFIX}WATCHDOG__WAIT_FOR_PICKED_MINUTES=10`; `jedictl config show` lists them."),
    ("XDG_CONFIG_HOME, XDG_DATA_HOME", "Where the default configuration file and the default store are."),
]
# jedictl/config.py: default_config_path() and default_store_url().
FILES = [
    ("${XDG_CONFIG_HOME:-~/.config}/jedictl/config.yaml", "The configuration file read when neither `--config` nor JEDICTL_CONFIG names one."),
    ("${XDG_DATA_HOME:-~/.local/share}/jedictl/jedictl.db", "The store used when neither `--db`, JEDICTL_DB nor the configuration names one."),
]


# ----------------------------------------------------------------------------------------- roff text

def esc(text: str) -> str:
    """Plain text as roff: hyphens as `\\-` (they copy and search as ASCII), non-ASCII as `\\[uXXXX]`."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(ch if ord(ch) < 128 else f"\\[u{ord(ch):04X}]" for ch in text)


def inline(text: str) -> str:
    """Help text as roff: `code` spans of the help strings become bold."""
    return re.sub(r"`([^`]+)`", r"\\fB\1\\fR", esc(text))


def line(text: str) -> str:
    """One output line of running text; a leading `.` or `'` would be read as a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def paragraphs(text: str) -> list[str]:
    """A help text as roff lines: one filled paragraph per block, like Typer's --help."""
    text = text.split("\f", 1)[0].strip()  # Click's convention: what follows a form feed is not help
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text) if text else []:
        raw = block.splitlines()
        out += [".PP"] if out else []
        if raw[0].strip() == "\b":  # Click's marker for a block printed as written
            out += [".nf", *(line(inline(text_line.rstrip())) for text_line in raw[1:]), ".fi"]
        else:
            out.append(line(inline(" ".join(text_line.strip() for text_line in raw))))
    return out


# --------------------------------------------------------------------------------------- command tree

@dataclass
class Node:
    """One command of the tree with the context Typer would give it (needed to read parameters)."""

    path: list[str]
    command: Any  # typer.core.TyperCommand | typer.core.TyperGroup
    ctx: typer.Context
    children: list[Node] = field(default_factory=list)

    @property
    def is_group(self) -> bool:
        return isinstance(self.command, typer.core.TyperGroup)

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def page(self) -> str:
        return "-".join(self.path)

    @property
    def summary(self) -> str:
        return str(self.command.get_short_help_str(limit=300)).rstrip(".") or self.name  # whatis needs a line

    def params(self) -> list[Any]:
        """The visible parameters, with the placeholders, bounds and defaults `--help` shows (`_help.tidy`)."""
        return [p for p in tidy(self.command.get_params(self.ctx)) if not getattr(p, "hidden", False)]

    @property
    def key(self) -> str:
        """The command's path without the program's name: its key in `_examples.EXAMPLES`."""
        return " ".join(self.path[1:])

    def is_common(self, param: Any) -> bool:
        """A global option (every command takes them) or the help option."""
        return getattr(param, "rich_help_panel", None) == GLOBAL_PANEL or bool(set(param.opts) & set(self.ctx.help_option_names))

    def takes_globals(self) -> bool:
        return any(getattr(p, "rich_help_panel", None) == GLOBAL_PANEL for p in self.params())

    def own_params(self) -> list[Any]:
        return [p for p in self.params() if not self.is_common(p)]

    def leaves(self) -> list[Node]:
        return [self] if not self.is_group else [leaf for child in self.children for leaf in child.leaves()]


def command_tree(app: typer.Typer) -> Node:
    """The whole tree of `app` in Typer's order (registration order), hidden commands left out."""
    command = typer.main.get_command(app)
    root = Node([PROG], command, typer.Context(command, info_name=PROG, **command.context_settings))
    _add_children(root)
    return root


def _add_children(node: Node) -> None:
    if not node.is_group:
        return
    for name in node.command.list_commands(node.ctx):
        sub = node.command.get_command(node.ctx, name)
        if sub is None or sub.hidden:
            continue
        child = Node([*node.path, name], sub, typer.Context(sub, info_name=name, parent=node.ctx, **sub.context_settings))
        _add_children(child)
        node.children.append(child)


# ----------------------------------------------------------------------------------------- parameters

def metavar(param: Any, ctx: typer.Context) -> str:
    """The value placeholder: the declared metavar, else a name for the type (Click's words)."""
    if param.metavar:
        return bare_name(str(param.metavar)) if param.param_type_name == "argument" else str(param.metavar)
    if param.param_type_name == "argument":
        return bare_name(str(param.name).upper())
    kind = str(param.display_type(ctx) or "").strip("<>")
    kind = re.sub(r"^list\[(.*)\]$", r"\1", kind)
    if "|" in kind:
        return "{" + kind + "}"
    names = {"str": "TEXT", "int": "INTEGER", "int range": "INTEGER", "float": "NUMBER", "float range": "NUMBER", "path": "PATH"}
    return names.get(kind, kind.upper().replace(" ", "_"))


def _default(param: Any) -> str | None:
    """The default as Typer's --help shows it: not for flags, counters, nothing or an empty list."""
    if isinstance(param.show_default, str):
        return param.show_default
    value = param.default
    if param.show_default is False or getattr(param, "count", False) or getattr(param, "is_flag", False) or value is None or value in ([], ()) or callable(value):
        return None
    return ", ".join(str(v.value if isinstance(v, Enum) else v) for v in (value if isinstance(value, (list, tuple)) else [value]))


def param_entry(param: Any, ctx: typer.Context) -> list[str]:
    """A `.TP` entry: the option's spellings and placeholder, then its help and the facts Typer shows."""
    if param.param_type_name == "argument":
        label = f"\\fI{esc(metavar(param, ctx))}\\fR" + ("..." if param.nargs != 1 else "")
    else:
        spellings = sorted(param.opts, key=lambda opt: (opt.startswith("--"), opt)) + list(param.secondary_opts)
        label = ", ".join(f"\\fB{esc(opt)}\\fR" for opt in spellings)
        if not (getattr(param, "is_flag", False) or getattr(param, "count", False)):
            label += f" \\fI{esc(metavar(param, ctx))}\\fR"
    facts = []  # what Typer's --help adds to the help text, in words (bounds are in the help: `_help.tidy`)
    value = _default(param)
    if value is not None:
        facts.append(f"Default: `{value}`.")
    if param.param_type_name == "option" and param.required:
        facts.append("Required.")
    if param.envvar:
        names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        facts.append(f"Environment: {', '.join(names)}.")
    text = " ".join([param.help or "", *facts]).strip()
    return [".TP", label, *(paragraphs(text) if text else [])]


def synopsis(node: Node) -> list[str]:
    """`jedictl task show [OPTIONS] TASK_ID`, as roff."""
    parts = [f"\\fB{esc(node.name)}\\fR"]
    if node.params():
        parts.append("[\\fIOPTIONS\\fR]")
    for param in node.params():
        if param.param_type_name != "argument":
            continue
        text = f"\\fI{esc(metavar(param, node.ctx))}\\fR"  # as `--help` writes it: _help.usage_name
        text = text if param.required else f"[{text}]"
        parts.append(text + ("..." if param.nargs != 1 else ""))
    if node.is_group:
        parts.append("\\fICOMMAND\\fR [\\fIARGS\\fR]...")
    return [" ".join(parts)]


# ---------------------------------------------------------------------------------------------- pages

def _header(node: Node) -> list[str]:
    return [
        '.\\" Generated from the command tree by `python -m jedictl.manpages`; edit the help texts, not this file.',
        f'.TH "{esc(node.page.upper())}" 1 "" "{PROG} {esc(__version__)}" "{PROG} manual"',
        ".nh", ".ad l",  # no hyphenation, ragged right: paths and options must survive copy and paste
        ".SH NAME",
        f"{esc(node.page)} \\- {inline(node.summary)}",
    ]


def _definitions(title: str, rows: list[tuple[str, str]], intro: str = "") -> list[str]:
    out = [f'.SH "{title}"', *(paragraphs(intro) if intro else [])]
    for term, text in rows:
        out += [".TP", f"\\fB{esc(term)}\\fR", *paragraphs(text)]
    return out


def _environment(nodes: list[Node]) -> list[str]:
    rows = list(ENVIRONMENT)
    for node in nodes:  # variables a command declares itself (Typer's `envvar=`)
        for param in node.params():
            names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
            rows += [(name, f"As `{param.opts[0]}` of `{node.name}`.") for name in names if name not in dict(rows)]
    intro = "Flags override the environment, which overrides the configuration file, which overrides the built-in defaults."
    return _definitions("ENVIRONMENT", rows, intro)


def _see_also(names: list[str]) -> list[str]:
    return ['.SH "SEE ALSO"', *(f".BR {esc(name)} (1)" + ("," if index < len(names) - 1 else "") for index, name in enumerate(names))]


def _examples(nodes: list[Node]) -> list[str]:
    """EXAMPLES: each command's examples (`_examples.py`), a line saying what, then the command line."""
    out: list[str] = []
    for key in dict.fromkeys(node.key for node in nodes):
        for example in EXAMPLES.get(key, ()):
            out += [".PP", line(inline(example.what + ":")), ".RS 4", ".nf", f"\\fB{esc(example.command)}\\fR", ".fi", ".RE"]
    return ['.SH "EXAMPLES"', *out] if out else []


def _footer(nodes: list[Node], see_also: list[str], files: bool = False) -> list[str]:
    """The closing sections, in the order of man-pages(7)."""
    out = _definitions("EXIT STATUS", EXIT_STATUS) + _environment(nodes)
    return out + (_definitions("FILES", FILES) if files else []) + _examples(nodes) + _see_also(see_also)


def root_page(root: Node) -> str:
    """`jedictl.1`: the program, its options, its commands, exit codes, environment and files."""
    out = _header(root)
    out += [".SH SYNOPSIS", *synopsis(root), ".SH DESCRIPTION", *paragraphs(root.command.help or "")]
    out += [".PP", *paragraphs(
        "Each command has its own page, jedictl-COMMAND(1); a group's page covers all its subcommands. "
        "The global options are accepted before the command name and, by every command that lists them, "
        "after it too. `--help` never opens the store; TAB completion reads names (sites, clouds, nuclei, endpoints) only "
        "from a SQLite store that exists, read-only. "
        + GLOSSARY_NOTE
    )]
    out.append(".SH OPTIONS")
    for param in root.params():
        out += param_entry(param, root.ctx)
    out.append(".SH COMMANDS")
    for child in root.children:
        out += [".TP", f"\\fB{esc(child.path[-1])}\\fR" + (" \\fICOMMAND\\fR" if child.is_group else "")]
        text = child.summary + "."
        if child.is_group:
            text += " Commands: " + ", ".join(" ".join(leaf.path[2:]) for leaf in child.leaves()) + "."
        out += [*paragraphs(text), f"See \\fB{esc(child.page)}\\fR(1)."]
    out += _footer([root], [child.page for child in root.children], files=True)
    return "\n".join(out) + "\n"


def _options(node: Node) -> list[str]:
    return [entry for param in node.own_params() for entry in param_entry(param, node.ctx)]


def _subcommands(group: Node) -> list[str]:
    """One `.SS` per subcommand (nested groups in place): its help, its arguments and options."""
    out: list[str] = []
    for child in group.children:
        out += [f'.SS "{esc(child.name)}"', *paragraphs(child.command.help or "")]
        if child.is_group:
            out += _options(child) + _subcommands(child)
            continue
        out += _options(child)
        if not child.takes_globals() and any(leaf.takes_globals() for leaf in group.leaves()):  # else said once
            out += [".PP", *paragraphs(f"The global options go before the command name only (`jedictl [GLOBAL OPTIONS] {' '.join(child.path[1:])}`).")]
    return out


def _global_options(node: Node) -> list[str]:
    """The options every command on the page shares, listed once rather than under each command."""
    seen: dict[tuple[str, ...], list[str]] = {}
    for leaf in node.leaves():
        for param in leaf.params():
            if leaf.is_common(param):
                seen.setdefault(tuple(param.opts), param_entry(param, leaf.ctx))
    if any(leaf.takes_globals() for leaf in node.leaves()):
        intro = "Options of jedictl(1) that the commands on this page also accept after their name."
    else:
        intro = "The global options of jedictl(1) go before the command name; after it, only this one is accepted."
    return ['.SH "GLOBAL OPTIONS"', *paragraphs(intro), *(entry for entries in seen.values() for entry in entries)]


def command_page(node: Node) -> str:
    """`jedictl-<command>.1`: one top-level command, or a group with all its subcommands."""
    leaves = node.leaves()
    out = _header(node) + [".SH SYNOPSIS"]
    for index, leaf in enumerate(leaves):
        out += ([".br"] if index else []) + synopsis(leaf)
    out += [".SH DESCRIPTION", *paragraphs(node.command.help or "")]
    if node.own_params():
        out += [".SH OPTIONS", *_options(node)]
    if node.is_group:
        out += [".SH COMMANDS", *_subcommands(node)]
    out += _global_options(node)
    out += _footer([node, *leaves], [PROG])
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- files

def render(app: typer.Typer | None = None) -> dict[str, str]:
    """Every generated file, by path relative to the repository: man pages and completion scripts."""
    if app is None:
        from jedictl.cli import app
    tree = command_tree(app)
    files = {f"{MAN_DIR}/{PROG}.1": root_page(tree)}
    files.update({f"{MAN_DIR}/{child.page}.1": command_page(child) for child in tree.children})
    files.update({f"{COMPLETIONS_DIR}/{name}": completion_script(shell) for shell, name in SCRIPT_FILES.items()})
    return files


def _generated_here(root: Path) -> set[str]:
    """Files in the output directories that this generator owns (a page of a removed command is stale)."""
    pages = {f"{MAN_DIR}/{p.name}" for p in (root / MAN_DIR).glob(f"{PROG}*.1")}
    scripts = {f"{COMPLETIONS_DIR}/{name}" for name in SCRIPT_FILES.values() if (root / COMPLETIONS_DIR / name).exists()}
    return pages | scripts


def _stale(root: Path, files: dict[str, str]) -> list[str]:
    differ = [rel for rel, text in files.items() if not (root / rel).is_file() or (root / rel).read_text() != text]
    return sorted(differ + sorted(_generated_here(root) - set(files)))


def stale(root: Path = ROOT, app: typer.Typer | None = None) -> list[str]:
    """Files under `root` that differ from what the generator writes, missing ones and obsolete ones."""
    return _stale(root, render(app))


def write(root: Path = ROOT, app: typer.Typer | None = None) -> list[str]:
    """Bring `man/` and `completions/` under `root` up to date; returns what changed."""
    files = render(app)
    changed = _stale(root, files)
    for rel in changed:
        path = root / rel
        if rel in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[rel])
        else:
            path.unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jedictl.manpages", description="Regenerate man/ and completions/ from the CLI.")
    parser.add_argument("--check", action="store_true", help="Only list stale files; exit 1 if there are any.")
    parser.add_argument("--root", type=Path, default=ROOT, help="Write under this directory (default: the repository).")
    args = parser.parse_args(argv)
    changed = stale(args.root) if args.check else write(args.root)
    for rel in changed:
        print(f"{'stale' if args.check else 'regenerated'}: {rel}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
