"""`jedictl pilot` reads a cvmfs-resident input where it is (docs/data-catalog.md "cvmfs"): no replica, no
stage-in, no checksum -- the payload finds it by name in its work directory, a link to its path under
the worker node's cvmfs mount (`pilot.cvmfs_root`). Real pilot processes, both backends."""

from __future__ import annotations

import sys

import yaml

from tests.cli import pilot_grid as grid

DBR = "ddo.DBRelease.v34"
DBR_DIR = "/cvmfs/atlas.cern.ch/repo/sw/database/DBRelease/34.1.1"
DBR_FILE = "DBRelease-34.1.1.dat"

#: Concatenates its inputs (every argument but the last) into its output, and notes which were links.
PAYLOAD = """\
#!{python}
import os, sys
*inputs, output = sys.argv[1:]
with open(output, "wb") as out:
    for name in inputs:
        out.write(open(name, "rb").read())
        out.write(("link %s\\n" % os.readlink(name) if os.path.islink(name) else "copy %s\\n" % name).encode())
"""


def _grid(cli, store, tmp_path, cvmfs_root):
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "sites.yaml").write_text(yaml.safe_dump(grid.sites_document(disk, cvmfs=True)))
    cli("sites", "import", str(tmp_path / "sites.yaml"), db=store)
    files = grid.place_inputs(disk, 2)
    data = {"datasets": [
        {"name": grid.INPUT, "state": "closed", "replicas": [{"endpoint": grid.ENDPOINT}], "files": files},
        # On cvmfs only: no replica at any endpoint; the checksum is not the file's (it is never read for one).
        {"name": DBR, "state": "closed", "cvmfs": DBR_DIR, "files": [{"lfn": DBR_FILE, "size": 5, "checksum": "ad:00000000"}]},
    ]}
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    cli("data", "import", str(tmp_path / "data.yaml"), db=store)
    payload = tmp_path / "concat.py"
    payload.write_text(PAYLOAD.format(python=sys.executable))
    payload.chmod(0o755)
    spec = yaml.safe_load(grid.task_spec(str(payload), command="${IN} ${DBR} ${OUTPUT0}"))
    spec["inputs"].append({"dataset": DBR, "stream": "DBR", "nosplit": True, "repeat": True})
    cli("submit", "-", db=store, input=yaml.safe_dump(spec))
    grid.generate(cli, store)
    return disk


def test_a_cvmfs_input_is_read_in_place_without_stage_in(cli, store, tmp_path):
    cvmfs_root = tmp_path / "mnt-cvmfs"  # where this worker node mounts /cvmfs
    release = cvmfs_root / DBR_DIR.removeprefix("/cvmfs/") / DBR_FILE
    release.parent.mkdir(parents=True)
    release.write_bytes(b"cond\n")
    disk = _grid(cli, store, tmp_path, cvmfs_root)
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"), "--keep-workdir",
                                          env={"JEDICTL_PILOT__CVMFS_ROOT": str(cvmfs_root)})
    assert code == 0, stderr
    assert (report["counts"]["jobs"], report["counts"]["finished"]) == (2, 2), stderr
    outputs = sorted(p for p in disk.rglob("out.*.dat"))
    assert len(outputs) == 2
    for path in outputs:
        content = path.read_bytes()
        assert content.endswith(f"cond\nlink {release}\n".encode())  # read at its cvmfs path
        assert b"copy in.00" in content  # the ordinary input was staged in
    logs = [p.read_text() for p in (tmp_path / "work").rglob("pilot.log")]
    assert logs and all("staged in 1 input(s)" in log and "read 1 input(s) in place from cvmfs (no stage-in)" in log for log in logs)


def test_a_node_without_the_cvmfs_file_fails_the_job_with_1331(cli, store, tmp_path):
    _grid(cli, store, tmp_path, tmp_path / "empty")
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "1", "--workdir", str(tmp_path / "work"),
                                          env={"JEDICTL_PILOT__CVMFS_ROOT": str(tmp_path / "empty")})
    assert report["counts"]["failed"] == 1, stderr
    failed = [job for job in grid.shown_jobs(cli, store) if job["status"] == "failed"]
    assert [(j["error_source"], j["error_code"]) for j in failed] == [("pilot", 1331)]
    assert failed[0]["error_diag"] == f"Input file is missing on cvmfs: {tmp_path / 'empty'}/{DBR_DIR.removeprefix('/cvmfs/')}/{DBR_FILE}"
