"""CPU time of `jedictl --help` and of TAB completions: what every shell user pays at each keystroke; and
of a pilot that finds no work (launch to exit: interpreter, imports, settings, store, one dispatch), what
every slot of every batch job pays before its first job (issue 16).

    python bench/startup.py [--source DIR] [--runs N]

`--source` runs another checkout's code with this interpreter (e.g. a `git worktree` of an older
commit), so two trees are compared on the same machine and packages. Prints the mean user+system CPU
seconds per run (CPU, not wall time: steadier on a shared machine) and the ratio to a bare
`python -c pass`, the floor no command can go under.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_CLI = "import sys; sys.argv[0] = 'jedictl'; from jedictl.cli import main; main()"
CASES = (
    ("jedictl --help", ["--help"], {}),
    ("TAB after `jedictl task `", [], {"_JEDICTL_COMPLETE": "complete_bash", "COMP_WORDS": "jedictl task ", "COMP_CWORD": "2"}),
    ("TAB after `jedictl jobs list --`", [], {"_JEDICTL_COMPLETE": "complete_bash", "COMP_WORDS": "jedictl jobs list --", "COMP_CWORD": "3"}),
)


def cpu_seconds(code: str, args: list[str], env: dict[str, str], source: Path, runs: int) -> float:
    """Mean user+system CPU of `runs` runs of `python -c code args` with `source` first on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, "PYTHONPATH": str(source), **env},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose jedictl to run (default: this one)")
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    floor = cpu_seconds("pass", [], {}, options.source, options.runs)
    print(f"{options.source}: mean CPU of {options.runs} runs (python -c pass: {floor:.3f} s)")
    with tempfile.TemporaryDirectory(prefix="jedictl-bench-startup-") as tmp:
        for name, args, env in (*CASES, ("a pilot without work (--once)", pilot_store(Path(tmp), options.source), {})):
            seconds = cpu_seconds(RUN_CLI, args, env, options.source, options.runs)
            print(f"  {name:34} {seconds:.3f} s  ({seconds / floor:.1f}x the bare interpreter)")


def pilot_store(folder: Path, source: Path) -> list[str]:
    """A SQLite store (made by `source`'s jedictl) with the pilot tests' one site and no job; the pilot's arguments."""
    import yaml

    sys.path.insert(0, str(ROOT))
    from tests.cli.pilot_grid import SITE, sites_document

    url = f"sqlite:///{folder / 'store.db'}"
    (folder / "sites.yaml").write_text(yaml.safe_dump(sites_document(folder / "disk")))
    for args in (["db", "init"], ["sites", "import", str(folder / "sites.yaml")]):
        subprocess.run([sys.executable, "-c", RUN_CLI, *args, "--db", url], env={**os.environ, "PYTHONPATH": str(source)}, check=True,
                       capture_output=True)
    args = ["pilot", "--site", SITE, "--once", "-q", "--db", url]
    subprocess.run([sys.executable, "-c", RUN_CLI, *args], env={**os.environ, "PYTHONPATH": str(source)}, check=True, capture_output=True)
    return args


if __name__ == "__main__":
    main()
