"""`jedictl config show`: effective values with their sources; secrets masked; bad files refused."""

from __future__ import annotations

import yaml


def _values(cli, *args, env=None):
    rows = cli.json("config", "show", *args, db=None) if env is None else None
    if env is not None:
        import json

        rows = json.loads(cli("config", "show", "-o", "json", *args, env=env).stdout)
    return {row["key"]: (row["value"], row["source"]) for row in rows}


def test_defaults_carry_jedi_values(cli):
    values = _values(cli)
    assert values["watchdog.wait_for_picked_minutes"] == (30, "default")
    assert values["throttle.threshold"] == (2.0, "default")
    assert values["feed.n_chunks_for_scout"] == (10, "default")
    assert values["retry.ram_ladder_mb"] == ([1000, 2000, 3000, 4000, 6000, 8000], "default")
    assert values["db"][0].startswith("sqlite:///") and values["db"][0].endswith("/jedictl/jedictl.db")


def test_file_env_and_flag_layers(cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"db": "postgresql://jedi:hunter2@db.example/jedi", "throttle": {"threshold": 3},
                                      "watchdog": {"wait_for_picked_minutes": 5}}))
    env = {"JEDICTL_CONFIG": str(config), "JEDICTL_WATCHDOG__WAIT_FOR_PICKED_MINUTES": "7"}
    values = _values(cli, "--output", "json", env=env)
    assert values["db"] == ("postgresql+psycopg://jedi:***@db.example/jedi", f"file {config}")
    assert values["throttle.threshold"] == (3.0, f"file {config}")
    assert values["watchdog.wait_for_picked_minutes"] == (7, "env JEDICTL_WATCHDOG__WAIT_FOR_PICKED_MINUTES")
    flagged = _values(cli, "--db", "/tmp/x.db", env=env)
    assert flagged["db"] == ("sqlite:////tmp/x.db", "flag")


def test_password_never_printed(cli, tmp_path):
    result = cli("config", "show", "--db", "postgresql+psycopg://u:topsecret@h/d")
    assert "topsecret" not in result.stdout + result.stderr


def test_bad_config_is_exit_2(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("throttle: {threshold: high}\n")
    assert "throttle.threshold: must be a number" in cli("config", "show", "--config", str(bad), code=2).stderr
    bad.write_text("thrott1e: {}\n")
    assert "thrott1e: unknown setting" in cli("config", "show", "--config", str(bad), code=2).stderr
    bad.write_text("a: [\n")
    assert "is not valid YAML" in cli("config", "show", "--config", str(bad), code=2).stderr
    assert "does not exist" in cli("config", "show", "--config", str(tmp_path / "none.yaml"), code=2).stderr


def test_global_options_before_or_after_the_command(cli, store):
    before = cli("--db", store, "-o", "json", "task", "list")
    after = cli("task", "list", "-o", "json", db=store)
    assert before.stdout == after.stdout == "[]\n"


def test_global_options_between_a_group_and_its_command(cli, store):
    """Every group takes the global options too, so `jedictl task --db X list` is not a usage error."""
    assert cli("task", "--db", store, "-o", "json", "list", db=None).stdout == "[]\n"
    assert yaml.safe_load(cli("db", "--db", store, "current", "-o", "json", db=None).stdout)["up_to_date"] is True


def test_the_last_global_option_wins_and_verbose_counts_add_up(cli, store):
    assert cli("-o", "json", "task", "-o", "yaml", "list", "-o", "tsv", db=store).stdout.startswith("task_id\tname\t")
    assert cli("-o", "tsv", "task", "list", "-o", "json", db=store).stdout == "[]\n"
    traced = cli("-v", "task", "-v", "show", "999", db=store, code=2)  # -v at two levels is -vv: traceback
    assert "Traceback" in traced.stderr and traced.stderr.rstrip().endswith("jedictl: error: task 999 does not exist")
    assert "Traceback" not in cli("-v", "task", "show", "999", db=store, code=2).stderr


def test_every_command_and_group_takes_the_global_options():
    """A command registered without jedictl's classes would refuse `--db` after its name."""
    import typer.core
    import typer.main

    from jedictl.cli import app

    names = {"db", "config", "output", "now", "verbose", "quiet"}
    missing = []

    def walk(command, path):
        if path[:2] != ["jedictl", "completion"] and not names <= {param.name for param in command.params}:
            missing.append(" ".join(path))
        for name, sub in getattr(command, "commands", {}).items() if isinstance(command, typer.core.TyperGroup) else ():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), ["jedictl"])
    assert missing == []
