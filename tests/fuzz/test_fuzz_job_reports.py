"""Fuzzing what executors send: `jobs report` (JSON lines) and `jobs heartbeat --from`, with random
fields, ids, statuses and values, against a store with jobs out at executors. Whatever arrives, no
traceback, refused lines change nothing, and the counters stay equal to the rows they count."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import any_text, edge_values, json_scalars, json_values
from tests.fuzz.support import assert_no_crash, assert_one_error_line, changed_tables, dump, fuzz, invoke

STATUSES = ("finished", "failed", "running", "starting", "holding", "transferring", "sent", "cancelled", "closed", "")
METRICS = ("error_diag", "trans_exit_code", "wall_time", "cpu_time", "max_pss", "max_rss", "n_events", "started_at", "ended_at")
PILOT_NAMES = ("pilotErrorCode", "exeErrorCode", "transExitCode", "maxPSS", "cpuConsumptionTime", "startTime", "endTime", "nEvents")


def _plausible(job: dict, status: str) -> dict:
    """What a well-behaved executor would send for `job`."""
    line: dict = {"job_id": job["job_id"], "status": status, "attempt_nr": job["attempt_nr"], "wall_time": 100, "cpu_time": 90,
                  "max_pss": 500_000, "n_events": 10, "started_at": "2026-01-01T00:00:00Z", "ended_at": 1767229200}
    if status == "finished":
        line["outputs"] = [{"lfn": output["lfn"], "size": 1000, "checksum": "ad:01234567", "guid": "G", "n_events": 10} for output in job["outputs"]]
    else:
        line.update(error_source="pilot", error_code=1212, error_diag="Payload exceeded memory limit")
    return line


@st.composite
def report_line(draw: st.DrawFn, jobs: list[dict]) -> str:
    """One line: a plausible report about a dispatched job with a few fields replaced, renamed or dropped,
    or junk."""
    kind = draw(st.sampled_from(["edited", "edited", "edited", "edited", "junk"]))
    if kind == "junk":
        return draw(st.one_of(any_text.map(lambda t: t.replace("\n", " ")), json_values.map(json.dumps), st.just("[" * 3000)))
    line = _plausible(draw(st.sampled_from(jobs)), draw(st.sampled_from(["finished", "failed"])))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["edge", "edge", "value", "drop", "pilot", "output", "cannot-be-right"]))
        if action == "cannot-be-right":  # issue 17: what an executor must not get away with
            _cannot_be_right(draw, line)
            continue
        key = draw(st.sampled_from(sorted(line) + list(METRICS) + ["job_id", "status", "attempt_nr", "colour"]))
        if action == "edge":
            line[key] = draw(edge_values)
        elif action == "value":
            line[key] = draw(st.sampled_from(STATUSES) if key == "status" else json_scalars)
        elif action == "drop":
            line.pop(key, None)
        elif action == "pilot":
            line[draw(st.sampled_from(PILOT_NAMES))] = draw(edge_values | json_scalars)
        elif isinstance(line.get("outputs"), list) and line["outputs"]:
            output = draw(st.sampled_from(line["outputs"]))
            if isinstance(output, dict):
                    output[draw(st.sampled_from(["lfn", "size", "checksum", "guid", "n_events", "no_output", "colour"]))] = draw(edge_values)
    return json.dumps(line)


#: Checksums that are not ad:+8 or md5:+32 hex digits, output names no job was told to write.
BAD_CHECKSUMS = ("ad:123", "ad:0a1b2c3d4", "md5:00ff", "AD:0A1B2C3D", "ad:0a1b2c3g", "adler32:0a1b2c3d", "0a1b2c3d", "ad:", "x'; --")
FOREIGN_LFNS = ("../../../etc/shadow", "/etc/passwd", "other.root", "")


def _cannot_be_right(draw: st.DrawFn, line: dict) -> None:
    edit = draw(st.sampled_from(["checksum", "times", "foreign", "diag"]))
    if edit == "checksum" and line.get("outputs"):
        line["outputs"][0]["checksum"] = draw(st.sampled_from(BAD_CHECKSUMS))
    elif edit == "times":
        line["started_at"], line["ended_at"] = "2026-01-02T00:00:00Z", draw(st.sampled_from(["2026-01-01T23:59:59Z", 1767225599]))
    elif edit == "foreign":
        line.setdefault("outputs", []).append({"lfn": draw(st.sampled_from(FOREIGN_LFNS)), "size": 1})
    else:  # over the limit and with terminal escapes: cut and escaped, never a refusal
        line["error_diag"] = draw(st.sampled_from(["\x1b[2J", "\x07", "\u202e", "x"])) * draw(st.sampled_from([1, 4001, 10_000]))


@fuzz(50)
@given(data=st.data())
def test_job_reports_never_crash_and_keep_the_store_consistent(stores, data):
    lines = data.draw(st.lists(report_line(stores.dispatched), min_size=1, max_size=6))
    text = "\n".join(lines) + "\n"
    url = stores.fresh()
    try:
        outcome = invoke(["jobs", "report", "-", "-o", "json", "--db", url], input=text)
        assert_no_crash(outcome, codes=(0, 1, 2))
        changed = changed_tables(stores.template_dump, dump(url))
        if outcome.exit_code == 2:
            assert_one_error_line(outcome)
            assert changed == [], outcome
        else:
            items = json.loads(outcome.stdout)["items"]
            # One item per line; stdin and files are read with universal newlines, so a \r ends a line too.
            assert len(items) == sum(1 for line in re.split(r"\r\n|\r|\n", text) if line.strip()), outcome
            if all(item["outcome"] in ("refused", "duplicate", "conflict") for item in items):
                assert changed == [], f"every line refused, but {changed} changed\n{outcome}"
            # A job ends by one report: every other final report of it is a duplicate or a conflict.
            applied = [item["job_id"] for item in items if item["outcome"] == "applied"]
            assert len(applied) == len(set(applied)), outcome
            assert (outcome.exit_code == 1) == any(item["outcome"] in ("refused", "conflict") for item in items), outcome
            stored = {row[0]: row for row in dump(url)["jobs"]}
            assert not any(isinstance(value, str) and re.search("[\x00-\x08\x0b-\x1f\x7f]", value)
                           for row in stored.values() for value in row), "a report stored a raw control character"
        # The agents then take what the reports left: scouts measured, retries generated, tasks finished.
        assert_no_crash(invoke(["run", "--seed", "1", "--db", url]), codes=(0, 1))
        assert_no_crash(invoke(["check", "--db", url]), codes=(0,))
    finally:
        stores.discard(url)


@fuzz(25)
@given(data=st.data())
def test_heartbeats_never_crash(stores, data):
    jobs = stores.dispatched
    beats = data.draw(st.lists(st.one_of(
        st.builds(lambda job, status, attempt: json.dumps({"job_id": job["job_id"], "status": status, "attempt_nr": attempt}),
                  st.sampled_from(jobs), st.sampled_from(STATUSES) | any_text, edge_values | st.sampled_from([1, 2])),
        json_values.map(json.dumps),
    ), min_size=1, max_size=4))
    url = stores.fresh()
    try:
        outcome = invoke(["jobs", "heartbeat", "--from", "-", "-o", "json", "--db", url], input="\n".join(beats) + "\n")
        assert_no_crash(outcome, codes=(0, 1, 2))
        if outcome.exit_code == 2:
            assert_one_error_line(outcome)
            assert changed_tables(stores.template_dump, dump(url)) == [], outcome
        assert_no_crash(invoke(["check", "--db", url]), codes=(0,))
    finally:
        stores.discard(url)
