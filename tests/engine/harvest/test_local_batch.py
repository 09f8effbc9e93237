"""LocalBatch with real processes: detached pilots, their exit codes, a cancel that reaches the pilot,
and a reused pid never taken for the pilot."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from jedictl.engine.harvest.batch import Submission
from jedictl.engine.harvest.local import LocalBatch
from jedictl.engine.harvest.policy import ENDED, RUNNING


def submission(tmp_path: Path, code: str, ids=(1,)) -> Submission:
    return Submission(site="LOCAL", argv=[sys.executable, "-c", code], env={"JEDICTL_DB": "sqlite:///x.db"}, pilot_ids=list(ids),
                      log_dir=tmp_path / "logs")


def wait_for(batch: LocalBatch, ids, state, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = batch.status(ids)
        if all(views.get(i) is not None and views[i].state == state for i in ids):
            return views
        time.sleep(0.05)
    raise AssertionError(f"not {state} in {timeout} s: {batch.status(ids)}")


def test_each_pilot_gets_its_id_and_the_exit_code_is_recorded(tmp_path):
    batch = LocalBatch(tmp_path / "state")
    code = "import os, sys; print(os.environ['JEDICTL_PILOT_ID'], os.environ['JEDICTL_DB']); sys.exit(int(os.environ['JEDICTL_PILOT_ID']))"
    ids = batch.submit(submission(tmp_path, code, ids=(3, 4)))
    assert len(ids) == 2 and len(set(ids)) == 2
    views = wait_for(batch, ids, ENDED)
    assert [views[i].exit_code for i in ids] == [3, 4]
    assert (tmp_path / "logs" / f"{ids[0]}.out").read_text().split() == ["3", "sqlite:///x.db"]


def test_a_running_pilot_is_running_and_cancel_reaches_it(tmp_path):
    batch = LocalBatch(tmp_path / "state")
    marker = tmp_path / "got-term"
    code = ("import signal, sys, time, pathlib\n"
            f"def term(*a): pathlib.Path({str(marker)!r}).write_text('x'); sys.exit(7)\n"
            "signal.signal(signal.SIGTERM, term)\nprint('up', flush=True)\ntime.sleep(60)\n")
    [batch_id] = batch.submit(submission(tmp_path, code))
    log = tmp_path / "logs" / f"{batch_id}.out"
    deadline = time.monotonic() + 10
    while "up" not in (log.read_text() if log.exists() else ""):  # its SIGTERM handler is in place
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert batch.status([batch_id])[batch_id].state == RUNNING
    batch.cancel([batch_id])
    views = wait_for(batch, [batch_id], ENDED)
    assert views[batch_id].exit_code == 7  # the pilot's own exit, after its handler ran
    assert marker.exists()


def test_a_killed_wrapper_is_ended_without_code_and_unknown_ids_are_left_out(tmp_path):
    batch = LocalBatch(tmp_path / "state")
    [batch_id] = batch.submit(submission(tmp_path, "import time; time.sleep(60)"))
    pid = int((tmp_path / "state" / f"{batch_id}.pid").read_text())
    os.killpg(pid, 9)  # the wrapper and its pilot, as kill -9 of the session would
    views = wait_for(batch, [batch_id], ENDED)
    assert views[batch_id].exit_code is None and "killed" in views[batch_id].reason
    assert batch.status(["local-unknown"]) == {}


def test_a_pid_reused_by_another_process_is_not_the_pilot(tmp_path):
    batch = LocalBatch(tmp_path / "state")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "local-abc.pid").write_text(f"{os.getpid()}\n")  # alive, but not its wrapper
    assert batch.status(["local-abc"])["local-abc"].state == ENDED
    batch.cancel(["local-abc"])  # must not signal this process
