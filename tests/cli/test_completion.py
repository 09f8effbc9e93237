"""`jedictl completion show|install`, run under a root app built here (the real root adds the group too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.completion
import typer.main
from typer.testing import CliRunner

from jedictl.commands import completion
from jedictl.commands._app import RootGroup
from jedictl.commands.completion import Shell, completion_script

NO_STORE_MODULES = "('sqlalchemy', 'alembic', 'psycopg')"


def make_root() -> typer.Typer:
    """A root like jedictl's (with its error funnel), without Typer's own completion options (the group
    replaces them)."""
    root = typer.Typer(name="jedictl", add_completion=False, context_settings={"help_option_names": ["-h", "--help"]}, cls=RootGroup)

    @root.callback()
    def _root() -> None:
        """The test root."""

    root.add_typer(completion.app, name="completion")
    return root


def run(*args: str, env: dict[str, str | None] | None = None, code: int = 0):
    result = CliRunner().invoke(make_root(), list(args), env=env, prog_name="jedictl")
    assert result.exit_code == code, f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result


def user_env(home: Path, shell: str = "/bin/bash") -> dict[str, str | None]:
    """A fresh user: every directory the installer may consult lives under `home`."""
    return {"HOME": str(home), "SHELL": shell, "XDG_DATA_HOME": None, "XDG_CONFIG_HOME": None, "ZDOTDIR": None, "BASH_COMPLETION_USER_DIR": None}


@pytest.mark.parametrize("shell", list(Shell))
def test_show_prints_the_script(shell):
    out = run("completion", "show", "--shell", shell.value).stdout
    assert out == completion_script(shell)
    assert "_JEDICTL_COMPLETE=complete_" + shell.value in out


def test_scripts_are_typers():
    """bash and fish are Typer's text as is; zsh is Typer's plus the autoload fix, appended."""
    for shell in Shell:
        typer_text = typer.completion.get_completion_script(prog_name="jedictl", complete_var="_JEDICTL_COMPLETE", shell=shell.value)
        ours = completion_script(shell)
        assert ours.startswith(typer_text.rstrip("\n") + "\n")
        assert ours == typer_text.rstrip("\n") + "\n" + (completion.ZSH_AUTOLOAD if shell is Shell.zsh else "")
    assert completion_script(Shell.zsh).startswith("#compdef jedictl\n"), "zsh autoloads only files whose first line is #compdef"


def test_show_detects_the_shell_from_SHELL():
    assert run("completion", "show", env={"SHELL": "/usr/bin/fish"}).stdout == completion_script(Shell.fish)
    assert run("completion", "show", env={"SHELL": "/bin/zsh"}).stdout == completion_script(Shell.zsh)


@pytest.mark.parametrize("shell_env", ["/bin/sh", "", None])
def test_unknown_shell_is_exit_2(shell_env):
    err = run("completion", "show", env={"SHELL": shell_env}, code=2).stderr
    assert err.startswith("jedictl: error: --shell: cannot tell which shell to complete for")
    assert "pass --shell bash, zsh or fish" in err


def test_unsupported_shell_name_is_refused():
    assert "tcsh" in run("completion", "show", "--shell", "tcsh", code=2).stderr


@pytest.mark.parametrize(
    ("shell", "relative"),
    [
        (Shell.bash, ".local/share/bash-completion/completions/jedictl"),
        (Shell.zsh, ".zfunc/_jedictl"),
        (Shell.fish, ".config/fish/completions/jedictl.fish"),
    ],
)
def test_install_writes_the_per_user_file_and_no_startup_file(tmp_path, shell, relative):
    out = run("completion", "install", "--shell", shell.value, env=user_env(tmp_path)).stdout
    target = tmp_path / relative
    assert target.read_text() == completion_script(shell)
    assert out.splitlines()[0] == f"{shell.value} completion installed: {target}"
    # Nothing else under HOME: no ~/.bashrc, ~/.zshrc or fish config was created or edited.
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == [target]
    assert run("completion", "install", "--shell", shell.value, env=user_env(tmp_path)).stdout.splitlines()[0].endswith(f"unchanged: {target}")


def test_install_hints_say_what_to_add(tmp_path):
    bash = run("completion", "install", env=user_env(tmp_path, "/bin/bash")).stdout
    assert f"source {tmp_path}/.local/share/bash-completion/completions/jedictl" in bash
    zsh = run("completion", "install", env=user_env(tmp_path, "/usr/bin/zsh")).stdout
    assert f"fpath=({tmp_path}/.zfunc $fpath)" in zsh and "autoload -Uz compinit && compinit" in zsh
    assert "load it automatically" in run("completion", "install", env=user_env(tmp_path, "/usr/bin/fish")).stdout


def test_install_honours_the_xdg_and_bash_completion_directories(tmp_path):
    env = {**user_env(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "conf")}
    run("completion", "install", "--shell", "bash", env=env)
    run("completion", "install", "--shell", "fish", env=env)
    assert (tmp_path / "data/bash-completion/completions/jedictl").is_file()
    assert (tmp_path / "conf/fish/completions/jedictl.fish").is_file()
    run("completion", "install", "--shell", "bash", env={**env, "BASH_COMPLETION_USER_DIR": str(tmp_path / "bc")})
    assert (tmp_path / "bc/completions/jedictl").is_file()
    run("completion", "install", "--shell", "zsh", env={**env, "ZDOTDIR": str(tmp_path / "zdot")})
    assert (tmp_path / "zdot/.zfunc/_jedictl").is_file()


def test_install_to_a_chosen_path_replaces_an_old_script(tmp_path):
    target = tmp_path / "site" / "jedictl"
    target.parent.mkdir()
    target.write_text("# an older script\n")
    out = run("completion", "install", "--shell", "bash", "--path", str(target), env=user_env(tmp_path / "home")).stdout
    assert out.startswith(f"bash completion updated: {target}\n")
    assert target.read_text() == completion_script(Shell.bash)


def test_install_failure_is_one_line_and_exit_1(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = run("completion", "install", "--shell", "fish", "--path", str(blocker / "jedictl.fish"), code=1).stderr
    assert err.startswith(f"jedictl: error: {blocker}/jedictl.fish: cannot write the completion script (")
    assert len(err.strip().splitlines()) == 1


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env={**os.environ, **(env or {})})


ROOT_SCRIPT = """
import atexit, sys
sys.argv[0] = "jedictl"
atexit.register(lambda: sys.stderr.write("DB-LAYER-LOADED" if any(m.startswith({modules}) for m in sys.modules) else ""))
import typer
from jedictl.commands import completion
from jedictl.commands._app import RootGroup
root = typer.Typer(add_completion=False)
@root.callback()
def _root() -> None: pass
@root.command("submit")
def submit() -> None: pass
root.add_typer(completion.app, name="completion")
root(prog_name="jedictl")
"""


def test_tab_completion_works_without_typers_builtin_options():
    """With add_completion=False Typer registers no completion classes; importing the group does."""
    env = {"_JEDICTL_COMPLETE": "complete_bash", "COMP_WORDS": "jedictl comp", "COMP_CWORD": "1"}
    result = _python(ROOT_SCRIPT.format(modules=NO_STORE_MODULES), env)
    assert result.stdout.split() == ["completion"], result.stderr
    env = {"_JEDICTL_COMPLETE": "complete_bash", "COMP_WORDS": "jedictl completion show --shell ", "COMP_CWORD": "4"}
    assert _python(ROOT_SCRIPT.format(modules=NO_STORE_MODULES), env).stdout.split() == ["bash", "zsh", "fish"]


def test_the_group_never_loads_the_database_layer(tmp_path):
    script = ROOT_SCRIPT.format(modules=NO_STORE_MODULES)
    for args in (["completion", "show", "--shell", "zsh"], ["completion", "install", "--shell", "fish"]):
        result = _python(script.replace('root(prog_name="jedictl")', f'root({args!r}, prog_name="jedictl")'),
                         {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c")})
        assert result.returncode == 0, result.stderr
        assert "DB-LAYER-LOADED" not in result.stderr


def test_the_real_root_registers_the_group(cli):
    from jedictl.cli import app

    command = typer.main.get_command(app)
    if "completion" not in command.list_commands(typer.Context(command)):
        pytest.skip("jedictl/cli.py does not register the completion group yet (app.add_typer(completion.app, name='completion'))")
    assert cli("completion", "show", "--shell", "bash").stdout == completion_script(Shell.bash)
