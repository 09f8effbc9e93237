"""`jedictl split`: the fixed JSON contract end to end, tables for humans, one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import invoke

NO_SITE = ("No sites are available to submit the job because the location of its input(s) do not pass "
           "the site whitelist/blacklist restrictions (WMAgent).")

FILESET = {
    "closed": True,
    "files": [
        {"lfn": "/store/a.root", "size": 1000, "events": 150, "locations": ["T1_A"], "runs": {"1": [1, 2, 3]}},
        {"lfn": "/store/b.root", "size": 1000, "events": 50, "locations": ["T1_A"], "runs": {"1": [4, 5]}},
        {"lfn": "/store/c.root", "size": 1000, "events": 0, "locations": ["T2_B"], "runs": {"2": [1]}},
    ],
}


def run(*args: str, document: object = FILESET, code: int = 0):
    result = invoke(["split", *args, "-"], input=json.dumps(document) if not isinstance(document, str) else document)
    assert result.exit_code == code, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result


def jobs(*args: str, document: object = FILESET) -> list[dict]:
    return json.loads(run(*args, "-o", "json", document=document).stdout)["jobs"]


def test_event_based_contract():
    assert jobs("--algorithm", "EventBased", "--param", "events_per_job=100") == [
        {"files": ["/store/a.root"], "first_event": 0, "last_event": 99, "lumis": None, "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1},
        {"files": ["/store/a.root"], "first_event": 100, "last_event": 149, "lumis": None, "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1},
        {"files": ["/store/b.root"], "first_event": 0, "last_event": 49, "lumis": None, "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1},
        {"files": ["/store/c.root"], "first_event": 0, "last_event": None, "lumis": None, "locations": ["T2_B"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 2},
    ]


def test_lumi_based_contract_and_failed_jobs():
    assert jobs("-a", "LumiBased", "-p", "lumis_per_job=2", "-p", "siteBlacklist=T2_B") == [
        {"files": ["/store/a.root"], "first_event": None, "last_event": None, "lumis": {"1": [[1, 2]]}, "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1},
        {"files": ["/store/a.root", "/store/b.root"], "first_event": None, "last_event": None, "lumis": {"1": [[3, 3], [4, 4]]},
         "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1},
        {"files": ["/store/b.root"], "first_event": None, "last_event": None, "lumis": {"1": [[5, 5]]}, "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1},
        {"files": ["/store/c.root"], "first_event": None, "last_event": None, "lumis": {"2": [[1, 1]]}, "locations": [], "failed": True, "short": False, "failed_reason": NO_SITE, "failed_code": 71101, "parents": [], "group": 2},
    ]


def test_jedi_with_panda_and_jedictl_option_names(tmp_path: Path):
    path = tmp_path / "files.json"
    path.write_text(json.dumps(FILESET))
    result = invoke(["split", "--algorithm", "jedi", "--param", "nFilesPerJob=2", "-o", "json", str(path)])
    assert result.exit_code == 0, result.stderr
    assert [job["files"] for job in json.loads(result.stdout)["jobs"]] == [["/store/a.root", "/store/b.root"], ["/store/c.root"]]
    assert [job["short"] for job in json.loads(result.stdout)["jobs"]] == [False, True]  # the table's "short", for scripts too
    events = jobs("-a", "jedi", "-p", "n_events_per_job=100")
    # a ends at event 149, so b's range starting at 0 continues the job (100 events from a's event 100);
    # c has no events and joins as a whole file. Locations are the sites holding every file of the job.
    assert [(job["files"], job["first_event"], job["last_event"], job["locations"]) for job in events] == [
        (["/store/a.root"], 0, 99, ["T1_A"]), (["/store/a.root", "/store/b.root", "/store/c.root"], 100, 199, [])]
    assert events[0]["lumis"] is None and events[0]["failed"] is False
    # scouts: one file per job; a closed, direct-IO site and boundary rules are accepted too
    assert len(jobs("-a", "jedi", "-p", "scout=true", "-p", "maxwdir=20000", "-p", "direct_access_lan=false")) == 3


def test_open_fileset_waits_for_enough_work():
    open_set = dict(FILESET, closed=False)
    assert jobs("-a", "MinFileBased", "-p", "files_per_job=2", document=open_set) == [
        {"files": ["/store/a.root", "/store/b.root"], "first_event": None, "last_event": None, "lumis": None,
         "locations": ["T1_A"], "failed": False, "short": False, "failed_reason": None, "failed_code": None, "parents": [], "group": 1}]


def test_table_output_and_summary_on_stderr():
    result = run("-a", "FileBased", "-p", "files_per_job=2")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["job", "group", "n_files", "files", "events", "lumis", "locations", "status"]
    assert lines[2].split() == ["1", "1", "2", "/store/a.root,/store/b.root", "T1_A", "ok"]
    assert result.stderr.strip() == "2 jobs from 3 files"
    assert run("-a", "FileBased", "-q").stderr == ""


def test_jobs_per_group_starts_a_new_job_group_as_wmcore_does():
    """WMCore's FileBased/MinFileBased open a job group per location set and, with jobs_per_group, a new one
    once a group holds more than jobs_per_group jobs (`>`: groups of jobs_per_group + 1)."""
    files = {"closed": True, "files": [{"lfn": f"/store/{i}.root", "locations": ["T1_A" if i < 7 else "T2_B"]} for i in range(9)]}
    for algorithm in ("FileBased", "MinFileBased"):
        assert [job["group"] for job in jobs("-a", algorithm, "-p", "files_per_job=1", document=files)] == [1] * 7 + [2] * 2
        assert [job["group"] for job in jobs("-a", algorithm, "-p", "files_per_job=1", "-p", "jobs_per_group=2", document=files)] == [
            1, 1, 1, 2, 2, 2, 3, 4, 4]  # the T2_B location set starts group 4
        table = run("-a", algorithm, "-p", "files_per_job=3", "-p", "jobs_per_group=1", document=files).stdout.splitlines()
        assert [line.split()[:2] for line in table[2:]] == [["1", "1"], ["2", "1"], ["3", "2"], ["4", "3"]]
    assert {job["group"] for job in jobs("-a", "jedi", "-p", "nFilesPerJob=1", document=files)} == {None}
    assert "--param jobs_per_group: must be at least 0" in run("-a", "FileBased", "-p", "jobs_per_group=-1", document=files,
                                                                   code=2).stderr


PARENTED = {"closed": False, "files": [
    {"lfn": "/u/a-1", "size": 400, "events": 100, "first_event": 100, "locations": ["T1_A"], "runs": {"1": [7]}, "parents": ["/d/A"]},
    {"lfn": "/u/a-0", "size": 400, "events": 100, "first_event": 0, "locations": ["T1_A"], "runs": {"1": [7]}, "parents": ["/d/A"]},
    {"lfn": "/u/b-0", "size": 300, "events": None, "locations": ["T1_A"], "runs": {"1": [8]}, "parents": ["/d/B", "/d/A"]},
    {"lfn": "/u/c-0", "size": 300, "events": 100, "locations": ["T1_A"], "runs": {"1": [9]}, "parents": ["/d/C"]},
    {"lfn": "/u/d-0", "size": 900, "events": 100, "locations": ["T1_A"], "runs": {"2": [1]}, "parents": ["/d/D"]},
]}


def test_wmbs_merge_by_size_keeps_each_parents_outputs_together():
    merged = jobs("-a", "WMBSMergeBySize", "-p", "min_merge_size=500", "-p", "max_merge_size=1200", document=PARENTED)
    # b-0's lowest parent is /d/A: one merge unit with a-0 and a-1, ordered by first event; c-0 waits (300 bytes).
    assert [job["files"] for job in merged] == [["/u/a-0", "/u/b-0", "/u/a-1"], ["/u/d-0"]]
    waiting = jobs("-a", "WMBSMergeBySize", "-p", "min_merge_size=500", "-p", "max_merge_size=1200", "-p",
                   "unfinished_parents=/d/A", document=PARENTED)
    assert [job["files"] for job in waiting] == [["/u/d-0"]]  # the unit of /d/A waits for its parent's jobs


def test_include_parents_and_unknown_events():
    (job,) = jobs("-a", "FileBased", "-p", "include_parents=true", document=PARENTED)
    assert job["parents"] == ["/d/A", "/d/B", "/d/C", "/d/D"]
    assert all(job["parents"] == [] for job in jobs("-a", "FileBased", document=PARENTED))
    events = jobs("-a", "EventBased", "-p", "events_per_job=100", "-p", "include_parents=true", document=PARENTED)
    assert [(job["files"], job["first_event"], job["last_event"], job["parents"]) for job in events][2] == (
        ["/u/b-0"], 0, None, ["/d/B", "/d/A"])  # unknown events: one job over the whole file


def test_yaml_and_tsv():
    assert run("-a", "FileBased", "-o", "yaml").stdout.startswith("jobs:\n- files:\n")
    assert run("-a", "FileBased", "-o", "tsv").stdout.splitlines()[0].split("\t")[:3] == ["job", "group", "n_files"]
    assert run("-a", "jedi", "-o", "tsv").stdout.splitlines()[0].split("\t")[:3] == ["job", "n_files", "files"]  # JEDI: no groups


def test_needs_no_store():
    result = invoke(["split", "-a", "FileBased", "--db", "postgresql+psycopg://x:y@127.0.0.1:1/none", "-o", "json", "-"],
                           input=json.dumps(FILESET))
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("args,document,message", [
    (("-a", "FileBased"), "{not json", "jedictl: error: stdin: line 1 column 2: Expecting property name enclosed in double quotes (invalid JSON)"),
    (("-a", "FileBased"), [], 'jedictl: error: input: must be a JSON object {"closed": ..., "files": [...]}'),
    (("-a", "FileBased"), {"files": [{"lfn": "a"}, {"lfn": "b", "events": -1}]}, "jedictl: error: files[1].events: must be a whole number, 0 or more"),
    (("-a", "FileBased"), {"files": [{"lfn": "a", "runs": {"x": [1]}}]}, "jedictl: error: files[0].runs.x: run numbers must be whole numbers"),
    (("-a", "FileBased"), {"files": [{"lfn": "a", "runs": {"1": [0]}}]}, "jedictl: error: files[0].runs.1[0]: lumi sections are whole numbers from 1"),
    (("-a", "FileBased"), {"files": [{"lfn": "a", "event": 3}]}, ("jedictl: error: files[0].event: unknown field (known: lfn, size, events, "
                                                                    "locations, runs, first_event, insert_time, parents, boundary_id, lumi_block)")),
    (("-a", "FileBased"), {"files": [{"lfn": "a"}, {"lfn": "a"}]}, "jedictl: error: files[1].lfn: duplicate lfn (also files[0])"),
    (("-a", "FileBased"), {"closed": "yes", "files": []}, "jedictl: error: closed: must be true or false"),
    (("-a", "RunBased"), {"files": [{"lfn": "a"}]}, "jedictl: error: files[0].runs: RunBased needs the run of every file"),
    (("-a", "Nope"), FILESET, ("jedictl: error: --algorithm: unknown algorithm 'Nope' (known: FileBased, MinFileBased, EventBased, "
                               "LumiBased, EventAwareLumiBased, SizeBased, RunBased, ParentlessMergeBySize, WMBSMergeBySize, SiblingProcessingBased, "
                               "Harvest, jedi)")),
    (("-a", "EventBased", "-p", "events_per_job=ten"), FILESET, "jedictl: error: --param events_per_job: must be a whole number"),
    (("-a", "EventBased", "-p", "events_per_job"), FILESET, "jedictl: error: --param: 'events_per_job' must be KEY=VALUE"),
    (("-a", "jedi", "-p", "nFilesPerJob=2", "-p", "nGBPerJob=5"), FILESET,
     "jedictl: error: --param nFilesPerJob: cannot be combined with --param nGBPerJob"),
    (("-a", "jedi", "-p", "nFilesPerJob=0"), FILESET, "jedictl: error: --param nFilesPerJob: must be at least 1"),
    (("-a", "jedi", "-p", "groupBoundaryID=9"), FILESET, "jedictl: error: groupBoundaryID: must be 1, 2, 3 or 4"),
    (("-a", "FileBased"), {"files": [{"lfn": "a", "parents": "p"}]}, "jedictl: error: files[0].parents: must be a list of parent LFNs"),
    (("-a", "FileBased"), {"files": [{"lfn": "a", "parents": ["a"]}]}, "jedictl: error: files[0].parents: a file cannot be its own parent"),
    (("-a", "FileBased", "-p", "include_parents=true"), FILESET,
     "jedictl: error: --param include_parents: is true but no input file has parents (files[].parents)"),
    (("-a", "SizeBased", "-p", "include_parents=true"), FILESET, ("jedictl: error: --param include_parents: unknown parameter for "
                                                                  "SizeBased; only FileBased, MinFileBased, EventBased, LumiBased, "
                                                                  "EventAwareLumiBased take it")),
    (("-a", "LumiBased", "-p", "max_events_per_lumi=5"), FILESET,
     "jedictl: error: --param max_events_per_lumi: unknown parameter for LumiBased; only EventAwareLumiBased take it"),
    (("-a", "EventAwareLumiBased", "-p", "max_events_per_lumi=0"), FILESET,
     "jedictl: error: --param max_events_per_lumi: must be at least 1"),
    (("-a", "WMBSMergeBySize", "-p", "max_wait_time=5"), FILESET,
     "jedictl: error: --param max_wait_time: unknown parameter for WMBSMergeBySize; only ParentlessMergeBySize take it"),
])
def test_bad_input_is_exit_2_with_one_line_naming_the_field(args, document, message):
    result = run(*args, document=document, code=2)
    assert result.stdout == ""
    assert result.stderr.splitlines() == [message]


def test_unreadable_file_is_exit_2(tmp_path: Path):
    result = invoke(["split", "-a", "FileBased", str(tmp_path / "missing.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"jedictl: error: {tmp_path / 'missing.json'}: cannot read the file")
