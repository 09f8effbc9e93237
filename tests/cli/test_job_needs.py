"""A job is judged as the splitter builds it (issue 14, defect 6): brokerage filters look at the work of
one job -- nFilesPerJob files, or nEventsPerJob events -- not one file, and no job is ever written with
needs its site refuses (walltime, memory, scratch disk)."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from jedictl.store.invariants import check_all
from jedictl.store.schema import files, jobs, sites
from tests.cli.test_generate import WORKED_EXAMPLE, _grid
from tests.helpers import run_sql

NOW = "2026-11-21T12:00:00"
# 5,000 HS06 s per event: one 100-event file needs ~45,000 s at 12.5 HS06 per core (the site allows
# 172,800 s), a job of ten such files ~445,000 s -- what the trial saw brokered to the same site.
LONG = {**WORKED_EXAMPLE, "nFilesPerJob": 10, "cpuTime": 5000, "cpuTimeUnit": "HS06sPerEvent", "skipScout": True}


def _to_generate(cli, store, params) -> dict:
    cli("submit", "-", db=store, input=json.dumps(params))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    return cli.json("generate", "--seed", "1", "--now", NOW, db=store)


def _jobs_with_limits(store) -> list:
    return run_sql(store, lambda conn: conn.execute(
        select(jobs.c.id, jobs.c.site, jobs.c.max_walltime, jobs.c.min_ram_count, jobs.c.max_disk_count,
               sites.c.max_walltime.label("site_walltime"), sites.c.max_memory.label("site_memory"))
        .join(sites, sites.c.name == jobs.c.site)).all())


def test_the_walltime_filter_judges_n_files_per_job_files_not_one(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    report = _to_generate(cli, store, LONG)
    assert report["counts"]["jobs"] == 0
    assert _jobs_with_limits(store) == []  # before: 3 jobs of 445,000-505,000 s at sites allowing 172,800 s
    task = cli.json("task", "show", "1", db=store)
    # The task brokerage asks the same filters ("hint mode"): no nucleus has a site for such jobs.
    assert task["status"] == "assigning", task
    assert task["error_dialog"] == "no nucleus fits: runnable 2"
    explained = json.dumps(cli.json("explain", "task", "1", db=store))
    assert "walltime: needs 445044 s, site max 172800 s" in explained  # CERN-PROD_GRID, 12.5 HS06 per core
    assert run_sql(store, check_all) == []


def test_jobs_that_fit_are_still_made_when_one_job_is_short_enough(cli, store, tmp_path):
    _grid(cli, store, tmp_path)
    report = _to_generate(cli, store, {**LONG, "nFilesPerJob": 3})  # ~134,000-152,000 s: fits 172,800 s
    assert report["counts"]["jobs"] > 0
    for job in _jobs_with_limits(store):
        assert job.max_walltime <= job.site_walltime, job


def test_no_job_is_written_with_needs_its_site_refuses(cli, store, tmp_path):
    """The brokerage judged a typical job; a retried file whose RAM the retry module raised past every
    site's slots makes one job that no site takes -- it is not written, the records wait."""
    _grid(cli, store, tmp_path)
    cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "skipScout": True}))
    for agent in (("refine",), ("feed",), ("broker", "--seed", "1")):
        cli(*agent, "--now", NOW, db=store)
    run_sql(store, lambda conn: conn.execute(update(files).where(files.c.lfn.in_(["f.001.root", "f.002.root"])).values(ram_count=100_000)))
    report = cli.json("generate", "--seed", "1", "--now", NOW, db=store)
    assert report["counts"]["jobs"] == 0
    assert _jobs_with_limits(store) == []  # before: a job asking 90,000 MB at a site of 32,000 MB slots
    task = cli.json("task", "show", "1", db=store)
    assert task["status"] == "pending" and "memory: the job needs 90000 MB" in task["error_dialog"]
    left = run_sql(store, lambda conn: conn.execute(select(files.c.status).where(files.c.lfn == "f.001.root")).scalars().all())
    assert left == ["ready"]
    assert run_sql(store, check_all) == []


def test_the_atom_is_the_largest_group_the_splitter_builds():
    from jedictl.engine.brokerage.model import job_atom

    sizes, events = [10, 20, 30, 40, 50], [1, 2, 3, 4, 5]
    assert job_atom(sizes, events) == (None, None)  # one file: the chunk's largest
    assert job_atom(sizes, events, files_per_job=2) == (70, 7)  # [10,20] [30,40] [50]
    assert job_atom(sizes, events, files_per_job=10) == (150, 15)
    assert job_atom(sizes, events, events_per_job=7) == (50 + 40 + 30 + 20 + 10, 7)  # 7 events: up to 7 one-event files
    assert job_atom([100], [1000], events_per_job=10) == (100, 10)  # a range of one file


def test_the_splitter_stops_before_a_job_the_site_refuses():
    from jedictl.engine.generate.splitters import START, InputChunk, InputFile, job_limits, split_at_site
    from jedictl.engine.task.options import TaskOptions

    records = tuple(InputFile(i, f"f{i}", 1000, 10) for i in range(1, 7))
    limits = job_limits(TaskOptions(n_files_per_job=2))
    result = split_at_site(InputChunk(master=records), limits, START, refuse=lambda sub: "too big" if sub.master[0].file_id == 3 else None)
    assert [[r.file_id for r in sub.master] for sub in result.sub_chunks] == [[1, 2]]
    assert result.refused == "too big" and result.cursor.master == 2  # files 3.. stay for another site
