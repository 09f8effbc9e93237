"""engine.task.incexec: which parameters incexec may change and the task's options after the merge."""

from __future__ import annotations

import pytest

from jedictl.engine.task.incexec import incexec_change
from jedictl.errors import BadInput

CURRENT = {"n_files_per_job": 2, "max_attempt": 3, "excluded_sites": ["A"]}


def test_panda_keys_jedictl_names_and_pbook_aliases_merge_into_the_options():
    change = incexec_change(CURRENT, {"nFilesPerJob": 5, "included_sites": "X,Y", "memory": 4000, "maxCore": 8, "site": "MWT2"})
    assert change.options == {"n_files_per_job": 5, "max_attempt": 3, "excluded_sites": ["A"], "included_sites": ["X", "Y"],
                              "ram_count": 4000, "max_core_count": 8}
    assert change.columns == {"site": "MWT2"}
    assert change.changed == {"n_files_per_job": 5, "included_sites": ["X", "Y"], "ram_count": 4000, "max_core_count": 8, "site": "MWT2"}


def test_null_removes_and_the_merge_is_validated_as_at_submission():
    change = incexec_change(CURRENT, {"nFilesPerJob": None, "nGBPerJob": 10, "excludedSite": None, "site": None})
    assert change.options == {"max_attempt": 3, "n_gb_per_job": 10.0}
    assert change.columns == {"site": None} and change.changed["n_files_per_job"] is None
    with pytest.raises(BadInput, match="n_files_per_job: cannot be combined with nGBPerJob"):
        incexec_change(CURRENT, {"nGBPerJob": 10})
    with pytest.raises(BadInput, match="nFilesPerJob: must be at least 1"):
        incexec_change(CURRENT, {"nFilesPerJob": 0})


@pytest.mark.parametrize("parameters,message", [
    ({"nEventsPerJob": 10}, "nEventsPerJob: cannot be changed by incexec"),
    ({"mergeOutput": True}, "mergeOutput: cannot be changed by incexec"),
    ({"colour": "red"}, "colour: unknown task parameter"),
    ({"site": 3}, "site: must be a name"),
    ({}, "must be a mapping"),
    (["nFilesPerJob"], "must be a mapping"),
])
def test_refusals_name_the_parameter(parameters, message):
    with pytest.raises(BadInput, match=message):
        incexec_change(CURRENT, parameters)
