"""Operator commands on tasks through the CLI, on both backends: kill, retry, finish, incexec, pause,
resume, avalanche, reassign, settle -- and the job summary of `task show`.

Tasks reach their final status through `jedictl finalize` where the story allows it; a few tests
set a status through the store to reach a case no short story does (every input finished for a
`retry` with nothing to do, children in chosen statuses, a broken task).
"""

from __future__ import annotations

import json
from datetime import datetime

import yaml
from sqlalchemy import select, update

from jedictl.store.schema import catalog_datasets, datasets, files, jobs, task_commands, tasks
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.cli.test_jobs_report import TASK, _consistent, _dispatch_all, _failed, _files, _finished, _report
from tests.helpers import row_counts, run_sql

NOW = "2026-12-01T10:00:00"
LATER = "2026-12-01T11:00:00"


def _task(cli, store, tmp_path, **params) -> int:
    _grid(cli, store, tmp_path)
    task_id = cli.json("submit", "-", db=store, input=json.dumps({**TASK, **params}))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    return task_id


def _dispatch(cli, store, count: int) -> list[dict]:
    """Hand `count` activated jobs to an executor, leaving the others queued."""
    site = cli.json("jobs", "list", "--status", "activated", "--limit", "1", db=store)[0]["site"]
    return cli.json("jobs", "dispatch", "--site", site, "--count", str(count), db=store)["jobs"]


def _command(cli, store, *args, code=0, now=NOW) -> dict:
    result = cli(*args, "--user", "alice", "--now", now, "-o", "json", db=store, code=code)
    return json.loads(result.stdout) if code == 0 else result


def _task_row(store, task_id: int) -> dict:
    return run_sql(store, lambda conn: dict(conn.execute(select(tasks).where(tasks.c.id == task_id)).one()._mapping))


def _job_statuses(store, task_id: int) -> dict[int, str]:
    return dict(run_sql(store, lambda conn: conn.execute(select(jobs.c.id, jobs.c.status).where(jobs.c.task_id == task_id)).all()))


def _counter(store, name: str, column: str):
    return run_sql(store, lambda conn: conn.execute(select(datasets.c[column]).where(datasets.c.name == name)).scalar_one())


def _history(cli, store, task_id: int) -> list[tuple[str, str]]:
    return [(h["status"], h["by"]) for h in cli.json("task", "show", str(task_id), db=store)["status_history"]]


def _set_final(store, task_id: int, status: str) -> None:
    """What finalize leaves: the task in its final status, the master input settled."""
    def write(conn):
        conn.execute(update(tasks).where(tasks.c.id == task_id).values(status=status, lease_owner=None, lease_expires_at=None))
        conn.execute(update(datasets).where(datasets.c.task_id == task_id, datasets.c.type == "input").values(status=status))
    run_sql(store, write)


# ------------------------------------------------------------------------------------------- kill

def test_kill_aborts_at_once_when_no_job_is_left_and_kills_the_children(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    child = cli.json("submit", "-", "--parent", str(task_id), db=store,
                     input=json.dumps({**TASK, "taskName": "child", "jobParameters": [
                         {"type": "template", "param_type": "input", "dataset": "ds.out", "value": "--in=${IN}"},
                         {"type": "template", "param_type": "output", "dataset": "ds.child", "value": "--out=ds.child.${SN}.root"}],
                         "log": {"type": "template", "param_type": "log", "dataset": "ds.child.log", "value": "ds.child.log.${SN}.log.tgz"}}))["task_id"]
    cli("refine", db=store)
    assert _task_row(store, child)["status"] == "pending"  # waiting for its parent
    dispatched = _dispatch_all(cli, store)
    _report(cli, store, _finished(dispatched[0]))  # one output is now in the data catalog
    result = _command(cli, store, "kill", str(task_id))
    assert (result["previous"], result["status"], result["outcome"]) == ("running", "aborted", "applied")
    assert set(_job_statuses(store, task_id).values()) == {"finished", "cancelled"}
    assert result["jobs"]["cancelled"] == len(_job_statuses(store, task_id)) - 1
    row = _task_row(store, task_id)
    assert row["ended_at"].isoformat() == NOW and row["lease_owner"] is None and row["error_dialog"] == "kill by alice"
    assert {d["status"] for d in cli.json("task", "show", str(task_id), db=store)["datasets"]} == {"failed"}
    state = run_sql(store, lambda conn: conn.execute(select(catalog_datasets.c.state).where(catalog_datasets.c.name == "ds.out")).scalar_one())
    assert state == "closed"
    assert [(h[0]) for h in _history(cli, store, task_id)][-2:] == ["aborting", "aborted"]
    # The waiting child was killed with it, recorded as given by jedictl.
    assert [(c["task_id"], c["status"]) for c in result["children"]] == [(child, "aborted")]
    commands = cli.json("task", "show", str(child), db=store)["commands"]
    assert [(c["command"], c["by"], c["comment"]) for c in commands] == [("kill", "jedictl", f"parent task {task_id} was aborted")]
    shown = cli.json("task", "show", str(task_id), db=store)
    assert [(c["command"], c["by"], c["at"], c["status"]) for c in shown["commands"]] == [("kill", "alice", NOW + "Z", "done")]
    assert "cancelled" in shown["commands"][0]["outcome"]
    _consistent(store)


def test_kill_waits_in_toabort_for_jobs_on_workers(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    running, sent = _dispatch_all(cli, store)[:2]
    cli("jobs", "heartbeat", str(running["job_id"]), db=store)
    result = _command(cli, store, "kill", str(task_id))
    assert (result["status"], result["outcome"], result["jobs"]["tobekilled"]) == ("toabort", "waiting", 1)
    statuses = _job_statuses(store, task_id)
    assert statuses[running["job_id"]] == "running" and statuses[sent["job_id"]] == "cancelled"
    assert {s for j, s in statuses.items() if j != running["job_id"]} == {"cancelled"}
    assert cli.json("jobs", "heartbeat", str(running["job_id"]), db=store)["items"][0]["command"] == "tobekilled"
    # Once the executor has stopped it, no job is live: finalize's `toabort -> aborted` can follow.
    assert cli.json("finalize", db=store)["counts"]["aborted"] == 0  # not while a killed job is on a worker
    _report(cli, store, _failed(running, diag="killed"))
    assert set(_job_statuses(store, task_id).values()) == {"cancelled"}
    assert cli.json("generate", db=store)["counts"]["jobs"] == 0  # nothing is generated for a task being aborted
    refused = _command(cli, store, "kill", str(task_id), code=2)
    assert refused.stderr.startswith(f"jedictl: error: cannot kill task {task_id}: its status is toabort (")
    assert cli.json("finalize", db=store)["counts"]["aborted"] == 1
    assert _task_row(store, task_id)["status"] == "aborted"
    _consistent(store)


# ---------------------------------------------------------------------------------- pause, resume

def test_paused_task_throttles_its_queued_jobs_until_resumed(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    queued = sorted(j for j, s in _job_statuses(store, task_id).items() if s == "activated")
    # An agent working on the task loses it: its next guarded write fails and it lets go.
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == task_id).values(
        lease_owner="generator-elsewhere", lease_expires_at=datetime.fromisoformat(LATER))))
    result = _command(cli, store, "task", "pause", str(task_id))
    assert _task_row(store, task_id)["lease_owner"] is None
    assert (result["previous"], result["status"], result["jobs"]) == ("running", "paused", {"throttled": len(queued)})
    assert set(_job_statuses(store, task_id).values()) == {"throttled"}
    assert _task_row(store, task_id)["old_status"] == "running"
    assert cli.json("jobs", "dispatch", "--site", "BNL_PROD", db=store)["jobs"] == []
    summary = cli.json("task", "show", str(task_id), db=store)["jobs"]
    assert summary == {"state": "submitted", "total": len(queued), "by_status": {"throttled": len(queued)}}
    assert _command(cli, store, "task", "pause", str(task_id), code=2).stderr.strip() == (
        f"jedictl: error: cannot pause task {task_id}: its status is paused "
        "(pause is refused in aborted, broken, done, failed, finished, paused)")

    result = _command(cli, store, "task", "resume", str(task_id), now=LATER)
    assert (result["previous"], result["status"], result["jobs"]) == ("paused", "running", {"activated": len(queued)})
    assert set(_job_statuses(store, task_id).values()) == {"activated"}
    row = _task_row(store, task_id)
    assert row["old_status"] is None and row["state_changed_at"].isoformat() == LATER
    assert cli.json("jobs", "dispatch", "--site", "BNL_PROD", db=store)["jobs"]
    assert [h[0] for h in _history(cli, store, task_id)][-2:] == ["paused", "running"]
    _consistent(store)


# ------------------------------------------------------------------------------------------ retry

def test_retry_of_a_failed_task_retries_only_its_unsuccessful_inputs(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path, maxAttempt=1)
    dispatched = _dispatch_all(cli, store)
    _report(cli, store, *[_failed(j) for j in dispatched[:2]], *[_finished(j) for j in dispatched[2:]])
    while cli.json("generate", db=store)["counts"]["jobs"]:  # the rest run to the end
        _report(cli, store, *[_finished(j) for j in _dispatch_all(cli, store)])
    failed_lfns = {i["lfn"] for j in dispatched[:2] for i in j["inputs"]}
    assert {lfn for lfn, f in _files(store).items() if f["status"] == "failed"} == failed_lfns
    assert cli.json("finalize", db=store)["counts"]["finished"] == 1  # 21 of 25 inputs processed

    result = _command(cli, store, "retry", str(task_id))
    assert (result["previous"], result["status"], result["files"]) == ("finished", "ready", {"retried": 4})
    records = _files(store)
    assert {(f["status"], f["max_attempt"]) for lfn, f in records.items() if lfn in failed_lfns} == {("ready", 6)}  # 1 + 5
    assert {f["status"] for lfn, f in records.items() if lfn not in failed_lfns} == {"finished"}
    row = _task_row(store, task_id)
    assert (row["attempt_nr"], row["old_status"], row["error_dialog"]) == (1, None, None)
    assert [h[0] for h in _history(cli, store, task_id)][-2:] == ["toretry", "ready"]
    assert _counter(store, "ds.in", "n_files_failed") == 0
    _consistent(store)
    # Only the retried files get jobs.
    assert cli.json("generate", "--seed", "2", db=store)["counts"]["jobs"] == 2
    new = _dispatch_all(cli, store)
    assert {i["lfn"] for j in new for i in j["inputs"]} == failed_lfns
    _report(cli, store, *[_finished(j) for j in new])
    assert _counter(store, "ds.in", "n_files_finished") == 25
    assert cli.json("finalize", db=store)["counts"]["done"] == 1
    _consistent(store)


def test_retry_with_max_attempt_and_of_a_task_with_nothing_to_retry(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path, maxAttempt=1)
    first = _dispatch_all(cli, store)[0]
    _report(cli, store, _failed(first))
    cli("jobs", "kill", "--task", str(task_id), db=store)  # killed jobs use the only attempt: every input failed
    assert cli.json("finalize", db=store)["counts"]["failed"] == 1
    result = _command(cli, store, "retry", str(task_id), "--max-attempt", "3")
    assert result["status"] == "ready"
    lfns = {i["lfn"] for i in first["inputs"]}
    assert {f["max_attempt"] for lfn, f in _files(store).items() if lfn in lfns} == {3}
    _consistent(store)

    # Every input finished: a retry finds nothing to do and leaves the task as it was.
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.task_id == task_id, files.c.type == "input")
                                             .values(status="finished")))
    run_sql(store, lambda conn: conn.execute(update(datasets).where(datasets.c.name == "ds.in").values(
        n_files_finished=25, n_files_used=25, n_files_to_be_used=25, n_files_failed=0)))
    _set_final(store, task_id, "done")
    assert "done" in _command(cli, store, "retry", str(task_id), code=2).stderr
    _set_final(store, task_id, "finished")
    result = _command(cli, store, "retry", str(task_id))
    assert (result["status"], result["outcome"], result["message"]) == ("finished", "unchanged", "no new or unprocessed files to retry")
    assert _task_row(store, task_id)["attempt_nr"] == 1


def test_retry_takes_the_children_along_unless_they_failed(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    kids = [cli.json("submit", "-", "--parent", str(task_id), db=store,
                     input=json.dumps({**TASK, "taskName": f"kid{i}", "allowTaskDuplication": True}))["task_id"] for i in range(2)]
    _set_final(store, task_id, "failed")
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == kids[0]).values(status="finished")))
    run_sql(store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == kids[1]).values(status="failed")))
    result = _command(cli, store, "retry", str(task_id))
    assert [c["task_id"] for c in result["children"]] == [kids[0]]
    assert [c["comment"] for c in cli.json("task", "show", str(kids[0]), db=store)["commands"]] == [f"retried with parent task {task_id}"]
    assert cli.json("task", "show", str(kids[1]), db=store)["commands"] == []


def test_a_broken_task_cannot_be_retried(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    _set_final(store, task_id, "broken")
    counts = row_counts(store)
    refused = _command(cli, store, "retry", str(task_id), code=2)
    assert refused.stderr.strip() == (f"jedictl: error: cannot retry task {task_id}: it is broken; "
                                      "fix the task definition and submit a new task")
    assert row_counts(store) == counts
    assert _command(cli, store, "retry", "999", code=2).stderr.strip() == "jedictl: error: task 999 does not exist"


# ---------------------------------------------------------------------------------------- incexec

def test_incexec_picks_up_new_files_with_the_new_parameters(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    while True:
        dispatched = _dispatch_all(cli, store)
        if not dispatched:
            break
        _report(cli, store, *[_finished(j) for j in dispatched])
        cli("generate", db=store)
    assert cli.json("finalize", db=store)["counts"]["done"] == 1
    new_files = tmp_path / "new.yaml"
    new_files.write_text(yaml.safe_dump([{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(26, 29)]))
    cli("data", "open", "ds.in", db=store)
    cli("data", "add-files", "ds.in", str(new_files), db=store)
    cli("data", "close", "ds.in", db=store)
    assert cli.json("feed", db=store)["counts"]["rescanned"] == 0  # a done task is not looked at again by itself

    changes = tmp_path / "changes.yaml"
    changes.write_text("nFilesPerJob: 1\nexcludedSite: [CERN-PROD_GRID]\n")
    result = _command(cli, store, "task", "incexec", str(task_id), str(changes))
    assert (result["previous"], result["status"]) == ("done", "defined")
    shown = cli.json("task", "show", str(task_id), db=store)
    assert shown["options"]["n_files_per_job"] == 1 and shown["options"]["excluded_sites"] == ["CERN-PROD_GRID"]
    assert next(d for d in shown["datasets"] if d["name"] == "ds.in")["status"] == "toupdate"
    assert shown["commands"][0]["parameters"] == {"changes": {"nFilesPerJob": 1, "excludedSite": ["CERN-PROD_GRID"]}}
    assert [h["status"] for h in shown["status_history"]][-2:] == ["toincexec", "defined"]
    _consistent(store)

    assert cli.json("feed", db=store)["counts"]["ready"] == 1
    assert _counter(store, "ds.in", "n_files") == 28
    assert cli.json("generate", "--seed", "3", db=store)["counts"]["jobs"] == 3  # one job per new file
    new = _dispatch_all(cli, store)
    assert sorted(i["lfn"] for j in new for i in j["inputs"]) == ["f.026.root", "f.027.root", "f.028.root"]
    assert "CERN-PROD_GRID" not in {j["site"] for j in cli.json("jobs", "list", "--task", str(task_id), "--status", "sent", db=store)}
    _consistent(store)


def test_incexec_refuses_parameters_that_shaped_the_records(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    _set_final(store, task_id, "finished")
    counts = row_counts(store)
    refused = cli("task", "incexec", str(task_id), "-", db=store, input="nEventsPerJob: 10\n", code=2)
    assert refused.stderr.strip().startswith("jedictl: error: nEventsPerJob: cannot be changed by incexec")
    assert cli("task", "incexec", str(task_id), "-", db=store, input="colour: red\n", code=2).stderr.strip() == (
        "jedictl: error: colour: unknown task parameter; did you mean cloud?")
    assert cli("task", "incexec", str(task_id), "-", db=store, input="nGBPerJob: 5\n", code=2).stderr.strip() == (
        "jedictl: error: n_files_per_job: cannot be combined with nGBPerJob")
    assert row_counts(store) == counts
    assert _task_row(store, task_id)["status"] == "finished"


def test_incexec_refuses_a_place_the_catalog_does_not_know(cli, store, tmp_path):
    """Like reassign: a site, cloud or excluded site nobody knows would leave the task with nowhere to
    run, or exclude nothing, and nobody told."""
    from tests.helpers import refused

    task_id = _task(cli, store, tmp_path)
    _set_final(store, task_id, "finished")
    for changes, message in (
            ("site: NOWHERE\n", "site: unknown site 'NOWHERE'"),
            ("site: cern-prod_grid\n", "site: unknown site 'cern-prod_grid'; did you mean 'CERN-PROD_GRID'?"),
            ("cloud: MARS\n", "cloud: unknown cloud 'MARS'"),
            ("excludedSite: [CERN-PROD_GRID, CERN-PROD_GIRD]\n", "excludedSite[1]: unknown site 'CERN-PROD_GIRD'; did you mean 'CERN-PROD_GRID'?"),
            ("excludedSite: 'BNL_PROD,NOPE*'\n", "excludedSite[1]: 'NOPE*' matches no site"),
            ("includedSite: [ATLANTIS]\n", "includedSite[0]: unknown site 'ATLANTIS'"),
            ("excluded_sites: [NOWHERE]\n", "excluded_sites[0]: unknown site 'NOWHERE'")):
        assert refused(cli, store, "task", "incexec", str(task_id), "-", input=changes) == f"jedictl: error: {message}", changes
    assert _task_row(store, task_id)["status"] == "finished"
    result = cli.json("task", "incexec", str(task_id), "-", db=store, input="cloud: US\nexcludedSite: ['CERN-*']\nsite: null\n")
    assert result["status"] == "defined"
    assert (_task_row(store, task_id)["cloud"], cli.json("task", "show", str(task_id), db=store)["options"]["excluded_sites"]) == ("US", ["CERN-*"])


# --------------------------------------------------------------------------------------- reassign

def test_reassign_closes_queued_jobs_and_regenerates_them_at_the_new_site(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    running = _dispatch(cli, store, 1)[0]
    cli("jobs", "heartbeat", str(running["job_id"]), db=store)
    before = _job_statuses(store, task_id)
    queued = [j for j, s in before.items() if s == "activated"]
    assert {j["site"] for j in cli.json("jobs", "list", "--task", str(task_id), db=store)} == {"BNL_PROD"}

    result = _command(cli, store, "task", "reassign", str(task_id), "--site", "CERN-PROD_GRID")
    assert (result["previous"], result["status"], result["jobs"]) == ("running", "running", {"closed": len(queued)})
    after = _job_statuses(store, task_id)
    assert {after[j] for j in queued} == {"closed"} and after[running["job_id"]] == "running"  # running jobs stay
    assert _task_row(store, task_id)["site"] == "CERN-PROD_GRID"
    assert [h[0] for h in _history(cli, store, task_id)][-2:] == ["toreassign", "running"]
    _consistent(store)

    generated = cli.json("generate", "--seed", "2", db=store)["counts"]["jobs"]
    assert generated > 0
    new = cli.json("jobs", "list", "--task", str(task_id), "--status", "activated", "--limit", "1000", db=store)
    assert len(new) == generated and {j["site"] for j in new} == {"CERN-PROD_GRID"}
    _consistent(store)


def test_reassign_to_a_nucleus_moves_the_outputs_and_checks_its_targets(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    assert _task_row(store, task_id)["nucleus"] == "BNL-ATLAS"
    for flag, value in (("--site", "NOWHERE"), ("--cloud", "MARS"), ("--nucleus", "NOPE")):
        assert f"unknown {flag[2:]}" in _command(cli, store, "task", "reassign", str(task_id), flag, value, code=2).stderr
    assert "name where to" in _command(cli, store, "task", "reassign", str(task_id), code=2).stderr
    result = _command(cli, store, "task", "reassign", str(task_id), "--nucleus", "CERN-PROD")
    assert result["status"] == "running"
    row = _task_row(store, task_id)
    assert (row["nucleus"], row["site"]) == ("CERN-PROD", None)
    destinations = {d["name"]: d["destination"] for d in cli.json("task", "show", str(task_id), db=store)["datasets"]}
    assert destinations["ds.out"] == destinations["ds.log"] == "CERN-PROD_DATADISK"


# ----------------------------------------------------------------------------------------- finish

def test_soft_finish_waits_for_running_jobs_then_settles_to_passed(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    running, sent = _dispatch(cli, store, 2)
    cli("jobs", "heartbeat", str(running["job_id"]), db=store)
    result = _command(cli, store, "task", "finish", "--soft", str(task_id))
    assert (result["status"], result["outcome"]) == ("finishing", "waiting")
    statuses = _job_statuses(store, task_id)
    assert (statuses[running["job_id"]], statuses[sent["job_id"]]) == ("running", "sent")  # on workers: they may end
    assert {s for j, s in statuses.items() if j not in (running["job_id"], sent["job_id"])} == {"cancelled"}
    assert cli.json("generate", db=store)["counts"]["jobs"] == 0
    nothing = cli.json("task", "settle", db=store)  # jobs are still on workers
    assert (nothing["pass"], nothing["counts"], nothing["items"]) == ("settle", {"applied": 0, "waiting": 0, "unchanged": 0}, [])
    settled = cli.json("task", "settle", str(task_id), db=store)["items"]
    assert [(s["task_id"], s["outcome"], s["message"]) for s in settled] == [(task_id, "waiting", "2 jobs still live")]

    _report(cli, store, _finished(running), _finished(sent))
    settled = cli.json("task", "settle", "--now", LATER, db=store)["items"]
    assert [(s["task_id"], s["status"], s["outcome"]) for s in settled] == [(task_id, "passed", "applied")]
    records = _files(store)
    assert sum(1 for f in records.values() if f["status"] == "finished") == 4
    assert {f["status"] for f in records.values()} == {"finished", "failed"}
    assert (_counter(store, "ds.in", "n_files_finished"), _counter(store, "ds.in", "n_files_failed")) == (4, 21)
    assert [h[0] for h in _history(cli, store, task_id)][-2:] == ["finishing", "passed"]
    assert cli.json("task", "settle", db=store)["items"] == []
    assert cli.json("finalize", db=store)["counts"]["finished"] == 1
    assert _task_row(store, task_id)["status"] == "finished"
    _consistent(store)


def test_hard_finish_kills_everything_and_passes_at_once(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path, failWhenGoalUnreached=True)
    running = _dispatch_all(cli, store)[0]
    cli("jobs", "heartbeat", str(running["job_id"]), db=store)
    result = _command(cli, store, "task", "finish", str(task_id))
    assert (result["status"], result["outcome"], result["files"]) == ("passed", "applied", {"failed": 25})
    assert set(_job_statuses(store, task_id).values()) == {"cancelled"}  # force-killed, also the running one
    assert (_counter(store, "ds.in", "n_files_failed"), _counter(store, "ds.in", "n_files_used")) == (25, 25)
    assert "fail_when_goal_unreached" not in _task_row(store, task_id)["options"]  # a forced finish drops the goal
    assert cli.json("finalize", db=store)["counts"]["failed"] == 1  # nothing was processed
    _consistent(store)


# -------------------------------------------------------------------------------------- avalanche

def test_avalanche_ends_scouting(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps(WORKED_EXAMPLE))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)
    assert _task_row(store, 1)["status"] == "scouting"
    result = _command(cli, store, "task", "avalanche", "1")
    assert (result["previous"], result["status"]) == ("scouting", "scouted")
    assert cli.json("generate", db=store)["counts"]["jobs"] == 0  # nothing more until finalize has released the rest
    assert _command(cli, store, "task", "avalanche", "1", code=2).stderr.strip() == (
        "jedictl: error: cannot avalanche task 1: its status is scouted (avalanche needs scouting)")
    cli("finalize", db=store)
    assert _task_row(store, 1)["status"] == "running"
    assert cli.json("generate", "--seed", "2", db=store)["counts"]["jobs"] == 3  # the 5 files left, 2 per job


# ---------------------------------------------------------------------------------- job summary

def test_task_show_summarises_the_jobs_by_gangas_precedence(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    total = len(_job_statuses(store, task_id))
    assert cli.json("task", "show", str(task_id), db=store)["jobs"] == {"state": "submitted", "total": total, "by_status": {"activated": total}}
    dispatched = _dispatch_all(cli, store)
    cli("jobs", "heartbeat", str(dispatched[0]["job_id"]), db=store)
    _report(cli, store, _failed(dispatched[1]), _finished(dispatched[2]))
    summary = cli.json("task", "show", str(task_id), db=store)["jobs"]
    assert summary["state"] == "running" and summary["by_status"]["running"] == 1
    assert summary["by_status"]["failed"] == summary["by_status"]["finished"] == 1
    _report(cli, store, *[_finished(j) for j in dispatched if j not in dispatched[1:3]])
    summary = cli.json("task", "show", str(task_id), db=store)["jobs"]
    assert (summary["state"], summary["by_status"]) == ("failed", {"finished": total - 1, "failed": 1})
    table = cli("task", "show", str(task_id), db=store).stdout
    assert "jobs               state: failed\n" in table  # the summary as key: value lines


def test_commands_are_recorded_with_their_comment(cli, store, tmp_path):
    task_id = _task(cli, store, tmp_path)
    cli("task", "pause", str(task_id), "--comment", "site downtime", "--now", NOW, db=store)
    rows = run_sql(store, lambda conn: [dict(r._mapping) for r in conn.execute(select(task_commands))])
    assert len(rows) == 1
    row = rows[0]
    assert (row["command"], row["comment"], row["status"], row["requested_at"].isoformat()) == ("pause", "site downtime", "done", NOW)
    assert row["requested_by"] and row["outcome"].startswith("no new jobs")
    assert _task_row(store, task_id)["error_dialog"] == "site downtime"


def test_free_text_is_stored_escaped_and_never_echoed_raw(cli, store, tmp_path):
    """A comment or a name with terminal escapes (clear the screen, retitle the window, reorder text)
    is kept with them written out, so `task show` or a log never drives the terminal it is printed on."""
    from tests.helpers import refused

    task_id = _task(cli, store, tmp_path)
    comment = "downtime\x1b[2J\x1b]0;owned\x07\nsecond line\u202egnp.exe"
    result = cli("task", "pause", str(task_id), "--comment", comment, "--user", "eve\x1b[31m", "--now", NOW, db=store)
    assert "\x1b" not in result.stdout + result.stderr
    row = run_sql(store, lambda conn: dict(conn.execute(select(task_commands)).one()._mapping))
    stored = "downtime\\x1b[2J\\x1b]0;owned\\x07\\nsecond line\\u202egnp.exe"
    assert (row["comment"], row["requested_by"]) == (stored, "eve\\x1b[31m")
    assert _task_row(store, task_id)["error_dialog"] == stored
    for output in ("table", "json", "yaml", "tsv"):
        shown = cli("task", "show", str(task_id), "-o", output, db=store).stdout
        assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown, output
    assert refused(cli, store, "task", "resume", str(task_id), "--comment", "x" * 4001) == \
        "jedictl: error: --comment: must be at most 4000 characters"
    assert refused(cli, store, "task", "resume", str(task_id), "--user", "u" * 129) == \
        "jedictl: error: --user: must be at most 128 characters"
