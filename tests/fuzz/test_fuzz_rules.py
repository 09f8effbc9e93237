"""Fuzzing the rule files: `queue-shares import` (work queues with criteria, global shares with regular
expressions) and `retry-rules import`, valid and broken, and `queue-shares set`."""

from __future__ import annotations

import json

import yaml
from hypothesis import given
from hypothesis import strategies as st

from jedictl.engine.input.expressions import KNOWN_ATTRIBUTES
from tests.conftest import ROOT
from tests.fuzz.conftest import SEED_TASK
from tests.fuzz.strategies import SAFE_REGEXES, broken_documents, free_text, names, serialise
from tests.fuzz.support import assert_no_crash, assert_one_error_line, changed_tables, dump, fuzz, invoke

QUEUES_EXAMPLE = yaml.safe_load((ROOT / "examples" / "queue-shares.yaml").read_text())
RULES_EXAMPLE = yaml.safe_load((ROOT / "examples" / "retry-rules.yaml").read_text())
QUEUE_TABLES = {"work_queues", "global_shares"}
RULE_TABLES = {"retry_rules"}
LABELS = ("managed", "user", "test")


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


values = st.one_of(free_text(20).map(_quoted), st.integers(-1000, 1000).map(str), st.sampled_from(["'simul'", "'GP_%'", "8", "1.5", ":p1"]))


def criteria() -> st.SearchStrategy[str]:
    """Sentences of the criteria language (docs/queue-shares.md)."""
    attribute = st.sampled_from(KNOWN_ATTRIBUTES).map(lambda a: a if len(a) % 2 else a.upper())
    comparison = st.one_of(
        st.tuples(attribute, st.sampled_from(["=", "==", "!=", "<>", "<", "<=", ">", ">="]), values).map(" ".join),
        st.tuples(attribute, st.sampled_from(["IN", "NOT IN"]), st.lists(values, min_size=1, max_size=3).map(lambda v: "(" + ", ".join(v) + ")")).map(" ".join),
        st.tuples(attribute, st.sampled_from(["LIKE", "NOT LIKE"]), values).map(" ".join),
        st.tuples(attribute, st.sampled_from(["IS NULL", "IS NOT NULL"])).map(" ".join),
    )
    return st.recursive(comparison, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(" ".join),
        inner.map(lambda c: f"NOT ({c})"),
        inner.map(lambda c: f"({c})"),
    ), max_leaves=5)


@st.composite
def queue_definitions(draw: st.DrawFn) -> dict:
    """A valid queue-shares file: queues per label with criteria, partitions and sub-queues, a share tree."""
    queues = []
    for label in draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=2, unique=True)):
        for name in draw(st.lists(names, min_size=1, max_size=3, unique=True)):
            queue = {"name": name, "queue_type": label, "order": draw(st.integers(-(2**31), 2**31 - 1)),
                     "share": draw(st.none() | st.floats(0, 1e6)), "criteria": draw(st.just("") | criteria()),
                     "variables": {"p1": draw(free_text(10))}, "stretchable": draw(st.booleans()),
                     "status": draw(st.sampled_from(["active", "inactive"]))}
            queues.append({key: value for key, value in queue.items() if value is not None})
        if draw(st.booleans()):
            queues.append({"name": "fz-partition", "queue_type": label, "kind": "partition", "order": 500, "share": 10})
            queues.append({"name": "fz-sub", "queue_type": label, "kind": "sub", "partition": "fz-partition", "order": 501,
                           "criteria": draw(criteria()), "variables": {"p1": "x"}})
    shares = []
    for name in draw(st.lists(names, min_size=1, max_size=4, unique=True)):
        share = {"name": name, "value": draw(st.floats(0, 1000)),
                 "parent": draw(st.none() | st.sampled_from([s["name"] for s in shares] or [None]))}
        for key in draw(st.lists(st.sampled_from(["prodsourcelabel", "processingtype", "workinggroup", "campaign"]), max_size=2, unique=True)):
            share[key] = draw(st.sampled_from(list(SAFE_REGEXES) + ["user|panda", "simul|evgen", ".*", "GP_.*"]))
        shares.append({key: value for key, value in share.items() if value is not None})
    return {"work_queues": queues, "global_shares": shares}


def _import(stores, argv: list[str], text: str, allowed: set[str], valid: bool) -> str:
    url = stores.fresh()
    outcome = invoke([*argv, "--db", url], input=text)
    assert_no_crash(outcome, codes=(0,) if valid else (0, 2))
    changed = changed_tables(stores.template_dump, dump(url))
    if outcome.exit_code == 2:
        assert_one_error_line(outcome)
        assert changed == [], f"refused, but {changed} changed\n{outcome}"
    else:
        assert set(changed) <= allowed, outcome
    return url


@fuzz(15)
@given(data=st.data())
def test_valid_queue_definitions_are_imported_and_used(stores, data):
    url = _import(stores, ["queue-shares", "import", "-"], serialise(data.draw, data.draw(queue_definitions())), QUEUE_TABLES, valid=True)
    try:
        # The refiner matches a new task against the imported criteria and shares; dispatch orders by them.
        task = {**SEED_TASK, "taskName": "fuzz.queues", "allowTaskDuplication": True,  # the seed store's task writes ds.out
                "prodSourceLabel": data.draw(st.sampled_from(LABELS)),
                "workingGroup": data.draw(st.sampled_from(["GP_TOP", "AP_X", None]))}
        assert_no_crash(invoke(["submit", "-", "--db", url], input=json.dumps(task)), codes=(0,))
        assert_no_crash(invoke(["refine", "--db", url]), codes=(0, 1))
        assert_no_crash(invoke(["queue-shares", "show", "--db", url]), codes=(0,))
        assert_no_crash(invoke(["jobs", "dispatch", "--site", "CERN-PROD_GRID", "--count", "2", "--db", url]), codes=(0,))
    finally:
        stores.discard(url)


@fuzz(70)
@given(text=broken_documents(st.just(QUEUES_EXAMPLE) | queue_definitions()))
def test_broken_queue_definitions_are_refused_cleanly(stores, text):
    stores.discard(_import(stores, ["queue-shares", "import", "-"], text, QUEUE_TABLES, valid=False))


@fuzz(40)
@given(name=st.sampled_from(["evgensimul", "group", "Production", "MC Simulation", "nosuch"]) | free_text(70),
       options=st.lists(st.sampled_from(["--share", "--stretchable", "--no-stretchable", "--kind", "--vo", "--queue-type"]), max_size=3),
       data=st.data())
def test_queue_shares_set_never_crashes(stores, name, options, data):
    argv = ["queue-shares", "set", name]
    for option in options:
        argv.append(option)
        if option == "--share":
            argv.append(data.draw(st.sampled_from(["0", "10", "-1", "nan", "inf", "1e400", "abc", "12.5"])))
        elif option in ("--kind", "--vo", "--queue-type"):
            argv.append(data.draw(st.sampled_from(["queue", "share", "managed", "atlas", "*", "x'; --"]) | free_text(10)))
    stores.discard(_import(stores, argv, "", QUEUE_TABLES, valid=False))


@st.composite
def retry_rules(draw: st.DrawFn) -> list[dict]:
    """A valid retry-rules file."""
    rules = []
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["no_retry", "limit_retry", "increase_memory", "increase_cputime", "reduce_input_per_job"]))
        rule = {"error_source": draw(st.sampled_from(["pilot", "trans", "exe", "pilotErrorCode", "ddm"])),
                "error_code": draw(st.integers(-(2**31), 2**31 - 1)), "action": action,
                "message_pattern": draw(st.none() | st.sampled_from([".*(corrupted|truncated) input file", ".*Lost heartbeat", "^Payload", r"(\d+\.){3}"])),
                "description": draw(st.none() | free_text(100)), "active": draw(st.booleans()),
                "prod_source_label": draw(st.none() | st.sampled_from(LABELS)), "release": draw(st.none() | free_text(30))}
        if action == "limit_retry":
            rule["parameters"] = draw(st.sampled_from([{"maxAttempt": 2}, "maxAttempt=5", {"max_attempt": 1000}]))
        if action == "reduce_input_per_job" and draw(st.booleans()):
            rule["parameters"] = {"steps": [2, 4, 6]}
        rules.append({key: value for key, value in rule.items() if value is not None})
    return rules


@fuzz(25)
@given(rules=retry_rules(), data=st.data())
def test_valid_retry_rules_are_imported(stores, rules, data):
    argv = ["retry-rules", "import", "-"] + (["--replace"] if data.draw(st.booleans()) else [])
    stores.discard(_import(stores, argv, serialise(data.draw, rules), RULE_TABLES, valid=True))


@fuzz(70)
@given(text=broken_documents(st.just(RULES_EXAMPLE) | retry_rules()))
def test_broken_retry_rules_are_refused_cleanly(stores, text):
    stores.discard(_import(stores, ["retry-rules", "import", "-"], text, RULE_TABLES, valid=False))
