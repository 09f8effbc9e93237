"""Both input formats normalise into the same TaskDefinition; PanDA's item rules in detail."""

from __future__ import annotations


import pytest
import yaml

from jedictl.engine.input.documents import load_document
from jedictl.engine.task.submission import parse_definition
from jedictl.errors import BadInput
from jedictl.model import DatasetType
from tests.conftest import EXAMPLES


def panda(**extra):
    document = {"taskName": "t.1", "vo": "wlcg", "prodSourceLabel": "managed", "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"},
        {"type": "constant", "value": "--n 10"},
    ], "log": {"type": "template", "param_type": "log", "dataset": "ds.log", "value": "ds.log.${SN}.log.tgz"}}
    document.update(extra)
    return parse_definition(document, user=None, default_user="me")


def test_worked_example_of_jedi_inventory_16_1():
    task = panda(nFilesPerJob=2, processingType="sim", taskType="prod")
    assert task.job_parameters == "--in=${IN} --out=${OUTPUT0} --n 10"
    streams = {d.name: (d.type, d.stream, d.is_master, d.file_template) for d in task.datasets}
    assert streams == {
        "ds.in": (DatasetType.INPUT, "IN", True, None),
        "ds.out": (DatasetType.OUTPUT, "OUTPUT0", False, "ds.out.${SN}.root"),
        "ds.log": (DatasetType.LOG, "LOG0", False, "ds.log.${SN}.log.tgz"),
    }
    assert task.options.n_files_per_job == 2 and task.task_priority == 0 and task.task_type == "prod"


def test_padding_hidden_and_es_only():
    task = panda(jobParameters=[
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "-i ${IN/L}"},
        {"type": "constant", "value": "-p \"", "padding": False},
        {"type": "constant", "value": "run.sh", "padding": False},
        {"type": "constant", "value": "\""},
        {"type": "constant", "value": "__delimiter__", "hidden": True},
        {"type": "constant", "value": "--es", "es_only": True},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "out.${SN/P}.root", "hidden": True},
    ])
    assert task.job_parameters == '-i ${IN/L} -p "run.sh" <PANDA_ES_ONLY>--es</PANDA_ES_ONLY>'


def test_secondaries_ds_for_and_attribute_tokens():
    task = panda(dsForIN="ds.in,ds.in2", jobParameters=[
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "input", "dataset": "ds.mb", "value": "--mb=${MB}", "ratio": 2, "attributes": "repeat,of=3"},
        {"type": "template", "param_type": "input", "dataset": "ds.dbr", "value": "--dbr=${DBR}", "attributes": "nosplit,repeat"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=o.${SN}", "offset": 10, "token": "ATLASDATADISK"},
    ])
    by_name = {d.name: d for d in task.datasets}
    assert [d.name for d in task.datasets if d.is_master] == ["ds.in", "ds.in2"]
    assert by_name["ds.mb"].attributes.as_dict() == {"ratio": 2.0, "repeat": True, "offset": 3}
    assert by_name["ds.dbr"].attributes.tokens() == "nosplit,repeat"
    assert (by_name["ds.out"].serial_offset, by_name["ds.out"].storage_token) == (10, "ATLASDATADISK")


def test_random_seed_and_first_event_offsets():
    task = panda(jobParameters=[
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "number", "value": "--seed=${RNDMSEED}", "offset": 1000},
        {"type": "template", "param_type": "number", "value": "--first=${FIRSTEVENT}", "offset": 50},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=o.${SN}"},
    ])
    assert any(d.type == DatasetType.RANDOM_SEED and d.stream == "RNDMSEED" for d in task.datasets)
    assert (task.options.random_seed_offset, task.options.first_event_offset) == (1000, 50)


def test_merge_spec_is_required_with_merge_output():
    with pytest.raises(BadInput, match="mergeSpec: mergeOutput needs a mergeSpec"):
        panda(mergeOutput=True)
    task = panda(mergeOutput=True, mergeSpec={"transPath": "merge.sh", "jobParameters": "-i ${TRN_OUTPUT0:OUTPUT0}"})
    assert task.merge.job_parameters == "-i ${TRN_OUTPUT0:OUTPUT0}"


def test_falsy_max_attempt_is_dropped_and_analysis_defaults():
    task = panda(maxAttempt=0, prodSourceLabel="user")
    assert task.options.max_attempt is None
    assert (task.task_type, task.task_priority) == ("anal", 1000)


def test_stream_placeholder_must_exist():
    with pytest.raises(BadInput, match=r"jobParameters: placeholder \$\{IN2\} names no input"):
        panda(jobParameters=[
            {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN} --in2=${IN2}"},
            {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=o.${SN}"},
        ])


def test_both_formats_give_the_same_definition():
    """The 16.1 task written as a jedictl spec equals its PanDA form, field for field."""
    spec = parse_definition(yaml.safe_load("""
name: t.1
vo: wlcg
processing_type: sim
unique_name: false
command: --in=${IN} --out=${OUTPUT0} --n 10
inputs: [{dataset: ds.in}]
outputs: [{dataset: ds.out, file_template: "ds.out.${SN}.root"}]
log: {dataset: ds.log, file_template: "ds.log.${SN}.log.tgz"}
split: {n_files_per_job: 2}
"""), user=None, default_user="me")
    assert spec.summary() | {"format": None} == panda(nFilesPerJob=2, processingType="sim").summary() | {"format": None}


def test_prun_examples_parse_without_unknown_keys():
    for name in ("prun_files.json", "prun_noinput.json"):
        document = load_document((EXAMPLES / name).read_text(), name)
        assert parse_definition(document, user=None, default_user="me").unknown_keys == ()


def test_json_errors_name_the_line():
    with pytest.raises(BadInput, match=r"t.json: line 2 column 3: Expecting property name"):
        load_document('{\n  ,\n}', "t.json")
