"""Chaos test (issue 10): agents and pilots SIGKILLed at random moments lose nothing and do nothing twice.

A fresh store (PostgreSQL: a schema of its own, dropped afterwards; SQLite: a temporary file) gets the
demo's grid and tasks plus a workload of file-based, scouted, merging, event-split and no-input tasks.
Then N processes run `jedictl run --loop 0.2` and one or two run `jedictl simulate --loop 0.5` (the
pilots) while a driver SIGKILLs a random one every 0.5-3 s and starts it again. The victim is drawn
among the processes that are running passes (whose log grew since their start): a kill during the
interpreter's start-up would test nothing. Leases last 60 s (`--lease-seconds`), a job without a
heartbeat times out after 72 s, a sent one after a minute, and pending tasks are retried after a
minute (CHAOS_SETTINGS), so while the chaos goes on live `watch` passes release the leases of killed
processes and close the jobs killed pilots left behind, racing the live pilots. While the chaos lasts
the driver keeps a backlog of active tasks (neither final nor waiting) by submitting more (as users do), so the agents always
have work to be killed in. When the time is up every process is killed, and the system settles: one
clean process (this driver) runs the pipeline and the pilots with the clock moved three hours ahead --
past every lease of the dead processes and past the job timeouts, so `watch` releases the leases,
rescues picked files and closes the jobs the killed pilots left `sent` or `running` -- ten minutes
more per round, until every task is final. A last watch pass runs past every lease's expiry.

Then the invariants are checked and printed with their violations: no file in two live jobs; every
counter equals the rows it counts; final tasks hold no lease; the retry history is consistent; every
running record is in its live job (nothing lost); no record finished by two jobs (nothing done twice);
every task reached a final state; no job is left live; no lease is held by a dead process after a
watch pass; and no process ended unless it was killed. Exit 1 on any violation.

Issue 14 added, before the kills, rounds of plain concurrent `jedictl run --once` (cron overlap: default
leases and settings, nobody killed: every run exits 0, and after each round no lease is left and every
task's history is a chain); during the chaos, files appended to re-opened input datasets and `task
incexec` (or `task kill`) by the driver; the lease checks `check --dead-owner` / `--no-live-passes`;
and `--break-guard` to show the invariants catch a deliberately broken lease guard.

    python bench/chaos.py --backend postgresql --minutes 10
    python bench/chaos.py --backend sqlite --minutes 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PG_URL = os.environ.get("JEDICTL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
DEMO_SITES = ("CERN-PROD_DATADISK", "BNL-ATLAS_DATADISK", "MWT2_DATADISK", "DESY-HH_DATADISK", "AGLT2_DATADISK")
#: Settling: the clock jumps past every lease (10 min) and job timeout (sent 30 min, no heartbeat 2 h).
SETTLE_JUMP = timedelta(hours=3)
SETTLE_STEP = timedelta(minutes=10)
SETTLE_LONG_STEP = timedelta(hours=12)  # once only waiting tasks are left: their timeouts end them
#: Settings of every process during the chaos (besides lease.seconds): jobs a killed pilot left `sent`
#: or `running` time out after a minute, and tasks pending on full sites are retried after a minute,
#: so live watch passes close the dead's jobs while the live pilots report theirs -- and the work
#: keeps moving on the real clock instead of waiting hours for the settling.
CHAOS_SETTINGS = {
    "JEDICTL_JOB_TIMEOUTS__SENT_MINUTES": "1",
    "JEDICTL_JOB_TIMEOUTS__HEARTBEAT_HOURS": "0.02",  # 72 s without a heartbeat
    "JEDICTL_WATCHDOG__WAIT_FOR_PENDING_MINUTES": "1",
    # Re-opened datasets close again within seconds (Churn): their tasks look again after a minute, not 5.
    "JEDICTL_FEED__CHECK_INTERVAL_MINUTES": "1",
}
#: How a pass reports a task it gave up (engine LeaseLost messages).
LEASE_LOST = ("taken over", "no longer leased", "changed while")
#: What watch passes did for the dead while the chaos went on.
WATCH_RESCUES = ("release_lease", "rescue_picked", "job_timeout")


# ------------------------------------------------------------------------------------------ workload

def chaos_catalog(n_datasets: int, files_per_dataset: int) -> dict[str, Any]:
    """Input datasets of the extra tasks, each with replicas at two of the demo's disks."""
    datasets = []
    for k in range(n_datasets):
        datasets.append({
            "name": f"chaos.data.{k:03d}.DAOD", "scope": "chaos", "state": "closed",
            "files": [{"lfn": f"chaos.data.{k:03d}._{i:06d}.root", "size": 500_000_000 + i * 1000, "events": 2000,
                       "checksum": f"ad:{(k * 100_003 + i) & 0xffffffff:08x}", "guid": str(uuid.UUID(int=(k << 32) + i + 1)).upper()}
                      for i in range(1, files_per_dataset + 1)],
            "replicas": [{"endpoint": DEMO_SITES[k % len(DEMO_SITES)]}, {"endpoint": DEMO_SITES[(k + 2) % len(DEMO_SITES)]}],
        })
    return {"datasets": datasets}


def chaos_task(number: int, n_datasets: int) -> dict[str, Any]:
    """Task `number` of the workload: five kinds in turn, each reading one of the chaos datasets."""
    name = f"chaos.task.{number:04d}"
    dataset = f"chaos.data.{number % n_datasets:03d}.DAOD"
    outputs = [{"dataset": f"{name}.out/", "file_template": f"{name}.${{JEDITASKID}}._${{SN/P}}.root"}]
    log = {"dataset": f"{name}.log/", "file_template": f"{name}.${{JEDITASKID}}._${{SN/P}}.log.tgz"}
    kind = number % 5
    if kind == 0:  # scouts, then the avalanche; two files per job
        return {"name": name, "label": "user", "command": '-i "${IN/L}" -o "${OUTPUT0}"', "inputs": [{"dataset": dataset}],
                "outputs": outputs, "log": log, "split": {"n_files_per_job": 2}, "retry": {"max_attempt": 5}}
    if kind == 1:  # production, no scouts, one file per job
        return {"name": name, "label": "managed", "processing_type": "reco", "priority": 700, "transformation": "Reco_tf.py",
                "command": "--inputAODFile=${IN} --outputDAODFile=${OUTPUT0}", "inputs": [{"dataset": dataset}],
                "outputs": outputs, "log": log, "split": {"n_files_per_job": 1}, "scouts": {"skip_scout": True},
                "retry": {"max_attempt": 5}}
    if kind == 2:  # pre-merge jobs and merge jobs
        return {"name": name, "label": "user", "command": '-i "${IN/L}" -o "${OUTPUT0}"', "inputs": [{"dataset": dataset}],
                "outputs": outputs, "log": log, "split": {"n_files_per_job": 1}, "retry": {"max_attempt": 5},
                "merge": {"transformation": "runMerge-00-00-02", "command": '-i "${TRN_OUTPUT0/L}" -o "${OUTPUT0}"', "n_files_per_merge_job": 4}}
    if kind == 3:  # event ranges of 1000 events out of 2000-event files
        return {"name": name, "label": "managed", "processing_type": "simul", "priority": 800, "transformation": "Sim_tf.py",
                "command": "--inputEVNTFile=${IN} --outputHITSFile=${OUTPUT0} --maxEvents=${MAXEVENTS} --skipEvents=${SKIPEVENTS}",
                "inputs": [{"dataset": dataset}], "outputs": outputs, "log": log, "retry": {"max_attempt": 5},
                "split": {"n_events_per_job": 1000, "n_events_per_input_file": 2000}}
    return {"name": name, "label": "managed", "processing_type": "evgen", "priority": 750, "transformation": "Gen_tf.py",
            "command": "--randomSeed=${RNDMSEED} --maxEvents=${MAXEVENTS} --firstEvent=${FIRSTEVENT} --outputEVNTFile=${OUTPUT0}",
            "no_input": True, "outputs": outputs, "log": log, "retry": {"max_attempt": 5},
            "split": {"n_events": 20_000, "n_events_per_job": 1000, "random_seed_offset": 10}}


class Workload:
    """The demo's grid and six tasks, the chaos datasets and tasks; more tasks on demand."""

    def __init__(self, store: Any, settings: Any, n_datasets: int, files_per_dataset: int):
        self.store, self.settings = store, settings
        self.n_datasets, self.files_per_dataset = n_datasets, files_per_dataset
        self.submitted = 0

    def load(self, n_tasks: int, now: datetime) -> None:
        from jedictl.engine.sim import demo
        from jedictl.engine.catalogs.importer import import_data_catalog

        demo.build(self.store, self.settings, now, "chaos")
        with self.store.begin() as conn:
            import_data_catalog(conn, chaos_catalog(self.n_datasets, self.files_per_dataset), now)
        self.submit(n_tasks, now)

    def submit(self, n: int, now: datetime) -> None:
        from jedictl.engine.task.submission import parse_definition, register_task

        with self.store.begin() as conn:
            for _ in range(n):
                spec = chaos_task(self.submitted, self.n_datasets)
                register_task(conn, parse_definition(spec, user="chaos", default_user="chaos"), spec, now, "chaos")
                self.submitted += 1

    def active(self) -> int:
        """Tasks the agents can move now: neither final nor waiting (pending, throttled, exhausted, paused
        tasks wait for the clock or an operator, `defined` ones mostly for a re-opened input to close and
        the feeder's next look; the chaos's real clock would leave them waiting)."""
        from sqlalchemy import func, select

        from jedictl.model import TASK_FINAL
        from jedictl.store.schema import tasks

        idle = [s.value for s in TASK_FINAL] + ["pending", "throttled", "exhausted", "paused", "defined"]
        with self.store.read() as conn:
            return conn.execute(select(func.count()).where(tasks.c.status.notin_(idle))).scalar_one()


@dataclass
class ChurnFigures:
    files_added: int = 0
    datasets_opened: int = 0
    incexecs: int = 0
    kills: int = 0  # operators' `task kill` of a running task (to incexec it once it is aborted)
    refused: Counter = field(default_factory=Counter)  # incexec refusals by reason (the task moved on first ...)


class Churn:
    """What users and data management do while the agents run (issue 14): files appended to input
    datasets -- a closed one is re-opened first and closed again `open_seconds` later (a growing
    dataset that data management closes), so tasks reading them pick the files up on their next feed
    and then end -- and `task incexec` on tasks that ended, which sends them back to `defined` to be
    fed again, racing the agents that hold leases. (Datasets left open for the whole chaos parked
    every task that read one in `defined` after a minute: the first 10-minute run did no work after it.)"""

    def __init__(self, store: Any, settings: Any, workload: Workload, rng: random.Random, open_seconds: float = 10.0):
        self.store, self.settings, self.workload, self.rng = store, settings, workload, rng
        self.open_seconds = open_seconds
        self.opened: dict[str, datetime] = {}  # re-opened by the churn, and when
        self.figures = ChurnFigures()
        self._serial = 0

    def step(self, now: datetime) -> None:
        self.close_due(now)
        self.add_files(now)
        self.incexec(now)

    def close_due(self, now: datetime) -> None:
        """Datasets re-opened more than `open_seconds` ago are closed: no more files come."""
        from jedictl.store import data_catalog as catalog

        due = sorted(name for name, opened in self.opened.items() if (now - opened).total_seconds() >= self.open_seconds)
        if due:
            with self.store.begin() as conn:
                for name in due:
                    catalog.set_state(conn, name, "closed", now)
                    del self.opened[name]

    def add_files(self, now: datetime) -> None:
        from sqlalchemy import select

        from jedictl.model.catalog import CatalogFile
        from jedictl.store import data_catalog as catalog
        from jedictl.store.schema import catalog_datasets

        k = self.rng.randrange(self.workload.n_datasets)
        name = f"chaos.data.{k:03d}.DAOD"
        new = []
        for _ in range(2):
            self._serial += 1
            new.append(CatalogFile(f"chaos.data.{k:03d}._added{self._serial:06d}.root", scope="chaos", size=500_000_000, n_events=2000,
                                   checksum=f"ad:{self._serial:08x}", guid=str(uuid.UUID(int=(1 << 100) + self._serial)).upper()))
        with self.store.begin() as conn:
            state = conn.execute(select(catalog_datasets.c.state).where(catalog_datasets.c.name == name)).scalar_one()
            if state != "open":
                catalog.set_state(conn, name, "open", now)
                self.opened[name] = now
                self.figures.datasets_opened += 1
            self.figures.files_added += catalog.add_files(conn, name, new, now)

    def incexec(self, now: datetime) -> None:
        """`task incexec` (nFilesPerJob 1) on a file-based chaos task that ended; when none has ended yet,
        an operator kills a running one (its lease broken under the agent holding it), to incexec later."""
        from sqlalchemy import select

        from jedictl.engine.commando.commands import Request, run_command
        from jedictl.errors import JedictlError
        from jedictl.store.schema import tasks

        def file_based(statuses: tuple[str, ...]) -> list[int]:
            with self.store.read() as conn:
                return [row.id for row in conn.execute(select(tasks.c.id, tasks.c.name).where(
                    tasks.c.status.in_(statuses), tasks.c.name.like("chaos.task.%")))
                    if int(row.name.rsplit(".", 1)[1]) % 5 in (0, 1, 2)]

        ended = file_based(("finished", "failed", "done", "aborted"))
        request = None
        if ended:
            request = Request("incexec", self.rng.choice(ended), "chaos", "chaos: files were added", changes={"nFilesPerJob": 1})
        elif running := file_based(("running", "scouting")):
            request = Request("kill", self.rng.choice(running), "chaos", "chaos: killed to be incexec'd")
        if request is None:
            return
        try:
            run_command(self.store, request, self.settings, now)
            if request.command == "incexec":
                self.figures.incexecs += 1
            else:
                self.figures.kills += 1
        except JedictlError as exc:
            self.figures.refused[f"{request.command}: {str(exc)[:100]}"] += 1

    def close_all(self, now: datetime) -> None:
        """No more files: the datasets opened during the chaos are closed, so their tasks can end."""
        from jedictl.store import data_catalog as catalog

        with self.store.begin() as conn:
            for name in sorted(self.opened):
                catalog.set_state(conn, name, "closed", now)
        self.opened.clear()


# ----------------------------------------------------------------------------------------- processes

@dataclass
class Slot:
    """One place in the chaos: a `run` or `simulate` process, restarted after each kill."""

    kind: str
    index: int
    log: Path
    process: subprocess.Popen | None = None
    started: float = 0.0
    generation: int = 0
    log_size: int = 0  # the log's size when the process started: it grew once the process ran a pass

    def working(self) -> bool:
        """Started up and running passes (a kill during interpreter start-up tests nothing)."""
        return self.process is not None and self.process.poll() is None and self.log.stat().st_size > self.log_size


@dataclass
class Figures:
    kills: Counter = field(default_factory=Counter)  # kind -> SIGKILLs during the chaos
    interrupted: Counter = field(default_factory=Counter)  # the pass a kill interrupted (or was about to start)
    stopped: int = 0  # killed when the chaos ended
    unexpected: list[str] = field(default_factory=list)  # processes that ended without being killed
    starts: int = 0
    submitted_during: int = 0
    killed_pids: list[int] = field(default_factory=list)  # their leases are those of dead owners (`check --dead-owner`)


class Chaos:
    def __init__(self, url: str, workers: int, simulators: int, seed: int, logs: Path, env: dict[str, str],
                 run_loop: float = 0.2, simulate_loop: float = 0.5, kill_every: tuple[float, float] = (0.5, 3.0)):
        self.url, self.env, self.rng = url, env, random.Random(seed)
        self.run_loop, self.simulate_loop, self.kill_every = run_loop, simulate_loop, kill_every
        self.slots = [Slot("run", i, logs / f"run-{i}.log") for i in range(workers)]
        self.slots += [Slot("simulate", i, logs / f"simulate-{i}.log") for i in range(simulators)]
        self.figures = Figures()

    def command(self, slot: Slot) -> list[str]:
        seed = str(self.rng.randrange(1, 1 << 30))
        if slot.kind == "run":
            args = ["run", "--loop", str(self.run_loop)]
        else:
            args = ["simulate", "--loop", str(self.simulate_loop), "--jobs", "10"]
        return [sys.executable, "-m", "jedictl", *args, "--db", self.url, "--seed", seed, "-v"]

    def start(self, slot: Slot) -> None:
        slot.generation += 1
        with open(slot.log, "a") as log:
            log.write(json.dumps({"event": "start", "generation": slot.generation}) + "\n")
            log.flush()
            slot.log_size = log.tell()
            slot.process = subprocess.Popen(self.command(slot), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        slot.started = time.monotonic()
        self.figures.starts += 1

    def kill(self, slot: Slot) -> bool:
        """SIGKILL; True if the process was still running (False: it had ended by itself)."""
        process = slot.process
        assert process is not None
        alive = process.poll() is None
        if alive:
            process.send_signal(signal.SIGKILL)
            self.figures.killed_pids.append(process.pid)
        process.wait()
        if not alive:
            self._ended_alone(slot)
        return alive

    def _ended_alone(self, slot: Slot) -> None:
        assert slot.process is not None
        tail = slot.log.read_text(errors="replace").splitlines()[-5:]
        self.figures.unexpected.append(f"{slot.kind}-{slot.index} (start {slot.generation}) exited {slot.process.returncode}: "
                                       + " | ".join(line[:300] for line in tail))

    def check_ended(self) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is not None:
                self._ended_alone(slot)
                self.start(slot)

    def kill_one(self) -> bool:
        """SIGKILL a random process that is running passes, and start it again; False if none is yet."""
        working = [slot for slot in self.slots if slot.working()]
        if not working:
            return False
        slot = self.rng.choice(working)
        running = current_pass(slot)
        if self.kill(slot):
            self.figures.kills[slot.kind] += 1
            self.figures.interrupted[running] += 1
        self.start(slot)
        return True

    def stop(self) -> None:
        for slot in self.slots:
            if slot.process is not None:
                self.figures.stopped += self.kill(slot)

    def run(self, seconds: float, workload: Workload, backlog: int, say: Callable[[str], None], status: Callable[[], str],
            churn: Churn | None = None, churn_every: float = 3.0) -> None:
        for slot in self.slots:
            self.start(slot)
        started = time.monotonic()
        deadline = started + seconds
        next_kill = started + self.rng.uniform(*self.kill_every)
        next_topup = next_report = next_churn = started
        try:
            while (moment := time.monotonic()) < deadline:
                self.check_ended()
                if churn is not None and moment >= next_churn:
                    from jedictl.clock import utcnow

                    churn.step(utcnow())
                    next_churn = moment + churn_every
                if moment >= next_kill:
                    next_kill = moment + (self.rng.uniform(*self.kill_every) if self.kill_one() else 0.1)
                if backlog and moment >= next_topup:
                    missing = backlog - workload.active()
                    if missing > 0:
                        from jedictl.clock import utcnow

                        workload.submit(missing, utcnow())
                        self.figures.submitted_during += missing
                    next_topup = moment + 2.0
                if moment >= next_report:
                    say(f"  chaos {moment - started:5.0f}s: kills {sum(self.figures.kills.values())}, {status()}")
                    next_report = moment + 30.0
                time.sleep(0.02)
        finally:
            self.stop()


# ------------------------------------------------------------------------------------- cron overlap

@dataclass
class CronFigures:
    rounds: int = 0
    runs: int = 0
    seconds: float = 0.0
    exits: Counter = field(default_factory=Counter)
    failed_runs: list[str] = field(default_factory=list)  # a `run --once` that exited non-zero: a pass met errors
    after_rounds: list[str] = field(default_factory=list)  # leases left, inconsistent history ... once a round's runs exited


#: The one chaos setting the cron rounds keep: tasks they park `pending` (no site free yet) are retried
#: after a minute, as during the chaos, instead of sitting out the whole chaos behind a 60-minute wait.
CRON_KEEPS = ("JEDICTL_WATCHDOG__WAIT_FOR_PENDING_MINUTES",)


def cron_env(env: dict[str, str]) -> dict[str, str]:
    """A plain cron line's environment: default leases and timeouts, none of the chaos's job-timeout settings."""
    return {k: v for k, v in env.items() if (k not in CHAOS_SETTINGS or k in CRON_KEEPS) and k != "JEDICTL_LEASE__SECONDS"}


def cron_overlap(store: Any, url: str, env: dict[str, str], rounds: int, workers: int, rng: random.Random, logs: Path,
                 say: Callable[[str], None]) -> CronFigures:
    """Cron firing while the previous run is still busy (issue 14, defect 1): each round starts `workers`
    plain `jedictl run --once` processes and one `jedictl simulate --once` at the same moment, on the
    real clock with default settings, and waits for all. Nobody is killed, so every run must exit 0,
    and once they have exited no task may be leased and every task's history must be a chain."""
    from jedictl.store import invariants as inv

    figures = CronFigures()
    plain = cron_env(env)
    started = time.monotonic()
    for number in range(1, rounds + 1):
        processes = []
        for index in range(workers):
            log = open(logs / f"cron-{index}.log", "a")
            command = [sys.executable, "-m", "jedictl", "run", "--once", "--db", url, "--seed", str(rng.randrange(1, 1 << 30)), "-v"]
            processes.append((f"run-{index}", log, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=plain)))
        log = open(logs / "cron-simulate.log", "a")
        processes.append(("simulate", log, subprocess.Popen([sys.executable, "-m", "jedictl", "simulate", "--db", url, "--jobs", "10", "-v"],
                                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=plain)))
        for name, log, process in processes:
            code = process.wait()
            log.close()
            figures.exits[code] += 1
            if code != 0 and name != "simulate":
                tail = (logs / f"cron-{name.split('-')[1]}.log").read_text(errors="replace").splitlines()[-3:]
                figures.failed_runs.append(f"round {number} {name} exited {code}: " + " | ".join(line[:300] for line in tail))
        figures.runs += workers
        with store.read() as conn:
            found = inv.check_all(conn, no_live_passes=True) + inv.status_history_chains(conn)
        figures.after_rounds += [f"round {number}: {problem}" for problem in found]
        figures.rounds = number
    figures.seconds = time.monotonic() - started
    say(f"  cron overlap: {figures.rounds} rounds of {workers} x `run --once` + `simulate --once` in {figures.seconds:.0f}s; "
        f"exits {brief(figures.exits)}; {len(figures.after_rounds)} violations after the rounds")
    return figures


# -------------------------------------------------------------------------------------------- logs

def current_pass(slot: Slot) -> str:
    """The pass a process is in: the one after the last that ended since its start (from its log)."""
    from jedictl.engine.pipeline import AGENTS

    if slot.kind != "run":
        return slot.kind
    with open(slot.log, errors="replace") as log:
        log.seek(slot.log_size)
        ended = [line for line in log.read().splitlines() if line.startswith('{"ts"') and '"event":"pass"' in line]
    try:
        last = json.loads(ended[-1])["pass"] if ended else None
    except (ValueError, KeyError):
        last = None
    return AGENTS[(AGENTS.index(last) + 1) % len(AGENTS)] if last in AGENTS else AGENTS[0]


def pass_figures(logs: Path) -> dict[str, Any]:
    """From the processes' JSON log lines: passes per agent, jobs the pilots ran, pass errors by reason."""
    passes: Counter = Counter()
    errors: Counter = Counter()
    lost_leases = 0
    simulated = 0
    watched: Counter = Counter()
    for path in sorted(logs.glob("*.log")):
        with open(path, errors="replace") as lines:
            for line in lines:
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by SIGKILL
                if record.get("event") != "pass":
                    continue
                passes[record["pass"]] += 1
                if record["pass"] == "simulate":
                    simulated += int(record.get("jobs", 0))
                items = record.get("items")
                if record["pass"] == "watch":
                    watched.update({key: value for key, value in record.items() if key in WATCH_RESCUES})
                if isinstance(items, list):  # LeaseLost: a guarded write found the lease gone or the task moved on
                    lost_leases += sum(1 for i in items if i.get("outcome") == "skipped"
                                       and any(why in str(i.get("reason")) for why in LEASE_LOST))
                if record.get("error"):
                    items = record.get("items")
                    reasons = [str(i.get("reason"))[:160] for i in items if i.get("outcome") == "error"] if isinstance(items, list) else []
                    for reason in reasons or ["(no reason given)"]:
                        errors[f"{record['pass']}: {reason}"] += 1
    return {"passes": passes, "errors": errors, "simulated": simulated, "lost_leases": lost_leases, "watched": watched}


# ------------------------------------------------------------------------------------------ settle

@dataclass
class Settled:
    rounds: int = 0
    clock: datetime | None = None
    final_watch: datetime | None = None
    actions: Counter = field(default_factory=Counter)  # watch actions: job_timeout, release_lease, rescue_picked ...
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0


def settle(store: Any, settings: Any, seed: int, max_rounds: int = 300, max_seconds: float = 1800, patient_rounds: int = 100) -> Settled:
    """One clean process: the pipeline and the pilots with the clock three hours ahead, ten minutes
    more per round, until every task is final; then a watch pass past every lease's expiry. After
    `patient_rounds` the clock moves half a day a round: a task left waiting (pending on a site none
    can run its jobs at, exhausted) ends by the watchdog's timeouts (7 days pending, 48 h exhausted)."""
    from jedictl.clock import utcnow
    from jedictl.engine.sim.demo import all_final
    from jedictl.engine.pipeline import run_pipeline
    from jedictl.engine.sim.simulator import simulate_pass
    from jedictl.engine.watch.watchdog import watch_pass

    owner = f"{socket.gethostname()}:{os.getpid()}:settle"
    rng = random.Random(seed)
    result = Settled()
    started = time.monotonic()
    now = utcnow() + SETTLE_JUMP
    while result.rounds < max_rounds and time.monotonic() - started < max_seconds:
        result.rounds += 1
        moment = now
        reports = [report for report, _ in run_pipeline(store, settings, owner, lambda at=moment: at, seed=seed + result.rounds)]
        reports.append(simulate_pass(store, settings, moment, rng))
        for report in reports:
            for item in report.items:
                if report.name == "watch" and item["outcome"] not in ("skipped",):
                    result.actions[item["outcome"]] += 1
                if item["outcome"] == "error":
                    result.errors[f"{report.name}: {str(item.get('reason'))[:160]}"] += 1
        result.clock = moment
        if all_final(store):
            break
        now += SETTLE_STEP if result.rounds < patient_rounds else SETTLE_LONG_STEP
    result.final_watch = (result.clock or now) + timedelta(seconds=settings.lease.seconds + 60)
    for item in watch_pass(store, settings, owner, result.final_watch).items:
        result.actions[item["outcome"]] += 1
    result.seconds = time.monotonic() - started
    return result


# -------------------------------------------------------------------------------------- invariants

def invariants(store: Any, final_watch: datetime, unexpected: list[str], dead_owners: list[str] | None = None,
               cron: CronFigures | None = None) -> list[tuple[str, list[str]]]:
    """Every invariant the chaos test promises, with its violations."""
    from sqlalchemy import select

    from jedictl.model import JOB_FINAL, TASK_FINAL
    from jedictl.store import invariants as inv
    from jedictl.store.schema import jobs, tasks

    def unfinished_tasks(conn: Any) -> list[str]:
        rows = conn.execute(select(tasks.c.id, tasks.c.status).where(tasks.c.status.notin_([s.value for s in TASK_FINAL])).order_by(tasks.c.id))
        return [f"task {r.id} is {r.status}" for r in rows]

    def live_jobs(conn: Any) -> list[str]:
        rows = conn.execute(select(jobs.c.id, jobs.c.task_id, jobs.c.status).where(jobs.c.status.notin_([s.value for s in JOB_FINAL]))
                            .order_by(jobs.c.id))
        return [f"job {r.id} of task {r.task_id} is still {r.status}" for r in rows]

    checks: list[tuple[str, Callable[[Any], list[str]]]] = [
        ("no file in two live jobs", inv.files_in_one_live_job),
        ("every counter equals the rows it counts", inv.dataset_counters),
        ("final tasks hold no lease", inv.leases_of_final_tasks),
        ("the retry history is consistent", inv.retry_history),
        ("every running record is in its live job (nothing lost)", inv.records_of_live_jobs),
        ("no record finished by two jobs (nothing done twice)", inv.work_done_once),
        ("every task reaches a final state", unfinished_tasks),
        ("no job is left live", live_jobs),
        ("no lease held by a dead process after a watch pass", lambda conn: inv.leases_after_watch(conn, final_watch)),
        ("no task leased by a killed process (check --dead-owner)", lambda conn: inv.leases_of_dead_owners(conn, dead_owners or [])),
        ("no task leased once every pass has ended (check --no-live-passes)", lambda conn: inv.leases_of_dead_owners(conn, every_owner=True)),
        ("every task's status history is a chain (no status written by a process without the lease)", inv.status_history_chains),
        ("no live job of a task that ended or never generated", inv.live_jobs_of_ended_tasks),
        ("no output name registered by two jobs, none dropped from the catalog", inv.outputs_registered_once),
        ("every input of a done or finished task processed or failed for good", inv.inputs_of_ended_tasks),
    ]
    # Whatever check_all gains later joins the chaos without being listed here.
    named = {getattr(check, "__name__", "") for _, check in checks}
    checks += [((check.__doc__ or check.__name__).strip().split("\n")[0], check) for check in inv.CHECKS if check.__name__ not in named]
    found = []
    with store.read() as conn:
        for name, check in checks:
            found.append((name, check(conn)))
    found.append(("processes end only when killed", list(unexpected)))
    if cron is not None:
        found.append(("cron overlap: every plain `run --once` exits 0 (no pass met an error)", list(cron.failed_runs)))
        found.append(("cron overlap: no lease, consistent store and history once the runs exited", list(cron.after_rounds)))
    return found


def counts(store: Any) -> dict[str, Counter]:
    from sqlalchemy import func, select

    from jedictl.store.schema import files, job_retry_history, jobs, tasks

    with store.read() as conn:
        return {
            "tasks": Counter(dict(conn.execute(select(tasks.c.status, func.count()).group_by(tasks.c.status)).all())),
            "jobs": Counter(dict(conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status)).all())),
            "leases": Counter({"held": conn.execute(select(func.count()).where(tasks.c.lease_owner.is_not(None))).scalar_one()}),
            "records": Counter(dict(conn.execute(select(files.c.status, func.count()).where(files.c.status.in_(("picked", "running")))
                                                 .group_by(files.c.status)).all())),
            "history": Counter(dict(conn.execute(select(job_retry_history.c.relation_type, func.count())
                                                 .group_by(job_retry_history.c.relation_type)).all())),
        }


def settings_text() -> str:
    """CHAOS_SETTINGS as dotted keys: job_timeouts.sent_minutes=1 ..."""
    return " ".join(f"{name.removeprefix('JEDICTL_').lower().replace('__', '.')}={value}" for name, value in CHAOS_SETTINGS.items())


def brief(counter: Counter) -> str:
    return ", ".join(f"{key} {value}" for key, value in sorted(counter.items())) or "none"


# ------------------------------------------------------------------------------------------- run it

@dataclass
class Result:
    backend: str
    seconds: float
    workers: int
    simulators: int
    seed: int
    lease_seconds: int
    tasks_loaded: int
    chaos: Figures
    passes: dict[str, Any]
    at_chaos_end: dict[str, Counter]
    settled: Settled
    final: dict[str, Counter]
    checks: list[tuple[str, list[str]]]
    cron: CronFigures | None = None
    churn: ChurnFigures | None = None
    break_guard: str | None = None

    @property
    def kills(self) -> int:
        return sum(self.chaos.kills.values())

    @property
    def violations(self) -> int:
        return sum(len(problems) for _, problems in self.checks)


def run_chaos(url: str, seconds: float, workers: int, seed: int, *, simulators: int = 2, tasks: int = 20, files_per_dataset: int = 40,
              backlog: int = 8, lease_seconds: int = 60, workdir: Path | None = None, kill_every: tuple[float, float] = (0.5, 3.0),
              cron_rounds: int = 0, cron_workers: int = 2, churn_every: float = 0.0, break_guard: str | None = None,
              say: Callable[[str], None] = print) -> Result:
    """The whole test on an empty store at `url`: load, cron overlap, chaos (with churn), settle, check.

    `break_guard` starts every process with a guard deliberately broken (tests/hooks/sitecustomize.py,
    e.g. "claim"), to show that the invariants catch it."""
    from jedictl.clock import utcnow
    from jedictl.config import load_settings
    from jedictl.store.database import open_store
    from jedictl.store.migrate import upgrade

    own_dir = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="jedictl-chaos-")) if workdir is None else workdir
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JEDICTL_")}
    env.update({"XDG_CONFIG_HOME": str(workdir / "config"), "XDG_DATA_HOME": str(workdir / "data"), "NO_COLOR": "1",
                "JEDICTL_LOG_FORMAT": "json",  # one JSON line per pass (with its items: -v), read back by pass_figures
                "JEDICTL_LEASE__SECONDS": str(lease_seconds), **CHAOS_SETTINGS})
    if break_guard:
        hooks = Path(__file__).resolve().parent.parent / "tests" / "hooks"
        env.update({"PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), env.get("PYTHONPATH")])), "JEDICTL_HOOK_BREAK_GUARD": break_guard})
    settings = load_settings({"db": url}, environ=env).settings
    upgrade(url)
    store = open_store(url)
    try:
        workload = Workload(store, settings, n_datasets=max(tasks // 2, 1), files_per_dataset=files_per_dataset)
        workload.load(tasks, utcnow())
        loaded = workload.submitted + 6
        say(f"  loaded {loaded} tasks (6 demo tasks + {workload.submitted}); chaos for {seconds:.0f}s with {workers} run and "
            f"{simulators} simulate processes, SIGKILL every {kill_every[0]}-{kill_every[1]}s"
            + (f"; first {cron_rounds} cron rounds of {cron_workers} plain `run --once`" if cron_rounds else "")
            + (f"; files added and incexec every {churn_every:.0f}s" if churn_every else "")
            + (f"; GUARD BROKEN: {break_guard}" if break_guard else ""))
        rng = random.Random(seed)
        cron = cron_overlap(store, url, env, cron_rounds, cron_workers, rng, logs, say) if cron_rounds else None
        chaos = Chaos(url, workers, simulators, seed, logs, env, kill_every=kill_every)
        churn = Churn(store, settings, workload, rng) if churn_every else None

        def status() -> str:
            now = counts(store)
            return f"tasks: {brief(now['tasks'])}; jobs: {brief(now['jobs'])}"

        if seconds > 0:  # 0: the cron overlap alone
            chaos.run(seconds, workload, backlog, say, status, churn=churn, churn_every=churn_every)
        at_end = counts(store)
        if churn is not None:
            churn.close_all(utcnow())
        say(f"  chaos over: {sum(chaos.figures.kills.values())} kills; settling ...")
        settled = settle(store, settings, seed)
        final = counts(store)
        dead = [f"{socket.gethostname()}:{pid}" for pid in chaos.figures.killed_pids]
        checks = invariants(store, settled.final_watch or utcnow(), chaos.figures.unexpected, dead, cron)
        return Result(store.dialect, seconds, workers, simulators, seed, lease_seconds, loaded + chaos.figures.submitted_during, chaos.figures,
                      pass_figures(logs), at_end, settled, final, checks, cron, churn.figures if churn else None, break_guard)
    finally:
        store.close()
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)


def report(result: Result, say: Callable[[str], None] = print) -> None:
    chaos, passes, settled = result.chaos, result.passes, result.settled
    say(f"chaos test on {result.backend}: {result.seconds / 60:.1f} min, {result.workers} x `run --loop 0.2`, "
        f"{result.simulators} x `simulate --loop 0.5`, seed {result.seed}, leases of {result.lease_seconds}s, "
        f"{settings_text()}")
    if result.break_guard:
        say(f"GUARD DELIBERATELY BROKEN in every process: {result.break_guard} (tests/hooks/sitecustomize.py)")
    if result.cron is not None:
        cron = result.cron
        say(f"cron overlap: {cron.rounds} rounds, {cron.runs} plain `run --once` (default leases, no simulator settings) in "
            f"{cron.seconds:.0f}s; exit codes {brief(cron.exits)}")
    if result.churn is not None:
        churn = result.churn
        say(f"churn during the chaos: {churn.files_added} files added to {churn.datasets_opened} re-opened datasets, "
            f"{churn.kills} task kills, {churn.incexecs} incexec; refused {sum(churn.refused.values())} ({brief(churn.refused)})")
    say(f"kills survived: {result.kills} SIGKILLs during the chaos ({brief(chaos.kills)}), {chaos.stopped} more to stop it; "
        f"{chaos.starts} processes started")
    say(f"kills by the pass they hit (or the pass about to start): {brief(chaos.interrupted)}")
    pipeline = passes["passes"].get("watch", 0)
    say(f"passes run: {pipeline} pipeline runs to the end (watch passes); per agent: {brief(passes['passes'])}; "
        f"{passes['simulated']} jobs run by the pilots; {passes['lost_leases']} tasks given up by a pass (LeaseLost: lease gone or task moved on)")
    say(f"live watch passes during the chaos: {brief(passes['watched'])}")
    if passes["errors"]:
        say(f"pass errors during the chaos (a pass reports them and the next pass retries): {sum(passes['errors'].values())}")
        for reason, n in passes["errors"].most_common(8):
            say(f"    {n:5d} x {reason}")
    end = result.at_chaos_end
    say(f"at the end of the chaos: tasks {brief(end['tasks'])}; jobs {brief(end['jobs'])}; leases held {end['leases']['held']}; "
        f"records picked/running {brief(end['records'])}")
    say(f"settling: {settled.rounds} rounds in {settled.seconds:.0f}s, clock {settled.clock:%Y-%m-%d %H:%M} (now + 3 h, +10 min a round), "
        f"final watch at {settled.final_watch:%H:%M}; watch did: {brief(settled.actions)}")
    if settled.errors:
        say(f"pass errors while settling: {brief(settled.errors)}")
    final = result.final
    say(f"tasks: {sum(final['tasks'].values())} ({result.tasks_loaded} loaded and submitted), final statuses: {brief(final['tasks'])}")
    say(f"jobs: {sum(final['jobs'].values())} ({brief(final['jobs'])}); retry history: {brief(final['history'])}")
    say("invariants:")
    for name, problems in result.checks:
        say(f"  {'ok  ' if not problems else 'FAIL'} {name}: {len(problems)} violations")
        for problem in problems[:10]:
            say(f"         {problem}")
        if len(problems) > 10:
            say(f"         ... and {len(problems) - 10} more")
    say(f"result: {result.violations} violations")


# ---------------------------------------------------------------------------------------- backends

@contextmanager
def fresh_store(backend: str, keep: bool = False) -> Iterator[tuple[str, Path]]:
    """An empty store URL and a work directory; both removed afterwards unless `keep`."""
    workdir = Path(tempfile.mkdtemp(prefix="jedictl-chaos-"))
    schema = None
    try:
        if backend == "sqlite":
            yield f"sqlite:///{workdir / 'chaos.db'}", workdir
        else:
            import psycopg

            schema = f"chaos_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(_libpq(PG_URL), autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            separator = "&" if "?" in PG_URL else "?"
            yield f"{PG_URL}{separator}options=-csearch_path%3D{schema}", workdir
    finally:
        if keep:
            print(f"kept: {workdir}" + (f" and schema {schema}" if schema else ""))
        else:
            if schema is not None:
                import psycopg

                with psycopg.connect(_libpq(PG_URL), autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            shutil.rmtree(workdir, ignore_errors=True)


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--minutes", type=float, default=1.0, help="how long the chaos lasts")
    parser.add_argument("--workers", type=int, help="`run --loop` processes (default 4 on PostgreSQL, 2 on SQLite)")
    parser.add_argument("--simulators", type=int, default=2, help="`simulate --loop` processes (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=20, help="chaos tasks loaded at the start, besides the demo's six")
    parser.add_argument("--files", type=int, default=40, help="files per input dataset")
    parser.add_argument("--backlog", type=int, default=8, help="keep at least this many tasks active (not final, not waiting) "
                                                              "while the chaos lasts, submitting more (0: off)")
    parser.add_argument("--lease-seconds", type=int, default=60,
                        help="lease.seconds of every process (default 60: leases of killed processes expire during the chaos)")
    parser.add_argument("--cron-rounds", type=int, default=6, help="rounds of plain concurrent `run --once` before the chaos (0: off)")
    parser.add_argument("--cron-workers", type=int, help="`run --once` processes per cron round (default: --workers)")
    parser.add_argument("--churn-every", type=float, default=3.0, help="seconds between adding files to datasets and an incexec (0: off)")
    parser.add_argument("--break-guard", choices=("claim", "release"),
                        help="break a lease guard in every process (tests/hooks) to show that the invariants catch it")
    parser.add_argument("--keep", action="store_true", help="keep the store and the process logs")
    args = parser.parse_args(argv)
    workers = args.workers or (4 if args.backend == "postgresql" else 2)
    with fresh_store(args.backend, args.keep) as (url, workdir):
        result = run_chaos(url, args.minutes * 60, workers, args.seed, simulators=args.simulators, tasks=args.tasks,
                           files_per_dataset=args.files, backlog=args.backlog, lease_seconds=args.lease_seconds, workdir=workdir,
                           cron_rounds=args.cron_rounds, cron_workers=args.cron_workers or workers, churn_every=args.churn_every,
                           break_guard=args.break_guard, say=lambda text: print(text, flush=True))
    report(result)
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
