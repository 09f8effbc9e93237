"""The store's invariants (store/invariants.py) hold after a real run, and each new check finds what it
is there to find: a retry history that does not fit the jobs, a lease left after a watch pass."""

from __future__ import annotations

import re

from datetime import timedelta

import pytest
from sqlalchemy import exists, func, select, update

from jedictl.clock import utcnow
from jedictl.store.invariants import check_all, leases_after_watch, retry_history
from jedictl.store.schema import job_retry_history, jobs, tasks
from tests.helpers import run_sql


@pytest.fixture
def demo_store(cli, store_backend, prepared_store):
    """A store the demo ran to the end: retries and merge jobs, so both relations are in the history.
    The demo runs once per backend (seeded); each test corrupts a copy of its own."""

    def run_demo(url):
        assert cli.json("demo", "--db", url, "--seed", "3")["all_final"] is True

    return prepared_store(store_backend, "demo --seed 3", run_demo)


def _history(conn, relation):
    return conn.execute(select(job_retry_history).where(job_retry_history.c.relation_type == relation)
                        .order_by(job_retry_history.c.id)).first()


def test_a_real_run_leaves_a_consistent_retry_history(demo_store):
    counts = run_sql(demo_store, lambda conn: dict(conn.execute(
        select(job_retry_history.c.relation_type, func.count()).group_by(job_retry_history.c.relation_type)).all()))
    assert counts.get("retry", 0) > 0 and counts.get("merge", 0) > 0
    assert run_sql(demo_store, check_all) == []


def test_retry_history_that_does_not_fit_the_jobs_is_reported(demo_store):
    def corrupt(conn):
        retry, merge = _history(conn, "retry"), _history(conn, "merge")
        # A retry whose new job never took the old job's records: point it at an unrelated later job.
        unrelated = conn.execute(select(jobs.c.id).where(jobs.c.task_id == retry.task_id, jobs.c.id > retry.new_job_id,
                                                         jobs.c.kind == "normal").order_by(jobs.c.id.desc())).scalar()
        unrelated = unrelated or conn.execute(select(func.max(jobs.c.id)).where(jobs.c.task_id == retry.task_id)).scalar_one()
        conn.execute(update(job_retry_history).where(job_retry_history.c.id == retry.id).values(new_job_id=unrelated))
        # A merge whose producer is live again, and a relation nobody knows.
        conn.execute(update(jobs).where(jobs.c.id == merge.old_job_id).values(status="running"))
        conn.execute(job_retry_history.insert().values(task_id=merge.task_id, old_job_id=merge.new_job_id, new_job_id=merge.old_job_id,
                                                       relation_type="clone", created_at=utcnow()))
        return retry, merge

    retry, merge = run_sql(demo_store, corrupt)
    problems = run_sql(demo_store, retry_history)
    text = "\n".join(problems)
    assert f"{retry.old_job_id} ->" in text and "new job took none of the old job's input records" in text, text
    assert f"merge {merge.old_job_id} -> {merge.new_job_id}" in text and "old job is still running" in text, text
    assert "unknown relation 'clone'" in text and "old job is not older than the new one" in text, text
    assert set(problems) <= set(run_sql(demo_store, check_all))


def test_a_lease_left_after_a_watch_pass_is_reported(cli, demo_store):
    now = utcnow()
    run_sql(demo_store, lambda conn: conn.execute(update(tasks).where(tasks.c.id == 1).values(
        lease_owner="host:1:dead", lease_expires_at=now + timedelta(minutes=10))))
    assert run_sql(demo_store, lambda conn: leases_after_watch(conn, now)) == []  # still alive then
    later = now + timedelta(minutes=11)
    problems = run_sql(demo_store, lambda conn: leases_after_watch(conn, later))
    # task 1 ended done or finished, by the demo's seed (the demo's tasks share one random sequence)
    assert len(problems) == 1 and re.search(r"task 1 \((done|finished)\) still leased by host:1:dead", problems[0]), problems
    # A watch pass at that moment releases the dead holder's lease.
    cli("watch", "--now", later.isoformat(), db=demo_store)
    assert run_sql(demo_store, lambda conn: leases_after_watch(conn, later)) == []
    assert run_sql(demo_store, check_all) == []


def test_a_record_lost_or_done_twice_is_reported(demo_store):
    from jedictl.store.invariants import records_of_live_jobs, work_done_once
    from jedictl.store.schema import datasets, files, job_files

    def corrupt(conn):
        masters = select(datasets.c.id).where(datasets.c.type == "input", datasets.c.master_id.is_(None))
        finished = conn.execute(select(files.c.id, files.c.job_id).where(files.c.dataset_id.in_(masters), files.c.status == "finished")
                                .order_by(files.c.id)).all()
        lost, twice, revived = list({row.job_id: row for row in reversed(finished)}.values())[:3]  # of three different jobs
        # Lost: a record left running though its job finished -- nobody would ever process it.
        conn.execute(update(files).where(files.c.id == lost.id).values(status="running"))
        # Done twice: another finished job read the same record.
        other = conn.execute(select(jobs.c.id).where(jobs.c.status == "finished", jobs.c.kind == "normal", jobs.c.id != twice.job_id)
                             .order_by(jobs.c.id)).scalar()
        row = conn.execute(select(job_files).where(job_files.c.job_id == twice.job_id, job_files.c.file_id == twice.id)).one()._asdict()
        conn.execute(job_files.insert().values({**{k: v for k, v in row.items() if k != "id"}, "job_id": other}))
        # A live job whose record went back to the pool: the next generation would take it again.
        conn.execute(update(jobs).where(jobs.c.id == revived.job_id).values(status="running"))
        conn.execute(update(files).where(files.c.id == revived.id).values(status="ready"))
        return lost, twice, revived, other

    lost, twice, revived, other = run_sql(demo_store, corrupt)
    live = "\n".join(run_sql(demo_store, records_of_live_jobs))
    assert f"record {lost.id} is running but job {lost.job_id} is finished" in live, live
    assert f"record {revived.id} is ready for job {revived.job_id} but live job {revived.job_id} (running) reads it" in live, live
    once = "\n".join(run_sql(demo_store, work_done_once))
    assert f"record {twice.id} (finished) is in 2 finished jobs" in once, once
    assert f"record {lost.id} " not in once  # still in its one finished job: lost, not done twice


def test_merge_inputs_lost_or_left_unmerged_are_reported(demo_store):
    """The unmerged logs merge jobs are split over are master records too: the chaos test's blind spot
    (issue 14) was a task ending while its merges ran, their inputs left `running` for ever."""
    from jedictl.store.invariants import inputs_of_ended_tasks, records_of_live_jobs
    from jedictl.store.schema import datasets, files

    def corrupt(conn):
        merged = conn.execute(select(files.c.id, files.c.job_id, files.c.task_id).join(datasets, datasets.c.id == files.c.dataset_id)
                              .where(datasets.c.type == "trn_log", files.c.status == "finished").order_by(files.c.id)).all()
        lost, unmerged = merged[0], next(row for row in merged if row.job_id != merged[0].job_id)
        conn.execute(update(files).where(files.c.id == lost.id).values(status="running"))
        conn.execute(update(files).where(files.c.id == unmerged.id).values(status="merging"))
        return lost, unmerged

    lost, unmerged = run_sql(demo_store, corrupt)
    live = "\n".join(run_sql(demo_store, records_of_live_jobs))
    assert f"record {lost.id} is running but job {lost.job_id} is finished" in live, live
    ended = "\n".join(run_sql(demo_store, inputs_of_ended_tasks))
    # done or finished, as the demo's pilots drew it: either way the task ended with a merge input left
    assert any(f"task {unmerged.task_id} is {status} but" in ended for status in ("done", "finished")) and "merging" in ended, ended


def test_the_checks_of_issue_14_see_what_they_are_for(demo_store):
    """Each check issue 14 asked for fails on the corruption it is there for: a live job of a task that
    ended, an output name registered by two jobs, an output dropped from the catalog, an input of a done
    task never processed, and the counters of outputs, unmerged outputs and random seeds."""
    from jedictl.store.invariants import (
        dataset_counters, inputs_of_ended_tasks, live_jobs_of_ended_tasks, outputs_registered_once,
    )
    from jedictl.store.schema import catalog_datasets, catalog_files, datasets, files

    def corrupt(conn):
        def dataset(kind):
            return conn.execute(select(datasets).where(datasets.c.type == kind).order_by(datasets.c.id)).first()

        def finished_records(dataset_id):
            return conn.execute(select(files).where(files.c.dataset_id == dataset_id, files.c.status == "finished")
                                .order_by(files.c.id)).all()

        # A job of a done task that is live again.
        done = conn.execute(select(tasks.c.id).where(tasks.c.status == "done").order_by(tasks.c.id)).scalar()
        revived = conn.execute(select(jobs.c.id).where(jobs.c.task_id == done, jobs.c.status == "finished").order_by(jobs.c.id)).scalar()
        conn.execute(update(jobs).where(jobs.c.id == revived).values(status="activated"))
        # Two tasks writing one output dataset, whose jobs registered one name twice; and a registered
        # output gone from the catalog.
        # (outputs with files: an output container's own row has none, its sites' datasets have them)
        registered = exists().where(files.c.dataset_id == datasets.c.id, files.c.status == "finished")
        output = conn.execute(select(datasets).where(datasets.c.type == "output", registered).order_by(datasets.c.id)).first()
        first, dropped = finished_records(output.id)[:2]
        other = conn.execute(select(datasets).where(datasets.c.type == "output", datasets.c.task_id != output.task_id, registered)
                             .order_by(datasets.c.id)).first()
        conn.execute(update(datasets).where(datasets.c.id == other.id).values(name=output.name))
        second = finished_records(other.id)[0]
        conn.execute(update(files).where(files.c.id == second.id).values(lfn=first.lfn))
        in_catalog = select(catalog_datasets.c.id).where(catalog_datasets.c.name == output.name).scalar_subquery()
        conn.execute(catalog_files.delete().where(catalog_files.c.dataset_id == in_catalog, catalog_files.c.lfn == dropped.lfn))
        # An input of a done task back in the pool with attempts left: the task ended without doing it.
        master = conn.execute(select(datasets).where(datasets.c.task_id == done, datasets.c.type.in_(("input", "pseudo_input")),
                                                     datasets.c.master_id.is_(None))).first()
        unprocessed = finished_records(master.id)[0]
        conn.execute(update(files).where(files.c.id == unprocessed.id).values(status="ready", max_attempt=None))
        # Counters: an unmerged dataset that counts nothing, an output that counts one too many, seeds used twice.
        for kind, column, change in (("trn_output", "n_files", 0), ("log", "n_files", 1), ("random_seed", "n_files_used", 1)):
            row = dataset(kind)
            conn.execute(update(datasets).where(datasets.c.id == row.id).values({column: 0 if change == 0 else getattr(row, column) + change}))
        return done, revived, output, first, second, dropped, unprocessed

    done, revived, output, first, second, dropped, unprocessed = run_sql(demo_store, corrupt)
    assert run_sql(demo_store, live_jobs_of_ended_tasks) == [f"task {done} is done but 1 of its jobs are live (job {revived} first)"]
    registered = "\n".join(run_sql(demo_store, outputs_registered_once))
    jobs_of = sorted((first.out_job_id, second.out_job_id))
    assert f"output {first.lfn} of {output.name} was registered by 2 jobs ({jobs_of[0]} and {jobs_of[1]})" in registered, registered
    assert f"output {first.lfn} of {output.name} (job {second.out_job_id}): the data catalog holds guid {first.guid}" in registered, registered
    assert f"output {dropped.lfn} of {output.name} (job {dropped.out_job_id}) is not in the data catalog" in registered, registered
    assert run_sql(demo_store, inputs_of_ended_tasks) == [
        f"task {done} is done but 1 input files were never processed nor failed for good (e.g. {unprocessed.lfn}, ready)"]
    counters = "\n".join(run_sql(demo_store, dataset_counters))
    for kind, column in (("trn_output", "n_files 0 but"), ("log", "n_files "), ("random_seed", "n_files_used ")):
        assert any(f" {kind} dataset " in line and f": {column}" in line for line in counters.splitlines()), (kind, counters)
    assert set(run_sql(demo_store, live_jobs_of_ended_tasks) + run_sql(demo_store, outputs_registered_once)) <= set(run_sql(demo_store, check_all))
