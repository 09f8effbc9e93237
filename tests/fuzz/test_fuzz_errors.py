"""Fuzzing what a first-time operator tripped over (issue 17): global options anywhere on the line and
`-v` given a value, ids at and past every bound, metrics files that cannot be written, and stores that
are not stores (empty, someone else's, random bytes, a directory, missing). Never an internal error
or a traceback; a refusal is one line (a usage error may add one hint line) and leaves the store as
it was; a command that only reads leaves a file that is not a store byte for byte as it was."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import uuid
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.support import assert_no_crash, assert_one_error_line, changed_tables, dump, fuzz, invoke
from tests.fuzz.test_fuzz_argv import TIMES, command_lines

#: Global options as an operator types them, right and wrong (a counter given a value, a format misspelt).
GLOBAL_OPTIONS = [
    ["-v"], ["-vv"], ["--verbose"], ["-q"], ["--quiet"], ["-o", "json"], ["-o", "tsv"], ["--output", "yaml"], ["-o", "xml"],
    ["-v", "3"], ["-v", "0"], ["--verbose", "2"], ["--verbose=2"], ["-vv", "1"], ["-q=1"], ["--now", "2026-01-01T00:00:00"],
    ["--now", "yesterday"], ["-o"], ["--db"],
]
#: Job and task references at and past every bound (BIGINT, INTEGER, >= 1) and in forms no parser should take.
REFERENCES = ["999999999999999999999999999", "1.3000000000", "0", "-1", "1.0", "0.1", str(2**63), f"{2**63}.1", str(2**63 - 1),
              str(2**31), f"1.{2**31}", "1.", ".1", "1e3", "1_000", " 1", "\u0661", "1.2.3", "", "-0", "+1", "0x10"]
REFERENCE_COMMANDS = [["jobs", "show"], ["jobs", "kill"], ["jobs", "heartbeat"], ["task", "show"], ["kill"], ["explain", "task"],
                      ["task", "pause"], ["retry"], ["jobs", "list", "--task"], ["task", "settle", "1"]]
#: Where a metrics file cannot (or can) be written; never a device, which a failed check would replace.
METRICS_PATHS = ["/nonexistent/dir/m.prom", "/", ".", "", "sub/dir/x.prom", "m.prom", "plain/x.prom", "plain", "./", "m.prom/"]
READ_COMMANDS = [["task", "list"], ["jobs", "list"], ["sites", "list"], ["data", "list"], ["db", "current"], ["check"],
                 ["task", "show", "1"], ["jobs", "show", "1"], ["explain", "task", "1"], ["queue-shares", "show"]]


def _verbosity(argv: list[str]) -> int:
    return sum(len(word) - 1 for word in argv if re.fullmatch(r"-v+", word)) + argv.count("--verbose")


def _refusal_changes_nothing(stores, url: str, outcome) -> None:  # noqa: ANN001
    if _verbosity(list(outcome.argv)) >= 2 and "Traceback" in outcome.stderr:  # -vv: the error line comes after the traceback
        assert "internal error" not in outcome.stderr and outcome.exit_code in (0, 1, 2, 3), outcome
        if outcome.exit_code in (2, 3):
            assert outcome.stderr.rstrip("\n").split("\n")[-1].startswith("jedictl: error: "), outcome
    else:
        assert_no_crash(outcome)
        if outcome.exit_code in (2, 3):
            assert_one_error_line(outcome)
    if outcome.exit_code in (2, 3):
        changed = changed_tables(stores.template_dump, dump(url))
        assert changed == [], f"refused, but {changed} changed\n{outcome}"


@fuzz(120)
@given(argv=command_lines(), extra=st.lists(st.tuples(st.sampled_from(GLOBAL_OPTIONS), st.integers(0, 20)), min_size=1, max_size=3),
       db_at=st.none() | st.integers(0, 20))
def test_global_options_anywhere(stores, in_tmp_dir, argv, extra, db_at):
    """Global options (and mistakes with them) inserted at any place of a random command line; the store
    comes from JEDICTL_DB, and sometimes from --db too, so no option can send a command elsewhere."""
    url = stores.fresh()
    try:
        line = list(argv)
        for option, at in extra:
            at = min(at, len(line))
            line[at:at] = option
        if db_at is not None:
            at = min(db_at, len(line))
            line[at:at] = ["--db", url]
        _refusal_changes_nothing(stores, url, invoke(line, env={"JEDICTL_DB": url}))
    finally:
        stores.discard(url)


@fuzz(60)
@given(command=st.sampled_from(REFERENCE_COMMANDS), reference=st.sampled_from(REFERENCES), verbosity=st.sampled_from([[], ["-v"], ["-vv"]]))
def test_references_at_and_past_every_bound(stores, in_tmp_dir, command, reference, verbosity):
    url = stores.fresh()
    try:
        outcome = invoke([*command, reference, *verbosity, "--db", url])
        _refusal_changes_nothing(stores, url, outcome)
        assert "between -9223372036854775807" not in outcome.stderr, outcome
    finally:
        stores.discard(url)


@fuzz(25)
@given(path=st.sampled_from(METRICS_PATHS), agent=st.sampled_from([["run"], ["run", "-q"], ["refine"], ["watch"]]),
       by_env=st.booleans())
def test_metrics_files_that_cannot_be_written(stores, in_tmp_dir, path, agent, by_env):
    """Refused before any pass (exit 2, nothing written), or written -- never every pass committed and
    then an internal error, never a temporary file outside the file's own directory."""
    (in_tmp_dir / "plain").write_text("a file, not a directory")
    url = stores.fresh()
    try:
        if by_env:
            outcome = invoke([*agent, "--db", url], env={"JEDICTL_METRICS_FILE": path})
        elif agent[0] == "run":
            outcome = invoke([*agent, "--metrics-file", path, "--db", url])
        else:
            return
        assert_no_crash(outcome, codes=(0, 2))
        if outcome.exit_code == 2:
            _refusal_changes_nothing(stores, url, outcome)
        assert not list(in_tmp_dir.parent.glob(".jedictl-metrics.*")) and not list(Path("/").glob(".jedictl-metrics.*"))
    finally:
        stores.discard(url)


def _not_a_store(kind: str, folder: Path, payload: bytes) -> Path:
    path = folder / f"{kind}.db"
    if kind == "empty":
        path.touch()
    elif kind == "bytes":
        path.write_bytes(payload)
    elif kind == "theirs":
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
        conn.close()
    elif kind == "directory":
        path.mkdir()
    elif kind == "missing":
        path = folder / "no" / "such" / "store.db"
    return path


def _fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir" for p in folder.rglob("*")}


@fuzz(60)
@given(kind=st.sampled_from(["empty", "bytes", "theirs", "directory", "missing"]), payload=st.binary(max_size=600),
       command=st.sampled_from([*READ_COMMANDS, ["db", "init"], ["db", "upgrade"], ["refine"], ["submit", "-"], ["run", "-q"]]))
def test_stores_that_are_not_stores(in_tmp_dir, kind, payload, command):
    """Exit 3 (or 0 for `db current`), one line; nothing is written -- except by `db init` (or `db upgrade`)
    making a store of an empty or missing file."""
    folder = in_tmp_dir / uuid.uuid4().hex
    folder.mkdir()
    path = _not_a_store(kind, folder, payload)
    before = _fingerprint(folder)
    outcome = invoke([*command, "--db", str(path)], input="{}")
    assert_no_crash(outcome)
    empty = kind == "empty" or (kind == "bytes" and not payload)
    creates = (command == ["db", "init"] and (empty or kind == "missing")) or (command == ["db", "upgrade"] and empty)
    if not creates:
        assert outcome.exit_code in (0, 2, 3), outcome
        if outcome.exit_code:
            assert_one_error_line(outcome)
        assert _fingerprint(folder) == before, outcome
