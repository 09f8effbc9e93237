"""store.workqueue's guarded writes on both backends (docs/queue-layers.md): the claim is one statement that
takes an Available element once -- a second claim, by any agent, gets nothing -- and records who took it;
moves between held statuses are guarded by agent and status; `released_blocks` is what generate reads."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select

from jedictl.store import workqueue as wq
from jedictl.store.schema import agent_sites, agents, workqueue_elements, workqueue_history
from tests.store.rows import add_dataset, add_task

NOW = datetime(2030, 3, 1, 8, 0)


def _setup(db) -> list[int]:
    """A task with two input blocks, two agents serving SITE_A (A) and SITE_B (B); two Available elements."""
    with db.begin() as conn:
        task_id = add_task(conn, "t", "ready")
        blocks = [add_dataset(conn, task_id, f"b{i}") for i in range(2)]
        for name, site in (("A", "SITE_A"), ("B", "SITE_B")):
            conn.execute(insert(agents).values(name=name, created_at=NOW, modified_at=NOW))
            conn.execute(insert(agent_sites).values(agent=name, site=site, job_type="managed", pending_threshold=5, running_threshold=5,
                                                    state="normal", modified_at=NOW))
        return wq.insert_elements(conn, [{"task_id": task_id, "dataset_id": block, "block": f"b{i}", "n_files": 4, "n_jobs": 2,
                                          "possible_sites": ["SITE_A", "SITE_B"], "agent": None, "site": None, "reason": None}
                                         for i, block in enumerate(blocks)], "test", NOW)


def test_an_element_is_claimed_once(db):
    first, second = _setup(db)
    with db.begin() as conn:
        assert wq.claim_element(conn, first, "A", "SITE_A", "p1", NOW) is True
    with db.begin() as conn:
        assert wq.claim_element(conn, first, "B", "SITE_B", "p2", NOW) is False  # the guard: no longer Available
        assert wq.claim_element(conn, first, "A", "SITE_A", "p1", NOW) is False  # not twice by the same agent either
    with db.read() as conn:
        row = conn.execute(select(workqueue_elements).where(workqueue_elements.c.id == first)).one()
        assert (row.status, row.agent, row.site) == ("Negotiating", "A", "SITE_A")
        taken = conn.execute(select(workqueue_history.c.agent).where(workqueue_history.c.element_id == first,
                                                                     workqueue_history.c.to_status == "Negotiating")).scalars().all()
        assert taken == ["A"]
        assert [r.id for r in wq.available_elements(conn, 10)] == [second]


def test_held_moves_are_guarded_by_agent_and_status(db):
    first, _ = _setup(db)
    with db.begin() as conn:
        wq.claim_element(conn, first, "A", "SITE_A", "p1", NOW)
        assert wq.move_held(conn, first, "B", "Negotiating", "Acquired", "p2", NOW) is False  # not B's
        assert wq.move_held(conn, first, "A", "Acquired", "Running", "p1", NOW) is False  # not Acquired yet
        assert wq.move_held(conn, first, "A", "Negotiating", "Acquired", "p1", NOW) is True
        assert wq.released_blocks(conn, 1) == {}  # queued, nothing released
        assert wq.move_held(conn, first, "A", "Acquired", "Running", "p1", NOW, site="SITE_A") is True
        block = conn.execute(select(workqueue_elements.c.dataset_id).where(workqueue_elements.c.id == first)).scalar_one()
        assert wq.released_blocks(conn, 1) == {block: ("SITE_A",)}  # its possible sites that agent A serves
        assert wq.released_blocks(conn, 999) is None  # a task not in the work queue
