"""A one-node Slurm cluster in a temp directory, for tests (and by hand: `python -m tests.slurm_cluster DIR`).

Debian's `slurm-wlm` and `munge` packages, no system configuration touched: the cluster's own munged
(its own socket, the system's key), slurmctld and slurmd all run as root from a generated slurm.conf
whose state, spool, logs and pid files live under DIR, on free ports -- so several clusters (xdist
workers) and a system Slurm can coexist. Clients find it through `SLURM_CONF`. Each daemon is
stopped by the pid it wrote, never by name.

Settings that make a laptop or a CI container a cluster: proctrack/linuxproc and task/none (no cgroups
needed), select/cons_tres with a node of the machine's CPUs and memory, no accounting daemon (so `sacct`
has nothing: the batch code reads ended jobs from `squeue -t all` while the controller keeps them,
MinJobAge), and short KillWait/timeouts so that a cancel or a time limit acts within seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


def installed() -> str | None:
    """None when every program the cluster needs is on PATH (or in /usr/sbin), else what is missing."""
    missing = [name for name in (*DAEMONS, "sbatch", "squeue", "scancel", "sinfo") if _which(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} not found; apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root"
    if not Path("/etc/munge/munge.key").exists():
        return "munge has no key (/etc/munge/munge.key)"
    return None


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 1024


class SlurmCluster:
    """`start()` writes the configuration and starts the daemons; `env` is what clients need; `stop()`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.node = f"jt{os.getpid()}"
        self.cpus = os.cpu_count() or 1
        self.memory_mb = _memory_mb()
        self.pids: dict[str, int] = {}

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def write_config(self) -> None:
        for sub in ("state", "spool", "log", "munge", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        ctld_port, d_port = _free_ports(2)
        host = socket.gethostname()
        self.conf.write_text("\n".join([
            "ClusterName=jedictltest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={d_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldPidFile={self.root / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",  # start pending jobs within a second, not a minute
            "MinJobAge=600",  # ended jobs stay visible to `squeue -t all` (no sacct here)
            "KillWait=5",  # SIGTERM -> SIGKILL on scancel or a time limit
            "OverTimeLimit=0",
            "InactiveLimit=0",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "MaxArraySize=100001",
            f"NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4",
            "",
        ]))

    def start(self, timeout: float = 30.0) -> None:
        self.write_config()
        run = self.root / "run"
        self._daemon("munged", [_which("munged") or "munged", "--force", f"--socket={self.munge_socket}",
                                f"--pid-file={run / 'munged.pid'}", f"--log-file={self.root / 'log' / 'munged.log'}",
                                f"--seed-file={self.root / 'munge' / 'seed'}"], run / "munged.pid")
        env = {**os.environ, **self.env}
        self._daemon("slurmctld", [_which("slurmctld") or "slurmctld", "-f", str(self.conf)], run / "slurmctld.pid", env)
        self._daemon("slurmd", [_which("slurmd") or "slurmd", "-f", str(self.conf), "-N", self.node], run / "slurmd.pid", env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-n", self.node, "-o", "%T"], env=env, capture_output=True, text=True)
            if state.returncode == 0 and state.stdout.strip().rstrip("*") in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the test Slurm cluster did not come up in {timeout} s; logs in {self.root / 'log'}")

    def _daemon(self, name: str, argv: list[str], pid_file: Path, env: dict[str, str] | None = None) -> None:
        # Each daemon forks into the background and writes its pid file: that pid is what stop() signals.
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            self.stop()
            raise RuntimeError(f"{name} did not start: {result.stderr.strip() or result.stdout.strip()}")
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} wrote no pid file {pid_file}")
            time.sleep(0.05)
        self.pids[name] = int(pid_file.read_text().split()[0])

    def stop(self) -> None:
        for name in reversed(DAEMONS):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


if __name__ == "__main__":  # start one by hand: python -m tests.slurm_cluster DIR; stop with Ctrl-C
    import sys

    cluster = SlurmCluster(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/jedictl-slurm"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill PID` stops the daemons too
    cluster.start()
    print(f"export SLURM_CONF={cluster.conf}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
