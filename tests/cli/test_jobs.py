"""`jedictl jobs list|show`: what a job is now -- its files' current records, its outcome, readable at 80 columns."""

from __future__ import annotations

from tests.cli.test_jobs_report import _dispatch_all, _failed, _finished, _report, _task


def test_show_lists_each_file_as_it_is_now_and_the_job_s_outcome(cli, store, tmp_path):
    _task(cli, store, tmp_path)
    done, failed, running = _dispatch_all(cli, store)[:3]
    _report(cli, store, _finished(done, trans_exit_code=0, max_rss=812_000))
    _report(cli, store, _failed(failed, source="exe", code=65, diag="segfault in payload", trans_exit_code=139, max_rss=4_000_000))
    cli("jobs", "heartbeat", str(running["job_id"]), db=store)
    cli("jobs", "kill", str(running["job_id"]), db=store)

    shown = cli.json("jobs", "show", done["task_job"], db=store)
    assert (shown["status"], shown["trans_exit_code"], shown["max_rss"], shown["command_to_pilot"]) == ("finished", 0, 812_000, None)
    outputs = {f["lfn"]: f for f in shown["files"] if f["type"] in ("output", "log")}
    expected = {o["lfn"]: (1000 + i, f"ad:0000000{i}") for i, o in enumerate(done["outputs"])}
    # The sizes and checksums the report gave, not the empty values the job was generated with.
    assert {lfn: (f["size"], f["checksum"], f["status"]) for lfn, f in outputs.items()} == {
        lfn: (size, checksum, "finished") for lfn, (size, checksum) in expected.items()}
    assert {f["status"] for f in shown["files"] if f["type"] == "input"} == {"finished"}

    shown = cli.json("jobs", "show", str(failed["job_id"]), db=store)
    assert (shown["error_source"], shown["error_code"], shown["error_diag"], shown["trans_exit_code"], shown["max_rss"]) == (
        "exe", 65, "segfault in payload", 139, 4_000_000)
    inputs = [f for f in shown["files"] if f["type"] == "input"]
    # The inputs went back to the pool for their next attempt: this job ran them as attempt 0.
    assert inputs and {(f["status"], f["attempt_nr"], f["job_attempt_nr"]) for f in inputs} == {("ready", 1, 0)}

    assert cli.json("jobs", "show", str(running["job_id"]), db=store)["command_to_pilot"] == "tobekilled"
    table = cli("jobs", "show", str(failed["job_id"]), db=store).stdout
    assert "trans_exit_code" in table and "segfault in payload" in table and "max_rss" in table


def test_list_at_80_columns_is_one_line_per_job(cli, store, tmp_path):
    from rich.cells import cell_len

    _task(cli, store, tmp_path)
    env = {"TTY_COMPATIBLE": "1", "COLUMNS": "80"}
    lines = cli("jobs", "list", "--limit", "5", db=store, env=env).stdout.splitlines()
    assert len(lines) == 2 + 5 and all(cell_len(line) <= 80 for line in lines)
    assert lines[0].split()[:4] == ["job_id", "task_job", "status", "site"]
    picked = cli("jobs", "list", "--limit", "1", "--columns", "task_job,kind,scout", db=store, env=env).stdout.splitlines()
    assert picked[0].split() == ["task_job", "kind", "scout"] and picked[2].split()[1:] == ["normal", "false"]
    assert "kind" in cli("jobs", "list", "--limit", "1", "--wide", db=store).stdout.splitlines()[0].split()
