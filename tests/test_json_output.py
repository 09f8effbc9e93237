"""docs/json-output.md is true: every command's `-o json` answer has the shape the page documents.

The page holds one machine-readable example per answer (`<!-- json: NAME -->` and a json block). This
test plays one scenario through every command on a fresh store, in the page's vocabulary of names, and
compares each answer with its example: the same kind (list or object), the same keys, numbers where
numbers are shown, lists of objects item by item. In an example, `{"*": X}` is a map whose keys are
data (every value shaped like X), and a `"...": null` key says the object may carry more keys than
those listed (a pass's items). Every command of the program is covered, or listed in EXEMPT with why.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jedictl.clock import parse_time
from jedictl.engine.agent import PASS_COUNTS
from jedictl.store import pilots as pilot_store
from sqlalchemy import select

from jedictl.store.schema import datasets, files, tasks
from tests.conftest import ROOT, click_command, invoke
from tests.helpers import run_sql
from tests.periodic_specs import hc_template

PAGE = ROOT / "docs" / "json-output.md"
SITE = "CERN-PROD_GRID"
NOW = "2030-01-01T00:00:00"

#: Commands without a JSON answer of their own, and why.
EXEMPT = {
    "completion show": "prints a shell script",
    "completion install": "writes a shell script; prints where",
    "data import --scan": "the catalog import of files on disk: object {dataset, endpoint, files_added, files_known, ...}, "
                          "covered by tests/cli/test_data_scan.py",
    "demo --execute": "runs real pilot processes (tests/cli/test_demo.py)",
    "listen": "needs a message broker: its report (the `listen` counts of the page's table) is checked against RabbitMQ by "
              "tests/messages/test_listen.py",
}

WORKED = {
    "taskName": "json.shapes", "vo": "wlcg", "prodSourceLabel": "managed", "taskType": "prod", "processingType": "sim",
    "nFilesPerJob": 2, "skipScout": True,
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"},
    ],
    "log": {"type": "template", "param_type": "log", "dataset": "ds.log", "value": "ds.log.${SN}.log.tgz"},
}
CATALOG = {"datasets": [
    {"name": "ds.in", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}],
     "files": [{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 9)]},
    {"name": "ds.open", "state": "open", "files": [{"lfn": "o.001.root", "size": 10}]},
], "containers": [{"name": "ds.all", "datasets": ["ds.in", "ds.open"]}]}
FILESET = {"closed": True, "files": [{"lfn": "/store/a.root", "events": 150, "locations": ["T1_A"]},
                                     {"lfn": "/store/b.root", "events": 50, "locations": ["T1_A"]}]}


def documented() -> dict[str, Any]:
    """The page's examples by name."""
    text = PAGE.read_text()
    found = {}
    for name, body in re.findall(r"<!-- json: (.+?) -->\n```json\n(.*?)```", text, re.S):
        assert name not in found, f"two examples named {name!r}"
        found[name] = json.loads(body)
    return found


def shape_errors(example: Any, actual: Any, where: str = "$") -> list[str]:
    """How `actual` differs in shape from `example` (an empty list: it fits)."""
    if example is None or actual is None:
        return []  # null stands for any value, and any value may be null when it has none
    if isinstance(example, bool) or isinstance(actual, bool):
        return [] if isinstance(example, bool) and isinstance(actual, bool) else [f"{where}: {actual!r} is not like {example!r}"]
    if isinstance(example, (int, float)):
        return [] if isinstance(actual, (int, float)) else [f"{where}: {actual!r} is not a number"]
    if isinstance(example, str):
        return [] if isinstance(actual, str) else [f"{where}: {actual!r} is not a string"]
    if isinstance(example, list):
        if not isinstance(actual, list):
            return [f"{where}: {type(actual).__name__}, not a list"]
        return [error for index, item in enumerate(actual) if example for error in shape_errors(example[0], item, f"{where}[{index}]")]
    if not isinstance(actual, dict):
        return [f"{where}: {type(actual).__name__}, not an object"]
    if set(example) == {"*"}:
        return [error for key, value in actual.items() for error in shape_errors(example["*"], value, f"{where}.{key}")]
    listed = {key: value for key, value in example.items() if key != "..."}
    errors = [f"{where}: no key {key!r}" for key in listed if key not in actual]
    if "..." not in example:
        errors += [f"{where}: undocumented key {key!r}" for key in actual if key not in listed]
    return errors + [error for key, value in listed.items() if key in actual for error in shape_errors(value, actual[key], f"{where}.{key}")]


def commands() -> set[str]:
    """Every command of the program, as `group command`."""
    names = set()

    def walk(command: Any, path: list[str]) -> None:
        subs = getattr(command, "commands", None)
        for name, sub in (subs or {}).items():
            walk(sub, path + [name])
        if path and (not subs or getattr(command, "invoke_without_command", False)):
            names.add(" ".join(path))

    walk(click_command(), [])
    return names


class Scenario:
    """One store taken through every command; `answers[name]` is each command's parsed JSON."""

    def __init__(self, tmp: Path):
        self.tmp, self.url = tmp, f"sqlite:///{tmp / 'store.db'}"
        self.answers: dict[str, Any] = {}
        self.invoked: set[str] = set()

    def json(self, name: str, *argv: str, input: str | None = None, code: int = 0, store: bool = True) -> Any:
        args = [*argv, "-o", "json", "--now", NOW] + (["--db", self.url] if store else [])
        result = invoke(args, input=input)
        assert result.exit_code == code, f"{name}: exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
        answer = json.loads(result.stdout)
        assert name not in self.answers, name
        self.answers[name] = answer
        self.invoked.add(" ".join(arg for arg in argv[:2] if not arg.startswith("-")) if argv[0] in GROUPS else argv[0])
        return answer

    def file(self, name: str, content: Any) -> str:
        path = self.tmp / name
        path.write_text(json.dumps(content) if name.endswith(".json") else yaml.safe_dump(content))
        return str(path)

    def play(self) -> None:
        j = self.json
        j("db init", "db", "init")
        j("db upgrade", "db", "upgrade")
        j("db current", "db", "current")
        j("config show", "config", "show")
        j("sites import", "sites", "import", str(ROOT / "examples" / "sites.yaml"))
        j("sites list", "sites", "list")
        j("sites show", "sites", "show", SITE)
        j("sites set-status", "sites", "set-status", SITE, "online")
        j("sites nuclei", "sites", "nuclei")
        j("sites endpoints", "sites", "endpoints")
        j("data import", "data", "import", self.file("catalog.yaml", CATALOG))
        j("data add-files", "data", "add-files", "ds.open", "-", input=json.dumps([{"lfn": "o.002.root", "size": 20}]))
        j("data remove-files", "data", "remove-files", "ds.open", "o.001.root")
        j("data close", "data", "close", "ds.open")
        j("data open", "data", "open", "ds.open")
        j("data list", "data", "list")
        j("data show", "data", "show", "ds.in", "--files")
        j("data show (container)", "data", "show", "ds.all")
        j("retry-rules import", "retry-rules", "import", str(ROOT / "examples" / "retry-rules.yaml"))
        j("retry-rules list", "retry-rules", "list")
        j("retry-rules match", "retry-rules", "match", "--source", "trans", "--code", "65", "--diag", "corrupted input file x")
        j("retry-rules match (no rule)", "retry-rules", "match", "--source", "sup", "--code", "1")
        j("retry-rules remove", "retry-rules", "remove", "1")
        j("queue-shares show", "queue-shares", "show")
        j("queue-shares", "queue-shares")
        j("queue-shares export", "queue-shares", "export")
        j("queue-shares import", "queue-shares", "import", str(ROOT / "examples" / "queue-shares.yaml"))
        j("queue-shares set", "queue-shares", "set", "managed", "--share", "35", "--kind", "queue")
        j("submit --dry-run", "submit", "-", "--dry-run", input=json.dumps(WORKED))
        task = j("submit", "submit", "-", input=json.dumps(WORKED))["task_id"]
        j("refine", "refine")
        j("feed", "feed")
        j("broker", "broker", "--seed", "1")
        j("generate", "generate", "--seed", "1")
        j("task list", "task", "list")
        j("task show", "task", "show", str(task))
        j("task show --split-rule", "task", "show", str(task), "--split-rule")
        j("explain task", "explain", "task", str(task))
        listed = j("jobs list", "jobs", "list")
        site = listed[0]["site"]
        first = j("jobs dispatch", "jobs", "dispatch", "--site", site, "--task", str(task), "--count", "2")["jobs"]
        j("jobs heartbeat", "jobs", "heartbeat", str(first[0]["job_id"]), first[1]["task_job"])
        j("jobs report", "jobs", "report", "-", input=json.dumps({"job_id": first[0]["job_id"], "status": "failed", "attempt_nr": 1,
                                                                  "error_source": "exe", "error_code": 65, "error_diag": "x"}) + "\n")
        j("jobs events report", "jobs", "events", "report", "-", code=1,
          input=json.dumps({"event_id": 999, "job_id": first[1]["job_id"], "status": "finished"}) + "\n")
        self.invoked.add("jobs events report")  # a group inside a group: `invoked` names the first two words
        j("jobs kill", "jobs", "kill", first[1]["task_job"])
        # its input has attempts left, so the automatic retry has it: refused (docs/subjobs.md)
        j("jobs resubmit", "jobs", "resubmit", first[0]["task_job"], code=1)
        j("jobs copy", "jobs", "copy", first[0]["task_job"])
        j("jobs show", "jobs", "show", first[0]["task_job"])
        queued = next(job for job in listed if job["job_id"] not in {taken["job_id"] for taken in first})
        j("jobs reassign", "jobs", "reassign", str(queued["job_id"]), "--site", "CERN-PROD_GRID" if queued["site"] != "CERN-PROD_GRID" else "BNL_PROD")
        j("simulate", "simulate", "--seed", "1", "--failure-rate", "0")
        j("finalize", "finalize")
        j("watch", "watch")
        j("run", "run", "--seed", "2")
        j("harvest", "harvest", "--dry-run", "--batch", "local", "--site", SITE)
        j("pilot", "pilot", "--site", "MWT2", "--once")
        run_sql(self.url, lambda conn: pilot_store.insert_pilots(conn, SITE, "local", 1, parse_time(NOW)))
        j("pilots list", "pilots", "list")
        j("task pause", "task", "pause", str(task))
        j("task resume", "task", "resume", str(task))
        for command in ("task kill", "task retry", "task finish", "task incexec", "task avalanche", "task reassign", "kill", "retry"):
            self.invoked.add(command)  # the same answer as pause and resume: one Outcome (commands/task_commands.py `_run`)
        j("task settle", "task", "settle")
        j("network import", "network", "import", str(ROOT / "examples" / "network.yaml"))
        j("network list", "network", "list")
        j("network show", "network", "show", "MWT2", "CERN-PROD")
        j("periodic add", "periodic", "add", self.file("hc.yaml", hc_template()), "--every", "1h", "--max-active", "2")
        j("periodic instantiate", "periodic", "instantiate")
        j("periodic list", "periodic", "list")
        j("periodic show", "periodic", "show", "hc.test.ANALY_X")
        j("periodic pause", "periodic", "pause", "hc.test.ANALY_X")
        j("periodic resume", "periodic", "resume", "hc.test.ANALY_X")
        j("periodic remove", "periodic", "remove", "hc.test.ANALY_X")
        # The queue layers (docs/queue-layers.md): a task put in the work queue before its first job, an agent takes it.
        queued = {**WORKED, "taskName": "json.queued", "jobParameters": [
            WORKED["jobParameters"][0], {**WORKED["jobParameters"][1], "dataset": "ds.queued"}], "log": {**WORKED["log"], "dataset": "ds.queued.log"}}
        for step in (["submit", "-"], ["refine"], ["feed"]):
            assert invoke([*step, "--db", self.url, "--now", NOW], input=json.dumps(queued)).exit_code == 0
        queued_id = run_sql(self.url, lambda conn: conn.execute(select(tasks.c.id).where(tasks.c.name == "json.queued")).scalar_one())
        j("agents add", "agents", "add", "agent1", "--site", SITE, "--pending-threshold", "10", "--running-threshold", "10",
          "--max-jobs-per-owner", "1000")
        j("agents set-state", "agents", "set-state", "agent1", SITE, "normal")
        j("workqueue create", "workqueue", "create", str(queued_id))
        j("workqueue list", "workqueue", "list")
        j("workqueue acquire", "workqueue", "acquire", "--agent", "agent1", "--seed", "1")
        j("workqueue show", "workqueue", "show", "1")
        j("workqueue update-locations", "workqueue", "update-locations")
        j("agents list", "agents", "list")
        j("agents show", "agents", "show", "agent1")
        assert invoke(["agents", "add", "agent2", "--db", self.url, "--now", NOW]).exit_code == 0
        j("agents remove", "agents", "remove", "agent2")
        j("check", "check")
        # Lost-file recovery (docs/recovery.md): a file of the task's output declared lost, the task ended, recovered.
        lost = run_sql(self.url, lambda conn: conn.execute(select(files.c.lfn).join(datasets, datasets.c.id == files.c.dataset_id).where(
            datasets.c.name == "ds.out", files.c.status == "finished").order_by(files.c.id)).scalars().first())
        j("data mark-lost", "data", "mark-lost", "ds.out", lost)
        run_sql(self.url, lambda conn: conn.execute(tasks.update().where(tasks.c.id == task).values(status="finished")))
        j("recover-lost", "recover-lost", "ds.out", "--files", lost)
        run_sql(self.url, lambda conn: conn.execute(datasets.update().where(datasets.c.name == "ds.out").values(n_files=datasets.c.n_files + 7)))
        j("check (violations)", "check", code=1)
        # A task of a unique name that ended, submitted again: `submit`'s answer, of a resubmission.
        again = {**WORKED, "taskName": "json.again", "uniqueTaskName": True, "jobParameters": [
            WORKED["jobParameters"][0], {**WORKED["jobParameters"][1], "dataset": "ds.again"}], "log": {**WORKED["log"], "dataset": "ds.again.log"}}
        for step in (["submit", "-"], ["refine"]):
            assert invoke([*step, "--db", self.url, "--now", NOW], input=json.dumps(again)).exit_code == 0
        run_sql(self.url, lambda conn: conn.execute(tasks.update().where(tasks.c.name == "json.again").values(status="finished")))
        j("submit (resubmission)", "submit", "-", input=json.dumps({**again, "nFilesPerJob": 1, "maxAttempt": 9}))
        j("split", "split", "--algorithm", "FileBased", "--param", "files_per_job=1", "-", input=json.dumps(FILESET), store=False)
        j("demo", "demo", "--db", str(self.tmp / "demo.db"), store=False)


GROUPS = {"task", "jobs", "explain", "sites", "network", "pilots", "data", "retry-rules", "queue-shares", "db", "config", "completion",
          "periodic", "agents", "workqueue"}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    played = Scenario(tmp_path_factory.mktemp("json-output"))
    played.play()
    return played


def test_every_answer_has_its_documented_shape(scenario):
    examples = documented()
    answered = scenario.answers
    assert sorted(set(answered) - set(examples)) == [], "answers the page does not document"
    assert sorted(set(examples) - set(answered)) == [], "examples the scenario does not check"
    errors = {name: shape_errors(examples[name], answer) for name, answer in answered.items()}
    assert {name: found for name, found in errors.items() if found} == {}


def test_every_command_is_covered_or_exempt(scenario):
    missing = sorted(commands() - scenario.invoked - set(EXEMPT))
    assert missing == [], f"commands with no documented JSON answer: {missing}"


def test_a_pass_counts_every_outcome_it_declares_even_when_zero(scenario):
    reports = [answer for name, answer in scenario.answers.items() if isinstance(answer, dict) and "pass" in answer]
    reports += scenario.answers["run"]["passes"]
    assert {report["pass"] for report in reports} >= {"refine", "feed", "broker", "generate", "finalize", "watch", "simulate", "pilot",
                                                      "harvest", "report", "heartbeat", "kill", "settle", "periodic", "acquire",
                                                      "locations"}
    for report in reports:
        declared = PASS_COUNTS[report["pass"]]
        assert tuple(report["counts"]) == declared, report["pass"]  # every declared count, in order, and nothing unforeseen
        assert report["errors"] == 0 or report["pass"] in ("kill", "report", "events", "resubmit")


def test_the_page_lists_each_pass_s_counts():
    text = PAGE.read_text()
    for name, counts in PASS_COUNTS.items():
        assert f"| `{name}` | " + ", ".join(f"`{count}`" for count in counts) + " |" in text, name
