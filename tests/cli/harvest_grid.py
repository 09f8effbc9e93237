"""Helpers for harvest tests: the pilot tests' real grid (tests/cli/pilot_grid.py) with a batch system
on its site, fast pilot settings, and waiting for pilots to end."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from tests.cli import pilot_grid
from tests.cli.pilot_grid import SITE, generate, place_inputs, task_spec, write_payload

FAST = {"JEDICTL_PILOT__HEARTBEAT_SECONDS": "1", "JEDICTL_PILOT__KILL_GRACE_SECONDS": "2", "JEDICTL_PILOT__POLL_SECONDS": "0.5",
        "JEDICTL_HARVEST__SUBMIT_GRACE_SECONDS": "0", "JEDICTL_HARVEST__QUIET_SECONDS": "5"}


def make_batch_grid(cli: Any, store: str, tmp_path: Path, batch: dict[str, Any], *, n_files: int = 3, task: str = "harvest.test.1",
                    command: str = "${IN} ${OUTPUT0}", spec: dict[str, Any] | None = None, **site: Any) -> Path:
    """The grid with `batch` on its site, `n_files` real inputs and a task made into activated jobs; the disk root."""
    disk = tmp_path / "disk"
    disk.mkdir(exist_ok=True)
    document = pilot_grid.sites_document(disk, **site)
    document["sites"][0]["batch"] = batch
    (tmp_path / "sites.yaml").write_text(yaml.safe_dump(document))
    cli("sites", "import", str(tmp_path / "sites.yaml"), db=store)
    files = place_inputs(disk, n_files)
    data = {"datasets": [{"name": pilot_grid.INPUT, "state": "closed", "replicas": [{"endpoint": pilot_grid.ENDPOINT}], "files": files}]}
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    cli("data", "import", str(tmp_path / "data.yaml"), db=store)
    payload = write_payload(tmp_path)
    cli("submit", "-", db=store, input=task_spec(str(payload), name=task, command=command, **(spec or {})))
    generate(cli, store)
    return disk


def pilots(cli: Any, store: str, **filters: str) -> list[dict[str, Any]]:
    args = [arg for key, value in filters.items() for arg in (f"--{key}", value)]
    return cli.json("pilots", "list", *args, db=store)


def wait_pilots_ended(cli: Any, store: str, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Until `count` pilots have ended on their own (the pilot's word) or the batch's exit was seen by a
    harvest pass; returns all pilots."""
    deadline = time.monotonic() + timeout
    while True:
        rows = pilots(cli, store)
        if sum(row["state"] not in ("submitted", "running") for row in rows) >= count:
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"not {count} pilots ended in {timeout} s: {rows}")
        time.sleep(0.25)
        cli("harvest", "--limit", "0", db=store)  # a pass that only reconciles: ends the rows of dead pilots


def registered_outputs(store: str, dataset: str) -> dict[str, tuple[int, str]]:
    """lfn -> (size, checksum) of the files the catalog registered in `dataset`."""
    from sqlalchemy import select

    from jedictl.store.database import open_store
    from jedictl.store.schema import catalog_datasets, catalog_files

    opened = open_store(store)
    try:
        with opened.read() as conn:
            rows = conn.execute(select(catalog_files.c.lfn, catalog_files.c.size, catalog_files.c.checksum)
                                .join(catalog_datasets, catalog_datasets.c.id == catalog_files.c.dataset_id)
                                .where(catalog_datasets.c.name == dataset))
            return {row.lfn: (row.size, row.checksum) for row in rows}
    finally:
        opened.close()


def check_outputs_on_disk(store: str, disk: Path, dataset: str, count: int) -> None:
    """`count` outputs registered, each on disk with the registered size and adler32."""
    from jedictl.engine.storage.checksums import digest

    outputs = registered_outputs(store, dataset)
    assert len(outputs) == count, outputs
    for lfn, registered in outputs.items():
        [path] = list(disk.rglob(lfn))
        assert digest(path) == registered, lfn


def jobs(cli: Any, store: str) -> list[dict[str, Any]]:
    return cli.json("jobs", "list", db=store)


__all__ = ["FAST", "SITE", "check_outputs_on_disk", "jobs", "make_batch_grid", "pilots", "wait_pilots_ended"]
