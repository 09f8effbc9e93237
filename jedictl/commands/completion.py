"""`jedictl completion show|install`: shell completion scripts for bash, zsh and fish.

The scripts are Typer's own (the text of `_JEDICTL_COMPLETE=source_bash jedictl`; zsh's with one fix,
see ZSH_AUTOLOAD): a short shim that calls `jedictl` back on every TAB with
`_JEDICTL_COMPLETE=complete_<shell>`, so completion always matches the installed program.
`python -m jedictl.manpages` writes the same text into `completions/`.

`install` writes the script where each shell (or bash-completion) looks for completions on its own
and never edits a start-up file such as ~/.bashrc; when a line is needed there, it prints the line.
Nothing here reads settings or opens the store, and SQLAlchemy is never imported.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
import typer.completion

from jedictl.commands._help import HelpCommand, HelpGroup

PROG_NAME = "jedictl"
COMPLETE_VAR = "_JEDICTL_COMPLETE"

# Typer registers its shell-completion classes only while it builds the root's own
# --install-completion/--show-completion options. Registering them here as well keeps TAB completion
# working if the root is ever built with `add_completion=False` (this group replaces those options).
typer.completion.completion_init()


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


# The file name each shell expects in a completions directory (zsh needs `_<command>` in $fpath).
SCRIPT_FILES: dict[Shell, str] = {Shell.bash: "jedictl.bash", Shell.zsh: "_jedictl", Shell.fish: "jedictl.fish"}

app = typer.Typer(
    help="Shell completion for bash, zsh and fish: print the script or install it for your user.",
    no_args_is_help=True,
    cls=HelpGroup,
)

ShellOpt = Annotated[
    Shell | None,
    typer.Option("--shell", "-s", help="The shell (default: the one named by $SHELL).", show_default=False),
]


# Typer's zsh script ends by registering its function with `compdef`. Installed the usual way, as a
# file in $fpath that compinit autoloads, that body first runs on the first TAB, which then completes
# nothing (verified in zsh 5.9). Click's own zsh template handles this case; so does this addition.
ZSH_AUTOLOAD = f"""
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  # Autoloaded from $fpath on the first TAB: complete that TAB as well.
  _{PROG_NAME}_completion "$@"
fi
"""


def completion_script(shell: Shell) -> str:
    """Typer's completion script for `shell` (for zsh with ZSH_AUTOLOAD added), ending with a newline."""
    script = typer.completion.get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell.value).rstrip("\n") + "\n"
    return script + ZSH_AUTOLOAD if shell is Shell.zsh else script


def detect_shell(environ: dict[str, str] | None = None) -> Shell:
    """The user's shell from $SHELL (the login shell: what a new terminal runs)."""
    from jedictl.errors import BadInput

    environ = dict(os.environ) if environ is None else environ
    name = Path(environ.get("SHELL", "")).name
    try:
        return Shell(name)
    except ValueError:
        shown = f"$SHELL is {name!r}" if name else "$SHELL is not set"
        raise BadInput(f"cannot tell which shell to complete for ({shown}); pass --shell bash, zsh or fish", "--shell") from None


def install_path(shell: Shell, environ: dict[str, str] | None = None) -> Path:
    """Where a shell picks up a user's completion script without any configuration (zsh: see hint)."""
    environ = dict(os.environ) if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    if shell is Shell.bash:
        # bash-completion >= 2.2 loads `<dir>/completions/<command>` on the first TAB.
        data_home = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        base = Path(environ.get("BASH_COMPLETION_USER_DIR") or data_home / "bash-completion")
        return base / "completions" / PROG_NAME
    if shell is Shell.zsh:
        # zsh has no per-user default; ~/.zfunc is the directory Typer's own installer uses.
        return Path(environ.get("ZDOTDIR") or home) / ".zfunc" / SCRIPT_FILES[Shell.zsh]
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config_home / "fish" / "completions" / SCRIPT_FILES[Shell.fish]


def activation_hint(shell: Shell, path: Path) -> str:
    """What, if anything, the user must add to a start-up file for `path` to be loaded."""
    if shell is Shell.bash:
        return ("New bash sessions load it through the bash-completion package; without that package, "
                f"add this line to ~/.bashrc:\n    source {path}")
    if shell is Shell.zsh:
        return ("zsh loads it from $fpath; unless that directory is already there, add these lines to "
                f"~/.zshrc (before any other compinit):\n    fpath=({path.parent} $fpath)\n    autoload -Uz compinit && compinit")
    return "New fish sessions load it automatically."


@app.command("show", cls=HelpCommand)
def show(shell: ShellOpt = None) -> None:
    """Print the completion script, to source it or to install it by hand.

    For example `source <(jedictl completion show --shell bash)` enables completion in the current
    bash session; docs/completion.md lists the usual places to install it.
    """
    typer.echo(completion_script(shell or detect_shell()), nl=False)


@app.command("install", cls=HelpCommand)
def install(
    shell: ShellOpt = None,
    path: Annotated[Path | None, typer.Option("--path", metavar="FILE", help="Write the script here instead of the shell's per-user completion directory.", show_default=False)] = None,
) -> None:
    """Install the completion script for your user, then say how the shell loads it.

    The script goes where the shell looks by itself: for bash, bash-completion's per-user directory
    ($BASH_COMPLETION_USER_DIR/completions, by default ~/.local/share/bash-completion/completions);
    for zsh, ~/.zfunc (under $ZDOTDIR if set); for fish, ~/.config/fish/completions (XDG_CONFIG_HOME).
    Start-up files such as ~/.bashrc are never edited: when one needs a line, the command prints it.
    Run it again after upgrading jedictl; it replaces the file.
    """
    from jedictl.errors import JedictlError

    chosen = shell or detect_shell()
    target = path.expanduser() if path else install_path(chosen)
    text = completion_script(chosen)
    try:
        previous = target.read_text() if target.is_file() else None
        if previous != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    except OSError as exc:
        raise JedictlError(f"{target}: cannot write the completion script ({exc.strerror or exc})") from exc
    action = "unchanged" if previous == text else ("updated" if previous is not None else "installed")
    typer.echo(f"{chosen.value} completion {action}: {target}")
    typer.echo(activation_hint(chosen, target))
