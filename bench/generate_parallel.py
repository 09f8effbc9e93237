"""Benchmark: two generators at once on PostgreSQL (issue 18, item 6).

Two tasks of N/2 files each (10 files per job, no scouts) are submitted, refined and fed in two
identical PostgreSQL stores. In the first, one `jedictl generate --no-throttle` makes every job (the two
tasks one after the other); in the second, two `jedictl generate --no-throttle --limit 1` start at the
same moment and each takes a task. As in JEDI, a task is leased by one generator at a time and
parallelism is across tasks; the claim of records still reads them `FOR UPDATE SKIP LOCKED`, so two
generators could never take the same record even on one task.

Checked afterwards, in both stores: every input record is in exactly one job (claims disjoint), jobs
= N/10 and job-file rows and running records exactly as many as expected (counts exact), `jedictl check`
consistent. Printed: both walls, the speed-up (one / two), each generator's jobs, and the load.
The goal (>= 1.5x) is for a 4-core machine; this one has 2 cores shared with the database server.

    python bench/generate_parallel.py [--files 400000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import func, select  # noqa: E402

from bench import ceiling  # noqa: E402
from bench.common import jedictl, scratch_store  # noqa: E402
from bench.feed import DATASET, build_catalog, check  # noqa: E402
from bench.generate import _vacuum, add_sites  # noqa: E402
from jedictl.store.database import create_store_engine  # noqa: E402
from jedictl.store.schema import files, job_files, jobs  # noqa: E402

SPEC = """
name: bench.parallel.{n}
label: user
command: -i "${{IN/L}}" -o "${{OUTPUT0}}"
inputs: [{{dataset: {dataset}}}]
outputs: [{{dataset: user.bench.par{n}.out/, file_template: "user.bench.par{n}.${{SN/P}}.root"}}]
split: {{n_files_per_job: 10}}
scouts: {{skip_scout: true}}
"""


def prepare(url: str, n_files: int) -> None:
    build_catalog(url, n_files // 2)  # both tasks read the same catalog dataset: each gets its own records
    add_sites(url)
    for n in (1, 2):
        jedictl(url, "submit", "-", stdin=SPEC.format(n=n, dataset=DATASET))
    jedictl(url, "refine")
    jedictl(url, "feed")
    _vacuum(url)


def generators(url: str, count: int, n_files: int) -> tuple[float, list[dict]]:
    """`count` generate processes started together; (wall until the last ends, their JSON reports)."""
    env = {**os.environ, "JEDICTL_GENERATE__N_FILES": str(n_files)}
    limit = ["--limit", "1"] if count > 1 else []
    started = time.perf_counter()
    processes = [subprocess.Popen([sys.executable, "-m", "jedictl", "generate", "--no-throttle", *limit, "-o", "json", "--db", url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(count)]
    outputs = [process.communicate() for process in processes]
    seconds = time.perf_counter() - started
    for process, (_, errors) in zip(processes, outputs):
        if process.returncode not in (0, 1):
            raise SystemExit(f"generate failed ({process.returncode}): {errors.strip()[-500:]}")
    return seconds, [json.loads(out) for out, _ in outputs]


def verify(url: str, n_files: int) -> dict:
    engine = create_store_engine(url)
    with engine.connect() as conn:
        inputs = job_files.c.type == "input"
        found = {
            "jobs": conn.execute(select(func.count()).select_from(jobs)).scalar_one(),
            "input_links": conn.execute(select(func.count()).where(inputs)).scalar_one(),
            "distinct_inputs": conn.execute(select(func.count(job_files.c.file_id.distinct())).where(inputs)).scalar_one(),
            "running_with_job": conn.execute(select(func.count()).select_from(files).where(
                files.c.type == "input", files.c.status == "running", files.c.job_id.is_not(None))).scalar_one(),
            "jobs_per_task": dict(conn.execute(select(jobs.c.task_id, func.count()).group_by(jobs.c.task_id)).all()),
        }
    engine.dispose()
    found["disjoint"] = found["input_links"] == found["distinct_inputs"]
    found["exact"] = found["jobs"] == n_files // 10 and found["input_links"] == n_files and found["running_with_job"] == n_files
    found["check"] = check(url)
    return found


def run(n_files: int, workdir: Path) -> dict:
    with scratch_store("postgresql", workdir, "par-one") as one_url, scratch_store("postgresql", workdir, "par-two") as two_url:
        prepare(one_url, n_files)
        prepare(two_url, n_files)
        load_one = ceiling.load()
        one_s, _ = generators(one_url, 1, n_files)
        load_two = ceiling.load()
        two_s, reports = generators(two_url, 2, n_files)
        one, two = verify(one_url, n_files), verify(two_url, n_files)
    return {"files": n_files, "one_generator_s": round(one_s, 2), "two_generators_s": round(two_s, 2), "speed_up": round(one_s / two_s, 2),
            "jobs_by_generator": [r["counts"].get("jobs", 0) for r in reports], "load_one": load_one, "load_two": load_two,
            "one": one, "two": two}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=400_000, help="files of both tasks together")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.files, Path(tmp))
    ok = all(result[k]["disjoint"] and result[k]["exact"] and result[k]["check"] == "consistent" for k in ("one", "two"))
    print(json.dumps(result, default=str), "|",
          f"speed-up {result['speed_up']}x on {os.cpu_count()} cores (goal >= 1.5x on 4 cores), "
          f"claims disjoint and counts exact: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
