"""The errors a pilot reports, with the codes of PanDA's pilot (pilot/common/errorcodes.py), so that
retry rules written for PanDA match jedictl's jobs too."""

from __future__ import annotations

from dataclasses import dataclass

STAGE_IN_FAILED = 1099  # STAGEINFAILED
NO_REPLICA = 1100  # REPLICANOTFOUND: no endpoint with a URL holds the input
PANDA_KILL = 1144  # PANDAKILL: command_to_pilot tobekilled
MISSING_OUTPUT = 1165  # MISSINGOUTPUTFILE
STAGE_OUT_FAILED = 1137  # STAGEOUTFAILED
MKDIR = 1199  # MKDIR: the work directory cannot be made
SIGTERM = 1201  # SIGTERM: the pilot itself was terminated (scancel)
SIGINT = 1204  # SIGINT
REACHED_MAX_TIME = 1213  # REACHEDMAXTIME: the job's walltime
PAYLOAD_FAILED = 1305  # PAYLOADEXECUTIONFAILURE: e.g. the program is not executable
LOST_HEARTBEAT = 1317  # EXCEEDEDMAXWAITTIME: no successful heartbeat for pilot.lost_heartbeat_seconds
TRANSFORM_NOT_FOUND = 1346  # TRANSFORMNOTFOUND


@dataclass(frozen=True)
class Failure:
    """Why a job failed, as its report says it: PanDA's (source, code, diag), and the payload's exit code."""

    source: str
    code: int
    diag: str
    trans_exit_code: int | None = None


class PilotError(Exception):
    """A step of a job failed: the job is reported failed with `failure`."""

    def __init__(self, code: int, diag: str, source: str = "pilot"):
        super().__init__(diag)
        self.failure = Failure(source, code, diag)


def walltime_failure(limit: float) -> Failure:
    return Failure("pilot", REACHED_MAX_TIME, f"Reached batch system time limit ({limit:g} s)")


def kill_failure() -> Failure:
    return Failure("pilot", PANDA_KILL, "Job killed by the server (command_to_pilot tobekilled)")


def lost_heartbeat_failure(seconds: float) -> Failure:
    return Failure("pilot", LOST_HEARTBEAT, f"Lost heartbeat: no successful heartbeat for {seconds:g} s")


def signal_failure(name: str) -> Failure:
    code = SIGINT if name == "SIGINT" else SIGTERM
    return Failure("pilot", code, f"The pilot received {name}")


def exit_failure(exit_code: int, stderr_tail: str = "") -> Failure:
    """A payload that ended by itself with a non-zero exit: error_source trans, the exit code as the code,
    so that retry rules on (trans, N) act; a signal S that killed it counts as 128 + S, as a shell says."""
    code = exit_code if exit_code > 0 else 128 - exit_code
    diag = f"Payload exited with code {exit_code}" if exit_code > 0 else f"Payload killed by signal {-exit_code}"
    if stderr_tail:
        diag = f"{diag}: {stderr_tail}"
    return Failure("trans", code, diag[:4000], trans_exit_code=code)


GENERAL_ERROR = 1008  # GENERALERROR: the pilot itself failed on this job (a bug; its log says which)
