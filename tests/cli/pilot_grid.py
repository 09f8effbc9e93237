"""A small real grid for pilot tests: one nucleus, one disk endpoint with a file:// URL, one site, an
input dataset of real files placed at their deterministic paths, and a task whose payload is a script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Sequence

import yaml

from jedictl.engine.storage.checksums import digest
from jedictl.engine.storage.paths import replica_path, replica_scope

SITE = "LOCAL"
ENDPOINT = "LOCAL_DISK"
INPUT = "data.pilot.in"


def sites_document(disk: Path, *, max_walltime: int = 172800, direct_io: bool = False, container_runtime: str | None = None,
                   url: str | None = None, cvmfs: bool = False) -> dict[str, Any]:
    site: dict[str, Any] = {"name": SITE, "nucleus": "N1", "core_count": 1, "core_power": 10.0, "max_memory": 4000,
                            "max_walltime": max_walltime, "max_scratch_mb": 100000, "read_endpoints": [ENDPOINT],
                            "write_endpoints": [ENDPOINT], "direct_io": direct_io, "cvmfs": cvmfs}
    if container_runtime:
        site["container_runtime"] = container_runtime
    return {"nuclei": [{"name": "N1", "status": "active"}],
            "storage_endpoints": [{"name": ENDPOINT, "kind": "disk", "nucleus": "N1", "free_gb": 800000, "total_gb": 2000000,
                                   "url": url or f"file://{disk}"}],
            "sites": [site]}


def place_inputs(disk: Path, n_files: int, size: int = 1000) -> list[dict[str, Any]]:
    """Real files at their replica paths; their catalog entries (size, adler32)."""
    entries = []
    for index in range(1, n_files + 1):
        lfn = f"in.{index:03d}.dat"
        path = replica_path(f"file://{disk}", replica_scope(None, INPUT), lfn)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
        nbytes, checksum = digest(path)
        entries.append({"lfn": lfn, "size": nbytes, "checksum": checksum, "events": 10})
    return entries


PAYLOAD = """\
#!{python}
# A payload: copies its input (argv[1]) to its output (argv[2]) with a line added (or, given only an
# output, writes one); PILOT_TEST_MODE says how to misbehave.
import os, subprocess, sys, time
src, dst = (sys.argv[1], sys.argv[2]) if len(sys.argv) > 2 else (None, sys.argv[1])
mode = os.environ.get("PILOT_TEST_MODE", "ok")
with open(os.environ.get("PILOT_TEST_PIDS", os.devnull), "a") as f:
    f.write(f"{{os.getpid()}} {{time.time()}}\\n")
print("payload", os.getpid(), "in", os.getcwd(), flush=True)
if mode.startswith("sleep"):
    time.sleep(float(mode[5:]))
if mode == "fail":
    print("something went wrong", file=sys.stderr)
    sys.exit(7)
if mode == "burn":
    x = bytearray(50 * 1024 * 1024)
    t = time.process_time()
    while time.process_time() - t < 0.5:
        pass
if mode != "no-output":
    with open(dst, "wb") as o:
        o.write((open(src, "rb").read() if src else b"") + b"processed\\n")
if mode == "close-self":  # the job is closed behind the pilot's back: its finished report will be refused
    subprocess.run([sys.executable, "-m", "jedictl", "jobs", "kill", "--code", "9", os.environ["PANDAID"]], check=True)
"""


def write_payload(folder: Path, executable: bool = True) -> Path:
    script = folder / "payload.py"
    script.write_text(PAYLOAD.format(python=sys.executable))
    script.chmod(0o755 if executable else 0o644)
    return script


def task_spec(transformation: str, name: str = "pilot.test.1", command: str = "${IN} ${OUTPUT0}", **extra: Any) -> str:
    spec = {"name": name, "label": "managed", "transformation": transformation, "command": command,
            "inputs": [{"dataset": INPUT}],
            "outputs": [{"dataset": f"{name}.out", "file_template": "out.${SN}.dat"}],
            "log": {"dataset": f"{name}.log", "file_template": "log.${SN}.tgz"},
            "split": {"n_files_per_job": 1}, "scouts": {"skip_scout": True}, **extra}
    return yaml.safe_dump(spec)


def make_grid(cli: Any, store: str, tmp_path: Path, *, n_files: int = 2, payload: Path | None = None, transformation: str | None = None,
              spec: dict[str, Any] | None = None, **site: Any) -> Path:
    """Import the grid and a task, and make its jobs; returns the disk root."""
    disk = tmp_path / "disk"
    disk.mkdir(exist_ok=True)
    (tmp_path / "sites.yaml").write_text(yaml.safe_dump(sites_document(disk, **site)))
    cli("sites", "import", str(tmp_path / "sites.yaml"), db=store)
    files = place_inputs(disk, n_files)
    data = {"datasets": [{"name": INPUT, "state": "closed", "replicas": [{"endpoint": ENDPOINT}], "files": files}]}
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    cli("data", "import", str(tmp_path / "data.yaml"), db=store)
    program = transformation or str(payload or write_payload(tmp_path))
    cli("submit", "-", db=store, input=task_spec(program, **(spec or {})))
    generate(cli, store)
    return disk


def generate(cli: Any, store: str) -> None:
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, db=store)


def pilot_argv(store: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "jedictl", "pilot", "--site", SITE, "--db", store, "-o", "json", *args]


def run_pilot(store: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    """A real pilot process to its end: (exit code, its JSON report, its stderr)."""
    done = subprocess.run(pilot_argv(store, *args), capture_output=True, text=True, timeout=timeout, env=pilot_env(env))
    try:
        report = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        report = {"stdout": done.stdout}
    return done.returncode, report, done.stderr


def pilot_env(extra: dict[str, str] | None = None, **settings: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"JEDICTL_PILOT__HEARTBEAT_SECONDS": "1", "JEDICTL_PILOT__KILL_GRACE_SECONDS": "2",
                "JEDICTL_PILOT__POLL_SECONDS": "0.5", **settings, **(extra or {})})
    return env


def start_pilot(store: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(pilot_argv(store, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pilot_env(env))


def shown_jobs(cli: Any, store: str) -> list[dict[str, Any]]:
    """Every job, `jobs show` of each (errors, metrics), by job id."""
    listed = sorted(cli.json("jobs", "list", "--limit", "1000", db=store), key=lambda j: j["job_id"])
    return [cli.json("jobs", "show", str(j["job_id"]), db=store) for j in listed]


def failure(job: dict[str, Any]) -> tuple[Any, ...]:
    return job["status"], job["error_source"], job["error_code"]


def wait_for(predicate: Any, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def payload_pids(path: Path) -> list[int]:
    """The pids the payloads wrote (PILOT_TEST_PIDS: one line per payload, the pid first)."""
    return [int(line.split()[0]) for line in path.read_text().splitlines()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive (its parent, the killed pilot's re-parented payload, may not have reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def textblock(text: str) -> str:
    return textwrap.dedent(text)
