"""`jedictl submit`: both formats, validation with field paths, nothing written on bad input."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES, invoke
from tests.helpers import row_counts

PRUN_FILES = str(EXAMPLES / "prun_files.json")
PRUN_NOINPUT = str(EXAMPLES / "prun_noinput.json")


def test_prun_task_is_submitted_refined_and_shown(cli, store):
    """The issue's acceptance path: submit PanDA's own task parameters, refine, show as JSON."""
    assert cli.json("submit", PRUN_FILES, db=store) == {
        "task_id": 1, "status": "registered", "resubmitted": False, "previous": None, "message": "succeeded. new jediTaskID=1",
        "changes": {}, "kept": [], "inputs_added": [], "retried": 0}
    cli("refine", db=store)
    task = cli.json("task", "show", "1", db=store)

    assert task["status"] == "defined"
    assert task["options"]["n_files_per_job"] == 4
    assert task["options"]["max_attempt"] == 4
    by_type = {d["type"]: d for d in task["datasets"]}
    assert by_type["input"]["name"] == "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026"
    assert by_type["input"]["attributes"] == {"exclude": [r"\.log\.tgz(\.\d+)*$"], "expand": True}
    assert by_type["output"]["name"] == "user.someone.example.files_hist.root/"
    assert by_type["output"]["file_templates"] == [{"template": "user.someone.$JEDITASKID._${SN/P}.hist.root", "next_serial": 1}]
    assert by_type["log"]["name"] == "user.someone.example.files.log/"
    assert by_type["log"]["file_templates"] == [{"template": "user.someone.example.files.log.$JEDITASKID.${SN}.log.tgz", "next_serial": 1}]
    assert task["job_parameters"]["job"] == (
        '-j "" --sourceURL ${SURL} -r . -a jobO.c86d02d5-3133-49a2-9233-ecf63052bcd4.tar.gz '
        "-o \"{'hist.root': 'user.someone.$JEDITASKID._${SN/P}.hist.root'}\" -i \"${IN/T}\" -p \"analyse.sh%20%25IN\""
    )
    assert (task["task_type"], task["task_priority"], task["work_queue"], task["gshare"], task["resource_type"]) == ("anal", 1000, "user", "Analysis", "SCORE")
    assert [h["status"] for h in task["status_history"]] == ["registered", "defined"]


def test_no_input_prun_task(cli, store):
    cli("submit", PRUN_NOINPUT, db=store)
    cli("refine", db=store)
    task = cli.json("task", "show", "1", db=store)
    datasets = {d["name"]: d for d in task["datasets"]}
    assert datasets["pseudo_dataset"]["type"] == "pseudo_input" and datasets["pseudo_dataset"]["master_id"] is None
    assert datasets["seq_number"]["stream"] == "SEQNUMBER"
    assert datasets["seq_number"]["attributes"] == {"offset": 1000}
    assert datasets["seq_number"]["master_id"] == datasets["pseudo_dataset"]["dataset_id"]
    assert task["options"]["n_events"] == 8 and task["options"]["n_events_per_job"] == 1


def test_submit_from_stdin_with_overrides(cli, store):
    with open(PRUN_FILES) as handle:
        text = handle.read()
    result = cli.json("submit", "-", "--user", "bob", "--priority", "42", db=store, input=text)
    assert (result["task_id"], result["status"], result["resubmitted"]) == (1, "registered", False)
    task = cli.json("task", "show", "1", db=store)
    assert (task["user"], task["task_priority"]) == ("bob", 42)


def test_dry_run_prints_the_normalised_task_and_needs_no_store(cli, tmp_path):
    missing = f"sqlite:///{tmp_path / 'nowhere.db'}"
    summary = cli.json("submit", PRUN_FILES, "--dry-run", db=missing)
    assert summary["name"] == "user.someone.example.files/"
    assert summary["format"] == "panda"
    assert [d["stream"] for d in summary["datasets"]] == ["OUTPUT0", "IN", "LOG0"]
    assert not (tmp_path / "nowhere.db").exists()


def test_unknown_panda_keys_are_kept_and_listed(cli, store):
    document = json.loads(open(PRUN_FILES).read())
    document["usePrefetcher"] = True  # a JEDI key jedictl has no model for (nJumboJobs is one since issue 20)
    document["jobParameters"][1]["someFutureKey"] = True
    result = cli("submit", "-", "-v", db=store, input=json.dumps(document))
    assert "usePrefetcher" in result.stderr and "jobParameters[1].someFutureKey" in result.stderr
    task = cli.json("task", "show", "1", db=store)
    assert task["unknown_keys"] == ["usePrefetcher", "jobParameters[1].someFutureKey"]


def test_a_name_still_queued_is_refused_naming_the_existing_task(cli, store):
    """The name of a task is its outDS: a second submission continues it once it has ended
    (tests/cli/test_resubmission.py), and is refused while it is queued, as PanDA refuses it."""
    cli("submit", PRUN_FILES, db=store)
    before = row_counts(store)
    result = cli("submit", PRUN_FILES, db=store, code=2)
    assert result.stderr.strip() == ("jedictl: error: taskName: jediTaskID=1 is already queued for outDS=user.someone.example.files/: "
                                     "you cannot submit duplicated tasks")
    assert row_counts(store) == before
    # another user may reuse the name (writing the same output dataset needs allowTaskDuplication)
    cli("submit", "-", "--user", "somebody-else", db=store, input=_prun(allowTaskDuplication=True))


OUT_DS = "user.someone.example.files_hist.root/"


def test_an_output_dataset_belongs_to_one_task(cli, store):
    """Issue 14 defect 4: a second task writing the same output dataset is refused (its jobs would be
    told to write the same files), whether the owner is still registered or already refined."""
    cli("submit", PRUN_FILES, db=store)
    before = row_counts(store)
    refused = cli("submit", "-", db=store, input=_prun(taskName="user.someone.another.name"), code=2)
    assert refused.stderr.strip() == (f"jedictl: error: jobParameters[4]: output dataset {OUT_DS} belongs to task 1 (registered); "
                                      "resubmit it under its name user.someone.example.files/ to continue it once it has ended, "
                                      "or set allowTaskDuplication to write to it from a new task")
    assert row_counts(store) == before
    cli("refine", db=store)
    before = row_counts(store)
    refused = cli("submit", "-", db=store, input=_prun(taskName="user.someone.another.name"), code=2)
    assert f"output dataset {OUT_DS} belongs to task 1 (defined)" in refused.stderr
    assert row_counts(store) == before
    # the explicit opt-out
    assert cli.json("submit", "-", db=store, input=_prun(taskName="user.someone.another.name", allowTaskDuplication=True))["task_id"] == 2
    # an owner that ended can be continued; a broken one cannot
    from sqlalchemy import update

    from jedictl.store.schema import tasks
    from tests.helpers import run_sql

    for status, hint in (("finished", "resubmit it under its name user.someone.example.files/ to continue it, or"),
                         ("broken", "a broken task cannot be continued: set allowTaskDuplication")):
        run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == 1).values(status=status)))
        refused = cli("submit", "-", db=store, input=_prun(taskName="user.someone.third.name"), code=2)
        assert f"belongs to task 1 ({status}); {hint}" in refused.stderr, refused.stderr


def test_two_registered_tasks_of_one_output_dataset_the_second_breaks_at_refine(cli, store):
    """Submissions that raced past each other's check: the first refined keeps the dataset."""
    from sqlalchemy import update

    from jedictl.store.schema import task_params, tasks
    from tests.helpers import run_sql

    cli("submit", PRUN_FILES, db=store)
    cli("submit", "-", db=store, input=_prun(taskName="user.someone.another.name", allowTaskDuplication=True))
    run_sql(store, lambda conn: conn.execute(update(task_params).where(task_params.c.task_id == 2)
                                             .values(document=json.loads(_prun(taskName="user.someone.another.name")))))
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == 2).values(options={})))
    cli("refine", db=store)
    first, second = (cli.json("task", "show", str(n), db=store) for n in (1, 2))
    assert first["status"] == "defined"
    assert second["status"] == "broken"
    assert second["error_dialog"].startswith(f"jobParameters[4]: output dataset {OUT_DS} belongs to task 1 (")


def _prun(**changes):
    document = json.loads(open(PRUN_FILES).read())
    for key, value in changes.items():
        if value is _DELETE:
            document.pop(key)
        else:
            document[key] = value
    return json.dumps(document)


_DELETE = object()
SPEC = """
name: demo.task
command: --in=${IN} --out=${OUTPUT0}
inputs: [{dataset: data.in}]
outputs: [{dataset: data.out, file_template: "out.${SN}.root"}]
"""

BAD_INPUTS = [
    ("malformed-yaml", "name: x\n  bad: [unclosed\n", "stdin: line 2 column"),
    ("malformed-json", '{"taskName": "x", ', "stdin: line 1 column"),
    ("not-a-mapping", "- just\n- a list\n", "stdin: must hold a mapping"),
    ("wrong-type", _prun(nFilesPerJob="four"), "nFilesPerJob: must be an integer"),
    ("negative-count", _prun(nFilesPerJob=-4), "nFilesPerJob: must be at least 1"),
    ("negative-attempts", SPEC + "retry: {max_attempt: -1}\n", "retry.max_attempt: must be at least 1"),
    ("conflict-panda", _prun(nGBPerJob=10), "nFilesPerJob: cannot be combined with nGBPerJob"),
    ("conflict-spec", SPEC + "split: {n_files_per_job: 2, n_gb_per_job: 5}\n", "split.n_files_per_job: cannot be combined with split.n_gb_per_job"),
    ("missing-output-spec", SPEC.replace('outputs: [{dataset: data.out, file_template: "out.${SN}.root"}]', ""), "outputs: at least one output dataset is required"),
    ("missing-output-panda", json.dumps({"taskName": "t", "vo": "atlas", "prodSourceLabel": "user", "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "d.in", "value": "${IN}"}]}), "jobParameters: the task writes nothing"),
    ("unknown-field", SPEC + "splitt: {n_files_per_job: 2}\n", "splitt: unknown field"),
    ("unknown-option", SPEC + "split: {n_file_per_job: 2}\n", "split.n_file_per_job: unknown field"),
    ("no-serial-in-template", SPEC.replace("out.${SN}.root", "out.root"), "outputs[0].file_template: must contain ${SN}"),
    ("unknown-placeholder", SPEC.replace("--out=${OUTPUT0}", "--out=${OUTPUT1}"), "command: placeholder ${OUTPUT1} names no input"),
    ("bad-dataset-name", SPEC.replace("data.in", "'data in; drop table tasks'"), "inputs[0].dataset: dataset name must be"),
    ("bad-regex", SPEC.replace("[{dataset: data.in}]", "[{dataset: data.in, exclude: ['(unclosed']}]"), "inputs[0].exclude[0]: is not a valid regular expression"),
    ("missing-task-name", _prun(taskName=_DELETE), "taskName: is required"),
    ("bad-item-type", _prun(jobParameters=[{"type": "weird", "value": "x"}]), "jobParameters[0].type: must be constant or template"),
    ("no-input-unsized", SPEC.replace("inputs: [{dataset: data.in}]", "no_input: true").replace("${IN}", "x"), "no_input: a no-input task needs"),
    ("merge-option-without-merge", SPEC + "merge: {}\n", "merge.command: is required"),
    ("unknown-parent", SPEC + "parent: 99\n", "parent: parent task 99 does not exist"),
    ("goal-over-100", SPEC + "completion: {goal: 150}\n", "completion.goal: must be at most 100"),
    ("key-twice-yaml", SPEC + "name: other.task\n", "stdin: line 6 column 1: found duplicate key 'name' (first at line 2)"),
    ("key-twice-json", _prun()[:-1] + ', "nFilesPerJob": 7}', "stdin: duplicate key 'nFilesPerJob' in an object (invalid JSON)"),
]


@pytest.mark.parametrize("text,expected", [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(cli, store, text, expected):
    cli("submit", PRUN_NOINPUT, db=store)  # the store is not empty: counts must not move
    before = row_counts(store)
    result = cli("submit", "-", db=store, input=text, code=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jedictl: error: ") and expected in lines[0], lines[0]
    assert result.stdout == ""
    assert row_counts(store) == before


def test_unreadable_file_is_bad_input(cli, store, tmp_path):
    result = cli("submit", str(tmp_path / "nope.yaml"), db=store, code=2)
    assert "nope.yaml: cannot read the file" in result.stderr


# ------------------------------------------------------------------ analysis priority cap (issue 14 defect 9)

def _analysis(priority: int, **changes) -> str:
    document = json.loads((EXAMPLES / "prun_files.json").read_text())
    # Several tasks of one example: they share its output dataset, which needs the opt-out.
    document.update(taskPriority=priority, allowTaskDuplication=True, **changes)
    return json.dumps(document)


def _priorities(cli, store, task_id):
    task = cli.json("task", "show", str(task_id), db=store)
    return task["task_priority"], task["current_priority"]


def test_a_plain_users_analysis_priority_is_capped_below_the_express_lane(cli, store):
    # PanDA gives non-production submissions taskPriority 1000; 5000 would jump the express lane (>= 1500).
    result = cli("submit", "-", "--user", "bob", db=store, input=_analysis(5000))
    assert "priority 5000 lowered to 1000" in result.stderr and "(`privileges` lifts the cap" in result.stderr
    task_id = json.loads(cli("submit", "-", "--user", "bob", "-o", "json", "-q", db=store,
                             input=_analysis(4000, taskName="user.bob.second")).stdout)["task_id"]
    assert _priorities(cli, store, 1) == (1000, 1000)
    assert _priorities(cli, store, task_id) == (1000, 1000)
    assert cli.json("submit", "-", "--user", "bob", "--priority", "3000", db=store,
                    input=_analysis(0, taskName="user.bob.flag"))["task_id"] == 3
    assert _priorities(cli, store, 3) == (1000, 1000)  # --priority is capped too
    lower = cli.json("submit", "-", "--user", "bob", db=store, input=_analysis(500, taskName="user.bob.low"))["task_id"]
    assert _priorities(cli, store, lower) == (500, 500)  # lowering one's own task stays allowed


PRIVILEGES = ("[{user: alice, permissions: s}, {user: carol, permissions: g}, {group: phys-higgs, permissions: s}]")


def test_privileged_users_and_groups_are_not_capped_and_jump_the_queue(cli, store):
    """seed 000 "Special permission": s = super user (all his analysis tasks), g = super group (his
    group analysis tasks), and a working group with s (every analysis task of the group). Their tasks
    keep the priority asked for and start at least at the express priority (1500, PanDA's
    priorityTasksToJumpOver); the others are capped at 1000."""
    env = {"JEDICTL_PRIVILEGES": PRIVILEGES}

    def submitted(user: str, priority: int, name: str, **changes) -> int:
        return cli.json("submit", "-", "--user", user, db=store, env=env, input=_analysis(priority, taskName=name, **changes))["task_id"]

    alice = submitted("alice", 5000, "user.alice.own")
    alice_low = submitted("alice", 800, "user.alice.low")
    group = submitted("bob", 2000, "user.bob.group", workingGroup="phys-higgs")
    plain = submitted("bob", 2000, "user.bob.plain")
    carol_own = submitted("carol", 2000, "user.carol.own")
    carol_group = submitted("carol", 2000, "user.carol.group", workingGroup="phys-top")
    cli("refine", db=store, env=env)
    assert _priorities(cli, store, alice) == (5000, 5000)
    assert _priorities(cli, store, alice_low) == (800, 1500)  # jumps the queue whatever it asked
    assert _priorities(cli, store, group) == (2000, 2000)
    assert _priorities(cli, store, plain) == (1000, 1000)
    assert _priorities(cli, store, carol_own) == (1000, 1000)  # g: only her group analysis tasks
    assert _priorities(cli, store, carol_group) == (2000, 2000)
    dry = cli.json("submit", "-", "--user", "alice", "--dry-run", db=store, env=env, input=_analysis(900, taskName="user.alice.dry"))
    assert (dry["task_priority"], dry["current_priority"]) == (900, 1500)


def test_the_replaced_settings_are_refused_naming_privileges(cli, store):
    for key, kind in (("SUPER_USERS", "user"), ("SUPER_GROUPS", "group")):
        result = cli("submit", "-", "--user", "alice", db=store, env={f"JEDICTL_REFINE__{key}": "[alice]"}, input=_analysis(5000), code=2)
        assert result.stderr.strip() == (f"jedictl: error: refine.{key.lower()}: was replaced by privileges (a list: - "
                                         f"{{{kind}: NAME, permissions: s}}) (from JEDICTL_REFINE__{key})")


def test_production_priorities_are_not_capped(cli, store):
    task_id = cli.json("submit", "-", "--user", "bob", db=store, input=_analysis(5000, prodSourceLabel="managed", taskType="prod"))["task_id"]
    assert _priorities(cli, store, task_id) == (5000, 5000)


@pytest.mark.slow
def test_two_submissions_of_one_output_dataset_at_once_accept_one(store_url, tmp_path):
    """Both submissions look for the dataset's owner before either registers its task (a test hook holds
    each a second after its check): the check and the registration are one critical section per
    dataset name, so the second sees the first and is refused."""
    from tests.cli.test_generate import WORKED_EXAMPLE
    from tests.helpers import hooked_env, jedictl_processes_together

    assert invoke(["db", "init", "--db", store_url]).exit_code == 0
    documents = []
    for n in range(2):
        path = tmp_path / f"task{n}.json"
        path.write_text(json.dumps({**WORKED_EXAMPLE, "taskName": f"racing.{n}"}))
        documents.append(["submit", str(path), "--db", store_url, "-o", "json"])
    workers = jedictl_processes_together(documents, tmp_path, env=hooked_env(slow_owner_check="1"))
    outcomes = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        outcomes.append((worker.returncode, err))
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    assert any("output dataset ds.out belongs to task" in err for _, err in outcomes), outcomes


def test_a_misspelt_panda_key_is_named_with_the_key_it_means(cli, store):
    """PanDA's format keeps keys it does not know: a typo is no error, but it must not go unnoticed."""
    document = json.loads(open(PRUN_FILES).read())
    document["nFilesPerjob"] = 2
    document["jobParameters"][1]["datset"] = "x"
    document["usePrefetcher"] = 3  # like no known key: a newer PanDA's, kept without a word
    result = cli("submit", "-", db=store, input=json.dumps(document))
    assert result.stderr.splitlines() == [
        "jedictl: warning: nFilesPerjob: not a task parameter jedictl knows (kept, not used); did you mean nFilesPerJob?",
        "jedictl: warning: jobParameters[1].datset: not a task parameter jedictl knows (kept, not used); did you mean jobParameters[1].dataset?",
    ]
    assert json.loads(cli("task", "list", "-o", "json", db=store).stdout)[0]["status"] == "registered"  # submitted all the same
    assert cli.json("task", "show", "1", db=store)["unknown_keys"] == ["nFilesPerjob", "usePrefetcher", "jobParameters[1].datset"]
    assert cli("submit", "-", "--dry-run", db=store, input=json.dumps({**document, "taskName": "t2"})).stderr.count("warning") == 2
