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


def _refused(cli, *args, env=None):
    result = cli(*args, env=env, code=2)
    lines = result.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("jedictl: error: "), result.stderr
    return lines[0]


def test_numbers_out_of_their_range_are_refused_naming_the_key(cli, tmp_path):
    config = tmp_path / "c.yaml"
    cases = [({"lease": {"seconds": -5}}, "lease.seconds: must be at least 1"),
             ({"dispatch": {"sloppy_ratio": 5}}, "dispatch.sloppy_ratio: must be between 0 and 1"),
             ({"generate": {"express_ratio": -0.1}}, "generate.express_ratio: must be between 0 and 1"),
             ({"feed": {"batch_size": 0}}, "feed.batch_size: must be at least 1"),
             ({"refine": {"default_cpu_efficiency": 101}}, "refine.default_cpu_efficiency: must be between 1 and 100"),
             ({"job_timeouts": {"sent_minutes": 0}}, "job_timeouts.sent_minutes: must be greater than 0"),
             ({"throttle": {"threshold": float("nan")}}, "throttle.threshold: must be a finite number"),
             ({"generate": {"express_priority": 10**10}}, "generate.express_priority: must be between -1000000000 and 1000000000"),
             ({"harvest": {"slots": 0}}, "harvest.slots: must be between 1 and 1024"),
             ({"throttle": {"bunch_min": 700}}, "throttle.bunch_min: must be at most throttle.bunch_max (600)"),
             ({"retry": {"ram_ladder_mb": [2000, 1000]}}, "retry.ram_ladder_mb[1]: must be larger than the step before it"),
             ({"retry": {"ram_ladder_mb": [0]}}, "retry.ram_ladder_mb[0]: must be a whole number of MB"),
             ({"throttle": {"limits": {"NQUEUELIMIT_Test": -1}}}, "throttle.limits.NQUEUELIMIT_Test: must be a number of jobs"),
             ({"lease": {"seconds": 2**63}}, "lease.seconds: must be at most 9223372036854775807")]
    for document, message in cases:
        config.write_text(yaml.safe_dump(document))
        line = _refused(cli, "config", "show", "--config", str(config))
        assert line.startswith(f"jedictl: error: {message}") and line.endswith(f" (in {config})"), line
    line = _refused(cli, "config", "show", env={"JEDICTL_LEASE__SECONDS": "0"})
    assert line == "jedictl: error: lease.seconds: must be at least 1 (from JEDICTL_LEASE__SECONDS)"
    assert _refused(cli, "config", "show", env={"JEDICTL_LEASE__SECONDS": "["}).startswith(
        "jedictl: error: JEDICTL_LEASE__SECONDS: is not a valid value")
    config.write_text(yaml.safe_dump({"leese": {"seconds": 5}}))
    assert _refused(cli, "config", "show", "--config", str(config)) == "jedictl: error: leese: unknown setting; did you mean lease?"


def test_every_number_in_the_settings_has_a_range():
    """A numeric setting added without a range would take any value again."""
    import dataclasses
    from typing import get_type_hints

    from jedictl.config import Settings

    def numbers(cls, prefix=""):
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                yield from numbers(hints[f.name], f"{prefix}{f.name}.")
            elif hints[f.name] in (int, float):
                yield f"{prefix}{f.name}", f.metadata

    unbounded = [key for key, meta in numbers(Settings) if meta.get("low") is None and meta.get("above") is None]
    assert unbounded == ["verbose"]


def test_the_defaults_are_within_their_ranges(cli):
    cli("config", "show")  # built from the defaults alone: every range and cross-check holds


def test_config_and_db_that_cannot_be_right(cli, tmp_path):
    assert _refused(cli, "config", "show", "--config", str(tmp_path)) == \
        f"jedictl: error: --config: {tmp_path} is a directory, not a configuration file"
    assert _refused(cli, "config", "show", env={"JEDICTL_CONFIG": str(tmp_path)}) == \
        f"jedictl: error: JEDICTL_CONFIG: {tmp_path} is a directory, not a configuration file"
    assert _refused(cli, "config", "show", "--config", "") == \
        "jedictl: error: --config: is empty (leave it out to use the default configuration file)"
    # `--db ''` (an unset variable in a script) used to open the default store instead.
    assert _refused(cli, "--db", "", "task", "list") == "jedictl: error: --db: is empty (leave it out to use the default store)"
    assert _refused(cli, "task", "list", "--db", "") == "jedictl: error: --db: is empty (leave it out to use the default store)"
    unreadable = tmp_path / "secret.yaml"
    unreadable.write_bytes(b"\xff\xfe lease: 1")
    assert _refused(cli, "config", "show", "--config", str(unreadable)).startswith(
        f"jedictl: error: cannot read the configuration file {unreadable}")


def test_a_duplicate_key_in_the_configuration_is_refused(cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("lease:\n  seconds: 60\nthrottle:\n  threshold: 3\nlease:\n  seconds: 5\n")
    assert _refused(cli, "config", "show", "--config", str(config)) == (
        f"jedictl: error: config file {config} line 5 is not valid YAML: found duplicate key 'lease' (first at line 1)")


def test_now_is_checked_by_every_command(cli, store):
    """`task list` never reads the clock: `--now yesterday` used to pass unnoticed."""
    from tests.helpers import refused

    assert refused(cli, store, "task", "list", "--now", "yesterday") == \
        "jedictl: error: --now: 'yesterday' is not an ISO-8601 time"
    assert refused(cli, store, "task", "list", env={"JEDICTL_NOW": "1900-01-01"}) == \
        "jedictl: error: JEDICTL_NOW: must lie between 1970-01-01 and 9000-01-01"
    assert cli.json("task", "list", "--now", "2030-01-01T00:00:00Z", db=store) == []


def test_every_setting_is_read_somewhere():
    """A setting nothing reads is an option accepted without an effect: each section's key must be read
    (as `.key`) by some module outside config.py. Two settings from the first skeleton were read nowhere."""
    import dataclasses
    import re
    from typing import get_type_hints

    from jedictl.config import Settings
    from tests.conftest import ROOT

    sources = "\n".join(path.read_text() for path in (ROOT / "jedictl").rglob("*.py") if path.name != "config.py")

    def keys(cls):
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            yield f.name
            if dataclasses.is_dataclass(hints[f.name]):
                yield from keys(hints[f.name])

    unread = [key for key in keys(Settings) if not re.search(rf"\.{key}\b", sources)]
    assert unread == []


def test_privileges_are_a_list_shown_by_config_show(cli, tmp_path):
    config = tmp_path / "c.yaml"
    privileges = [{"user": "alice", "permissions": "s"}, {"user": "carol", "permissions": "g"},
                  {"group": "phys-higgs", "permissions": "s"}, {"group": "GP_Top", "share": 10}]
    config.write_text(yaml.safe_dump({"privileges": privileges, "user_caps": {"running_user_jobs": 500, "max_active_tasks": {"user": 50}}}))
    values = _values(cli, env={"JEDICTL_CONFIG": str(config)})
    assert values["privileges"] == (privileges, f"file {config}")
    assert values["user_caps.running_user_jobs"] == (500, f"file {config}")
    assert values["user_caps.max_active_tasks"] == ({"user": 50}, f"file {config}")
    assert values["user_caps.prestage_limit_gb"] == (1024.0, "default") and values["job_timeouts.throttled_days"] == (7.0, "default")
    assert "refine.super_users" not in values and "refine.super_groups" not in values
    table = cli("config", "show", env={"JEDICTL_CONFIG": str(config)}).stdout
    assert "privileges" in table and "alice" in table


def test_bad_privileges_are_refused_naming_the_entry(cli, tmp_path):
    cases = {
        "[{user: alice, permissions: k}]": "privileges[0].permissions: 'k' (download key-pairs) is a PanDA server permission jedictl has "
                                           "nothing to act on; a user takes s, g",
        "[{user: alice, permissions: x}]": "privileges[0].permissions: unknown permission 'x' (a user takes s, g)",
        "[{group: phys, permissions: g}]": "privileges[0].permissions: unknown permission 'g' (a group takes s); a group is privileged with s",
        "[{user: alice, group: phys, permissions: s}]": "privileges[0]: names either a user or a group",
        "[{user: alice, permissions: s}, {user: alice, permissions: g}]": "privileges[1].user: user alice is listed twice",
        "[{user: alice, share: 3}]": "privileges[0].share: a share is given to a working group, not a user",
        "[{group: GP_Top, share: 0}]": "privileges[0].share: must be a number greater than 0",
        "[{group: GP_Top}]": "privileges[0]: gives neither permissions nor a share",
        "[{user: alice, permission: s}]": "privileges[0].permission: unknown key 'permission' (known: user, group, permissions, share)",
        "{alice: s}": "privileges: must be a list",
    }
    for value, message in cases.items():
        result = cli("config", "show", env={"JEDICTL_PRIVILEGES": value}, code=2)
        assert result.stderr.strip() == f"jedictl: error: {message} (from JEDICTL_PRIVILEGES)", value
    result = cli("config", "show", env={"JEDICTL_USER_CAPS__MAX_ACTIVE_TASKS": "{user: 0}"}, code=2)
    assert result.stderr.strip() == ("jedictl: error: user_caps.max_active_tasks.user: must be a whole number of tasks, at least 1 "
                                     "(from JEDICTL_USER_CAPS__MAX_ACTIVE_TASKS)")


def test_a_refused_column_is_the_only_line_config_show_writes(cli):
    """The note naming the config file follows the rows, so a refused --columns leaves one error line
    (the argv fuzz test found the note printed before it)."""
    result = cli("config", "show", "--columns", "1", code=2)
    assert result.stdout == ""
    assert result.stderr.splitlines() == ["jedictl: error: --columns: no column 1; choose from key, value, source, help"]
    assert cli("config", "show").stderr.startswith("config file: ")
