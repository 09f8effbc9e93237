"""`python -m jedictl.engine.harvest.wrapper BATCH_ID EXIT_FILE -- ARGV...`: LocalBatch's batch job.

Runs ARGV as its child, passes SIGTERM/SIGINT/SIGHUP on to it (a cancel must reach the pilot so that
it can end its payloads and say how it ended), and when the child is gone writes its exit code to
EXIT_FILE (atomically: a reader sees no file or the whole code). BATCH_ID is on this process's command
line so that LocalBatch can tell its own process from another that reused the pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main(args: list[str]) -> int:
    if len(args) < 4 or args[2] != "--":
        print("usage: python -m jedictl.engine.harvest.wrapper BATCH_ID EXIT_FILE -- ARGV...", file=sys.stderr)
        return 2
    exit_file, argv = args[1], args[3:]
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"cannot start {argv[0]}: {exc}", file=sys.stderr)
        _write(exit_file, 127)
        return 127

    def forward(signum: int, frame: object) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
            continue
    code = 128 - code if code < 0 else code  # -N: killed by signal N
    _write(exit_file, code)
    return code


def _write(path: str, code: int) -> None:
    temporary = f"{path}.part"
    with open(temporary, "w") as handle:
        handle.write(f"{code}\n")
    os.replace(temporary, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
