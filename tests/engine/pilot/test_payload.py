"""The payload's argument vector, its container, and its process group (real short processes)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from jedictl.engine.pilot.codes import PAYLOAD_FAILED, TRANSFORM_NOT_FOUND, PilotError
from jedictl.engine.pilot.payload import Process, container_argv, payload_argv, stderr_tail


def test_parameters_are_split_like_a_shell_but_never_given_to_one():
    assert payload_argv("run.py", '-i "a b.root" --x=$HOME;rm `id`') == ["run.py", "-i", "a b.root", "--x=$HOME;rm", "`id`"]
    assert payload_argv(None, "prog --n 3") == ["prog", "--n", "3"]
    # A shell only when the task names one: its script is then one argument of `-c`.
    assert payload_argv("bash", "-c 'echo $HOME > out'") == ["bash", "-c", "echo $HOME > out"]


def test_parameters_that_are_no_argument_vector_or_name_no_program_are_refused():
    with pytest.raises(PilotError) as caught:
        payload_argv("run.py", '-i "unbalanced')
    assert caught.value.failure.code == PAYLOAD_FAILED
    with pytest.raises(PilotError) as caught:
        payload_argv(None, "   ")
    assert caught.value.failure.code == TRANSFORM_NOT_FOUND


def test_containers_mount_the_work_directory_at_the_same_path():
    assert container_argv("apptainer", "docker://img:1", "/w/job-1.1", ["run", "x"], ["/data/ab"]) == [
        "apptainer", "exec", "--bind", "/w/job-1.1", "--bind", "/data/ab", "--pwd", "/w/job-1.1", "docker://img:1", "run", "x"]
    assert container_argv("docker", "docker://img:1", "/w", ["run"]) == ["docker", "run", "--rm", "-v", "/w:/w", "-w", "/w", "img:1", "run"]
    with pytest.raises(PilotError):
        container_argv("podman", "img", "/w", ["run"])


def _run(argv, tmp_path, timeout=30.0):
    process = Process(argv, tmp_path, dict(os.environ))
    deadline = time.monotonic() + timeout
    while not process.wait(0.5):
        assert time.monotonic() < deadline
    return process


def test_a_missing_program_and_a_program_that_is_not_executable_have_their_codes(tmp_path):
    with pytest.raises(PilotError) as caught:
        Process([str(tmp_path / "nothing")], tmp_path, {})
    assert caught.value.failure.code == TRANSFORM_NOT_FOUND
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    with pytest.raises(PilotError) as caught:
        Process([str(script)], tmp_path, {})
    assert caught.value.failure.code == PAYLOAD_FAILED


def test_exit_code_output_files_and_rusage(tmp_path):
    code = "import sys, time; print('out'); t = time.process_time()\nwhile time.process_time() - t < 0.2: pass\nprint('bad', file=sys.stderr); sys.exit(3)"
    process = _run([sys.executable, "-c", code], tmp_path)
    assert process.exit_code == 3
    assert (tmp_path / "payload.stdout").read_text() == "out\n"
    assert stderr_tail(tmp_path) == "bad"
    assert process.rusage.ru_utime + process.rusage.ru_stime >= 0.2


def test_stop_ends_the_whole_group_even_a_child_that_ignores_sigterm(tmp_path):
    # The payload starts a grandchild that ignores SIGTERM, then waits: both must be gone after stop().
    code = ("import os, signal, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
            "open('child.pid', 'w').write(str(child.pid)); time.sleep(60)")
    process = Process([sys.executable, "-c", code], tmp_path, dict(os.environ))
    deadline = time.monotonic() + 30
    while not (tmp_path / "child.pid").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int((tmp_path / "child.pid").read_text())
    started = time.monotonic()
    process.stop(grace=1.0)
    assert time.monotonic() - started < 10
    assert process.exit_code == -15  # the leader took SIGTERM
    time.sleep(0.2)
    state = open(f"/proc/{child}/stat").read().rpartition(")")[2].split()[0] if os.path.exists(f"/proc/{child}") else "gone"
    assert state in ("gone", "Z")  # SIGKILLed (a zombie until init reaps it)
