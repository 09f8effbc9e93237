"""CPU time and memory of a payload's whole process tree, read from /proc (PanDA's pilot uses prmon).

The tree is the payload's session: the payload leads a session of its own, and every process it starts
stays in it (even one whose parent died and was re-parented to init), unless it deliberately leaves.
CPU is utime + stime + cutime + cstime of every live member: a live process's own time is in no one's
cutime until it is reaped, so nothing is counted twice. Memory is Rss and Pss of every member summed,
from /proc/PID/smaps_rollup; the peak is the highest sum seen by any sample.

Parsing is pure (unit-tested on text); sampling reads the files, and a process that ends between the
listing and the read is simply not counted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class StatLine:
    pid: int
    session: int
    cpu_ticks: int  # utime + stime + cutime + cstime


def parse_stat(text: str) -> StatLine:
    """/proc/PID/stat; the command name (field 2) is in parentheses and may hold spaces or ')'."""
    head, _, rest = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = rest.split()  # fields[0] is field 3 (state): field n is fields[n - 3]
    return StatLine(pid=pid, session=int(fields[3]), cpu_ticks=sum(int(fields[i]) for i in (11, 12, 13, 14)))


def parse_rollup(text: str) -> tuple[int, int]:
    """(Rss, Pss) in kB from /proc/PID/smaps_rollup."""
    rss = pss = 0
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "Rss":
            rss = int(value.split()[0])
        elif name == "Pss":
            pss = int(value.split()[0])
    return rss, pss


@dataclass(frozen=True)
class Sample:
    cpu_s: float
    rss_kb: int
    pss_kb: int
    processes: int


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:  # ended meanwhile, or not ours to read
        return None


def session_members(session: int, proc: str = "/proc") -> list[StatLine]:
    members = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        text = _read(f"{proc}/{name}/stat")
        if text is None:
            continue
        try:
            line = parse_stat(text)
        except (ValueError, IndexError):
            continue
        if line.session == session:
            members.append(line)
    return members


def sample(session: int, proc: str = "/proc") -> Sample:
    cpu = rss = pss = 0
    members = session_members(session, proc)
    for member in members:
        cpu += member.cpu_ticks
        text = _read(f"{proc}/{member.pid}/smaps_rollup")
        if text:
            member_rss, member_pss = parse_rollup(text)
            rss += member_rss
            pss += member_pss
    return Sample(cpu / CLOCK_TICKS, rss, pss, len(members))


@dataclass
class Peaks:
    """The highest values seen so far, then the reaped child's rusage as a floor."""

    cpu_s: float = 0.0
    rss_kb: int = 0
    pss_kb: int = 0

    def add(self, current: Sample) -> None:
        self.cpu_s = max(self.cpu_s, current.cpu_s)
        self.rss_kb = max(self.rss_kb, current.rss_kb)
        self.pss_kb = max(self.pss_kb, current.pss_kb)

    def add_rusage(self, rusage: object | None) -> None:
        """wait4's rusage covers the payload and the children it waited for, also those that lived
        between two samples; ru_maxrss (kB on Linux) is one process's peak, a floor for the tree's."""
        if rusage is None:
            return
        self.cpu_s = max(self.cpu_s, rusage.ru_utime + rusage.ru_stime)  # type: ignore[attr-defined]
        self.rss_kb = max(self.rss_kb, int(rusage.ru_maxrss))  # type: ignore[attr-defined]


def sample_delays(poll_seconds: float, first: float = 0.01):
    """When to sample: soon after the start (a short payload still gets measured), then doubling up to
    every `poll_seconds`."""
    delay = min(first, poll_seconds)
    while True:
        yield delay
        delay = min(delay * 2, poll_seconds)
