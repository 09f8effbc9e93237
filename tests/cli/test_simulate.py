"""`jedictl simulate` is realistic enough to test with (issue 14, defect 11): a job never runs past its
own walltime (the pilot kills it with error 1213), starts after it was created, and counts the events
of its master input only -- not its secondaries, not every stream a merge job reads."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select

from jedictl.store.invariants import check_all
from jedictl.store.schema import datasets, files, jobs
from tests.cli.test_generate import DS_IN, WORKED_EXAMPLE
from tests.conftest import ROOT
from tests.helpers import run_sql

NOW = "2026-11-21T12:00:00"
MINBIAS = {"datasets": [{"name": "ds.minbias", "state": "closed", "replicas": [{"endpoint": "CERN-PROD_DATADISK"}, {"endpoint": "BNL-ATLAS_DATADISK"}],
                         "files": [{"lfn": f"mb.{i:03d}.root", "size": 2_000_000, "events": 1000} for i in range(1, 31)]}]}
WITH_SECONDARY = """
name: sim.secondary
label: managed
processing_type: pile
transformation: Digi_tf.py
command: --in=${IN} --mb=${MB} --out=${OUTPUT0}
inputs:
  - dataset: ds.in
  - dataset: ds.minbias
    stream: MB
    ratio: 1
outputs:
  - {dataset: ds.rdo, file_template: "RDO.${SN}.root"}
log: {dataset: ds.rdo.log, file_template: "log.${SN}.tgz"}
split: {n_files_per_job: 1}
scouts: {skip_scout: true}
"""
TWO_STREAMS_MERGED = """
name: user.bob.sim.two.streams
label: user
processing_type: panda-client-jedi-run
transformation: runGen-00-00-02
command: -i "${IN/L}" -o "${OUTPUT0}" -t "${OUTPUT1}"
inputs: [{dataset: ds.in}]
outputs:
  - {dataset: user.bob.sim.ntuple.root/, file_template: "user.bob.${JEDITASKID}._${SN/P}.ntuple.root"}
  - {dataset: user.bob.sim.hist.root/, file_template: "user.bob.${JEDITASKID}._${SN/P}.hist.root"}
log: {dataset: user.bob.sim.log/, file_template: "user.bob.${JEDITASKID}._${SN/P}.log.tgz"}
split: {n_files_per_job: 5}
merge:
  transformation: runMerge-00-00-02
  command: -i "${TRN_OUTPUT0/L}" -o "${OUTPUT0}" -j "${TRN_OUTPUT1/L}" -k "${OUTPUT1}"
  n_files_per_merge_job: 10
scouts: {skip_scout: true}
"""


def _grid(cli, store, tmp_path) -> None:
    cli("sites", "import", str(ROOT / "examples" / "sites.yaml"), db=store)
    for name, document in (("in", DS_IN), ("minbias", MINBIAS)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document))
        cli("data", "import", str(path), db=store)


def _to_jobs(cli, store) -> None:
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1"), ("generate", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)


def _jobs(store, **where) -> list:
    query = select(jobs).order_by(jobs.c.id)
    for name, value in where.items():
        query = query.where(getattr(jobs.c, name) == value)
    return run_sql(store, lambda conn: conn.execute(query).all())


def test_a_job_past_its_walltime_is_killed_by_the_pilot_with_1213(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    # 1 HS06 s per event: 200 events need about 620 s at 10 HS06 per core; the simulator takes
    # 10 s per event, so every job would run for about 2,600 s -- past its own max_walltime.
    cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "cpuTime": 1, "cpuTimeUnit": "HS06sPerEvent", "skipScout": True}))
    _to_jobs(cli, store)
    made = _jobs(store)
    assert made and all(0 < job.max_walltime < 1000 for job in made)
    ran = cli.json("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    assert ran["counts"]["jobs"] == len(made) and ran["counts"]["finished"] == 0
    for job in _jobs(store):
        assert (job.status, job.error_source, job.error_code) == ("failed", "pilot", 1213), job
        assert job.error_diag == "Reached batch system time limit"
        assert job.wall_time == job.max_walltime  # killed at the limit, not after
        assert job.created_at <= job.dispatched_at <= job.started_at < job.ended_at
        assert (job.ended_at - job.started_at).total_seconds() == job.wall_time
    assert run_sql(store, check_all) == []


def test_a_job_starts_after_it_was_created_and_ends_its_wall_time_later(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "skipScout": True}))
    _to_jobs(cli, store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    ended = _jobs(store, status="finished")
    assert ended
    for job in ended:
        assert job.created_at <= job.started_at < job.ended_at
        assert (job.ended_at - job.started_at).total_seconds() == job.wall_time <= job.max_walltime


def test_events_are_those_of_the_master_input_not_of_secondaries(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=WITH_SECONDARY)
    _to_jobs(cli, store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    ended = _jobs(store, status="finished")
    assert ended
    for job in ended:
        assert job.n_events == 100  # one 100-event file; its 1,000-event minimum-bias file adds none
    rdo = run_sql(store, lambda conn: conn.execute(select(files.c.n_events).join(datasets, datasets.c.id == files.c.dataset_id)
                                                   .where(datasets.c.name == "ds.rdo")).scalars().all())
    assert rdo and set(rdo) == {100}


def test_a_merge_job_counts_the_events_of_one_stream_not_of_every_stream(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=TWO_STREAMS_MERGED)
    _to_jobs(cli, store)
    cli("simulate", "--seed", "1", "--failure-rate", "0", "--now", NOW, db=store)
    cli("generate", "--seed", "2", "--now", NOW, db=store)
    merges = _jobs(store, kind="merge")
    assert merges
    cli("simulate", "--seed", "2", "--failure-rate", "0", "--now", NOW, db=store)
    merged = _jobs(store, kind="merge", status="finished")
    assert merged
    assert sum(job.n_events for job in merged) == 2500  # 25 files of 100 events, merged once per stream
    for name in ("user.bob.sim.ntuple.root/", "user.bob.sim.hist.root/"):  # output containers: the files are in the sites' datasets
        events = run_sql(store, lambda conn: conn.execute(select(files.c.n_events).join(datasets, datasets.c.id == files.c.dataset_id)
                                                          .where(datasets.c.container_name == name)).scalars().all())
        assert sum(events) == 2500, name
    assert run_sql(store, check_all) == []
