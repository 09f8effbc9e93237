"""`jedictl demo --execute`: one small task run for real on this machine, end to end.

Nothing here is simulated: twelve input files with numbers in them are written to a scratch
directory and registered with `data import --scan`'s steps (size, adler32, placed at their replica
paths under a storage endpoint with a `file://` URL); the payload is a short Python program that adds up
the numbers of its inputs; `jedictl harvest` submits real pilot processes (the site's batch system is
`local`), which stage the inputs in, run the payload, stage the outputs out and report. One payload
fails on its first attempt (a sentinel file the program removes when it fails), so the retry is real
too. The agents run on the wall clock, one round a second, until the task ends.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jedictl.config import Settings
from jedictl.engine.agent import PassReport
from jedictl.engine.catalogs.importer import import_resource_catalog
from jedictl.engine.catalogs.scan import place_files, plan_scan, register_scan
from jedictl.engine.pipeline import run_pipeline
from jedictl.engine.sim.demo import holds_tasks, task_status  # noqa: F401 - the command asks the same questions
from jedictl.engine.storage.checksums import digest
from jedictl.engine.storage.paths import replica_path, replica_scope
from jedictl.engine.task.submission import parse_definition, register_task
from jedictl.model import TASK_FINAL
from jedictl.store import data_catalog as catalog_store
from jedictl.store import pilots as pilot_store
from jedictl.store import tasks as task_store
from jedictl.store import views as view_store

SITE = "LOCAL"
ENDPOINT = "LOCAL_DATADISK"
INPUT = "user.demo.numbers"
OUTPUT = "user.demo.execute.sums"
LOG = "user.demo.execute.log"
N_FILES = 12
FAILING_INPUT = "numbers._000005.txt"  # the payload's one injected failure reads this file

PAYLOAD = '''\
#!/usr/bin/env python3
"""jedictl demo --execute's payload: add up the numbers in the input files, write the sum.

usage: sum_numbers.py SENTINEL IN1,IN2,... OUT
Fails once on purpose (exit 3) when SENTINEL exists and it reads %(failing)s: it removes SENTINEL,
so the retry succeeds -- the demo's injected failure.
"""
import os
import sys

sentinel, inputs, output = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
if "%(failing)s" in inputs and os.path.exists(sentinel):
    os.remove(sentinel)
    print("injected failure: exiting 3 (the retry will succeed)", file=sys.stderr)
    sys.exit(3)
total = 0
for name in inputs:
    with open(name) as stream:
        total += sum(int(line) for line in stream if line.strip())
with open(output, "w") as stream:
    stream.write("%%d\\n" %% total)
print("inputs", inputs, "sum", total)
''' % {"failing": FAILING_INPUT}


@dataclass(frozen=True)
class Workspace:
    """The demo's directory: storage, inputs, the payload, the pilots' work directories."""

    root: Path

    @property
    def storage(self) -> Path:
        return self.root / "storage" / ENDPOINT

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def payload(self) -> Path:
        return self.root / "bin" / "sum_numbers.py"

    @property
    def sentinel(self) -> Path:
        return self.root / "FAIL_ONCE"

    @property
    def pilots(self) -> Path:
        return self.root / "pilots"


def grid(workspace: Workspace) -> dict[str, Any]:
    """One nucleus, one endpoint with a URL, one site whose pilots `harvest` starts as local processes."""
    return {
        "nuclei": [{"name": SITE, "status": "active"}],
        "storage_endpoints": [{"name": ENDPOINT, "nucleus": SITE, "url": workspace.storage.as_uri(), "free_gb": 1000, "total_gb": 2000}],
        "sites": [{"name": SITE, "nucleus": SITE, "core_count": 1, "max_memory": 8000,
                   "read_endpoints": [ENDPOINT], "write_endpoints": [ENDPOINT],
                   "batch": {"system": "local", "max_pilots": 2, "max_queued": 2, "jobs_per_pilot": 3, "slots": 2,
                             "workdir": str(workspace.pilots)}}],
    }


def task_spec(workspace: Workspace) -> dict[str, Any]:
    return {
        "name": "user.demo.execute.sums", "label": "user",
        "transformation": sys.executable,  # the payload is a Python program: run it with this Python, no shell
        "command": f"{workspace.payload} {workspace.sentinel} ${{IN/L}} ${{OUTPUT0}}",
        "inputs": [{"dataset": INPUT}],
        "outputs": [{"dataset": OUTPUT, "file_template": "sums.${JEDITASKID}._${SN/P}.txt"}],
        "log": {"dataset": LOG, "file_template": "log.${JEDITASKID}._${SN/P}.tgz"},
        "split": {"n_files_per_job": 2},
        "scouts": {"skip_scout": True},  # scouts would wait for their assessment; the demo shows the retry instead
        "retry": {"max_attempt": 3},
    }


def make_inputs(workspace: Workspace, seed: int) -> None:
    """Twelve files of numbers, the payload, and the sentinel of the one injected failure."""
    rng = random.Random(seed)
    workspace.inputs.mkdir(parents=True)
    for index in range(1, N_FILES + 1):
        numbers = [rng.randint(1, 1000) for _ in range(rng.randint(50, 200))]
        (workspace.inputs / f"numbers._{index:06d}.txt").write_text("".join(f"{n}\n" for n in numbers))
    workspace.payload.parent.mkdir(parents=True)
    workspace.payload.write_text(PAYLOAD)
    workspace.payload.chmod(0o755)
    workspace.sentinel.write_text("the demo's payload fails once while this file exists\n")
    workspace.storage.mkdir(parents=True)
    workspace.pilots.mkdir(parents=True)


def build(store: Any, settings: Settings, now: datetime, owner: str, workspace: Workspace, seed: int) -> int:
    """Grid, real input files registered at their replica paths, and the task; returns its id."""
    make_inputs(workspace, seed)
    with store.begin() as conn:
        import_resource_catalog(conn, grid(workspace), now)
    with store.read() as conn:
        plan = plan_scan(conn, workspace.inputs, ENDPOINT, INPUT, None, "copy")
    entries = place_files(plan)
    with store.begin() as conn:
        register_scan(conn, plan, entries, now)
        catalog_store.set_state(conn, INPUT, "closed", now)  # complete: the task need not wait for more files
        spec = task_spec(workspace)
        return register_task(conn, parse_definition(spec, user="demo", default_user="demo"), spec, now, owner)


@dataclass(frozen=True)
class Round:
    number: int
    now: datetime
    reports: list[tuple[PassReport, float]]


def rounds(store: Any, settings: Settings, owner: str, clock: Callable[[], datetime], seed: int,
           max_rounds: int = 120) -> Iterator[Round]:
    """Every agent once a round (harvest included: the site has a batch system) until the task ends."""
    for number in range(1, max_rounds + 1):
        now = clock()
        reports = list(run_pipeline(store, settings, owner, clock, seed=seed + number))
        yield Round(number, now, reports)
        if all_final(store):
            return


def progress_line(store: Any, task_id: int, round_: Round, elapsed: float) -> str:
    """One plain line per round: the task, its jobs by status, the pilots by state."""
    with store.read() as conn:
        status = task_store.status_of(conn, task_id)
        jobs = dict((s, n) for t, s, n in view_store.job_status_counts_by(conn, "task") if t == task_id)
        pilots = pilot_store.state_counts(conn)
    listed = lambda counts: ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"  # noqa: E731
    return f"round {round_.number:>2} ({elapsed:4.0f} s): task {task_id} {status}; jobs {listed(jobs)}; pilots {listed(pilots)}"


def wait_for_pilots(store: Any, timeout_s: float) -> None:
    """The pilots exit on their own (`--once`: no work left); wait for them so that nothing runs on
    after the demo says it is over."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with store.read() as conn:
            if not pilot_store.state_counts(conn, live_only=True):
                return
        time.sleep(0.5)


def retry_count(store: Any) -> int:
    with store.read() as conn:
        return view_store.retry_count(conn)


def all_final(store: Any) -> bool:
    with store.read() as conn:
        return task_store.count_not_in_status(conn, [s.value for s in TASK_FINAL]) == 0


@dataclass(frozen=True)
class OutputFile:
    lfn: str
    path: Path
    registered_size: int | None
    registered_checksum: str | None
    size_on_disk: int | None
    checksum_on_disk: str | None

    @property
    def matches(self) -> bool:
        return (self.size_on_disk, self.checksum_on_disk) == (self.registered_size, self.registered_checksum)


def outputs(store: Any, workspace: Workspace) -> list[OutputFile]:
    """Every file the task registered in its output and log datasets, checked against the disk."""
    found = []
    with store.read() as conn:
        datasets = [catalog_store.show_dataset(conn, name, with_files=True) for name in (OUTPUT, LOG)
                    if catalog_store.dataset_lfns(conn, name) is not None]
    for dataset in datasets:
        for entry in dataset["files"]:
            path = replica_path(workspace.storage.as_uri(), replica_scope(entry.get("scope") or dataset["scope"], dataset["name"]), entry["lfn"])
            size, checksum = digest(path) if path.exists() else (None, None)
            found.append(OutputFile(entry["lfn"], path, entry.get("size"), entry.get("checksum"), size, checksum))
    return found
