"""Hostile input: job-parameter templates, queue criteria, dataset names and patterns, names and LFNs
that try to run code, inject SQL or hang a matcher either fail validation (exit 2, one line, nothing
written) or stay inert text (stored and rendered verbatim, never executed). Passwords in store URLs
are never printed or logged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.cli.test_generate import DS_IN, WORKED_EXAMPLE
from tests.conftest import ROOT
from tests.helpers import row_counts, run_sql

CANARY = "PWNED"
#: Shell, template-engine and format-string attacks that must reach the executor as plain text.
INERT_COMMAND_TEXT = [
    f"$(touch {CANARY})", f"`touch {CANARY}`", f"; touch {CANARY}", f"| touch {CANARY}", f"&& touch {CANARY}",
    "{{7*7}}", "{{config.__class__.__init__.__globals__}}", "{0.__class__.__mro__}", "%s%s%s%n", "%(password)s", "$IN $HOME",
    "'; DROP TABLE tasks; --",
]
TASK = {**WORKED_EXAMPLE, "taskName": "hostile.task", "skipScout": True}


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Commands run here: a `touch` that ran would leave its canary in this directory."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


@pytest.fixture
def grid(cli, store, tmp_path) -> str:
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    cli("data", "import", "-", db=store, input=yaml.safe_dump(DS_IN))
    return store


def _canary_absent(scratch: Path) -> None:
    assert not (scratch / CANARY).exists() and not Path(CANARY).exists(), "a hostile input was executed"


def _refused(cli, store: str, *args: str, input: str | None = None) -> str:
    """The command is refused with one line and the store keeps every row it had."""
    before = row_counts(store)
    result = cli(*args, db=store, input=input, code=2)
    lines = result.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("jedictl: error: "), result.stderr
    assert row_counts(store) == before
    return lines[0]


def _pipeline(cli, store: str) -> None:
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)


def _dispatched_parameters(cli, store: str) -> list[str]:
    sites = sorted({job["site"] for job in cli.json("jobs", "list", "--status", "activated", db=store)})
    return [job["job_parameters"] for site in sites for job in cli.json("jobs", "dispatch", "--site", site, "--count", "5", db=store)["jobs"]]


# ------------------------------------------------------------------------------ job-parameter templates

@pytest.mark.parametrize("placeholder", [
    f"${{__import__('os').system('touch {CANARY}')}}", "${IN.__class__.__mro__}", "${eval('1+1')}", "${{7*7}}",
    "${OUTPUT0;touch PWNED}", "${lambda: 0}", "${IN[__import__('os')]}", "${IN/X}", "${SN/M[__import__('os')]}", "${IN/M[#.real]}",
])
def test_code_in_a_placeholder_of_a_task_spec_is_refused(cli, grid, scratch, placeholder):
    spec = {"name": "hostile.spec", "command": f"--in=${{IN}} {placeholder} --out=${{OUTPUT0}}", "inputs": [{"dataset": "ds.in"}],
            "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}]}
    line = _refused(cli, grid, "submit", "-", input=yaml.safe_dump(spec))
    assert "command" in line
    _canary_absent(scratch)


def test_shell_and_template_syntax_reaches_the_executor_verbatim(cli, grid, scratch):
    """Every attack is one constant item of the job parameters: each reaches the payload as written."""
    task = {**TASK, "jobParameters": [*TASK["jobParameters"], *({"type": "constant", "value": text} for text in INERT_COMMAND_TEXT)]}
    cli("submit", "-", db=grid, input=json.dumps(task))
    _pipeline(cli, grid)
    parameters = _dispatched_parameters(cli, grid)
    assert parameters and all(p.endswith(" --n 10 " + " ".join(INERT_COMMAND_TEXT)) for p in parameters), parameters
    _canary_absent(scratch)
    assert row_counts(grid)["tasks"] == 1


def test_unknown_placeholders_in_panda_parameters_stay_text(cli, grid, scratch):
    """PanDA's format keeps a `${...}` that names nothing (a shell variable, as JEDI does): never evaluated."""
    hostile = f"${{__import__('os').system('touch {CANARY}')}}"
    task = {**TASK, "jobParameters": [*TASK["jobParameters"], {"type": "constant", "value": hostile}]}
    cli("submit", "-", db=grid, input=json.dumps(task))
    _pipeline(cli, grid)
    parameters = _dispatched_parameters(cli, grid)
    assert parameters and all(p.endswith(" " + hostile) for p in parameters)
    _canary_absent(scratch)


def _seq_task(expression: str) -> dict:
    return {**TASK, "noInput": True, "nEvents": 4, "nEventsPerJob": 1, "jobParameters": [
        {"type": "template", "param_type": "pseudo_input", "dataset": "seq_number", "value": f"--seed=${{SEQNUMBER/M[{expression}]}}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"}]}


@pytest.mark.parametrize("expression", [f"__import__('os').system('touch {CANARY}')", "#.__class__", "lambda: 1", "#**#**#**#", "#;1",
                                        "#if 1 else 0", "(" * 150 + "#"])
def test_arithmetic_decorators_with_code_are_refused(cli, grid, scratch, expression):
    """`/M[...]` knows numbers and + - * / // % only: anything else is refused when the task is submitted."""
    line = _refused(cli, grid, "submit", "-", input=json.dumps(_seq_task(expression)))
    assert "jobParameters: placeholder ${SEQNUMBER/M[" in line and "arithmetic" in line
    _canary_absent(scratch)


def test_arithmetic_that_fails_on_a_job_leaves_the_task_pending(cli, grid, scratch):
    """What only a job's values can break (a division by zero) leaves the task pending, with the reason."""
    cli("submit", "-", db=grid, input=json.dumps(_seq_task("#/(#-#)")))
    _pipeline(cli, grid)
    shown = cli.json("task", "show", "1", db=grid)
    assert shown["status"] == "pending" and "unresolved ${SEQNUMBER/M[#/(#-#)]}" in shown["status_history"][-1]["reason"]
    assert cli.json("jobs", "list", db=grid) == []
    _canary_absent(scratch)


# ---------------------------------------------------------------------------------------- queue criteria

@pytest.mark.parametrize("criteria", [
    "1; DROP TABLE tasks", "processingType = 'a'; DROP TABLE tasks; --", f"__import__('os').system('touch {CANARY}')",
    "lambda: True", "processingType.__class__ = 'x'", "processingType = processingType.__class__", "exec('1')",
    "processingType = 'a' OR 1=1", "NOT " * 200 + "vo IS NULL", "(" * 200 + "vo IS NULL" + ")" * 200, "processingType IN (SELECT name FROM tasks)",
])
def test_hostile_queue_criteria_are_refused(cli, store, scratch, criteria):
    document = {"work_queues": [{"name": "hostile", "queue_type": "managed", "criteria": criteria}]}
    line = _refused(cli, store, "queue-shares", "import", "-", input=yaml.safe_dump(document))
    assert "work_queues[0].criteria" in line
    _canary_absent(scratch)


def test_sql_in_criteria_values_stays_text(cli, grid, scratch):
    """A quoted value is compared as text: the quote and the SQL in it match only a task that carries them."""
    value = "x'; DROP TABLE tasks; --"
    document = {"work_queues": [
        {"name": "injected", "queue_type": "managed", "order": 1, "criteria": "processingType = '" + value.replace("'", "''") + "'"},
        {"name": "rest", "queue_type": "managed", "order": 2}]}
    cli("queue-shares", "import", "-", db=grid, input=yaml.safe_dump(document))
    cli("submit", "-", db=grid, input=json.dumps({**TASK, "processingType": value}))
    cli("submit", "-", db=grid, input=json.dumps({**TASK, "taskName": "other", "processingType": "x", "allowTaskDuplication": True}))
    cli("refine", db=grid)
    assert [t["work_queue"] for t in sorted(cli.json("task", "list", db=grid), key=lambda t: t["task_id"])] == ["injected", "rest"]
    assert row_counts(grid)["tasks"] == 2
    _canary_absent(scratch)


def test_like_patterns_cannot_make_matching_explode(cli, grid):
    """`%a%a%a...%b` backtracks exponentially in a regex; the LIKE matcher stays linear-ish."""
    document = {"work_queues": [{"name": "slow", "queue_type": "managed", "order": 1, "criteria": "workingGroup LIKE '" + "%a" * 30 + "%b'"},
                                {"name": "rest", "queue_type": "managed", "order": 2}]}
    cli("queue-shares", "import", "-", db=grid, input=yaml.safe_dump(document))
    cli("submit", "-", db=grid, input=json.dumps({**TASK, "workingGroup": "a" * 32}))
    started = time.monotonic()
    cli("refine", db=grid)
    assert time.monotonic() - started < 10
    assert cli.json("task", "show", "1", db=grid)["work_queue"] == "rest"


# ----------------------------------------------------------------------- dataset names and patterns

@pytest.mark.parametrize("name", ["x'; DROP TABLE tasks; --", "ds.in; rm -rf /", "$(touch PWNED)", "`id`", "ds in", "ds.in\n", "ds.in\x00", "a" * 256])
def test_hostile_dataset_names_are_refused(cli, store, scratch, name):
    spec = {"name": "hostile.spec", "command": "--in=${IN} --out=${OUTPUT0}", "inputs": [{"dataset": [name]}],
            "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}]}
    assert "inputs[0].dataset" in _refused(cli, store, "submit", "-", input=json.dumps(spec))
    assert "datasets[0].name" in _refused(cli, store, "data", "import", "-", input=json.dumps({"datasets": [{"name": name}]}))
    _canary_absent(scratch)


BOMBS = [r"(a+)+$", r"(a|aa)+$", r"(\w+\s?)+$", r"(.*a){20}", r".*.*.*.*.*x", r"(a|a)*$", r"^(([a-z])+.)+[A-Z]([a-z])+$"]


@pytest.mark.parametrize("pattern", BOMBS)
def test_catastrophic_include_patterns_are_refused(cli, store, pattern):
    for key in ("include", "exclude"):
        spec = {"name": "bomb", "command": "--in=${IN} --out=${OUTPUT0}", "inputs": [{"dataset": "ds.in", key: [pattern]}],
                "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}]}
        assert "exponential time" in _refused(cli, store, "submit", "-", input=json.dumps(spec))
        task = {**TASK, "jobParameters": [{**TASK["jobParameters"][0], key: pattern}, *TASK["jobParameters"][1:]]}
        assert "exponential time" in _refused(cli, store, "submit", "-", input=json.dumps(task))


@pytest.mark.parametrize("pattern", BOMBS[:3])
def test_catastrophic_share_and_retry_patterns_are_refused(cli, store, pattern):
    shares = {"global_shares": [{"name": "bomb", "value": 1, "processingtype": pattern}]}
    assert "global_shares[0].processingtype" in _refused(cli, store, "queue-shares", "import", "-", input=yaml.safe_dump(shares))
    rules = [{"error_source": "pilot", "error_code": 1, "action": "no_retry", "message_pattern": pattern}]
    assert "[0].message_pattern" in _refused(cli, store, "retry-rules", "import", "-", input=yaml.safe_dump(rules))


def test_sql_and_shell_text_in_include_patterns_stays_inert(cli, grid, scratch):
    """A pattern with quotes and SQL is a valid regex: it only filters file names (here, all of them out)."""
    spec = {"name": "inert", "command": "--in=${IN} --out=${OUTPUT0}",
            "inputs": [{"dataset": "ds.in", "include": [f"x'; DROP TABLE files; -- $(touch {CANARY})"]}],
            "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}], "completion": {"allow_empty_input": True}}
    cli("submit", "-", db=grid, input=json.dumps(spec))
    _pipeline(cli, grid)
    stored = cli.json("task", "show", "1", db=grid)
    assert stored["datasets"][0]["attributes"]["include"] == [f"x'; DROP TABLE files; -- $(touch {CANARY})"]
    assert row_counts(grid)["files"] == 0 and row_counts(grid)["catalog_files"] == len(DS_IN["datasets"][0]["files"])
    _canary_absent(scratch)


def test_a_regex_bomb_already_in_the_store_is_not_run_by_the_feeder_on_a_long_name(cli, grid):
    """The feeder's own time: an accepted pattern on 255-character names stays fast."""
    long_names = {"datasets": [{"name": "ds.long", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}],
                                "files": [{"lfn": "a" * 254 + f"{i}"} for i in range(5)]}]}
    cli("data", "import", "-", db=grid, input=json.dumps(long_names))
    spec = {"name": "long", "command": "--in=${IN} --out=${OUTPUT0}", "inputs": [{"dataset": "ds.long", "exclude": [r".*a.*b", r"(\.\d+)*$"]}],
            "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}]}
    cli("submit", "-", db=grid, input=json.dumps(spec))
    started = time.monotonic()
    _pipeline(cli, grid)
    assert time.monotonic() - started < 30


# ------------------------------------------------------------------------ names, users, LFNs, sites

@pytest.mark.parametrize("user", ["bob'; DROP TABLE tasks; --", "bob\n", "bob\x00", "$(id)", "a b", ""])
def test_hostile_user_names_are_refused(cli, store, user):
    if user:
        assert "--user" in _refused(cli, store, "submit", "-", "--user", user, input=json.dumps(TASK))
    spec_user = {**TASK, "userName": user or "x\ty"}
    _refused(cli, store, "submit", "-", input=json.dumps(spec_user))


@pytest.mark.parametrize("lfn", ["f'; DROP TABLE files; --.root", "f.root\x00", "f.root\n", "f root", "$(touch PWNED)", "f\"x"])
def test_hostile_lfns_are_refused(cli, grid, scratch, lfn):
    document = {"datasets": [{"name": "ds.hostile", "files": [{"lfn": lfn}]}]}
    assert "datasets[0].files[0].lfn" in _refused(cli, grid, "data", "import", "-", input=json.dumps(document))
    assert "[0].lfn" in _refused(cli, grid, "data", "add-files", "ds.in", "-", input=json.dumps([{"lfn": lfn}]))
    _canary_absent(scratch)


def test_hostile_lfns_in_job_reports_are_refused_lines(cli, grid):
    cli("submit", "-", db=grid, input=json.dumps(TASK))
    _pipeline(cli, grid)
    job = cli.json("jobs", "dispatch", "--site", "BNL_PROD", "--count", "1", db=grid)["jobs"][0]
    before = row_counts(grid)
    lines = [{"job_id": job["job_id"], "status": "finished", "attempt_nr": 1, "outputs": [{"lfn": lfn, "size": 1}]}
             for lfn in ("x'; DROP TABLE files; --\x00", "a\x00b")]
    result = cli("jobs", "report", "-", "-o", "json", db=grid, input="".join(json.dumps(line) + "\n" for line in lines), code=1)
    assert [item["outcome"] for item in json.loads(result.stdout)["items"]] == ["refused", "refused"]
    assert row_counts(grid) == before


@pytest.mark.parametrize("name", ["CERN'; DROP TABLE sites; --", "X; DROP TABLE sites", 'Q"uote', "$(touch PWNED)", "a`id`b",
                                  "../../etc", "/etc", "a/b", "..", ".hidden", "-rf", "a b", "x" * 129])
def test_site_nucleus_and_endpoint_names_are_checked_like_task_names(cli, store, scratch, name):
    """Names of the resource catalog name folders and go into commands: letters, digits and . _ - only,
    starting with a letter or digit -- `../../etc` and `X; DROP TABLE sites` used to be stored."""
    for kind in ("sites", "nuclei", "storage_endpoints"):
        line = _refused(cli, store, "sites", "import", "-", input=json.dumps({kind: [{"name": name}]}))
        if len(name) <= 64:
            assert line.startswith(f"jedictl: error: {kind}[0].name: a ") and "must be letters, digits and . _ -" in line, line
    assert _refused(cli, store, "sites", "import", "-", input=json.dumps({"sites": [{"name": "S1", "cloud": name}]})).startswith(
        "jedictl: error: sites[0].cloud: ")
    before = row_counts(store)
    _refused(cli, store, "jobs", "dispatch", "--site", name + "' OR '1'='1")
    assert cli.json("task", "list", "--user", "x' OR '1'='1", db=store) == []
    assert row_counts(store) == before and before["sites"] == 0
    _canary_absent(scratch)


def test_catalog_names_that_are_fine(cli, store):
    names = ["CERN-PROD_GRID", "ANALY_BNL.SHORT", "UKI-SCOTGRID-GLASGOW_CEPH", "9LIVES", "a" * 64]
    cli("sites", "import", "-", db=store, input=json.dumps({"nuclei": [{"name": "N-1.a", "cloud": "DE"}],
                                                             "storage_endpoints": [{"name": "E_" + "x" * 126, "nucleus": "N-1.a"}],
                                                             "sites": [{"name": name, "cloud": "US"} for name in names]}))
    assert sorted(site["name"] for site in cli.json("sites", "list", db=store)) == sorted(names)


@pytest.mark.parametrize("name", ["a\x00b", "a\x1bb", "\ud800"])
def test_site_names_with_control_characters_are_refused(cli, store, name):
    assert "sites[0].name" in _refused(cli, store, "sites", "import", "-", input=json.dumps({"sites": [{"name": name}]}))


def test_the_tables_survive_every_hostile_input(cli, store):
    """After all of the above on one store, every table is still there and readable."""
    for text in ("x'; DROP TABLE tasks; --", "'; DELETE FROM sites; --"):
        cli("sites", "import", "-", db=store, input=json.dumps({"sites": [{"name": text, "cloud": text}]}), code=2)
        cli("sites", "import", "-", db=store, input=json.dumps({"sites": [{"name": "S1", "attributes": {"note": text}}]}))
        cli("task", "list", "--user", text, db=store)
        cli("data", "list", text, db=store)
    counts = row_counts(store)  # every table is still there to be counted
    assert counts["sites"] == 1 and counts["tasks"] == 0
    assert run_sql(store, lambda conn: conn.exec_driver_sql("SELECT name FROM sites ORDER BY name").scalars().all()) == ["S1"]


# -------------------------------------------------------------------------------------------- passwords

UNREACHABLE = [
    "postgresql+psycopg://u:SECRET@127.0.0.1:1/x",
    "postgresql+psycopg://:SECRET@127.0.0.1:1/x",
    "postgresql+psycopg://u:SE@CRET@127.0.0.1:1/x",
    "postgresql+psycopg://u@127.0.0.1:1/x?password=SECRET",
    "postgresql+psycopg://u:SECRET@127.0.0.1:notaport/x",
    "postgresql://u:SECRET@[::1/x",
]


@pytest.mark.parametrize("url", UNREACHABLE)
@pytest.mark.parametrize("verbosity", [[], ["-v"], ["-vv"]])
def test_passwords_are_never_printed_for_an_unreachable_store(cli, tmp_path, url, verbosity):
    for args in (["task", "list"], ["run", "--log-format", "json", "--metrics-file", str(tmp_path / "m.prom")], ["db", "current"],
                 ["submit", str(ROOT / "examples" / "panda-taskparams" / "prun_files.json")]):
        result = cli(*args, *verbosity, db=url, code=3)
        assert "SECRET" not in result.stdout + result.stderr and "CRET" not in result.stdout + result.stderr, result.stderr
        assert result.stderr.strip().split("\n")[-1].startswith("jedictl: error: store")
        result = cli(*args, *verbosity, env={"JEDICTL_DB": url}, code=3)
        assert "SECRET" not in result.stdout + result.stderr
    assert not (tmp_path / "m.prom").exists() or "SECRET" not in (tmp_path / "m.prom").read_text()


def test_passwords_are_never_printed_in_a_real_process(tmp_path):
    """The same through a real process, tracebacks and all (-vv)."""
    from tests.helpers import jedictl_process

    process = jedictl_process(["task", "list", "-vv", "--db", UNREACHABLE[0]])
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 3 and "Traceback" in stderr
    assert "SECRET" not in stdout + stderr


@pytest.mark.parametrize("where", ["flag", "env", "file"])
def test_config_show_masks_the_password(cli, tmp_path, where):
    url = UNREACHABLE[0]
    config = tmp_path / "jedictl.yaml"
    config.write_text(yaml.safe_dump({"db": url}))
    args = {"flag": ["--db", url], "env": [], "file": ["--config", str(config)]}[where]
    for output in ("table", "json", "yaml", "tsv"):
        result = cli("config", "show", *args, "-o", output, env={"JEDICTL_DB": url} if where == "env" else None)
        assert "SECRET" not in result.stdout + result.stderr
        assert "u:***@127.0.0.1:1/x" in result.stdout


@pytest.mark.postgres
def test_passwords_stay_out_of_json_logs_and_metrics(cli, pg_url, tmp_path):
    """A reachable store whose URL carries a password (trust authentication ignores it): a whole run
    with JSON logs, metrics and -vv prints and writes no password."""
    url = pg_url.replace("postgresql+psycopg://postgres@", "postgresql+psycopg://postgres:SECRET@", 1)
    assert "SECRET" in url
    metrics = tmp_path / "metrics.prom"
    outputs = [cli("db", "init", db=url), cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=url),
               cli("data", "import", "-", db=url, input=yaml.safe_dump(DS_IN)), cli("submit", "-", db=url, input=json.dumps(TASK))]
    for verbosity in ([], ["-v"], ["-vv"]):
        outputs.append(cli("run", "--seed", "1", "--log-format", "json", "--metrics-file", str(metrics), *verbosity, db=url))
    outputs += [cli("config", "show", db=url), cli("db", "current", db=url), cli("task", "list", "-o", "json", db=url)]
    for result in outputs:
        assert "SECRET" not in result.stdout + result.stderr
    assert '"event":"pass"' in outputs[4].stderr
    assert metrics.exists() and "SECRET" not in metrics.read_text()
