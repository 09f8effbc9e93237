"""`jedictl pilot` runs build jobs (docs/build-jobs.md): a real pilot runs the build job's program, which
writes the site's lib file; the pilot stages it out and registers it; the run jobs, released once it is
built, get it staged in beside their input and read it (`${LIB}`)."""

from __future__ import annotations

import sys

from jedictl.engine.storage.paths import replica_path, replica_scope
from tests.cli import pilot_grid as grid

BUILD = """\
#!{python}
# A build job: packs the "sources" into the lib file named by argv[1].
import sys
with open(sys.argv[1], "wb") as lib:
    lib.write(b"compiled library\\n")
"""
RUN = """\
#!{python}
# A run job: argv[1] is the lib file (staged in by the pilot), argv[2] the input, argv[3] the output.
import sys
lib, src, dst = sys.argv[1:4]
with open(dst, "wb") as out:
    out.write(open(lib, "rb").read() + open(src, "rb").read() + b"processed\\n")
"""


def _script(folder, name: str, text: str):
    path = folder / name
    path.write_text(text.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_the_pilot_runs_the_build_job_then_the_run_jobs_read_its_lib_file(cli, store, tmp_path):
    build = _script(tmp_path, "build.py", BUILD)
    run = _script(tmp_path, "run.py", RUN)
    disk = grid.make_grid(cli, store, tmp_path, n_files=2, transformation=str(run),
                          spec={"command": "${LIB} ${IN} ${OUTPUT0}", "build": {"transformation": str(build), "command": "${OUT}"}})
    listed = cli.json("jobs", "list", "--limit", "100", db=store)
    assert sorted(j["status"] for j in listed) == ["activated", "defined", "defined"]
    # One pilot: it finds only the build job first (the run jobs wait for it), then the run jobs it released.
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"))
    assert code == 0, stderr
    assert (report["counts"]["jobs"], report["counts"]["finished"]) == (3, 3), stderr
    started = [line for line in stderr.splitlines() if ": starting " in line]
    assert len(started) == 3 and str(build) in started[0] and all(str(run) in line for line in started[1:])
    assert all("staged in 2 input(s)" in stderr.split(f"pilot job {n}:", 1)[1][:200] for n in (2, 3))
    lib_name = next(d for d in cli.json("task", "show", "1", db=store)["datasets"] if d["name"].endswith(".lib"))["name"]
    lib = cli.json("data", "show", lib_name, "--files", db=store)["files"]
    assert len(lib) == 1
    lib_path = replica_path(f"file://{disk}", replica_scope(None, lib_name), lib[0]["lfn"])
    assert lib_path.read_bytes() == b"compiled library\n"
    assert sorted(j["status"] for j in cli.json("jobs", "list", "--limit", "100", db=store)) == ["finished"] * 3
    outputs = cli.json("data", "show", "pilot.test.1.out", "--files", db=store)["files"]
    assert len(outputs) == 2
    for entry in outputs:
        path = replica_path(f"file://{disk}", replica_scope(None, "pilot.test.1.out"), entry["lfn"])
        content = path.read_bytes()
        assert content.startswith(b"compiled library\n") and content.endswith(b"processed\n")


PREPROCESS = """\
#!{python}
# A preprocess job: leaves a mark that it ran, for the task given by argv[1].
import os, sys
with open(os.environ["PILOT_TEST_MARK"], "a") as mark:
    mark.write(f"preprocessed task {{sys.argv[1]}}\\n")
"""


def test_the_pilot_runs_the_preprocess_job_and_then_the_task_s_jobs(cli, store, tmp_path):
    prepro = _script(tmp_path, "prepro.py", PREPROCESS)
    grid.make_grid(cli, store, tmp_path, n_files=2,
                   spec={"preprocess": {"transformation": str(prepro), "command": "${JEDITASKID}"}})
    assert cli.json("task", "show", "1", db=store)["status"] == "preprocessing"
    mark = tmp_path / "mark.txt"
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"),
                                          env={"PILOT_TEST_MARK": str(mark)})
    assert code == 0, stderr
    assert (report["counts"]["jobs"], report["counts"]["finished"]) == (1, 1), stderr
    assert mark.read_text() == "preprocessed task 1\n"
    assert cli.json("task", "show", "1", db=store)["status"] == "defined"
    grid.generate(cli, store)
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"))
    assert code == 0, stderr
    assert (report["counts"]["jobs"], report["counts"]["finished"]) == (2, 2), stderr
    cli("finalize", db=store)
    assert cli.json("task", "show", "1", db=store)["status"] == "done"
