"""The output check's policy (engine.finalize.post_check), without a store: what is a problem, what is
removed and why, what is kept, and what the error dialog and the pass report say."""

from __future__ import annotations

from jedictl.engine.finalize.post_check import (
    Disagreement,
    PostCheck,
    Unaccounted,
    checked,
    kept_output,
    post_check,
    removal,
    stale_dialog,
)


def entry(dataset_type: str = "output", **values) -> Unaccounted:
    base = dict(dataset="ds.out", dataset_type=dataset_type, entry_id=9, lfn="ds.out.000004.root", guid=None, size=10, checksum=None,
                has_replica=True)
    return Unaccounted(**{**base, **values})


def test_an_earlier_attempts_file_whose_input_another_job_finished_is_a_duplicate():
    found = removal(entry(record_status="failed", job_id=4, input_lfn="f.007.root", kept_lfn="ds.out.000014.root", kept_job_id=14))
    assert (found.kind, found.kept_lfn, found.job_id, found.entry_id) == ("duplicate", "ds.out.000014.root", 4, 9)
    assert found.reason == ("written by job 4 (its record is failed) for input f.007.root, which job 14 processed: "
                            "ds.out.000014.root is kept")


def test_a_file_of_an_attempt_with_no_replacement_or_of_no_job_is_a_stray():
    assert removal(entry(record_status="cancelled", job_id=4)).kind == "stray"
    assert removal(entry(record_status="cancelled", job_id=4)).reason == "written by job 4, which did not finish (its record is cancelled)"
    assert removal(entry()).reason == "no finished job of the task produced it"


def test_a_log_is_removed_only_when_no_replica_of_it_exists():
    assert removal(entry("log", has_replica=True, job_id=4, record_status="failed")) is None
    gone = removal(entry("log", has_replica=False, job_id=4, record_status="failed"))
    assert gone.kind == "incomplete_log" and "never completed" in gone.reason


def test_problems_name_what_disagrees_and_the_dialog_counts_the_rest():
    rows = [Disagreement("ds.out", f"o.{n}", 10, "ad:1", n, None, None, None) for n in range(4)]
    rows.append(Disagreement("ds.log", "l.1", 10, "ad:1", 7, 3, 11, "ad:1"))
    rows.append(Disagreement("ds.log", "l.2", 10, "ad:1", 8, 4, 10, "ad:2"))
    check = post_check(rows[-2:] + rows[:2], 6, [entry()])
    assert not check.passed and [p.what for p in check.problems] == ["size", "checksum", "missing", "missing"]
    assert check.dialog() == ("post-processing: 6 outputs disagree with the data catalog: l.1 of ds.log has size 11 in the catalog, "
                              "10 reported by its job; l.2 of ds.log has checksum ad:2 in the catalog, ad:1 reported by its job; "
                              "o.0 of ds.out is not in the data catalog; and 3 more (repair the catalog, then `task resume`)")
    assert check.summary() == "1 stray file removed, 6 outputs disagree with the data catalog"
    assert stale_dialog(check.dialog()) and not stale_dialog("scouts failed") and not stale_dialog(None)


def test_a_clean_check_passes_with_no_dialog():
    check = post_check([], 0, [entry("log")])
    assert check == PostCheck() and check.passed and check.dialog() is None and check.summary() == ""


def test_only_done_and_finished_tasks_are_checked():
    assert checked("done") and checked("finished")
    assert not any(checked(status) for status in ("failed", "broken", "aborted", "paused", "exhausted"))


def test_the_kept_file_is_another_jobs_output_in_the_same_dataset():
    outputs = [(4, "ds.out.000004.root", "ds.out"), (14, "ds.log.000014.tgz", "ds.log"), (14, "ds.out.000014.root", "ds.out")]
    assert kept_output(outputs, "ds.out", 4) == (14, "ds.out.000014.root")
    assert kept_output(outputs[:2], "ds.out", 4) is None
