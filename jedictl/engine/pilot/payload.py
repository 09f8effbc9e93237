"""The payload: its argument vector, the container around it, and its process group.

The job's parameters are split like a shell would split them (shlex) but never given to a shell: quotes
group words, `$`, `;` and backquotes are plain characters. A task that wants a shell names one as its
transformation (`bash`, with `-c '...'` in its parameters): that is asking for it explicitly.

The payload runs in a session of its own (start_new_session), so that a kill reaches every process it
started -- PanDA's pilot kills the payload's process group the same way: SIGTERM, a grace period, SIGKILL.
"""

from __future__ import annotations

import json

import os
import select
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from jedictl.engine.pilot.codes import PAYLOAD_FAILED, TRANSFORM_NOT_FOUND, PilotError

STDOUT = "payload.stdout"
STDERR = "payload.stderr"
RUNTIMES = ("apptainer", "docker")


def payload_argv(transformation: str | None, job_parameters: str | None) -> list[str]:
    """[transformation] + shlex.split(job_parameters), or the parameters alone without a transformation."""
    try:
        words = shlex.split(job_parameters or "")
    except ValueError as exc:  # an unbalanced quote: no argument vector can be made of it
        raise PilotError(PAYLOAD_FAILED, f"job parameters are not an argument vector: {exc}") from exc
    argv = ([transformation] if transformation else []) + words
    if not argv:
        raise PilotError(TRANSFORM_NOT_FOUND, "the job names no program to run (no transformation, no parameters)")
    return argv


def container_argv(runtime: str, image: str, workdir: str, argv: Sequence[str], binds: Sequence[str] = ()) -> list[str]:
    """`argv` run inside `image` with the work directory (and `binds`, e.g. directly read endpoints) mounted
    at the same path, so that the names in the job's parameters mean the same inside and out."""
    if runtime == "apptainer":
        mounts = [arg for path in (workdir, *binds) for arg in ("--bind", path)]
        return ["apptainer", "exec", *mounts, "--pwd", workdir, image, *argv]
    if runtime == "docker":
        mounts = [arg for path in (workdir, *binds) for arg in ("-v", f"{path}:{path}")]
        name = image.removeprefix("docker://")  # apptainer's notation for a registry image; docker wants the bare name
        return ["docker", "run", "--rm", *mounts, "-w", workdir, name, *argv]
    raise PilotError(PAYLOAD_FAILED, f"container runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")


def job_environment(payload: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    """The payload's environment: the pilot's, plus the names PanDA's pilot sets for a payload."""
    env = dict(base)
    env.update({"PANDAID": str(payload["job_id"]), "JEDICTL_JOB_ID": str(payload["job_id"]),
                "JEDICTL_TASK_ID": str(payload["task_id"]), "ATHENA_CORE_NUMBER": str(payload.get("core_count") or 1)})
    env.update(mask_environment(payload.get("mask")))
    return env


#: The environment a WMCore job's mask is given to its payload in (docs/executor-protocol.md, "Job masks").
MASK_ENVIRONMENT = {"first_event": "JEDICTL_FIRST_EVENT", "last_event": "JEDICTL_LAST_EVENT", "first_run": "JEDICTL_FIRST_RUN",
                    "last_run": "JEDICTL_LAST_RUN", "first_lumi": "JEDICTL_FIRST_LUMI", "last_lumi": "JEDICTL_LAST_LUMI"}


def mask_environment(mask: Mapping[str, Any] | None) -> dict[str, str]:
    """A WMCore job's mask as environment variables: each bound set, and JEDICTL_LUMIS as
    `run:first-last,first-last;run:...` (the lumi ranges per run), JEDICTL_MASK the mask as JSON."""
    if not mask:
        return {}
    env = {name: str(mask[key]) for key, name in MASK_ENVIRONMENT.items() if mask.get(key) is not None}
    if mask.get("lumis"):
        env["JEDICTL_LUMIS"] = ";".join(f"{run}:" + ",".join(f"{first}-{last}" for first, last in ranges)
                                        for run, ranges in mask["lumis"].items())
    env["JEDICTL_MASK"] = json.dumps(dict(mask), sort_keys=True)
    return env


class Process:
    """A started payload: its process group, and its end (exit code and rusage) once reaped."""

    def __init__(self, argv: Sequence[str], workdir: Path, env: Mapping[str, str]):
        self.argv = list(argv)
        out, err = open(workdir / STDOUT, "wb"), open(workdir / STDERR, "wb")
        try:
            self.popen = subprocess.Popen(self.argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          env=dict(env), start_new_session=True, close_fds=True)
        except FileNotFoundError as exc:
            raise PilotError(TRANSFORM_NOT_FOUND, f"Transform not found: {self.argv[0]}") from exc
        except PermissionError as exc:
            raise PilotError(PAYLOAD_FAILED, f"Payload is not executable: {self.argv[0]} ({exc.strerror})") from exc
        except OSError as exc:  # ENOEXEC (no #! line), E2BIG, ...
            raise PilotError(PAYLOAD_FAILED, f"Payload could not be started: {self.argv[0]} ({exc.strerror or exc})") from exc
        finally:
            out.close()
            err.close()
        self.pid = self.popen.pid
        self.started = time.monotonic()
        self.exit_code: int | None = None
        self.rusage: Any = None
        # A pidfd becomes readable the instant the process ends: no sleep-polling between samples.
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the payload's own process to end; True once it has (reaped)."""
        if self.exit_code is not None:
            return True
        if self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            poller.poll(max(timeout, 0) * 1000)
        pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            if self._pidfd is None:
                time.sleep(min(max(timeout, 0), 0.05))
            return False
        # wait4, not Popen.wait: its rusage holds the CPU of the payload and every child it reaped.
        self.exit_code = os.waitstatus_to_exitcode(status)
        self.rusage = rusage
        self.popen.returncode = self.exit_code  # Popen must not wait for it again
        self._close()
        return True

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # the whole group is gone already

    def stop(self, grace: float) -> None:
        """SIGTERM to the group; SIGKILL to whatever of it is left after `grace` seconds."""
        self.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while not self.wait(min(0.1, max(deadline - time.monotonic(), 0))) and time.monotonic() < deadline:
            pass
        # Children may outlive the leader (or ignore SIGTERM): the group gets SIGKILL either way.
        self.signal_group(signal.SIGKILL)
        while not self.wait(1.0):
            pass

    def _close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def stderr_tail(workdir: Path, limit: int = 300) -> str:
    """The payload's last non-empty stderr line, for the error diag of a non-zero exit."""
    try:
        with open(workdir / STDERR, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(handle.tell() - 4096, 0))
            lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""
