"""Per-user caps end to end on both backends (issue 19, item 4; docs/analysis.md "Per-user caps").

- a user at CAP_RUNNING_USER_JOBS (`user_caps.running_user_jobs`) has his activated jobs throttled by
  `jedictl watch` (not handed out by `jobs dispatch`), and activated again once his running jobs fall
  below 90 % of the cap; another user's jobs are untouched; a throttled job never released is closed
  after 7 days; the jobs of a paused task are left to `task resume`;
- no new jobs for a user over his running cap, or with more queued than twice it;
- the active tasks of a user per label are capped at submission (MAX_ACTIVE_TASKS_PER_USER_<label>);
- a user whose assigned jobs wait for more input than the prestage or transfer limit has those tasks
  throttled until the backlog falls.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import yaml
from sqlalchemy import select

from jedictl.clock import parse_time
from jedictl.store.invariants import check_all
from jedictl.store.schema import jobs, tasks
from tests.helpers import run_sql

T0 = parse_time("2030-04-01T08:00:00")
SITES = ("DATA_SITE", "IDLE_B")


def at(delta: timedelta = timedelta(), **settings: str) -> dict[str, str]:
    return {"JEDICTL_NOW": (T0 + delta).isoformat(), **{f"JEDICTL_USER_CAPS__{key.upper()}": value for key, value in settings.items()}}


GRID = {
    "storage_endpoints": [{"name": f"{site}_DISK", "kind": "disk", "free_gb": 100000, "total_gb": 200000} for site in SITES]
    + [{"name": "ARCHIVE_TAPE", "kind": "tape", "free_gb": 100000, "total_gb": 200000}],
    "sites": [{"name": site, "cloud": "WORLD", "core_count": 1, "core_power": 10.0, "max_memory": 4000, "max_walltime": 172800,
               "max_scratch_mb": 60000, "read_endpoints": [f"{site}_DISK"], "write_endpoints": [f"{site}_DISK"]} for site in SITES],
}


def dataset(name: str, n_files: int, *endpoints: str, size: int = 1_000_000) -> dict:
    files = [{"lfn": f"{name}.{i:03d}.root", "size": size, "events": 100} for i in range(1, n_files + 1)]
    return {"name": name, "state": "closed", "files": files, "replicas": [{"endpoint": endpoint} for endpoint in endpoints]}


def task(user: str, input_name: str, **changes) -> str:
    document = {
        "taskName": f"user.{user}.{input_name}/", "vo": "atlas", "prodSourceLabel": "user", "taskType": "anal",
        "processingType": "panda-client-jedi-run", "userName": user, "nFilesPerJob": 1, "skipScout": True, "maxAttempt": 5,
        "jobParameters": [
            {"type": "template", "param_type": "input", "dataset": input_name, "value": "-i ${IN}"},
            {"type": "template", "param_type": "output", "dataset": f"user.{user}.{input_name}_out/", "value": f"user.{user}.${{SN}}.root"},
        ],
        "log": {"type": "template", "param_type": "log", "dataset": f"user.{user}.{input_name}.log/", "value": f"user.{user}.${{SN}}.log.tgz"},
    }
    document.update(changes)
    return json.dumps(document)


def _import(cli, store, tmp_path, name: str, document: dict, kind: str = "data") -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    cli(kind, "import", str(path), db=store)


def _grid(cli, store, tmp_path, *datasets: dict) -> None:
    _import(cli, store, tmp_path, "grid", GRID, kind="sites")
    _import(cli, store, tmp_path, "data", {"datasets": list(datasets)})


def _ready(cli, store, env) -> None:
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, db=store, env=env)


def _statuses(store, task_id: int) -> dict[str, int]:
    rows = run_sql(store, lambda conn: list(conn.execute(select(jobs.c.status).where(jobs.c.task_id == task_id))))
    found: dict[str, int] = {}
    for row in rows:
        found[row.status] = found.get(row.status, 0) + 1
    return found


def _fail(cli, store, job_ids, env) -> None:
    lines = "".join(json.dumps({"job_id": job_id, "status": "failed", "error_source": "pilot", "error_code": 1099,
                                "error_diag": "Failed to stage-in file"}) + "\n" for job_id in job_ids)
    cli("jobs", "report", "-", db=store, input=lines, env=env)


# ------------------------------------------------------------------------------ the running-jobs cap

def test_a_user_at_his_running_cap_has_his_queued_jobs_throttled_until_he_falls_below_it(cli, store, tmp_path):
    _grid(cli, store, tmp_path, dataset("data.ann", 8, "DATA_SITE_DISK"), dataset("data.bob", 2, "DATA_SITE_DISK"))
    caps = {"running_user_jobs": "3"}
    ann = cli.json("submit", "-", db=store, input=task("ann", "data.ann"), env=at())["task_id"]
    bob = cli.json("submit", "-", db=store, input=task("bob", "data.bob"), env=at())["task_id"]
    _ready(cli, store, at())
    assert cli.json("generate", "--seed", "1", db=store, env=at(**caps))["counts"]["jobs"] == 10
    taken = cli.json("jobs", "dispatch", "--site", "DATA_SITE", "--count", "3", "--task", str(ann), db=store, env=at())["jobs"]
    assert len(taken) == 3  # ann runs 3 jobs: her cap

    watched = cli.json("watch", db=store, env=at(timedelta(minutes=5), **caps))
    throttled = [item for item in watched["items"] if item["outcome"] == "throttle_jobs"]
    assert throttled == [{"outcome": "throttle_jobs", "task_id": ann, "jobs": 5,
                          "reason": "user ann: 3 running jobs >= user_caps.running_user_jobs 3"}]
    assert _statuses(store, ann) == {"sent": 3, "throttled": 5} and _statuses(store, bob) == {"activated": 2}
    assert run_sql(store, check_all) == []

    # Slots go to other users: dispatch hands out bob's jobs, never ann's throttled ones.
    handed = cli.json("jobs", "dispatch", "--site", "DATA_SITE", "--count", "10", db=store, env=at(timedelta(minutes=6)))["jobs"]
    assert {job["task_id"] for job in handed} == {bob} and len(handed) == 2

    # Why: jobs show and explain say it.
    capped = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.task_id == ann, jobs.c.status == "throttled")
                                                      .order_by(jobs.c.id)).scalars().first())
    shown = cli.json("jobs", "show", str(capped), db=store)
    assert shown["status"] == "throttled" and shown["sub_status"] == "user_cap"
    assert shown["throttled_because"].startswith("its user (or working group) reached the running-jobs cap")
    explained = cli.json("explain", "task", str(ann), db=store, env=at(timedelta(minutes=7), **caps))
    assert explained["user_caps"]["account"] == "user ann" and explained["user_caps"]["capped_jobs"] == 5
    assert explained["user_caps"]["caps"] == {"running_user_jobs": 3, "running_user_cores": 10000}
    assert "5 of its jobs are throttled by the user cap: user ann runs 3 jobs on 3 cores" in explained["summary"]
    table = cli("explain", "task", str(ann), db=store, env=at(timedelta(minutes=7), **caps)).stdout
    assert "user ann: running 3 jobs / 3 cores, queued 5 jobs / 5 cores (running_user_jobs 3, running_user_cores 10000)" in table

    # Still at 90 % of the cap or above (3 > 2.7): nothing; below it: released, one item per task.
    assert cli.json("watch", db=store, env=at(timedelta(minutes=10), **caps))["counts"]["release_jobs"] == 0
    _fail(cli, store, [taken[0]["job_id"]], at(timedelta(minutes=11)))
    watched = cli.json("watch", db=store, env=at(timedelta(minutes=15), **caps))
    released = [item for item in watched["items"] if item["outcome"] == "release_jobs"]
    assert released == [{"outcome": "release_jobs", "task_id": ann, "jobs": 5, "reason": "user ann: 2 running jobs and 2 cores, below "
                         "0.9 x user_caps.running_user_jobs 3 and .running_user_cores 10000"}]
    assert _statuses(store, ann)["activated"] == 5
    assert cli.json("jobs", "show", str(capped), db=store)["sub_status"] is None

    # A paused task's jobs are the pause's: the cap neither throttles them again nor releases them.
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "1", "--task", str(ann), db=store, env=at(timedelta(minutes=16)))
    cli("watch", db=store, env=at(timedelta(minutes=17), **caps))
    assert _statuses(store, ann)["throttled"] == 4
    cli("task", "pause", str(ann), db=store, env=at(timedelta(minutes=18)))
    _fail(cli, store, [taken[1]["job_id"]], at(timedelta(minutes=19)))
    assert cli.json("watch", db=store, env=at(timedelta(minutes=20), **caps))["counts"]["release_jobs"] == 0
    assert _statuses(store, ann)["throttled"] == 4
    cli("task", "resume", str(ann), db=store, env=at(timedelta(minutes=21)))  # resume activates them all, marks gone
    assert _statuses(store, ann)["activated"] == 4 and run_sql(store, check_all) == []
    assert cli.json("watch", db=store, env=at(timedelta(minutes=22), **caps))["counts"]["throttle_jobs"] == 0
    assert run_sql(store, check_all) == []


def test_the_cores_cap_and_a_working_groups_caps(cli, store, tmp_path):
    """Cores count like jobs; a group analysis task counts against its group and the group's caps, not its user's."""
    _grid(cli, store, tmp_path, dataset("data.ann", 4, "DATA_SITE_DISK"), dataset("data.grp", 4, "DATA_SITE_DISK"))
    own = cli.json("submit", "-", db=store, input=task("ann", "data.ann"), env=at())["task_id"]
    group = cli.json("submit", "-", db=store, input=task("ann", "data.grp", workingGroup="phys-higgs"), env=at())["task_id"]
    _ready(cli, store, at())
    cli("generate", "--seed", "1", db=store, env=at())
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "2", "--task", str(group), db=store, env=at())
    caps = {"running_user_cores": "1", "running_group_jobs": "2"}
    watched = cli.json("watch", db=store, env=at(timedelta(minutes=5), **caps))
    assert [(item["task_id"], item["jobs"], item["reason"]) for item in watched["items"] if item["outcome"] == "throttle_jobs"] == [
        (group, 2, "group phys-higgs: 2 running jobs >= user_caps.running_group_jobs 2")]
    assert _statuses(store, own) == {"activated": 4}  # ann herself runs nothing: her own cap of one core is not reached

    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "1", "--task", str(own), db=store, env=at(timedelta(minutes=6)))
    watched = cli.json("watch", db=store, env=at(timedelta(minutes=10), **caps))
    assert [(item["task_id"], item["jobs"], item["reason"]) for item in watched["items"] if item["outcome"] == "throttle_jobs"] == [
        (own, 3, "user ann: 1 running cores >= user_caps.running_user_cores 1")]
    assert run_sql(store, check_all) == []


def test_a_paused_tasks_jobs_are_left_to_resume_and_capped_jobs_close_after_seven_days(cli, store, tmp_path):
    _grid(cli, store, tmp_path, dataset("data.ann", 3, "DATA_SITE_DISK"), dataset("data.more", 2, "DATA_SITE_DISK"))
    caps = {"running_user_jobs": "1"}
    first = cli.json("submit", "-", db=store, input=task("ann", "data.ann"), env=at())["task_id"]
    paused = cli.json("submit", "-", db=store, input=task("ann", "data.more"), env=at())["task_id"]
    _ready(cli, store, at())
    cli("generate", "--seed", "1", db=store, env=at())
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "1", "--task", str(first), db=store, env=at())
    cli("task", "pause", str(paused), db=store, env=at())
    watched = cli.json("watch", db=store, env=at(timedelta(minutes=5), **caps))
    assert {item["task_id"] for item in watched["items"] if item["outcome"] == "throttle_jobs"} == {first}
    assert _statuses(store, paused) == {"throttled": 2}

    # ann runs nothing any more: her capped jobs are released, the paused task's stay until it resumes.
    running = run_sql(store, lambda conn: conn.execute(select(jobs.c.id).where(jobs.c.task_id == first, jobs.c.status == "sent")).scalar_one())
    _fail(cli, store, [running], at(timedelta(minutes=6)))
    watched = cli.json("watch", db=store, env=at(timedelta(minutes=10), **caps))
    assert {item["task_id"] for item in watched["items"] if item["outcome"] == "release_jobs"} == {first}
    assert _statuses(store, paused) == {"throttled": 2}
    shown = cli.json("jobs", "list", "--task", str(paused), db=store)
    assert cli.json("jobs", "show", str(shown[0]["job_id"]), db=store)["throttled_because"] == (
        "its task is paused; `jedictl task resume` activates it")

    # A job throttled by the cap and never released is closed after 7 days; a paused task's are not.
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "1", "--task", str(first), db=store, env=at(timedelta(minutes=11)))
    cli("watch", db=store, env=at(timedelta(minutes=15), **caps))
    assert _statuses(store, first) == {"failed": 1, "sent": 1, "throttled": 1}
    # The next watch, a week on: its timeouts close the job sent then (30 min) and the capped one (7 days).
    watched = cli.json("watch", db=store, env=at(timedelta(days=7, minutes=20), **caps))
    reasons = sorted(item["reason"] for item in watched["items"] if item["outcome"] == "job_timeout")
    assert reasons == ["sent for 7d (limit 30m)", "throttled for 7d (limit 7d)"]
    assert _statuses(store, first) == {"failed": 1, "closed": 2}
    assert _statuses(store, paused) == {"throttled": 2}
    assert run_sql(store, check_all) == []


def test_no_new_jobs_for_a_user_over_his_running_cap_or_with_too_many_queued(cli, store, tmp_path):
    _grid(cli, store, tmp_path, dataset("data.ann", 6, "DATA_SITE_DISK"), dataset("data.ann2", 2, "DATA_SITE_DISK"),
          dataset("data.bob", 2, "DATA_SITE_DISK"))
    first = cli.json("submit", "-", db=store, input=task("ann", "data.ann"), env=at())["task_id"]
    _ready(cli, store, at())
    cli("generate", "--seed", "1", db=store, env=at())
    second = cli.json("submit", "-", db=store, input=task("ann", "data.ann2"), env=at())["task_id"]
    bob = cli.json("submit", "-", db=store, input=task("bob", "data.bob"), env=at())["task_id"]
    _ready(cli, store, at())
    # ann has 6 queued jobs: more than 2 x a cap of 2.
    made = cli.json("generate", "--seed", "1", db=store, env=at(running_user_jobs="2"))
    outcome = {item["task_id"]: (item["outcome"], item.get("reason")) for item in made["items"]}
    assert outcome[second] == ("throttled", "user ann: 6 queued jobs > 2 x user_caps.running_user_jobs 2")
    assert outcome[bob][0] == "generated"
    # Running more than the cap of cores stops her too.
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "2", "--task", str(first), db=store, env=at())
    made = cli.json("generate", "--seed", "1", db=store, env=at(running_user_cores="1", running_user_jobs="100"))
    assert [item["reason"] for item in made["items"] if item["task_id"] == second] == [
        "user ann: 2 running cores > user_caps.running_user_cores 1"]
    assert "no new jobs: user ann: 2 running cores > user_caps.running_user_cores 1" in cli.json(
        "explain", "task", str(second), db=store, env=at(running_user_cores="1", running_user_jobs="100"))["summary"]
    assert cli.json("generate", "--seed", "1", db=store, env=at())["counts"]["jobs"] == 2  # without caps: made
    assert run_sql(store, check_all) == []


# ------------------------------------------------------------------------------ active tasks

def test_the_active_tasks_of_a_user_are_capped_per_label_at_submission(cli, store, tmp_path):
    env = {"JEDICTL_USER_CAPS__MAX_ACTIVE_TASKS": "{user: 2}"}
    first = cli.json("submit", "-", db=store, input=task("ann", "data.a"), env=env)["task_id"]
    cli.json("submit", "-", db=store, input=task("ann", "data.b"), env=env)
    refused = cli("submit", "-", db=store, input=task("ann", "data.c"), env=env, code=2)
    assert refused.stderr.strip() == ("jedictl: error: user: too many active tasks for ann: 2 user tasks are active "
                                      "(user_caps.max_active_tasks.user = 2); wait until some end, or kill some")
    assert run_sql(store, lambda conn: conn.execute(select(tasks.c.id)).scalars().all()) == [first, first + 1]  # nothing written
    # Another user, and another label of the same user, are not counted together.
    cli("submit", "-", db=store, input=task("bob", "data.c"), env=env)
    cli("submit", "-", db=store, input=task("ann", "data.d", prodSourceLabel="managed", taskType="prod"), env=env)
    # A task that ended no longer counts.
    cli("task", "kill", str(first), db=store, env=env)
    cli("finalize", db=store, env=env)
    assert cli.json("task", "show", str(first), db=store)["status"] == "aborted"
    cli("submit", "-", db=store, input=task("ann", "data.c"), env=env)


# ------------------------------------------------------------------------------ prestage and transfer limits

def test_a_users_tasks_waiting_for_too_much_input_to_move_are_throttled_until_it_arrives(cli, store, tmp_path):
    """Tasks pinned to a site without their input wait `assigned` for it: 4 MB from disk for ann's
    first task, 2 MB from tape for her second. Over the limits, the tasks are throttled (their jobs
    still run); once the input arrives, released."""
    disk = dataset("data.disk", 4, "DATA_SITE_DISK")
    tape = dataset("data.tape", 2, "ARCHIVE_TAPE")
    _grid(cli, store, tmp_path, disk, tape, dataset("data.bob", 2, "DATA_SITE_DISK"))
    moved = cli.json("submit", "-", db=store, input=task("ann", "data.disk", site="IDLE_B"), env=at())["task_id"]
    staged = cli.json("submit", "-", db=store, input=task("ann", "data.tape", site="IDLE_B"), env=at())["task_id"]
    bob = cli.json("submit", "-", db=store, input=task("bob", "data.bob", site="IDLE_B"), env=at())["task_id"]
    _ready(cli, store, at())
    limits = {"transfer_limit_gb": "0.003", "prestage_limit_gb": "0.001"}  # 3.2 MB and 1.1 MB
    cli("generate", "--seed", "1", db=store, env=at(**limits))
    assert _statuses(store, moved) == {"assigned": 4} and _statuses(store, staged) == {"assigned": 2}

    watched = cli.json("watch", db=store, env=at(timedelta(minutes=5), **limits))
    items = {item["task_id"]: item for item in watched["items"] if item["outcome"] == "throttle_transfers"}
    assert set(items) == {moved, staged}  # bob's 2 MB are his own, under the limit
    assert items[moved]["reason"] == "user ann: 4 MB of input waits for transfer > user_caps.transfer_limit_gb 0.003 GB"
    assert items[staged]["reason"] == "user ann: 2 MB of input waits for prestaging > user_caps.prestage_limit_gb 0.001 GB"
    shown = {task_id: cli.json("task", "show", str(task_id), db=store) for task_id in (moved, staged, bob)}
    assert shown[moved]["status"] == "throttled" and shown[staged]["status"] == "throttled" and shown[bob]["status"] == "running"
    explained = cli.json("explain", "task", str(staged), db=store, env=at(timedelta(minutes=6), **limits))
    assert ("throttled until the input its user waits for (prestaging) is back within the limit: user ann: 2 MB of input waits for "
            "prestaging > user_caps.prestage_limit_gb 0.001 GB") in explained["summary"]
    assert explained["reason"] == "user ann: 2 MB of input waits for prestaging > user_caps.prestage_limit_gb 0.001 GB"
    # The failure throttle's release (by time) leaves them alone; a watch later they are still throttled.
    later = cli.json("watch", db=store, env=at(timedelta(hours=3), **limits))
    assert not [item for item in later["items"] if item.get("task_id") in (moved, staged) and item["outcome"].startswith("release")]
    assert run_sql(store, check_all) == []

    # The disk input arrives at IDLE_B: its jobs are activated, ann's transfer backlog is gone, the task released.
    arrived = copy.deepcopy(disk)
    arrived["replicas"].append({"endpoint": "IDLE_B_DISK"})
    _import(cli, store, tmp_path, "arrived", {"datasets": [arrived]})
    watched = cli.json("watch", db=store, env=at(timedelta(hours=4), **limits))
    released = [item for item in watched["items"] if item["outcome"] == "release_transfers"]
    assert [item["task_id"] for item in released] == [moved]
    assert released[0]["reason"] == "user ann: 0 MB of input waits for transfer, within user_caps.transfer_limit_gb 0.003 GB"
    assert cli.json("task", "show", str(moved), db=store)["status"] == "running"
    assert cli.json("task", "show", str(staged), db=store)["status"] == "throttled"
    # A resume lifts the throttle at once (and the next watch decides again).
    cli("task", "resume", str(staged), db=store, env=at(timedelta(hours=4, minutes=1)))
    assert run_sql(store, lambda conn: conn.execute(select(tasks.c.throttle_reason).where(tasks.c.id == staged)).scalar_one()) is None
    assert run_sql(store, check_all) == []


def test_check_finds_a_throttled_job_that_nothing_would_release(cli, store, tmp_path, monkeypatch):
    """The mark is what lets the watch release a capped job (and keeps `task resume` from being the only
    way out): a watch that throttled without it would strand the jobs, and `jedictl check` says so."""
    import jedictl.store.user_caps as cap_store

    _grid(cli, store, tmp_path, dataset("data.ann", 3, "DATA_SITE_DISK"))
    ann = cli.json("submit", "-", db=store, input=task("ann", "data.ann"), env=at())["task_id"]
    _ready(cli, store, at())
    cli("generate", "--seed", "1", db=store, env=at())
    cli("jobs", "dispatch", "--site", "DATA_SITE", "--count", "1", db=store, env=at())
    monkeypatch.setattr(cap_store, "USER_CAP", None)  # the throttle without its mark
    cli("watch", db=store, env=at(timedelta(minutes=5), running_user_jobs="1"))
    assert _statuses(store, ann) == {"sent": 1, "throttled": 2}
    report = json.loads(cli("check", "-o", "json", db=store, code=1).stdout)
    assert {(v["check"], v["object"]) for v in report["violations"]} == {("throttled_jobs_are_released", f"task {ann}")}
    assert report["violations"][0]["message"].endswith("is throttled but nothing releases it (the task is running, not paused, "
                                                      "and no user cap holds the job)")
