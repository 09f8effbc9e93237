"""Two executors pulling from one site at once never get the same job (real processes, 2000 jobs).

Each executor is a bash loop calling `jedictl jobs dispatch --site S --count 100 -o json` -- a new
jedictl process per call, as a pilot wrapper would -- until it gets an empty list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from jedictl.clock import utcnow
from jedictl.engine.catalogs.data import CatalogFile
from jedictl.engine.task.submission import parse_definition, register_task
from jedictl.store import data_catalog as store_catalog
from jedictl.store.database import open_store
from jedictl.store.invariants import check_all
from jedictl.store.schema import catalog_datasets, jobs, site_storage, sites, storage_endpoints
from tests.helpers import run_sql

SITE, N_JOBS, PER_CALL = "RACE_DISPATCH", 2000, 100

# One executor: dispatch until the site is empty; every answer is appended to $OUT.
EXECUTOR = """
set -euo pipefail
while true; do
  answer=$("$PYTHON" -m jedictl jobs dispatch --db "$STORE" --site "$SITE" --count "$COUNT" --executor "$NAME" -o json)
  printf '%s\\n' "$answer" >> "$OUT"
  case "$answer" in *'"jobs": []'*) break ;; esac
done
"""


def _prepare(url: str) -> None:
    store = open_store(url)
    now = utcnow()
    try:
        with store.begin() as conn:
            conn.execute(storage_endpoints.insert().values(name="RACE_DATADISK", kind="disk", free_gb=1e6, total_gb=2e6, attributes={}, modified_at=now))
            conn.execute(sites.insert().values(name=SITE, status="online", core_count=1, core_power=10, max_memory=4000,
                                               max_walltime=172800, attributes={}, modified_at=now))
            conn.execute(site_storage.insert().values(site=SITE, endpoint="RACE_DATADISK", role="read"))
            conn.execute(site_storage.insert().values(site=SITE, endpoint="RACE_DATADISK", role="write"))
            name = "race.dispatch.input"
            conn.execute(catalog_datasets.insert().values(name=name, kind="dataset", state="open", attributes={}, created_at=now, modified_at=now))
            store_catalog.add_files(conn, name, [CatalogFile(f"{name}.{i:05d}.root", size=10_000, n_events=100) for i in range(N_JOBS)], now)
            store_catalog.set_state(conn, name, "closed", now)
            document = {"name": "race.dispatch", "label": "user", "command": "--in=${IN} --out=${OUTPUT0}",
                        "inputs": [{"dataset": name}], "outputs": [{"dataset": "race.dispatch.out", "file_template": "o.${SN}"}],
                        "split": {"n_files_per_job": 1}, "scouts": {"skip_scout": True}}
            register_task(conn, parse_definition(document, user="racer", default_user="racer"), document, now, "test")
    finally:
        store.close()


def _answers(path) -> list[list[int]]:
    """The job ids of every answer an executor got, in order (the file holds JSON documents back to back)."""
    text, decoder, position, answers = path.read_text(), json.JSONDecoder(), 0, []
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        document, position = decoder.raw_decode(text, position)
        answers.append([job["job_id"] for job in document["jobs"]])
    return answers


def _sent(conn):
    return dict(conn.execute(select(jobs.c.id, jobs.c.executor).where(jobs.c.status == "sent")).all())


@pytest.mark.slow
def test_two_executors_never_get_the_same_job(cli, store, tmp_path):
    _prepare(store)
    cli("refine", db=store)
    cli("feed", db=store)
    cli("generate", "--no-throttle", db=store, env={"JEDICTL_GENERATE__N_FILES": str(N_JOBS * 2)})
    activated = run_sql(store, lambda conn: conn.execute(select(func.count()).where(jobs.c.status == "activated", jobs.c.site == SITE))
                        .scalar_one())
    assert activated == N_JOBS

    outputs = {name: tmp_path / f"{name}.json" for name in ("executor-a", "executor-b")}
    workers = {name: subprocess.Popen(["bash", "-c", EXECUTOR], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "PYTHON": sys.executable, "STORE": store, "SITE": SITE, "COUNT": str(PER_CALL),
                                           "NAME": name, "OUT": str(path)})
               for name, path in outputs.items()}
    for name, worker in workers.items():
        stdout, stderr = worker.communicate(timeout=600)
        assert worker.returncode == 0, (name, stdout, stderr)

    got = {name: _answers(path) for name, path in outputs.items()}
    for answers in got.values():
        assert answers[-1] == [] and all(0 < len(ids) <= PER_CALL for ids in answers[:-1])
    handed = {name: [job_id for ids in answers for job_id in ids] for name, answers in got.items()}
    everything = handed["executor-a"] + handed["executor-b"]
    assert len(everything) == len(set(everything)) == N_JOBS  # nobody got a job twice, nothing was left behind
    assert handed["executor-a"] and handed["executor-b"]  # both really took part
    sent = run_sql(store, _sent)
    assert set(sent) == set(everything)
    assert all(sent[job_id] == name for name, ids in handed.items() for job_id in ids)  # each job records who has it
    assert run_sql(store, lambda conn: conn.execute(select(func.count()).where(jobs.c.status == "activated")).scalar_one()) == 0
    assert run_sql(store, check_all) == []
