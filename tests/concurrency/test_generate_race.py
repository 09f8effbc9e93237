"""Two generate processes on one store never put a file into two jobs (real processes, thousands of files)."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import func, select

from jedictl.clock import utcnow
from jedictl.engine.catalogs.data import CatalogFile
from jedictl.engine.task.submission import parse_definition, register_task
from jedictl.store import data_catalog as store_catalog
from jedictl.store.database import open_store
from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, datasets, files, job_files, jobs, sites, storage_endpoints, site_storage
from tests.helpers import jedictl_process, run_sql

N_TASKS, N_FILES, PER_JOB = 6, 1500, 10


def _prepare(url: str) -> None:
    store = open_store(url)
    now = utcnow()
    try:
        with store.begin() as conn:
            conn.execute(storage_endpoints.insert().values(name="RACE_DATADISK", kind="disk", free_gb=1e6, total_gb=2e6, attributes={}, modified_at=now))
            for name in ("RACE_A", "RACE_B", "RACE_C"):
                conn.execute(sites.insert().values(name=name, status="online", core_count=1, core_power=10, max_memory=4000,
                                                   max_walltime=172800, attributes={}, modified_at=now))
                conn.execute(site_storage.insert().values(site=name, endpoint="RACE_DATADISK", role="read"))
                conn.execute(site_storage.insert().values(site=name, endpoint="RACE_DATADISK", role="write"))
            for index in range(N_TASKS):
                name = f"race.gen.input.{index}"
                conn.execute(catalog_datasets.insert().values(name=name, kind="dataset", state="open", attributes={}, created_at=now, modified_at=now))
                store_catalog.add_files(conn, name, [CatalogFile(f"{name}.{i:05d}.root", size=10_000, n_events=100) for i in range(N_FILES)], now)
                store_catalog.set_state(conn, name, "closed", now)
                document = {"name": f"race.gen.{index}", "label": "user", "command": "--in=${IN} --out=${OUTPUT0}",
                            "inputs": [{"dataset": name}], "outputs": [{"dataset": f"race.gen.out.{index}", "file_template": "o.${SN}"}],
                            "split": {"n_files_per_job": PER_JOB}, "scouts": {"skip_scout": True}}
                register_task(conn, parse_definition(document, user=f"user{index % 3}", default_user="racer"), document, now, "test")
    finally:
        store.close()


def _facts(conn):
    masters = select(datasets.c.id).where(datasets.c.master_id.is_(None), datasets.c.type == "input")
    uses = conn.execute(select(job_files.c.file_id, func.count()).where(job_files.c.dataset_id.in_(masters))
                        .group_by(job_files.c.file_id).having(func.count() > 1)).all()
    used_records = conn.execute(select(func.count()).select_from(job_files).where(job_files.c.dataset_id.in_(masters))).scalar_one()
    running = conn.execute(select(func.count()).where(files.c.status == "running", files.c.type == "input")).scalar_one()
    mismatched = conn.execute(select(func.count()).select_from(files.join(job_files, job_files.c.file_id == files.c.id))
                              .where(files.c.type == "input", files.c.job_id != job_files.c.job_id)).scalar_one()
    n_jobs = conn.execute(select(func.count()).select_from(jobs)).scalar_one()
    return uses, used_records, running, mismatched, n_jobs


def _run(url: str, extra: list[list[str]], env: dict[str, str]) -> list[tuple[int, str]]:
    workers = [jedictl_process(["generate", "--db", url, "--no-throttle", "-o", "json", *args], env={**os.environ, **env}) for args in extra]
    results = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        results.append((worker.returncode, stdout + stderr))
    return results


@pytest.mark.slow
@pytest.mark.parametrize("clocks", [(None, None), ("2030-01-01T00:00:00", "2030-01-01T01:00:00")], ids=["together", "leases-overlap"])
def test_two_generators_never_put_a_file_into_two_jobs(cli, store, clocks):
    _prepare(store)
    cli("refine", db=store)
    cli("feed", db=store)
    # Small transactions: each task is made in several chunks, so the two processes interleave.
    results = _run(store, [["--now", clock] if clock else [] for clock in clocks], {"JEDICTL_GENERATE__BATCH_SIZE": "200"})
    assert all(code in (0, 1) for code, _ in results), results
    uses, used_records, running, mismatched, _ = run_sql(store, _facts)
    assert uses == [] and mismatched == 0
    assert used_records == running
    cli("generate", "--no-throttle", "--now", "2030-01-02T00:00:00", db=store)  # whatever a give-up left
    uses, used_records, running, mismatched, n_jobs = run_sql(store, _facts)
    assert uses == [] and mismatched == 0
    assert used_records == running == N_TASKS * N_FILES
    assert n_jobs == N_TASKS * N_FILES // PER_JOB
    assert run_sql(store, check_all) == []
