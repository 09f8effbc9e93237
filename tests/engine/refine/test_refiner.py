"""The refiner's pure decisions."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jedictl.engine.task import split_rule
from jedictl.engine.task.options import TaskOptions
from jedictl.config import RefineSettings
from jedictl.engine.refine.refiner import base_ram_count, effective_options, parent_gate, plan_datasets, request_type, resource_columns
from tests.engine.task.test_parsing import panda


@pytest.mark.parametrize("parent,status,no_wait,expected", [
    (None, None, False, ("proceed", None)),
    (5, None, False, ("break", "parent task 5 does not exist")),
    (5, "done", False, ("proceed", None)),
    (5, "finished", False, ("proceed", None)),
    (5, "running", False, ("wait", "pending until parent task 5 is done")),
    (5, "registered", False, ("wait", "pending until parent task 5 is done")),
    (5, "running", True, ("proceed", None)),
    (5, "registered", True, ("wait", "waiting for parent task 5 to start")),
    (5, "failed", True, ("break", "parent task 5 is failed")),
    (5, "broken", False, ("break", "parent task 5 is broken")),
    (5, "aborted", False, ("break", "parent task 5 is aborted")),
])
def test_parent_gate(parent, status, no_wait, expected):
    gate = parent_gate(parent, status, no_wait)
    assert (gate.action, gate.reason) == expected


def test_files_per_job_is_derived_from_events_as_jedi_does():
    task = panda(nEventsPerJob=1000, nEventsPerInputFile=250)
    assert effective_options(task).n_files_per_job == 4
    assert effective_options(panda(nEventsPerJob=100, nEventsPerInputFile=250)).n_files_per_job is None
    assert effective_options(panda(tgtNumEventsPerJob=300)).n_events_per_job == 300


def test_merge_output_adds_unmerged_twins():
    task = panda(mergeOutput=True, mergeSpec={"jobParameters": "-i ${TRN_OUTPUT0}"})
    rows = {row.name: row for row in plan_datasets(task)}
    twin, log_twin = rows["panda.um.ds.out"], rows["panda.um.ds.log"]
    assert (twin.type, twin.storage_token, twin.file_template) == ("trn_output", "TOMERGE", "panda.um.ds.out.${SN}.root")
    assert twin.master_key == log_twin.key and log_twin.master_key is None
    assert rows["ds.out"].provenance_key == twin.key and rows["ds.log"].provenance_key == log_twin.key
    name_at_end = {r.name: r for r in plan_datasets(panda(mergeOutput=True, umNameAtEnd=True, mergeSpec={"jobParameters": "x"}))}
    assert name_at_end["panda.um.ds.out"].file_template == "ds.out.${SN}.root.panda.um"


@pytest.mark.parametrize("params,expected", [
    ({"processingType": "simul"}, 1000),  # seed 000's table: simul 1000, pile 1500, reco 1000
    ({"processingType": "pile"}, 1500),
    ({"processingType": "reco"}, 1000),
    ({"processingType": "panda-client-jedi-run"}, 0),  # not in the table
    ({}, 0),  # no processingType
    ({"processingType": "pile", "baseRamCount": 700}, 700),  # the task's own value wins
    ({"processingType": "pile", "baseRamCount": 0}, 0),  # an explicit 0 too
])
def test_base_ram_count_by_processing_type_when_the_task_gives_none(params, expected):
    settings = RefineSettings()
    assert base_ram_count(panda(**params), settings) == expected
    assert resource_columns(panda(**params), settings)["base_ram_count"] == expected
    configured = RefineSettings(base_ram_count={"evgen": 250})
    assert base_ram_count(panda(processingType="evgen"), configured) == 250
    assert base_ram_count(panda(processingType="pile"), configured) == 0  # the configured table replaces the default one


def test_request_type_is_a_payload_identity():
    assert request_type(panda()) == request_type(panda(taskName="other.name"))
    assert request_type(panda()) != request_type(panda(transPath="other.sh"))


_int_options = [name for name, f in TaskOptions.__dataclass_fields__.items()
                if f.metadata.get("code") and f.type in ("int | None",) and f.metadata["code"] not in ("LS", "CC")]


@given(st.dictionaries(st.sampled_from(_int_options), st.integers(min_value=1, max_value=10_000), max_size=6),
       st.booleans(), st.booleans())
def test_split_rule_round_trip(numbers, scouts_skipped, merge):
    options = dataclasses.replace(TaskOptions(), **numbers, skip_scout=scouts_skipped or None, merge_output=merge or None)
    decoded = split_rule.decode(split_rule.encode(options))
    assert split_rule.encode(decoded) == split_rule.encode(options)
    for name, value in numbers.items():
        assert getattr(decoded, name) == value
