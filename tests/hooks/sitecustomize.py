"""Test hooks for real jedictl processes, loaded by Python at start-up when this folder is on PYTHONPATH
(tests.helpers.HOOKS). Nothing here is part of jedictl: a test that needs a process to be slow at a
known moment, or a guard deliberately broken, starts the process with these variables.

JEDICTL_HOOK_SLOW_TASK=SECONDS  every task a leased pass handles waits SECONDS first (a pass that is
                                mid-way, holding its leases, for as long as a test needs)
JEDICTL_HOOK_HOLDING=PATH       this file is created when a pass starts handling its first task
                                (the moment to send a signal)
JEDICTL_HOOK_SLOW_QUERY=SECONDS every task a leased pass handles first locks its row and runs a
                                statement that takes SECONDS inside the database (PostgreSQL's
                                pg_sleep), in one transaction: a signal that arrives while the driver
                                waits for the server, with a row lock held
JEDICTL_HOOK_SLOW_CHUNK=SECONDS every chunk the generator writes waits SECONDS first, in its
                                transaction (two generators both past their start-of-pass snapshot)
JEDICTL_HOOK_SLOW_OWNER_CHECK=SECONDS  a submission waits SECONDS after it looked for the owner of its
                                output datasets, before it registers the task (two submissions both past
                                their check)
JEDICTL_HOOK_SLOW_RESUBMISSION=SECONDS  a submission that continues a task waits SECONDS once it has
                                planned the resubmission, holding the task's lock (two resubmissions
                                of one outDS both past their look for the task)
JEDICTL_HOOK_BREAK_GUARD=claim  leases.claim_one ignores the condition the row was chosen for -- the
                                guard whose absence was issue 14's defect 1 -- so a test can show that
                                its invariants catch the break
JEDICTL_HOOK_BREAK_GUARD=release  leases.release and release_all do nothing: leases are left behind
JEDICTL_HOOK_SLOW_PERIODIC=SECONDS  a periodic pass waits SECONDS once it has read the templates due,
                                before it claims any (overlapping passes all past their read of one due time)
JEDICTL_HOOK_BREAK_GUARD=periodic  store.periodic.claim_due ignores the due time the pass read and
                                claims whatever the template holds, so a test can show that `check`
                                catches two instances of one due time
JEDICTL_HOOK_DIE_AT=periodic-before-commit  a periodic pass SIGKILLs itself when it has claimed a due time,
                                submitted the instance and recorded the outcome, before it commits
JEDICTL_HOOK_SLOW_REASSIGN=SECONDS  job reassignment waits SECONDS once it has decided its moves, before it
                                writes them (a dispatch, or a second pass, in between); with
                                JEDICTL_HOOK_DECIDED=PATH it creates that file when the wait begins, and
                                with JEDICTL_HOOK_RESUME=PATH the wait ends as soon as that file exists
JEDICTL_HOOK_BREAK_GUARD=reassign  a job's move ignores the status and site it was decided on (only its id
                                counts), so a test can show that `check` catches a job moved twice or
                                moved after its dispatch
JEDICTL_HOOK_SLOW_WORKQUEUE=SECONDS  an acquire pass waits SECONDS once it has read the global queue, before
                                it claims any element (racing agents all past their read of the same elements);
                                JEDICTL_HOOK_DECIDED and JEDICTL_HOOK_RESUME as for SLOW_REASSIGN
JEDICTL_HOOK_BREAK_GUARD=workqueue  an element is claimed whatever its status (store.workqueue._claimable is
                                always true), so a test can show that `check` catches an element two agents took
JEDICTL_HOOK_DIE_AT=generate-finish  the process SIGKILLs itself when the generator has committed a
                                task's jobs and is about to make its final write (a kill between them)
JEDICTL_HOOK_DIE_AT=listen-before-commit  `jedictl listen` SIGKILLs itself inside a message's action
                                transaction, its writes made and not committed (after the outcome of a
                                command or dataset message is written; after a batch of job reports)
JEDICTL_HOOK_DIE_AT=listen-before-ack  `jedictl listen` SIGKILLs itself when a message's action has
                                committed, before the message is acknowledged
"""

from __future__ import annotations

import os


def _install() -> None:
    slow = float(os.environ.get("JEDICTL_HOOK_SLOW_TASK", "0") or 0)
    slow_query = float(os.environ.get("JEDICTL_HOOK_SLOW_QUERY", "0") or 0)
    holding = os.environ.get("JEDICTL_HOOK_HOLDING")
    broken = os.environ.get("JEDICTL_HOOK_BREAK_GUARD")
    slow_chunk = float(os.environ.get("JEDICTL_HOOK_SLOW_CHUNK", "0") or 0)
    slow_owner_check = float(os.environ.get("JEDICTL_HOOK_SLOW_OWNER_CHECK", "0") or 0)
    slow_resubmission = float(os.environ.get("JEDICTL_HOOK_SLOW_RESUBMISSION", "0") or 0)
    die_at = os.environ.get("JEDICTL_HOOK_DIE_AT")
    slow_periodic = float(os.environ.get("JEDICTL_HOOK_SLOW_PERIODIC", "0") or 0)
    slow_reassign = float(os.environ.get("JEDICTL_HOOK_SLOW_REASSIGN", "0") or 0)
    slow_workqueue = float(os.environ.get("JEDICTL_HOOK_SLOW_WORKQUEUE", "0") or 0)
    if not (slow or slow_query or holding or broken or slow_chunk or slow_owner_check or slow_resubmission or die_at or slow_periodic or slow_reassign
            or slow_workqueue):
        return
    if slow_workqueue:
        import time

        from jedictl.store import workqueue

        real_available = workqueue.available_elements

        def slow_available(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            found = real_available(*args, **kwargs)
            decided = os.environ.get("JEDICTL_HOOK_DECIDED")
            if decided:
                open(decided, "w").close()
            resume = os.environ.get("JEDICTL_HOOK_RESUME")
            deadline = time.monotonic() + slow_workqueue
            while time.monotonic() < deadline and not (resume and os.path.exists(resume)):
                time.sleep(0.02 if resume else max(0.0, deadline - time.monotonic()))
            return found

        workqueue.available_elements = slow_available
    if broken == "workqueue":
        from sqlalchemy import true

        from jedictl.store import workqueue

        workqueue._claimable = lambda: true()
    if slow_periodic:
        import time

        from jedictl.store import periodic

        real_due = periodic.due_templates

        def slow_due_templates(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            found = real_due(*args, **kwargs)
            time.sleep(slow_periodic)
            return found

        periodic.due_templates = slow_due_templates
    if broken == "periodic":
        from sqlalchemy import update

        from jedictl.store import periodic
        from jedictl.store.schema import periodic_templates as templates

        def unguarded_claim_due(conn, template_id, expected, due_at, following, missed, now):  # noqa: ANN001, ANN202, ARG001
            moved = conn.execute(update(templates).where(templates.c.id == template_id, templates.c.status == "active")
                                 .values(next_due_at=following, last_due_at=due_at, n_missed=templates.c.n_missed + missed,
                                         modified_at=now))
            return moved.rowcount == 1

        periodic.claim_due = unguarded_claim_due
    if slow_reassign:
        import time

        from jedictl.engine.watch import reassignment

        real_apply = reassignment.apply_moves

        def slow_apply(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            decided = os.environ.get("JEDICTL_HOOK_DECIDED")
            if decided:
                open(decided, "w").close()
            resume = os.environ.get("JEDICTL_HOOK_RESUME")
            deadline = time.monotonic() + slow_reassign
            while time.monotonic() < deadline and not (resume and os.path.exists(resume)):
                time.sleep(0.02 if resume else max(0.0, deadline - time.monotonic()))
            return real_apply(*args, **kwargs)

        reassignment.apply_moves = slow_apply
    if broken == "reassign":
        from sqlalchemy import update

        from jedictl.store import reassignments
        from jedictl.store.schema import jobs

        def unguarded_move_jobs(conn, moves, now):  # noqa: ANN001, ANN202
            for move in moves:
                conn.execute(update(jobs).where(jobs.c.id == move.job_id).values(site=move.to_site, cloud=move.cloud, status=move.to_status,
                                                                                 state_changed_at=now, modified_at=now))
            reassignments._after_move(conn, moves, now)
            return len(moves)

        reassignments.move_jobs = unguarded_move_jobs
        reassignments.move_job = lambda conn, move, now: unguarded_move_jobs(conn, [move], now) == 1
    if slow_resubmission:
        import time

        from jedictl.engine.task import resubmission

        real_plan = resubmission.plan

        def slow_plan(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            planned = real_plan(*args, **kwargs)
            time.sleep(slow_resubmission)
            return planned

        resubmission.plan = slow_plan
    if die_at == "listen-before-commit":
        import signal

        from jedictl.engine.jobs import outcomes
        from jedictl.store import messages

        real_settle, real_end_jobs = messages.settle, outcomes.end_jobs

        def dying_settle(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            real_settle(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)

        def dying_end_jobs(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            real_end_jobs(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)

        messages.settle, outcomes.end_jobs = dying_settle, dying_end_jobs
    if die_at == "listen-before-ack":
        import signal

        from jedictl.engine.messages import broker

        def dying_ack(self, delivery):  # noqa: ANN001, ANN202
            os.kill(os.getpid(), signal.SIGKILL)

        broker.Broker.ack = dying_ack
    if die_at == "periodic-before-commit":
        import signal

        from jedictl.store import periodic

        real_record = periodic.record_outcome

        def dying_record(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            real_record(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)

        periodic.record_outcome = dying_record
    if die_at == "generate-finish":
        import signal

        from jedictl.engine.generate import generator

        real_finish = generator.TaskGenerator._finish

        def dying_finish(self, made, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            if made:
                os.kill(os.getpid(), signal.SIGKILL)
            return real_finish(self, made, *args, **kwargs)

        generator.TaskGenerator._finish = dying_finish
    if slow_owner_check:
        import time

        from jedictl.engine.task import submission

        real_owner = submission.output_owner

        def slow_output_owner(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            found = real_owner(*args, **kwargs)
            time.sleep(slow_owner_check)
            return found

        submission.output_owner = slow_output_owner
    if slow_chunk:
        import time

        from jedictl.engine.generate import generator

        real_chunk = generator.TaskGenerator._chunk

        def slow_chunk_of(self, conn, *args, **kwargs):  # noqa: ANN001, ANN202
            time.sleep(slow_chunk)
            return real_chunk(self, conn, *args, **kwargs)

        generator.TaskGenerator._chunk = slow_chunk_of
    if slow or slow_query or holding:
        import time

        from jedictl.engine import agent

        real_pass = agent.leased_pass

        def leased_pass(store, report, candidates, order_by, handle, **kwargs):  # noqa: ANN001, ANN202
            def slow_handle(task_id):  # noqa: ANN001, ANN202
                if holding and not os.path.exists(holding):
                    with open(holding, "w") as marker:
                        marker.write(f"{report.name} {task_id}\n")
                if slow:
                    time.sleep(slow)
                if slow_query:
                    with store.begin() as conn:  # as a pass mid-transaction: the task row locked, then a long statement
                        conn.exec_driver_sql(f"UPDATE tasks SET modified_at = modified_at WHERE id = {int(task_id)}")
                        conn.exec_driver_sql(f"SELECT pg_sleep({slow_query})")
                return handle(task_id)

            return real_pass(store, report, candidates, order_by, slow_handle, **kwargs)

        agent.leased_pass = leased_pass
    if broken == "claim":
        from jedictl.store import leases

        real_claim_one = leases.claim_one

        def claim_one(conn, table, row_id, owner, now, seconds, where=None):  # noqa: ANN001, ANN202
            return real_claim_one(conn, table, row_id, owner, now, seconds)

        leases.claim_one = claim_one
    if broken == "release":
        from jedictl.store import leases

        leases.release = lambda conn, table, row_id, owner: True  # noqa: ARG005
        leases.release_all = lambda conn, table, owner: []  # noqa: ARG005


_install()
