"""Many-time and one-time inputs in both task formats (seed 000, "Different treatment of input datasets";
docs/task-spec.md "Many-time and one-time inputs")."""

from __future__ import annotations

import pytest

from jedictl.engine.generate.splitters import SecondaryInput
from jedictl.engine.task.definition import DatasetAttributes
from jedictl.engine.task.submission import parse_definition
from jedictl.errors import BadInput


def spec(*secondaries: dict, master: dict | None = None) -> dict:
    return {"name": "pileup.digi", "command": "digi ${IN} " + " ".join(f"${{IN{i}}}" for i in range(1, len(secondaries) + 1)),
            "inputs": [{"dataset": "hits", **(master or {})}, *({"dataset": f"sec{i}", **s} for i, s in enumerate(secondaries, 1))],
            "outputs": [{"dataset": "rdo", "file_template": "RDO.${SN}.root"}]}


def panda(*items: dict) -> dict:
    return {"taskName": "user.x.pileup/", "vo": "atlas", "prodSourceLabel": "user", "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "hits", "value": "-i ${IN}"}, *items,
        {"type": "template", "param_type": "output", "dataset": "out/", "value": "out.${SN}.root"}]}


def attributes_of(document: dict, name: str) -> DatasetAttributes:
    task = parse_definition(document, user=None, default_user="me")
    return next(d.attributes for d in task.datasets if d.name == name)


@pytest.mark.parametrize(("given", "many_time"), [
    ({"ratio": 2}, False),  # consumed: each file by one job
    ({"files_per_job": 1}, False),
    ({"nosplit": True}, True),  # every job reads all of it
    ({"files_per_job": 1, "repeat": True}, True),  # cycled through
    ({"ratio": 1, "reusable": True}, True),  # rewound
    ({"ratio": 2, "many_time": True}, True),  # said so: pile-up read by many jobs
])
def test_a_secondary_is_many_time_when_marked_or_when_its_files_are_shared(given, many_time):
    attributes = attributes_of(spec(given), "sec1")
    assert attributes.is_many_time is many_time
    assert attributes_of(spec({**given, "many_time": many_time}), "sec1").is_many_time is many_time


def test_the_master_and_contradictions_are_refused_with_the_field_named():
    with pytest.raises(BadInput) as master:
        parse_definition(spec(master={"many_time": True}), user=None, default_user="me")
    assert master.value.path == "inputs[0]" and "secondary inputs only" in str(master.value)
    with pytest.raises(BadInput) as contradiction:
        parse_definition(spec({"nosplit": True, "many_time": False}), user=None, default_user="me")
    assert contradiction.value.path == "inputs[1]" and "cannot be nosplit, repeat or reusable" in str(contradiction.value)
    with pytest.raises(BadInput) as typo:
        parse_definition(spec({"many_time": "yes"}), user=None, default_user="me")
    assert typo.value.path == "inputs[1].many_time"


def test_panda_parameters_mark_many_time_by_token_reusable_or_nosplit():
    document = panda(
        # pathena's pile-up (--lowMinDS): a number of files per job, consumed
        {"type": "template", "param_type": "input", "dataset": "minbias.low", "value": "--low ${LOWMB}", "nFilesPerJob": 2},
        # prun --secondaryDSs with --reusableSecondary
        {"type": "template", "param_type": "input", "dataset": "minbias.high", "value": "--high ${HIGHMB}", "ratio": 1, "reusable": True},
        # the legacy `manytime` token of seed 000's dataset attributes
        {"type": "template", "param_type": "input", "dataset": "cavern", "value": "--cav ${CAV}", "ratio": 1, "attributes": "manytime"},
        # pathena --dbRelease: every job gets the whole DBRelease
        {"type": "template", "param_type": "input", "dataset": "ddo.DBRelease", "value": "--dbr ${DBR}", "attributes": "nosplit,repeat"},
    )
    flags = {name: attributes_of(document, name).is_many_time for name in ("minbias.low", "minbias.high", "cavern", "ddo.DBRelease")}
    assert flags == {"minbias.low": False, "minbias.high": True, "cavern": True, "ddo.DBRelease": True}
    assert attributes_of(document, "cavern").tokens() == "ratio=1.0,manytime"
    with pytest.raises(BadInput) as master:
        parse_definition(panda() | {"jobParameters": [
            {"type": "template", "param_type": "input", "dataset": "hits", "value": "-i ${IN}", "attributes": "manytime"},
            {"type": "template", "param_type": "output", "dataset": "out/", "value": "out.${SN}.root"}]}, user=None, default_user="me")
    assert master.value.path == "jobParameters[0]"


def test_a_many_time_ratio_secondary_rewinds_its_files_like_a_reusable_one():
    """Its files are read, never claimed, so the splitter must reuse them rather than run dry."""
    marked = SecondaryInput.from_attributes(7, (), DatasetAttributes(ratio=2, many_time=True))
    plain = SecondaryInput.from_attributes(7, (), DatasetAttributes(ratio=2))
    assert (marked.reusable, plain.reusable) == (True, False)
    assert SecondaryInput.from_attributes(7, (), DatasetAttributes(nosplit=True, many_time=True)).reusable is False
