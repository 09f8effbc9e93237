"""SlurmBatch: pilots as Slurm batch jobs -- sbatch (a job array when several go at once), squeue,
sacct, scancel. Every command is an argument vector; nothing goes through a shell.

The batch script is a small Python program (the interpreter jedictl runs on, so the pilot runs the
same install) that picks its pilot id by `SLURM_ARRAY_TASK_ID` and execs the pilot: no shell quoting
of the store URL or the pilot's arguments, and the pilot itself receives Slurm's signals (SIGTERM on
scancel or at the time limit). It is written under the log directory, which must be on a filesystem
the compute nodes see (as the store's SQLite file must be, or PostgreSQL reachable).

Ended jobs: `squeue -t all` lists them while the controller keeps them (MinJobAge, 300 s by default);
after that `sacct` answers where accounting is configured. An id neither knows is left out.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

from jedictl.engine.harvest.batch import PILOT_ID_ENV, BatchError, Submission, decode_wait_status
from jedictl.engine.harvest.policy import ENDED, QUEUED, RUNNING, BatchView

QUEUED_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED", "RESIZING"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"}
TIMEOUT_S = 60.0


class SlurmBatch:
    name = "slurm"

    def submit(self, submission: Submission) -> list[str]:
        site, ids = submission.site, list(submission.pilot_ids)
        if not ids:
            return []
        sbatch = _program("sbatch", site)
        try:
            submission.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BatchError(f"site {site}: batch system slurm: cannot create {exc.filename}: {exc.strerror}") from None
        script = submission.log_dir / f"pilot-{ids[0]}.py"
        script.write_text(pilot_script(submission.argv, submission.env, ids))
        script.chmod(0o700)  # it carries the store URL
        argv = [sbatch, "--parsable", *sbatch_options(site, submission.options, len(ids)),
                f"--output={submission.log_dir / ('slurm-%A_%a.out' if len(ids) > 1 else 'slurm-%j.out')}",
                f"--chdir={submission.workdir or submission.log_dir}", str(script)]
        out = _run(argv, site)
        job = out.strip().splitlines()[-1].split(";")[0].strip() if out.strip() else ""
        if not job.isdigit():
            raise BatchError(f"site {site}: batch system slurm: sbatch printed no job id ({out.strip()[:200]!r})")
        return [f"{job}_{index}" for index in range(len(ids))] if len(ids) > 1 else [job]

    def status(self, batch_ids: Sequence[str]) -> dict[str, BatchView]:
        wanted = set(batch_ids)
        if not wanted:
            return {}
        # All of this user's jobs, array elements one per line: `squeue -j` fails outright when any
        # listed id has left the controller, which is exactly the case we are asking about.
        squeue = _program("squeue", None)
        out = _run([squeue, "-h", "-r", "-t", "all", f"--user={getpass.getuser()}", "-O", "JobArrayID:64,State:32,exit_code:16"], None)
        views = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] in wanted:
                views[parts[0]] = _view(parts[1], int(parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else None, waitstatus=True)
        missing = wanted - set(views)
        if missing:
            views.update(_sacct(sorted(missing)))
        return views

    def cancel(self, batch_ids: Sequence[str]) -> None:
        if batch_ids:
            _run([_program("scancel", None), *batch_ids], None)


def sbatch_options(site: str, options: Mapping[str, object], count: int) -> list[str]:
    """sbatch arguments from the site's `batch` settings (engine.catalogs.sites.BATCH_FIELDS)."""
    args = [f"--job-name=jedictl-pilot-{site}"]
    if count > 1:
        args.append(f"--array=0-{count - 1}")
    for key, flag in (("partition", "--partition"), ("account", "--account"), ("qos", "--qos")):
        if options.get(key):
            args.append(f"{flag}={options[key]}")
    if options.get("walltime"):
        minutes = -(-int(options["walltime"]) // 60)  # type: ignore[call-overload]  # sbatch --time counts minutes: round up
        args.append(f"--time={minutes}")
    if options.get("cores"):
        args.append(f"--cpus-per-task={options['cores']}")
    if options.get("memory_mb"):
        args.append(f"--mem={options['memory_mb']}")
    args.extend(str(arg) for arg in options.get("submit_args") or ())  # type: ignore[union-attr]
    return args


def pilot_script(argv: Sequence[str], env: Mapping[str, str], pilot_ids: Sequence[int]) -> str:
    """The batch script: choose this array element's pilot id, set the environment, exec the pilot. It needs
    only `os`, so its interpreter skips `site` (-S: no site-packages, no .pth files) -- a batch job pays two
    interpreter start-ups before its pilot's first dispatch, and this one need not cost more than ~10 ms."""
    return "\n".join([
        f"#!{sys.executable} -S",
        "# Written by `jedictl harvest`: one pilot per array element (SLURM_ARRAY_TASK_ID indexes PILOT_IDS).",
        "import os",
        f"PILOT_IDS = {list(pilot_ids)!r}",
        f"ARGV = {list(argv)!r}",
        f"os.environ.update({dict(env)!r})",
        f"os.environ[{PILOT_ID_ENV!r}] = str(PILOT_IDS[int(os.environ.get('SLURM_ARRAY_TASK_ID') or 0)])",
        "os.execv(ARGV[0], ARGV)",
        "",
    ])


def _view(state: str, code: int | None, *, waitstatus: bool) -> BatchView:
    state = state.split()[0].rstrip("+")  # sacct: "CANCELLED by 0", "CANCELLED+"
    if state in QUEUED_STATES:
        return BatchView(QUEUED, None, state)
    if state in RUNNING_STATES:
        return BatchView(RUNNING, None, state)
    if code is not None and waitstatus:
        code = decode_wait_status(code)
    return BatchView(ENDED, code, state)


def _sacct(batch_ids: list[str]) -> dict[str, BatchView]:
    """Ended jobs from accounting; nothing when the cluster keeps none (sacct then exits non-zero)."""
    sacct = shutil.which("sacct")
    if sacct is None:
        return {}
    try:
        result = subprocess.run([sacct, "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(batch_ids)],
                                capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if result.returncode != 0:
        return {}
    views = {}
    for line in result.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0] in batch_ids:
            code, _, sig = parts[2].partition(":")  # "exit:signal"
            exit_code = 128 + int(sig) if sig.isdigit() and int(sig) else int(code) if code.isdigit() else None
            views[parts[0]] = _view(parts[1], exit_code, waitstatus=False)
    return views


def _program(name: str, site: str | None) -> str:
    path = shutil.which(name)
    if path is None:
        raise BatchError(f"{'site ' + site + ': ' if site else ''}batch system slurm: {name} not found")
    return path


def _run(argv: list[str], site: str | None) -> str:
    """Run a Slurm client; a busy controller (exit 1 with "Socket timed out") is retried twice."""
    where = f"site {site}: " if site else ""
    for attempt in range(3):
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ))
        except subprocess.TimeoutExpired:
            raise BatchError(f"{where}batch system slurm: {Path(argv[0]).name} did not answer in {TIMEOUT_S:.0f} s") from None
        except OSError as exc:
            raise BatchError(f"{where}batch system slurm: {Path(argv[0]).name}: {exc.strerror}") from None
        if result.returncode == 0:
            return result.stdout
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        text = message[-1] if message else f"exit code {result.returncode}"
        if "timed out" not in text.lower() or attempt == 2:
            raise BatchError(f"{where}batch system slurm: {Path(argv[0]).name} failed: {text}")
        time.sleep(1 + attempt)
    raise AssertionError("unreachable")  # pragma: no cover
