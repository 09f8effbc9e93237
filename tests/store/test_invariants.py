"""The store's invariants (store/invariants.py) hold after a real run, and each new check finds what it
is there to find: a retry history that does not fit the jobs, a lease left after a watch pass."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from jedictl.clock import utcnow
from jedictl.store.invariants import check_all, leases_after_watch, retry_history
from jedictl.store.schema import job_retry_history, jobs, tasks
from tests.helpers import run_sql


@pytest.fixture
def demo_store(cli, store_url):
    """A store the demo ran to the end: retries and merge jobs, so both relations are in the history."""
    assert cli.json("demo", "--db", store_url, "--seed", "3")["all_final"] is True
    return store_url


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
    assert len(problems) == 1 and "task 1 (done) still leased by host:1:dead" in problems[0]
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
