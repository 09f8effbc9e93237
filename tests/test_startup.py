"""`--help` and completion must be fast and never load the database layer or touch the store; a pilot loads
only what its first dispatch needs."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_does_not_load_sqlalchemy():
    code = "import sys, jedictl.cli; print(any(m.startswith(('sqlalchemy', 'alembic', 'psycopg', 'pika')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_help_works_with_an_unreachable_store():
    env_db = "postgresql+psycopg://x:y@127.0.0.1:1/none"
    for args in (["--help"], ["refine", "--help"], ["listen", "--help"], ["--db", env_db, "task", "show", "--help"]):
        result = subprocess.run([sys.executable, "-m", "jedictl", *args], capture_output=True, text=True, env={"JEDICTL_DB": env_db, "PATH": ""})
        assert result.returncode == 0, result.stderr
        assert "Usage" in result.stdout


def test_version(cli):
    assert cli("--version").stdout.startswith("jedictl ")


# What a pilot may load before its first dispatch (a batch job pays the start-up once per slot): not the
# other commands' modules, not what only a job needs (stage-in, payload, report, the job-outcome rules),
# nor rich, alembic or psycopg on SQLite. jedictl.cli.main picks the one command named first on the line.
_PILOT_WITHOUT_WORK = """
import sys
sys.argv = ["jedictl", "pilot", "--site", "LOCAL", "--once", "--db", sys.argv[1]]
try:
    from jedictl.cli import main
    main()
finally:
    print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


def test_a_pilot_loads_only_what_its_first_dispatch_needs(tmp_path):
    import yaml

    from jedictl.store.migrate import upgrade
    from tests.cli.pilot_grid import sites_document

    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    (tmp_path / "sites.yaml").write_text(yaml.safe_dump(sites_document(tmp_path)))
    env = {"PATH": "", "XDG_CONFIG_HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "jedictl", "sites", "import", str(tmp_path / "sites.yaml"), "--db", url], check=True, env=env,
                   capture_output=True)
    result = subprocess.run([sys.executable, "-c", _PILOT_WITHOUT_WORK, url], capture_output=True, text=True, env=env)
    assert result.returncode == 0 and "pilot: failed 0, finished 0, jobs 0" in result.stderr, result.stderr  # it dispatched: no job
    loaded = set(result.stderr.strip().splitlines()[-1].split())
    assert {"jedictl.commands.pilot", "jedictl.engine.pilot.pilot", "sqlalchemy"} <= loaded
    other_commands = {m for m in loaded if m.startswith("jedictl.commands.") and not m.startswith(("jedictl.commands._", "jedictl.commands.pilot"))}
    assert not other_commands, other_commands
    job_only = {"jedictl.engine.pilot.job", "jedictl.engine.pilot.staging", "jedictl.engine.pilot.payload", "jedictl.engine.pilot.report",
                "jedictl.engine.jobs.outcomes", "jedictl.engine.jobs.results", "jedictl.engine.task.templates"} & loaded
    assert not job_only, job_only
    assert not {m for m in loaded if m.split(".")[0] in ("rich", "alembic", "psycopg")}
