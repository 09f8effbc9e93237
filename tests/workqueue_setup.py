"""A grid, a catalog and tasks for the queue layers' tests (docs/queue-layers.md): three sites (SITE_A at
the nucleus), blocks of six files as datasets of one container, most at SITE_A and SITE_B, the last at
SITE_C only; a task reads the container expanded into its blocks, two files per job (three jobs a block)."""

from __future__ import annotations

import json

import yaml

NOW = "2030-03-01T08:00:00"
SITES = ("SITE_A", "SITE_B", "SITE_C")


def _site(name: str) -> dict:
    return {"name": name, "cloud": "WORLD", "nucleus": "NUC" if name == "SITE_A" else None, "core_count": 1, "core_power": 10.0,
            "max_memory": 4000, "max_walltime": 172800, "max_scratch_mb": 60000, "read_endpoints": [f"{name}_DISK"],
            "write_endpoints": [f"{name}_DISK"]}


GRID = {
    "nuclei": [{"name": "NUC"}],
    "storage_endpoints": [{"name": f"{name}_DISK", "kind": "disk", "nucleus": "NUC" if name == "SITE_A" else None, "free_gb": 800000,
                           "total_gb": 2000000} for name in SITES],
    "sites": [_site(name) for name in SITES],
}


def catalog(n_blocks: int = 4, prefix: str = "wq", at: tuple[str, ...] = ("SITE_A", "SITE_B"), last_at: tuple[str, ...] = ("SITE_C",)) -> dict:
    blocks = []
    for b in range(n_blocks):
        where = at if b < n_blocks - 1 else last_at
        blocks.append({"name": f"{prefix}.blk{b}", "state": "closed", "replicas": [{"endpoint": f"{site}_DISK"} for site in where],
                       "files": [{"lfn": f"{prefix}.{b}.{i}.root", "size": 1_000_000, "events": 100} for i in range(6)]})
    return {"datasets": blocks, "containers": [{"name": f"{prefix}.in", "datasets": [f"{prefix}.blk{b}" for b in range(n_blocks)]}]}


def task(name: str = "wq.task.1", container: str = "wq.in", priority: int = 500, **changes) -> dict:
    return {"taskName": name, "vo": "atlas", "prodSourceLabel": "managed", "taskType": "prod", "processingType": "simul", "nFilesPerJob": 2,
            "skipScout": True, "taskPriority": priority,
            "jobParameters": [{"type": "template", "param_type": "input", "dataset": container, "expand": True, "value": "--in=${IN}"},
                              {"type": "template", "param_type": "output", "dataset": f"{name}.out", "value": "--out=" + name + ".${SN}.root"}],
            "log": {"type": "template", "param_type": "log", "dataset": f"{name}.log", "value": name + ".log.${SN}.log.tgz"}, **changes}


def write(tmp_path, name: str, document) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document))
    return str(path)


def grid(cli, store, tmp_path, data: dict | None = None) -> None:
    cli("sites", "import", write(tmp_path, "grid.yaml", GRID), db=store)
    cli("data", "import", write(tmp_path, "data.yaml", data or catalog()), db=store)


def submit(cli, store, queue: bool = True, **changes) -> int:
    """A task submitted, refined, fed and brokered (ready); with `queue` its elements made."""
    task_id = cli.json("submit", "-", db=store, input=json.dumps(task(**changes)))["task_id"]
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    if queue:
        cli("workqueue", "create", str(task_id), "--now", NOW, db=store)
    return task_id


def agent(cli, store, name: str, *sites: str, pending: int = 3, running: int = 0, **options: str) -> None:
    args = ["agents", "add", name, *[part for site in sites for part in ("--site", site)], "--pending-threshold", str(pending),
            "--running-threshold", str(running)]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", value]
    cli(*args, "--now", NOW, db=store)


def acquire(cli, store, name: str, *args: str) -> dict:
    return cli.json("workqueue", "acquire", "--agent", name, "--seed", "1", "--now", NOW, *args, db=store)


def elements(cli, store, **filters: str) -> dict[int, dict]:
    args = [part for key, value in filters.items() for part in (f"--{key}", value)]
    return {row["element"]: row for row in cli.json("workqueue", "list", *args, db=store)}


def statuses(cli, store) -> dict[int, tuple]:
    return {element: (row["status"], row["agent"]) for element, row in elements(cli, store).items()}
