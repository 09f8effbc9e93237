"""engine.task.resubmission: which task a submission with the same outDS continues, what it changes,
what it keeps (PanDA's format: said; a jedictl spec: refused), its new inputs and its new code."""

from __future__ import annotations

import copy
import json

import pytest

from jedictl.engine.task.definition import effective_options
from jedictl.engine.task.resubmission import RESUBMITTABLE, StoredInput, StoredTask, plan, refusal
from jedictl.engine.task.submission import parse_definition
from jedictl.errors import BadInput
from jedictl.model import TaskStatus
from tests.conftest import EXAMPLES

PRUN = json.loads((EXAMPLES / "prun_files.json").read_text())
IN = "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026"
SANDBOX = "jobO.c86d02d5-3133-49a2-9233-ecf63052bcd4.tar.gz"
SPEC = {
    "name": "user.alice.spec", "label": "user", "command": "-a code.v1.tgz --in=${IN} --out=${OUTPUT0}",
    "inputs": [{"dataset": "ds.in"}], "outputs": [{"dataset": "ds.out", "file_template": "out.${SN}.root"}],
    "split": {"n_files_per_job": 2, "n_events_per_job": 100}, "placement": {"site": "MWT2"}, "source_url": "https://a",
}


def _parse(document):
    return parse_definition(copy.deepcopy(document), user="alice", default_user="alice")


def _stored(document, status=TaskStatus.FINISHED, **changes) -> StoredTask:
    definition = _parse(document)
    values = dict(
        id=7, status=status, definition=definition, options=effective_options(definition).as_dict(), site=definition.site,
        cloud=definition.cloud, task_priority=definition.task_priority, source_url=definition.source_url,
        inputs=tuple(StoredInput(d.name, d.stream) for d in definition.inputs()), templates={"job": definition.job_parameters},
    )
    values.update(changes)
    return StoredTask(**values)


def _prun(**changes):
    document = copy.deepcopy(PRUN)
    document.update(changes)
    return document


def _resubmit(stored, document, **flags):
    return plan(stored, _parse(document), document, **flags)


@pytest.mark.parametrize("status", sorted(TaskStatus))
def test_statuses_that_are_continued_and_the_one_line_refusals(status):
    reason = refusal(3, status, "user.x/")
    if status in RESUBMITTABLE:
        assert reason is None
    elif status == TaskStatus.BROKEN:
        assert reason.startswith("jediTaskID=3 is broken for outDS=user.x/: a broken task cannot be resubmitted")
        assert "allowTaskDuplication" in reason
    elif status == TaskStatus.REGISTERED:
        assert reason == "jediTaskID=3 is already queued for outDS=user.x/: you cannot submit duplicated tasks"
    else:
        assert reason == f"jediTaskID=3 is in the {status} state for outDS=user.x/: resubmit it once it is finished, failed or done"
    assert RESUBMITTABLE == {"finished", "failed", "aborted", "done", "exhausted"}


def test_a_running_task_is_refused_by_the_plan_with_the_name_as_the_field():
    with pytest.raises(BadInput, match=r"^taskName: jediTaskID=7 is in the running state for outDS=user.someone.example.files/"):
        _resubmit(_stored(PRUN, TaskStatus.RUNNING), PRUN)


def test_the_same_parameters_change_nothing():
    result = _resubmit(_stored(PRUN), PRUN)
    assert (result.task_id, result.previous, result.changes, result.kept, result.inputs_added, result.templates) == (
        7, "finished", {}, (), (), {})
    assert result.change.options == _stored(PRUN).options and result.change.columns == {}


def test_panda_keys_given_change_the_changeable_parameters():
    result = _resubmit(_stored(PRUN), _prun(nFilesPerJob=2, excludedSite=["CERN-PROD_GRID"], site="MWT2", nFiles=10, ramCount=3000))
    assert result.changes == {"nFilesPerJob": 2, "excludedSite": ["CERN-PROD_GRID"], "site": "MWT2", "nFiles": 10, "ramCount": 3000}
    assert result.change.options["n_files_per_job"] == 2 and result.change.options["n_files"] == 10
    assert result.change.columns == {"site": "MWT2"}
    assert result.kept == ()


def test_panda_keys_left_out_keep_their_values_and_null_removes():
    stored = _stored(_prun(nFiles=10, site="MWT2"))
    without = copy.deepcopy(PRUN)
    del without["nFilesPerJob"]
    result = _resubmit(stored, without)  # JEDI merges only the keys given: nFiles, nFilesPerJob stay
    assert result.changes == {"site": None}  # prun writes "site": null -- which removes it
    assert result.change.options["n_files"] == 10 and result.change.options["n_files_per_job"] == 4
    assert _resubmit(stored, _prun(nFiles=None, site="MWT2")).changes == {"nFiles": None}


def test_a_new_split_size_replaces_the_other():
    document = _prun(nGBPerJob=10)
    del document["nFilesPerJob"]
    result = _resubmit(_stored(PRUN), document)
    assert result.changes == {"nGBPerJob": 10, "nFilesPerJob": None}
    assert "n_files_per_job" not in result.change.options and result.change.options["n_gb_per_job"] == 10


def test_panda_parameters_a_resubmission_cannot_change_are_kept_and_said():
    result = _resubmit(_stored(PRUN), _prun(maxAttempt=6, nEventsPerJob=100, processingType="other"))
    assert [k.path for k in result.kept] == ["nEventsPerJob", "maxAttempt", "processingType"]  # options first, in their order
    assert result.changes == {} and result.change.options["max_attempt"] == 4
    warning = result.kept[1].warning(7)
    assert warning == "jedictl: warning: maxAttempt: not changed by the resubmission: task 7 keeps 4 (6 asked)"


def test_outputs_of_the_task_never_change():
    document = _prun()
    document["jobParameters"][4]["dataset"] = "user.someone.other_hist.root/"
    result = _resubmit(_stored(PRUN), document)
    assert [k.path for k in result.kept] == ["jobParameters[4]"]
    assert "output datasets and file names never change" in result.kept[0].warning(7)


def test_a_new_input_dataset_is_added_and_the_old_one_stays():
    document = _prun(dsForIN="mc23.new.dataset")
    result = _resubmit(_stored(PRUN), document)
    assert [(i.name, i.stream) for i in result.inputs_added] == [("mc23.new.dataset", "IN")]
    assert result.kept == ()
    document["jobParameters"][6]["dataset"] = "mc23.new.dataset"  # only the new one: the old stays in the task
    result = _resubmit(_stored(PRUN), document)
    assert [(i.name, i.stream) for i in result.inputs_added] == [("mc23.new.dataset", "IN")]
    assert [k.path for k in result.kept] == ["jobParameters[6]"] and "an input stays in the task" in result.kept[0].warning(7)


def test_a_dataset_the_container_was_expanded_into_is_no_new_input():
    stored = _stored(PRUN, inputs=(StoredInput(f"{IN}_tid00000001_00", "IN", IN), StoredInput(f"{IN}_tid00000002_00", "IN", IN)))
    assert _resubmit(stored, _prun(dsForIN=f"{IN}_tid00000002_00")).inputs_added == ()


def test_the_sandbox_changes_only_with_new_code():
    document = _prun()
    document["jobParameters"][3]["value"] = "-a jobO.new.tar.gz"
    document["sourceURL"] = "https://127.0.0.1:2"
    kept = _resubmit(_stored(PRUN), document)
    assert [k.path for k in kept.kept] == ["jobParameters", "sourceURL"] and kept.templates == {}
    assert "--use-new-code" in kept.kept[0].warning(7)
    for result in (_resubmit(_stored(PRUN), document, use_new_code=True), _resubmit(_stored(PRUN), {**document, "fixedSandbox": "jobO.new.tar.gz"})):
        assert result.kept == ()
        assert result.changes == {"fixedSandbox": "jobO.new.tar.gz", "sourceURL": "https://127.0.0.1:2"}
        assert result.templates["job"] == _parse(PRUN).job_parameters.replace(SANDBOX, "jobO.new.tar.gz")
        assert result.change.columns["source_url"] == "https://127.0.0.1:2" and result.change.columns["request_type"]
    merge = _stored(PRUN, templates={"job": _parse(PRUN).job_parameters, "merge": f"-a {SANDBOX} --merge ${{TRN_OUTPUT0}}"})
    assert _resubmit(merge, document, use_new_code=True).templates["merge"] == "-a jobO.new.tar.gz --merge ${TRN_OUTPUT0}"


def test_new_code_needs_a_sandbox_to_replace():
    stored = _stored(PRUN, templates={"job": "--in=${IN} --out=${OUTPUT0}"})
    with pytest.raises(BadInput, match=r"^--use-new-code: task 7's job parameters name no sandbox \(-a ARCHIVE\) to replace"):
        _resubmit(stored, PRUN, use_new_code=True)
    with pytest.raises(BadInput, match=r"^fixedSandbox: task 7's job parameters name no sandbox"):
        _resubmit(stored, _prun(fixedSandbox="x.tgz"))


def test_the_priority_changes_when_given():
    assert _resubmit(_stored(PRUN), _prun(taskPriority=900)).change.columns == {"task_priority": 900, "current_priority": 900}
    assert _resubmit(_stored(PRUN, task_priority=900), PRUN).change.columns == {}  # not given: kept


def test_a_spec_changes_its_changeable_options_and_is_refused_for_the_rest():
    stored = _stored(SPEC)
    result = _resubmit(stored, {**SPEC, "split": {"n_events_per_job": 100}, "placement": {"excluded_sites": ["A*"]}})
    assert result.changes == {"split.n_files_per_job": None, "placement.excluded_sites": ["A*"], "placement.site": None}
    with pytest.raises(BadInput, match=r"^split.n_events_per_job: task 7 keeps 100, a resubmission does not change it \(200 asked\); "
                                       r"submit a new task under another name to change it$"):
        _resubmit(stored, {**SPEC, "split": {"n_files_per_job": 2, "n_events_per_job": 200}})
    with pytest.raises(BadInput, match=r"^outputs\[0\]: task 7 keeps ds.out"):
        _resubmit(stored, {**SPEC, "outputs": [{"dataset": "ds.other", "file_template": "out.${SN}.root"}]})
    with pytest.raises(BadInput, match=r"^inputs\[0\]: task 7 keeps input ds.in"):
        _resubmit(stored, {**SPEC, "inputs": [{"dataset": "ds.two"}]})


def test_a_spec_s_code_is_its_command_and_changes_only_with_new_code():
    new = {**SPEC, "command": "-a code.v2.tgz --in=${IN} --out=${OUTPUT0}", "source_url": "https://b"}
    with pytest.raises(BadInput, match=r"^command: task 7 keeps -a code.v1.tgz .*--use-new-code replaces the code of the task$"):
        _resubmit(_stored(SPEC), new)
    result = _resubmit(_stored(SPEC), new, use_new_code=True)
    assert result.templates == {"job": new["command"]}
    assert result.changes == {"command": new["command"], "source_url": "https://b"}


def test_a_spec_adds_inputs_and_another_format_is_refused():
    result = _resubmit(_stored(SPEC), {**SPEC, "inputs": [{"dataset": ["ds.in", "ds.more"]}]})
    assert [(i.name, i.stream) for i in result.inputs_added] == [("ds.more", "IN")]
    with pytest.raises(BadInput, match=r"^taskName: task 7 was submitted as a jedictl task spec: resubmit it in that format"):
        _resubmit(_stored(SPEC), _prun(taskName="user.alice.spec"))
