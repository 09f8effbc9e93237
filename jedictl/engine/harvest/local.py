"""LocalBatch: pilots as detached processes on this host, for laptops and tests.

Each pilot runs under `jedictl.engine.harvest.wrapper` in a session of its own (so the harvest pass,
its terminal or cron job can end without taking the pilot along). Its state lives in `state_dir`:
`<id>.pid` written at submission and `<id>.exit` written by the wrapper when the pilot ends. A process
counts as the pilot's only if its command line carries the batch id, so a reused pid is never
mistaken for it. The state is per host: a store shared by several hosts needs a real batch system.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from jedictl.engine.harvest.batch import PILOT_ID_ENV, BatchError, Submission
from jedictl.engine.harvest.policy import ENDED, RUNNING, BatchView


class LocalBatch:
    name = "local"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)

    def submit(self, submission: Submission) -> list[str]:
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            submission.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BatchError(f"site {submission.site}: batch system local: cannot create {exc.filename}: {exc.strerror}") from None
        ids = []
        for pilot_id in submission.pilot_ids:
            batch_id = f"local-{secrets.token_hex(6)}"
            env = {**os.environ, **submission.env, PILOT_ID_ENV: str(pilot_id)}
            argv = [sys.executable, "-m", "jedictl.engine.harvest.wrapper", batch_id, str(self._exit_file(batch_id)), "--",
                    *submission.argv]
            with open(submission.log_dir / f"{batch_id}.out", "ab") as log:
                try:
                    process = subprocess.Popen(argv, env=env, cwd=submission.workdir or submission.log_dir, stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
                except OSError as exc:
                    raise BatchError(f"site {submission.site}: batch system local: cannot start the pilot: {exc}") from None
            (self.state_dir / f"{batch_id}.pid").write_text(f"{process.pid}\n")
            ids.append(batch_id)
        return ids

    def status(self, batch_ids: Sequence[str]) -> dict[str, BatchView]:
        views = {}
        for batch_id in batch_ids:
            exit_file = self._exit_file(batch_id)
            if exit_file.exists():
                code = int(exit_file.read_text().strip() or -1)
                views[batch_id] = BatchView(ENDED, code, f"exit code {code}")
                continue
            pid = self._pid(batch_id)
            if pid is None:
                continue  # not ours, or its files were cleaned up: unknown
            if self._is_ours(pid, batch_id):
                views[batch_id] = BatchView(RUNNING)
            elif not exit_file.exists():  # it may have written the file between our two looks
                views[batch_id] = BatchView(ENDED, None, "killed (the wrapper ended without an exit code)")
            else:
                code = int(exit_file.read_text().strip() or -1)
                views[batch_id] = BatchView(ENDED, code, f"exit code {code}")
        return views

    def cancel(self, batch_ids: Sequence[str]) -> None:
        for batch_id in batch_ids:
            pid = self._pid(batch_id)
            if pid is not None and self._is_ours(pid, batch_id):
                try:
                    os.kill(pid, signal.SIGTERM)  # the wrapper passes it on to the pilot
                except ProcessLookupError:
                    pass

    def _exit_file(self, batch_id: str) -> Path:
        return self.state_dir / f"{batch_id}.exit"

    def _pid(self, batch_id: str) -> int | None:
        try:
            return int((self.state_dir / f"{batch_id}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _is_ours(pid: int, batch_id: str) -> bool:
        """Alive (not a zombie) and running the wrapper for this batch id."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
        return batch_id.encode() in cmdline
