"""Work-queue criteria: parsed, never executed."""

from __future__ import annotations

import pytest

from jedictl.engine.input.expressions import evaluate, parse
from jedictl.errors import BadInput

TASK = {"processingType": "simul", "workingGroup": "GP_TOP", "coreCount": 8, "prodSourceLabel": "managed", "campaign": None}


@pytest.mark.parametrize("criteria,variables,expected", [
    # the seed's own examples (JEDI_Work_Queue)
    ("processingType IN (:p1,:p2)", "p1:evgen,p2:simul", True),
    ("workingGroup LIKE :p1", "p1:GP_%", True),
    ("processingType IN ('evgen', 'simul')", None, True),
    ("processingType = 'reco'", None, False),
    ("coreCount > 1 AND prodSourceLabel = 'managed'", None, True),
    ("coreCount >= 8 AND NOT processingType = 'simul'", None, False),
    ("processingType = 'reco' OR (coreCount = 8 AND workingGroup LIKE 'GP\\_%')", None, True),
    ("workingGroup NOT LIKE 'AP_%'", None, True),
    ("processingType NOT IN ('evgen')", None, True),
    ("campaign IS NULL", None, True),
    ("campaign IS NOT NULL", None, False),
    ("campaign = 'MC23'", None, False),  # NULL compares false, as in SQL
    ("", None, True),
    ("PROCESSINGTYPE in ('SIMUL', 'simul')", None, True),  # names and keywords are case-insensitive
    ("workingGroup LIKE 'GP_TO_'", None, True),  # _ is one character
    ("workingGroup LIKE 'GP.TOP'", None, False),  # . is literal, not a regex
])
def test_evaluate(criteria, variables, expected):
    assert evaluate(parse(criteria, variables), TASK) is expected


@pytest.mark.parametrize("criteria,message", [
    ("colour = 'red'", "unknown attribute 'colour'"),
    ("processingType = ", "ends too early"),
    ("processingType == 'a' AND", "ends too early"),
    ("processingType IN ('a'", "ends too early"),
    ("processingType = :p9", "bind variable :p9 has no value"),
    ("__import__('os').system('id')", "cannot read"),
    ("processingType = 'a'; DROP TABLE tasks", "cannot read"),
    ("processingType = 'a' OR 1=1", "expected an attribute name"),
    ("processingType ~ 'a'", "cannot read"),
    ("(processingType = 'a'", "expected ')'"),
])
def test_hostile_or_broken_criteria_are_refused(criteria, message):
    with pytest.raises(BadInput) as error:
        parse(criteria, None, "work_queues[0].criteria")
    assert str(error.value).startswith("work_queues[0].criteria: ")
    assert message in str(error.value)


def test_quoted_quotes_stay_text():
    node = parse("processingType = 'it''s'")
    assert evaluate(node, {"processingType": "it's"})
