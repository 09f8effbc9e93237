"""Named operations behind the queue layers (docs/queue-layers.md; seed 002): agents and their resource
control, work-queue elements and their history, the figures the slot rules count, the one guarded
statement that takes an element from the global queue, and what `generate` may make jobs from.

The claim (`claim_element`) is one statement per element on both backends: the element is chosen in a
MATERIALIZED CTE `... WHERE id = :id AND status = 'Available' FOR UPDATE SKIP LOCKED` and the UPDATE
joins it with the same guard (PostgreSQL: a second agent skips the locked row and gets nothing; SQLite:
BEGIN IMMEDIATE serialises the claimers and the guard refuses the second). `_claimable()` is that guard.

An agent is removed only while it holds nothing, and an element is taken only for an agent that exists:
both lock the agent's row first (`lock_agent`) -- a claim shares the lock (FOR KEY SHARE: concurrent
claims of one agent do not wait for each other), a removal takes it alone (FOR UPDATE) -- so on PostgreSQL
a removal waits for a claim in progress and then counts its element, and a claim waits for a removal in
progress and then finds no agent. SQLite's BEGIN IMMEDIATE serialises them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, case, delete, exists, func, insert, select, update

from jedictl.errors import BadInput, JedictlError, NotFound
from jedictl.model import ELEMENT_ENDED, ELEMENT_HELD, SLOT_PENDING, SLOT_RUNNING, ElementStatus, FileStatus
from jedictl.store.leases import claim_candidates
from jedictl.store.schema import (
    agent_sites, agents, catalog_datasets, catalog_replicas, datasets, files, jobs, site_storage, sites, tasks,
    workqueue_elements, workqueue_history,
)

E = workqueue_elements.c
AVAILABLE, NEGOTIATING, ACQUIRED, RUNNING = (ElementStatus.AVAILABLE.value, ElementStatus.NEGOTIATING.value, ElementStatus.ACQUIRED.value,
                                             ElementStatus.RUNNING.value)
HELD, ENDED = ELEMENT_HELD, ELEMENT_ENDED
MASTER_INPUT_TYPES = ("input", "pseudo_input")


def _claimable() -> Any:
    """The claim's guard: an element is taken from the global queue only while it is Available."""
    return E.status == AVAILABLE


# ------------------------------------------------------------------------------------------- agents

def site_names(conn: Connection, names: Iterable[str]) -> set[str]:
    """Which of `names` are sites of the resource catalog."""
    names = list(names)
    return set(conn.execute(select(sites.c.name).where(sites.c.name.in_(names))).scalars()) if names else set()


def upsert_agent(conn: Connection, name: str, max_jobs_per_owner: int | None, keep_cap: bool, now: datetime) -> str:
    """Create the agent, or set its cap (unless `keep_cap`); returns created | updated | unchanged."""
    row = conn.execute(select(agents).where(agents.c.name == name).with_for_update()).first()
    if row is None:
        conn.execute(insert(agents).values(name=name, max_jobs_per_owner=max_jobs_per_owner, created_at=now, modified_at=now))
        return "created"
    if keep_cap or row.max_jobs_per_owner == max_jobs_per_owner:
        return "unchanged"
    conn.execute(update(agents).where(agents.c.name == name).values(max_jobs_per_owner=max_jobs_per_owner, modified_at=now))
    return "updated"


def set_agent_site(conn: Connection, agent: str, site: str, job_type: str, pending: int | None, running: int | None, state: str | None,
                   now: datetime) -> str:
    """Set an agent's thresholds and state at a site for a job type; a new row needs both thresholds.
    Returns created | updated | unchanged."""
    key = and_(agent_sites.c.agent == agent, agent_sites.c.site == site, agent_sites.c.job_type == job_type)
    row = conn.execute(select(agent_sites).where(key)).first()
    if row is None:
        if pending is None or running is None:
            raise BadInput(f"agent {agent} has no thresholds at {site} for {job_type} yet: give --pending-threshold and --running-threshold")
        conn.execute(insert(agent_sites).values(agent=agent, site=site, job_type=job_type, pending_threshold=pending,
                                                running_threshold=running, state=state or "normal", modified_at=now))
        return "created"
    values = {k: v for k, v in (("pending_threshold", pending), ("running_threshold", running), ("state", state))
              if v is not None and row._mapping[k] != v}
    if not values:
        return "unchanged"
    conn.execute(update(agent_sites).where(key).values(**values, modified_at=now))
    return "updated"


def set_site_state(conn: Connection, agent: str, site: str, state: str, now: datetime) -> int:
    """A site's state for the agent, for every job type (WMCore's --drain/--down/--normal); rows changed."""
    return conn.execute(update(agent_sites).where(agent_sites.c.agent == agent, agent_sites.c.site == site)
                        .values(state=state, modified_at=now)).rowcount


def list_agents(conn: Connection) -> list[Row]:
    return list(conn.execute(select(agents).order_by(agents.c.name)))


def get_agent(conn: Connection, name: str) -> Row:
    row = conn.execute(select(agents).where(agents.c.name == name)).first()
    if row is None:
        raise NotFound(f"no agent {name!r} (`jedictl agents add {name} --site ...` adds it)")
    return row


def agent_thresholds(conn: Connection, agent: str) -> list[Row]:
    """The agent's `agent_sites` rows, by site and job type."""
    return list(conn.execute(select(agent_sites).where(agent_sites.c.agent == agent).order_by(agent_sites.c.site, agent_sites.c.job_type)))


def lock_agent(conn: Connection, name: str, exclusive: bool = False) -> bool:
    """Lock the agent's row until the transaction ends (module docstring): shared for a claim, exclusive
    for a removal. False when there is no such agent (any more)."""
    query = select(agents.c.name).where(agents.c.name == name)
    query = query.with_for_update() if exclusive else query.with_for_update(key_share=True)
    return conn.execute(query).first() is not None


def remove_agent(conn: Connection, name: str) -> None:
    """Remove an agent and its thresholds; refused while it holds elements. The agent's row is locked
    first, so a claim of it in progress has committed (or rolled back) before its elements are counted."""
    if not lock_agent(conn, name, exclusive=True):
        get_agent(conn, name)  # NotFound, with its message
    held = conn.execute(select(func.count()).select_from(workqueue_elements).where(E.agent == name, E.status.in_(HELD))).scalar_one()
    if held:
        raise BadInput(f"agent {name} holds {held} work-queue elements (Negotiating, Acquired or Running): they must end first")
    conn.execute(delete(agents).where(agents.c.name == name))


def element_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """(agent, status) -> elements."""
    rows = conn.execute(select(E.agent, E.status, func.count()).where(E.agent.is_not(None)).group_by(E.agent, E.status))
    return {(agent, status): n for agent, status, n in rows}


# ------------------------------------------------------------------------------------- element creation

def task_for_elements(conn: Connection, task_id: int) -> Row:
    row = conn.execute(select(tasks.c.id, tasks.c.status, tasks.c.options, tasks.c.user_name, tasks.c.prod_source_label)
                       .where(tasks.c.id == task_id)).first()
    if row is None:
        raise NotFound(f"no task {task_id}")
    return row


def task_blocks(conn: Connection, task_id: int) -> tuple[list[Row], list[str]]:
    """A task's blocks -- its master input dataset rows (id, name) -- and the names of its secondary
    (pile-up) inputs."""
    rows = list(conn.execute(select(datasets.c.id, datasets.c.name, datasets.c.master_id, datasets.c.status, datasets.c.n_files)
                             .where(datasets.c.task_id == task_id, datasets.c.type.in_(MASTER_INPUT_TYPES)).order_by(datasets.c.id)))
    return [r for r in rows if r.master_id is None], [r.name for r in rows if r.master_id is not None]


def replica_sites(conn: Connection, names: Sequence[str]) -> dict[str, set[str]]:
    """Catalog dataset name -> the sites that read from an endpoint holding a complete replica of it (for a
    container: of every member)."""
    if not names:
        return {}
    found: dict[str, set[str]] = {name: set() for name in names}
    rows = conn.execute(select(catalog_datasets.c.name, site_storage.c.site)
                        .join(catalog_replicas, and_(catalog_replicas.c.dataset_id == catalog_datasets.c.id, catalog_replicas.c.complete.is_(True)))
                        .join(site_storage, and_(site_storage.c.endpoint == catalog_replicas.c.endpoint, site_storage.c.role == "read"))
                        .where(catalog_datasets.c.name.in_(list(names))))
    for name, site in rows:
        found[name].add(site)
    from jedictl.store.schema import catalog_container_members as members

    member = catalog_datasets.alias("member")
    kids = conn.execute(select(catalog_datasets.c.name, member.c.name).join(members, members.c.container_id == catalog_datasets.c.id)
                        .join(member, member.c.id == members.c.dataset_id)
                        .where(catalog_datasets.c.name.in_(list(names)), catalog_datasets.c.kind == "container")).all()
    if kids:
        of_members = replica_sites(conn, sorted({kid for _, kid in kids}))
        by_container: dict[str, list[set[str]]] = {}
        for container, kid in kids:
            by_container.setdefault(container, []).append(of_members.get(kid, set()))
        for container, sets in by_container.items():
            found[container] = set.intersection(*sets) if sets else set()
    return found


def task_has_jobs(conn: Connection, task_id: int) -> bool:
    return conn.execute(select(jobs.c.id).where(jobs.c.task_id == task_id).limit(1)).first() is not None


def existing_blocks(conn: Connection, task_id: int) -> set[int]:
    return set(conn.execute(select(E.dataset_id).where(E.task_id == task_id)).scalars())


def insert_elements(conn: Connection, rows: Sequence[dict[str, Any]], owner: str, now: datetime) -> list[int]:
    """New Available elements with their first history row; their ids."""
    ids = []
    for row in rows:
        element_id = conn.execute(insert(workqueue_elements).values(**row, status=AVAILABLE, created_at=now, modified_at=now,
                                                                    locations_at=now).returning(E.id)).scalar_one()
        ids.append(element_id)
    if ids:
        conn.execute(insert(workqueue_history), [{"element_id": i, "from_status": None, "to_status": AVAILABLE, "agent": None, "owner": owner,
                                                  "changed_at": now} for i in ids])
    return ids


# ------------------------------------------------------------------------------------------ reading

_COLUMNS = (E.id, E.task_id, E.dataset_id, E.block, E.status, E.n_files, E.n_jobs, E.possible_sites, E.agent, E.site, E.reason, E.created_at,
            E.modified_at, E.locations_at, tasks.c.current_priority.label("priority"), tasks.c.prod_source_label.label("job_type"),
            tasks.c.user_name.label("owner"), tasks.c.status.label("task_status"))


def list_elements(conn: Connection, *, task_id: int | None = None, status: str | None = None, agent: str | None = None,
                  limit: int | None = None) -> list[Row]:
    query = select(*_COLUMNS).join(tasks, tasks.c.id == E.task_id).order_by(E.id)
    if task_id is not None:
        query = query.where(E.task_id == task_id)
    if status:
        query = query.where(E.status == status)
    if agent:
        query = query.where(E.agent == agent)
    if limit:
        query = query.limit(limit)
    return list(conn.execute(query))


def get_element(conn: Connection, element_id: int) -> Row:
    row = conn.execute(select(*_COLUMNS).join(tasks, tasks.c.id == E.task_id).where(E.id == element_id)).first()
    if row is None:
        raise NotFound(f"no work-queue element {element_id} (`jedictl workqueue list` shows them)")
    return row


def element_history(conn: Connection, element_id: int) -> list[Row]:
    h = workqueue_history.c
    return list(conn.execute(select(h.from_status, h.to_status, h.agent, h.owner, h.changed_at).where(h.element_id == element_id).order_by(h.id)))


def available_elements(conn: Connection, limit: int) -> list[Row]:
    """The global queue: Available elements of live tasks, highest priority and oldest first."""
    return list(conn.execute(select(*_COLUMNS).join(tasks, tasks.c.id == E.task_id)
                             .where(_claimable(), tasks.c.status.notin_(_TASK_ENDED))
                             .order_by(tasks.c.current_priority.desc(), E.created_at, E.id).limit(limit)))


def agent_elements(conn: Connection, agent: str, statuses: Sequence[str]) -> list[Row]:
    return list(conn.execute(select(*_COLUMNS).join(tasks, tasks.c.id == E.task_id).where(E.agent == agent, E.status.in_(list(statuses)))
                             .order_by(E.id)))


def ready_records(conn: Connection, dataset_ids: Sequence[int]) -> dict[int, int]:
    """Master input dataset id -> its records still ready (not in a job yet)."""
    if not dataset_ids:
        return {}
    rows = conn.execute(select(files.c.dataset_id, func.count()).where(files.c.dataset_id.in_(list(dataset_ids)),
                                                                       files.c.status == FileStatus.READY.value).group_by(files.c.dataset_id))
    return dict(rows.all())


def site_jobs(conn: Connection, site_names_: Sequence[str]) -> list[Row]:
    """Live jobs at these sites by (site, job type, priority, pending|running, owner)."""
    if not site_names_:
        return []
    kind = func.coalesce(jobs.c.prod_source_label, "")
    rows = conn.execute(select(jobs.c.site, kind.label("job_type"), jobs.c.current_priority.label("priority"), jobs.c.status,
                               tasks.c.user_name.label("owner"), func.count().label("n"))
                        .join(tasks, tasks.c.id == jobs.c.task_id)
                        .where(jobs.c.site.in_(list(site_names_)), jobs.c.status.in_(SLOT_PENDING + SLOT_RUNNING))
                        .group_by(jobs.c.site, kind, jobs.c.current_priority, jobs.c.status, tasks.c.user_name))
    return list(rows)


# ------------------------------------------------------------------------------------------ writing

def _history(conn: Connection, element_id: int, from_status: str | None, to_status: str, agent: str | None, owner: str, now: datetime) -> None:
    conn.execute(insert(workqueue_history).values(element_id=element_id, from_status=from_status, to_status=to_status, agent=agent,
                                                  owner=owner, changed_at=now))


def claim_element(conn: Connection, element_id: int, agent: str, site: str, owner: str, now: datetime) -> bool:
    """Take one element from the global queue for `agent`, charged to `site`: ONE guarded statement
    (module docstring). True when this agent got it; False when another agent has it or it moved on.
    JedictlError (the pass stops, exit 1) when the agent was removed meanwhile: the claim holds the
    agent's row shared, so no removal can commit between this check and the claim (module docstring)."""
    if not lock_agent(conn, agent):
        raise JedictlError(f"agent {agent!r} was removed during the pass: it takes no element")
    candidates = claim_candidates(select(E.id).where(E.id == element_id, _claimable()))
    taken = conn.execute(update(workqueue_elements).where(E.id == candidates.c.id, _claimable())
                         .values(status=NEGOTIATING, agent=agent, site=site, reason=None, modified_at=now)
                         .returning(E.id)).scalars().all()
    if not taken:
        return False
    _history(conn, element_id, AVAILABLE, NEGOTIATING, agent, owner, now)
    return True


def move_held(conn: Connection, element_id: int, agent: str, from_status: str, to_status: str, owner: str, now: datetime,
              site: str | None = None) -> bool:
    """An agent's element from one status to the next, guarded by both."""
    values: dict[str, Any] = {"status": to_status, "modified_at": now}
    if site is not None:
        values["site"] = site
    done = conn.execute(update(workqueue_elements).where(E.id == element_id, E.agent == agent, E.status == from_status).values(**values)).rowcount
    if done:
        _history(conn, element_id, from_status, to_status, agent, owner, now)
    return bool(done)


_TASK_ENDED = ("done", "finished", "failed", "broken", "aborted", "aborting")


def ending_elements(conn: Connection, agent: str | None = None) -> list[Row]:
    """Elements not ended whose task ended, or Running ones whose block has no record left to process:
    (id, status, agent, task_status, n_records, n_finished, n_failed)."""
    n = func.count(files.c.id)
    finished = func.coalesce(func.sum(case((files.c.status.in_((FileStatus.FINISHED.value, FileStatus.PARTIAL.value)), 1), else_=0)), 0)
    failed = func.coalesce(func.sum(case((files.c.status == FileStatus.FAILED.value, 1), else_=0)), 0)
    query = (select(E.id, E.status, E.agent, tasks.c.status.label("task_status"), n.label("n_records"), finished.label("n_finished"),
                    failed.label("n_failed"))
             .join(tasks, tasks.c.id == E.task_id)
             .outerjoin(files, and_(files.c.dataset_id == E.dataset_id, files.c.keep_track.is_(True)))
             .where(E.status.notin_(ENDED))
             .group_by(E.id, E.status, E.agent, tasks.c.status).order_by(E.id))
    if agent is not None:
        query = query.where(E.agent == agent)
    return list(conn.execute(query))


def end_element(conn: Connection, element_id: int, from_status: str, to_status: str, reason: str | None, owner: str, now: datetime) -> bool:
    row = conn.execute(update(workqueue_elements).where(E.id == element_id, E.status == from_status)
                       .values(status=to_status, reason=reason, modified_at=now).returning(E.agent)).first()
    if row is None:
        return False
    _history(conn, element_id, from_status, to_status, row.agent, owner, now)
    return True


#: A block's records still to process: in no job yet, or in a live one (the check's "Done but ... to process").
TO_PROCESS = (FileStatus.READY.value, FileStatus.PICKED.value, FileStatus.RUNNING.value)


def _to_process() -> Any:
    """The element's block has a tracked record to process (correlated with workqueue_elements)."""
    return exists().where(files.c.dataset_id == E.dataset_id, files.c.keep_track.is_(True), files.c.status.in_(TO_PROCESS))


def requeue_candidates(conn: Connection, task_id: int | None = None) -> list[Row]:
    """Ended elements whose block has records to process again, of live tasks (or of one task):
    (id, task_id, status, agent, n_to_process)."""
    n = select(func.count()).where(files.c.dataset_id == E.dataset_id, files.c.keep_track.is_(True), files.c.status.in_(TO_PROCESS))
    query = (select(E.id, E.task_id, E.status, E.agent, n.scalar_subquery().label("n_to_process"))
             .join(tasks, tasks.c.id == E.task_id)
             .where(E.status.in_(ENDED), tasks.c.status.notin_(_TASK_ENDED), _to_process()).order_by(E.id))
    if task_id is not None:
        query = query.where(E.task_id == task_id)
    return list(conn.execute(query))


def requeue_element(conn: Connection, element_id: int, from_status: str, reason: str, owner: str, now: datetime) -> bool:
    """An ended element back in the global queue, Available with no agent and no site: ONE statement
    guarded by the status it was read in and by its block having records to process. Its history row
    names no agent: any agent may take it now."""
    done = conn.execute(update(workqueue_elements).where(E.id == element_id, E.status == from_status, _to_process())
                        .values(status=AVAILABLE, agent=None, site=None, reason=reason, modified_at=now)).rowcount
    if done:
        _history(conn, element_id, from_status, AVAILABLE, None, owner, now)
    return bool(done)


def requeue_ended(conn: Connection, owner: str, now: datetime, task_id: int | None = None) -> list[dict[str, Any]]:
    """WMCore's ResubmitBlock: an ended element of a live task whose block has records to process again
    (a retried task's failed records back to `ready`) goes back to the global queue -- Available, its
    agent and site cleared, one guarded statement each -- so an agent's acquire takes it and `generate`
    makes the jobs. In the caller's transaction: `task retry` and `incexec` call it with the records'
    move, so `check` never sees a Done block with records to process; every acquire and location pass
    calls it too, for records that came back any other way. A line per element re-queued."""
    lines = []
    for row in requeue_candidates(conn, task_id):
        reason = f"back from {row.status}: {row.n_to_process} records of its block to process again"
        if requeue_element(conn, row.id, row.status, reason, owner, now):
            lines.append({"element": row.id, "task_id": row.task_id, "agent": row.agent, "reason": reason})
    return lines


def set_locations(conn: Connection, element_id: int, possible: list[str], reason: str | None, now: datetime) -> bool:
    """Refresh an Available element's possible sites and the reason it shows with them (guarded: only while
    it is Available)."""
    return bool(conn.execute(update(workqueue_elements).where(E.id == element_id, E.status == AVAILABLE)
                             .values(possible_sites=possible, reason=reason, locations_at=now)).rowcount)


def elements_for_locations(conn: Connection, task_id: int | None = None) -> list[Row]:
    """Available elements with what their possible sites are computed from."""
    query = (select(E.id, E.task_id, E.block, E.possible_sites, tasks.c.options).join(tasks, tasks.c.id == E.task_id)
             .where(E.status == AVAILABLE).order_by(E.id))
    if task_id is not None:
        query = query.where(E.task_id == task_id)
    return list(conn.execute(query))


# ------------------------------------------------------------------------------------ what generate uses

def released_blocks(conn: Connection, task_id: int) -> dict[int, tuple[str, ...]] | None:
    """None when the task has no work-queue elements (generate takes all its released input, as always);
    else its blocks released to generate (elements Running) -> the sites their jobs may run at: the
    element's possible sites that its agent serves for the task's job type, and that are not down there."""
    rows = conn.execute(select(E.dataset_id, E.status, E.possible_sites, E.agent).where(E.task_id == task_id)).all()
    if not rows:
        return None
    job_type = conn.execute(select(tasks.c.prod_source_label).where(tasks.c.id == task_id)).scalar_one()
    running = [r for r in rows if r.status == RUNNING]
    served: dict[str, set[str]] = {}
    for agent in {r.agent for r in running}:
        served[agent] = set(conn.execute(select(agent_sites.c.site).where(agent_sites.c.agent == agent, agent_sites.c.job_type == job_type,
                                                                            agent_sites.c.state != "down")).scalars())
    return {r.dataset_id: tuple(sorted(set(r.possible_sites or ()) & served.get(r.agent, set()))) for r in running}
