"""Benchmark: one brokerage over 2,000 sites and 1,000 input files (issue 4).

Builds a SQLite store with N sites (20 nuclei, 100 disk and 20 tape endpoints) and a dataset of F files
whose replicas are spread over the endpoints, feeds a task reading it, then times:
  - job brokerage of the task's next chunk (F files) over all sites, decision only;
  - the same including loading the catalog, site loads and replicas from the store;
  - the task brokerage (nucleus choice) over all nuclei.
Target on the 2-core machine: under 1 s.

    python bench/brokerage.py [--sites 2000] [--files 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from jedictl.config import load_settings  # noqa: E402
from jedictl.engine.brokerage.loading import chunk_of, load_catalog, load_site_loads, load_task_works, next_chunk_files  # noqa: E402
from jedictl.engine.brokerage.job_brokerage import broker_job_sites  # noqa: E402
from jedictl.engine.brokerage.model import task_requirements_from_row  # noqa: E402
from jedictl.engine.task.options import options_from_dict  # noqa: E402
from jedictl.engine.brokerage.task_brokerage import choose_nucleus  # noqa: E402
from jedictl.store import tasks as task_store  # noqa: E402
from jedictl.store.data_catalog import StoreDataCatalog  # noqa: E402
from jedictl.store.database import open_store  # noqa: E402


def grid(n_sites: int, n_files: int) -> tuple[dict, dict]:
    rng = random.Random(1)
    nuclei = [{"name": f"NUCLEUS_{n:02d}", "cloud": f"CLOUD{n % 5}"} for n in range(20)]
    disks = [{"name": f"SE_{e:03d}_DATADISK", "kind": "disk", "nucleus": nuclei[e % 20]["name"] if e < 20 else None,
              "free_gb": rng.randint(100, 500_000), "total_gb": 1_000_000} for e in range(100)]
    tapes = [{"name": f"NUCLEUS_{n:02d}_DATATAPE", "kind": "tape", "nucleus": f"NUCLEUS_{n:02d}", "free_gb": 5e6, "total_gb": 1e7} for n in range(20)]
    sites = []
    for s in range(n_sites):
        disk = disks[s % 100]["name"]
        sites.append({"name": f"SITE_{s:05d}", "cloud": f"CLOUD{s % 5}", "nucleus": f"NUCLEUS_{s % 20:02d}", "tier": 2,
                      "core_count": rng.choice([1, 8, -1]), "core_power": rng.uniform(8, 14), "max_memory": rng.choice([4000, 16000, 32000]),
                      "max_walltime": rng.choice([86400, 172800]), "max_scratch_mb": 200_000, "read_endpoints": [disk, f"NUCLEUS_{s % 20:02d}_DATATAPE"],
                      "write_endpoints": [disk], "status": "online" if s % 50 else "brokeroff"})
    files = [{"lfn": f"EVNT.bench._{i:06d}.pool.root.1", "size": 2_000_000_000, "events": 10000} for i in range(n_files)]
    replicas = [{"endpoint": disks[e]["name"], "complete": False, "files": [f["lfn"] for f in rng.sample(files, n_files // 4)]} for e in range(0, 100, 7)]
    replicas.append({"endpoint": "NUCLEUS_03_DATATAPE"})
    catalog = {"datasets": [{"name": "bench.input", "state": "closed", "files": files, "replicas": replicas}]}
    return {"nuclei": nuclei, "storage_endpoints": disks + tapes, "sites": sites}, catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, default=2000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/broker.db"
        sites_doc, data_doc = grid(args.sites, args.files)
        (Path(tmp) / "sites.json").write_text(json.dumps(sites_doc))
        (Path(tmp) / "data.json").write_text(json.dumps(data_doc))
        spec = {"name": "bench.broker", "command": "${IN} ${OUTPUT0}", "inputs": [{"dataset": "bench.input"}],
                "outputs": [{"dataset": "bench.out", "file_template": "o.${SN}"}], "scouts": {"skip_scout": True},
                "resources": {"core_count": 8, "ram_count": 2000, "cpu_time": 50, "cpu_time_unit": "HS06sPerEvent", "io_intensity": 400}}
        for command in (["db", "init"], ["sites", "import", f"{tmp}/sites.json"], ["data", "import", f"{tmp}/data.json"],
                        ["submit", "-"], ["refine"], ["feed"]):
            subprocess.run([sys.executable, "-m", "jedictl", *command, "--db", url, "-q"], input=yaml.safe_dump(spec), text=True,
                           check=True, capture_output=True)
        settings = load_settings({"db": url}).settings
        store = open_store(url)
        decisions, loaded, nucleus_times = [], [], []
        with store.read() as conn:
            for _ in range(args.repeat):
                started = time.perf_counter()
                catalog, loads = load_catalog(conn), load_site_loads(conn)
                task = task_store.get_task(conn, 1)
                requirements = task_requirements_from_row(task._mapping, options_from_dict(task.options))
                chunk = chunk_of(next_chunk_files(conn, 1, args.files), StoreDataCatalog(conn))
                middle = time.perf_counter()
                result = broker_job_sites(requirements, chunk, catalog, loads, settings.brokerage)
                done = time.perf_counter()
                decisions.append(done - middle)
                loaded.append(done - started)
                started = time.perf_counter()
                nucleus = choose_nucleus(requirements, chunk, catalog, load_task_works(conn), loads, settings.task_broker,
                                         settings.brokerage, random.Random(1))
                nucleus_times.append(time.perf_counter() - started)
        store.close()
    kept = sum(1 for fate in result.trail if fate.kept)
    print(json.dumps({
        "sites": args.sites, "files": chunk.n_files, "candidates": len(result.candidates), "sites_passing_filters": kept,
        "job_brokerage_s": round(statistics.median(decisions), 3), "job_brokerage_with_loading_s": round(statistics.median(loaded), 3),
        "task_brokerage_s": round(statistics.median(nucleus_times), 3), "nucleus": nucleus.nucleus,
    }), "|", "target < 1 s:", "met" if statistics.median(loaded) < 1 else "MISSED")


if __name__ == "__main__":
    main()
