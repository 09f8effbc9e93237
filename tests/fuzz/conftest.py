"""Fixtures of the fuzz suite: one seeded store per session, copied fresh for every example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT
from tests.fuzz.support import StoreFactory, invoke

#: A small task that makes ten jobs from ds.in (the worked example of the generator's tests).
SEED_TASK = {
    "taskName": "fuzz.seed.task", "vo": "wlcg", "prodSourceLabel": "managed", "taskType": "prod", "processingType": "simul",
    "nFilesPerJob": 2, "skipScout": True,
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "ds.in", "value": "--in=${IN}"},
        {"type": "template", "param_type": "output", "dataset": "ds.out", "value": "--out=ds.out.${SN}.root"},
        {"type": "constant", "value": "--n 10"},
    ],
    "log": {"type": "template", "param_type": "log", "dataset": "ds.log", "value": "ds.log.${SN}.log.tgz"},
}
DS_IN = {"datasets": [{"name": "ds.in", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}, {"endpoint": "BNL-ATLAS_DATADISK"}],
                       "files": [{"lfn": f"f.{i:03d}.root", "size": 1_000_000, "events": 100} for i in range(1, 21)]}]}


def _ok(*argv: str, input: str | None = None) -> str:
    outcome = invoke(argv, input=input)
    assert outcome.exit_code == 0, outcome
    return outcome.stdout


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> StoreFactory:
    """A store with the example grid, catalog, queues, retry rules and two tasks with jobs, some dispatched."""
    workdir = tmp_path_factory.mktemp("fuzz-stores")
    template = workdir / "template.db"
    db = ["--db", f"sqlite:///{template}"]
    _ok("db", "init", *db)
    _ok("sites", "import", str(ROOT / "examples" / "sites.yaml"), *db)
    _ok("data", "import", str(ROOT / "examples" / "data.yaml"), *db)
    _ok("data", "import", "-", *db, input=yaml.safe_dump(DS_IN))
    _ok("queue-shares", "import", str(ROOT / "examples" / "queue-shares.yaml"), *db)
    _ok("retry-rules", "import", str(ROOT / "examples" / "retry-rules.yaml"), *db)
    _ok("submit", "-", *db, input=json.dumps(SEED_TASK))
    _ok("submit", str(EXAMPLES / "prun_files.json"), *db)
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        _ok(*agent, *db)
    jobs = json.loads(_ok("jobs", "list", "--status", "activated", "--limit", "1000", "-o", "json", *db))
    assert jobs, "the seeded store has no activated jobs to dispatch"
    dispatched = []
    for site in sorted({job["site"] for job in jobs}):
        dispatched += json.loads(_ok("jobs", "dispatch", "--site", site, "--count", "3", "--seed", "1", "-o", "json", *db))["jobs"]
    factory = StoreFactory(template, workdir)
    factory.dispatched = dispatched
    return factory


@pytest.fixture
def in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in a scratch directory: commands that write files (export, metrics) write them here."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
