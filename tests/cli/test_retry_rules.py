"""`jedictl retry-rules ...`: import is idempotent and all-or-nothing, list filters, remove, match picks one rule."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.helpers import row_counts

EXAMPLE = ROOT / "examples" / "retry-rules.yaml"
EXAMPLE_SOURCES = ["pilot", "trans", "pilot", "trans", "jobDispatcherErrorCode", "pilot", "pilot", "pilot"]


def ids(rows: list[dict]) -> list[int]:
    return [row["id"] for row in rows]


def test_example_imports_and_lists_with_filters(cli, store):
    assert cli.json("retry-rules", "import", str(EXAMPLE), db=store) == {"added": 8, "unchanged": 0, "removed": 0}
    rules = cli.json("retry-rules", "list", db=store)
    assert ids(rules) == list(range(1, 9))
    assert [r["error_source"] for r in rules] == EXAMPLE_SOURCES
    assert set(rules[0]) == {"id", "error_source", "error_code", "message_pattern", "action", "parameters", "scope", "active",
                             "expires_at", "description"}
    assert {r["action"] for r in rules} == {"no_retry", "limit_retry", "increase_memory", "increase_cputime", "reduce_input_per_job"}
    scoped = next(r for r in rules if r["scope"])
    assert (scoped["error_code"], scoped["scope"], scoped["parameters"]) == (1328, {"prod_source_label": "managed"}, {"maxAttempt": 2})
    assert [r["active"] for r in rules].count(False) == 1
    heartbeat = next(r for r in rules if r["error_code"] == 100)
    assert heartbeat["parameters"] == {"maxAttempt": 3}  # PanDA's `params: maxAttempt=3`
    reduce = next(r for r in rules if r["action"] == "reduce_input_per_job")
    assert reduce["parameters"] == {"excluded_rules": ["nEventsPerJob", "nFilesPerJob"], "steps": [2, 4, 7]}

    # --source accepts either spelling of a source, as matching does
    assert ids(cli.json("retry-rules", "list", "--source", "pilot", db=store)) == [1, 3, 6, 7, 8]
    assert ids(cli.json("retry-rules", "list", "--source", "pilotErrorCode", db=store)) == [1, 3, 6, 7, 8]
    assert ids(cli.json("retry-rules", "list", "--source", "jobdispatcher", db=store)) == [5]
    assert ids(cli.json("retry-rules", "list", "--code", "65", db=store)) == [4]
    assert ids(cli.json("retry-rules", "list", "--action", "limit_retry", db=store)) == [3, 5, 6]
    assert ids(cli.json("retry-rules", "list", "--action", "limit_retry", "--source", "pilot", "--code", "1099", db=store)) == [3]
    assert cli.json("retry-rules", "list", "--code", "4242", db=store) == []

    table = cli("retry-rules", "list", db=store).stdout
    assert table.splitlines()[0].split() == ["id", "error_source", "error_code", "message_pattern", "action", "parameters", "scope",
                                             "active", "expires_at", "description"]
    assert 'prod_source_label: managed' in table  # mappings read as key: value in a table (JSON stays in tsv)
    tsv = cli("retry-rules", "list", "-o", "tsv", "--code", "65", db=store).stdout.splitlines()
    assert len(tsv) == 2 and tsv[1].split("\t")[:5] == ["4", "trans", "65", ".*(corrupted|truncated) input file", "no_retry"]


def test_import_is_idempotent(cli, store, tmp_path):
    cli("retry-rules", "import", str(EXAMPLE), db=store)
    before, listed = row_counts(store), cli.json("retry-rules", "list", db=store)
    assert cli.json("retry-rules", "import", str(EXAMPLE), db=store) == {"added": 0, "unchanged": 8, "removed": 0}
    assert row_counts(store) == before and cli.json("retry-rules", "list", db=store) == listed

    # One field differs: a new rule. The same rule twice in a file is stored once. Parameters compare
    # by value, whatever their spelling.
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        "- {error_source: pilot, error_code: 1212, action: increase_memory, description: payload ran out of memory}\n"
        "- {error_source: pilot, error_code: 1212, action: increase_memory, description: out of memory}\n"
        "- {error_source: pilot, error_code: 1212, action: increase_memory, description: out of memory}\n"
        "- {errorsource: pilot, errorcode: 1099, action: limit_retry, params: maxAttempt=5,"
        " description: stage-in of an input file failed}\n")
    assert cli.json("retry-rules", "import", str(changed), db=store) == {"added": 1, "unchanged": 3, "removed": 0}
    assert ids(cli.json("retry-rules", "list", "--code", "1212", db=store)) == [1, 9]


def test_replace_keeps_identical_rules_and_removes_the_rest(cli, store):
    cli("retry-rules", "import", str(EXAMPLE), db=store)
    text = ("- {error_source: trans, error_code: 137, action: increase_memory,"
            " description: 'payload killed by SIGKILL (128+9), most often by the batch system for memory'}\n"
            "- {error_source: ddm, error_code: 200, action: no_retry}\n")
    assert cli.json("retry-rules", "import", "-", "--replace", db=store, input=text) == {"added": 1, "unchanged": 1, "removed": 7}
    rules = cli.json("retry-rules", "list", db=store)
    assert [(r["error_source"], r["error_code"]) for r in rules] == [("trans", 137), ("ddm", 200)]
    assert rules[0]["id"] == 2  # the identical rule kept its row (a new id is the backend's: SQLite reuses freed ones)
    assert cli.json("retry-rules", "import", "-", "--replace", db=store, input=text) == {"added": 0, "unchanged": 2, "removed": 0}


def test_remove(cli, store):
    cli("retry-rules", "import", str(EXAMPLE), db=store)
    assert cli.json("retry-rules", "remove", "2", "3", db=store) == {"removed": 2}
    assert ids(cli.json("retry-rules", "list", db=store)) == [1, 4, 5, 6, 7, 8]
    before = row_counts(store)
    result = cli("retry-rules", "remove", "1", "99", db=store, code=2)
    assert result.stderr.strip() == "jedictl: error: retry rule 99 does not exist"
    assert cli("retry-rules", "remove", "2", "98", db=store, code=2).stderr.strip() == "jedictl: error: retry rules 2, 98 do not exist"
    assert row_counts(store) == before
    assert ids(cli.json("retry-rules", "list", db=store)) == [1, 4, 5, 6, 7, 8]


VALID = "- {error_source: pilot, error_code: 1, action: no_retry}\n"
BAD_FILES = [
    ("bad-action", VALID + "- {error_source: pilot, error_code: 2, action: retry_forever}\n",
     "[1].action: must be one of no_retry, limit_retry, increase_memory, increase_cputime, reduce_input_per_job"),
    ("missing-code", VALID + "- {error_source: pilot, action: no_retry}\n", "[1].error_code: is required"),
    # the words after the place are the YAML parser's (libyaml: "did not find expected ...", PyYAML: "expected ..., but got ...")
    ("not-yaml", VALID + "- {error_source: pilot, error_code: [1\n", ": line 3 column 1: "),
    ("unknown-key", VALID + "- {error_source: pilot, error_code: 2, action: no_retry, colour: red}\n", "[1].colour: unknown key"),
    ("limit-without-max", VALID + "- {error_source: pilot, error_code: 2, action: limit_retry}\n",
     "[1].parameters.maxAttempt: is required for limit_retry"),
    ("bad-regex", VALID + "- {error_source: pilot, error_code: 2, action: no_retry, message_pattern: '(unclosed'}\n",
     "[1].message_pattern: is not a valid regular expression"),
    # Wider than the column: refused on both backends, not only where PostgreSQL checks widths.
    ("long-vo", VALID + f"- {{error_source: pilot, error_code: 2, action: no_retry, vo: {'v' * 40}}}\n",
     "[1].vo: must be at most 32 characters"),
    ("empty", "[]\n", ": must be a non-empty list of rules"),
]


@pytest.mark.parametrize("name,text,message", BAD_FILES, ids=[case[0] for case in BAD_FILES])
def test_bad_files_change_nothing(cli, store, tmp_path, name, text, message):
    cli("retry-rules", "import", str(EXAMPLE), db=store)
    before = row_counts(store)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    for args in ([str(path)], [str(path), "--replace"]):
        result = cli("retry-rules", "import", *args, db=store, code=2)
        assert result.stderr.startswith(f"jedictl: error: {path}") and message in result.stderr, result.stderr
        assert name != "not-yaml" or "expected ',' or ']'" in result.stderr and result.stderr.rstrip().endswith("(invalid YAML)")
        assert len(result.stderr.strip().splitlines()) == 1
    assert row_counts(store) == before


MATCH_RULES = """
- {error_source: trans, error_code: 65, action: limit_retry, parameters: {maxAttempt: 3}}
- {error_source: transExitCode, error_code: 65, action: limit_retry, parameters: {maxAttempt: 5}, prod_source_label: managed}
- {error_source: trans, error_code: 65, action: no_retry, message_pattern: ".*corrupted input"}
- {error_source: pilot, error_code: 1099, action: limit_retry, parameters: {maxAttempt: 4}}
- {error_source: pilot, error_code: 1099, action: no_retry}
- {error_source: pilot, error_code: 1212, action: increase_memory, active: false}
- {error_source: ddm, error_code: 200, action: no_retry, expires_at: 2024-06-01T02:00:00+02:00}
- {error_source: exe, error_code: 68, action: no_retry, message_pattern: "Corrupted.file"}
"""


def test_match_picks_the_one_rule_that_acts(cli, store):
    cli("retry-rules", "import", "-", db=store, input=MATCH_RULES)

    def match(*args: str) -> dict | None:
        answer = json.loads(cli("retry-rules", "match", *args, "-o", "json", "--now", "2024-05-01T00:00:00", db=store).stdout)
        assert set(answer) == {"matched", "rule", "mode", "outranked"}  # one shape, a rule found or not (never `null`)
        if not answer["matched"]:
            assert (answer["rule"], answer["mode"], answer["outranked"]) == (None, None, [])
            return None
        return {**answer["rule"], "mode": answer["mode"], "outranked": answer["outranked"]}

    generic = match("--source", "trans", "--code", "65")
    assert (generic["id"], generic["parameters"], generic["mode"], generic["outranked"]) == (1, {"maxAttempt": 3}, "acts", [])
    # The rule scoped to managed jobs is more specific: it wins for them, even though it is less strict.
    managed = match("--source", "transExitCode", "--code", "65", "--label", "managed")
    assert (managed["id"], managed["scope"], managed["outranked"]) == (2, {"prod_source_label": "managed"}, [1])
    assert match("--source", "trans", "--code", "65", "--label", "user")["id"] == 1
    assert match("--source", "trans", "--code", "65", "--diag", "ERROR: corrupted input file x.root")["id"] == 3
    assert match("--source", "trans", "--code", "65", "--diag", "a truncated input")["id"] == 1
    # A pattern is matched from the start of the message, as in PanDA.
    assert match("--source", "exe", "--code", "68", "--diag", "Corrupted\nfile")["id"] == 8
    assert match("--source", "exe", "--code", "68", "--diag", "input file Corrupted") is None
    # Equally specific: the stricter rule wins.
    assert (match("--source", "pilot", "--code", "1099")["action"], match("--source", "pilot", "--code", "1099")["outranked"]) == ("no_retry", [4])
    assert match("--source", "pilot", "--code", "1212")["mode"] == "passive: reports only"
    # The offset of expires_at was converted to UTC: 2024-06-01T00:00 in the store.
    assert match("--source", "ddm", "--code", "200")["expires_at"] == "2024-06-01T00:00:00Z"
    assert cli("retry-rules", "match", "--source", "ddm", "--code", "200", "--now", "2024-06-01T00:00:00", db=store).stdout == "no rule matches\n"
    assert match("--source", "pilot", "--code", "4242") is None

    shown = cli("retry-rules", "match", "--source", "trans", "--code", "65", "--label", "managed", db=store).stdout
    assert "prod_source_label" in shown and "outranked" in shown
    assert cli("retry-rules", "match", "--source", "sup", "--code", "1", db=store).stdout == "no rule matches\n"
    assert cli("retry-rules", "match", "--source", "sup", "--code", "1", "-o", "tsv", db=store).stdout.startswith("id\terror_source")


def test_match_with_the_example_file(cli, store):
    cli("retry-rules", "import", str(EXAMPLE), db=store)
    found = cli.json("retry-rules", "match", "--source", "trans", "--code", "65", "--diag",
                     "ERROR: corrupted input file EVNT.01234._000042.pool.root.1", db=store)["rule"]
    assert (found["action"], found["error_code"]) == ("no_retry", 65)
    assert cli("retry-rules", "match", "--source", "trans", "--code", "65", "--diag", "segmentation violation", db=store).stdout == "no rule matches\n"
    assert cli.json("retry-rules", "match", "--source", "jobdispatcher", "--code", "100", db=store)["rule"]["parameters"] == {"maxAttempt": 3}
    assert cli.json("retry-rules", "match", "--source", "pilot", "--code", "1328", "--label", "managed", db=store)["rule"]["id"] == 6
    assert cli("retry-rules", "match", "--source", "pilot", "--code", "1328", db=store).stdout == "no rule matches\n"


def test_list_refuses_an_unknown_action(cli, store):
    from tests.helpers import refused

    cli("retry-rules", "import", str(ROOT / "examples" / "retry-rules.yaml"), db=store)
    assert refused(cli, store, "retry-rules", "list", "--action", "bogus") == (
        "jedictl: error: --action: 'bogus' is not a retry action "
        "(allowed: no_retry, limit_retry, increase_memory, increase_cputime, reduce_input_per_job)")
    assert refused(cli, store, "retry-rules", "list", "--action", "no-retry").endswith("did you mean 'no_retry'?)")
