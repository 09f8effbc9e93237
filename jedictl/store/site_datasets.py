"""Named operations behind output containers (seed 000 "Workflow for analysis" step 5; jedi-inventory.md
§6.8, template instantiation): the dataset a site's jobs write inside a task's output container.

A task that asks for an output container (an output or log dataset named `<outDS>/`) has one row for the
container -- its output templates hang on it, so serial numbers run on across sites -- and gets, for each
site its jobs go to, a dataset of its own: a copy of the container's row named `<outDS>.<dataset id>`, with
`site` and `template_id` set, registered open in the data catalog as a member of the container. It is made
in the transaction of the first chunk that sends jobs to the site, and used by every later job there, a
retry included, for as long as it is open in the catalog; once finalize closed it, the next job at that
site (a retried task) gets a new one.

Everything runs in the generator's transaction, under the task's lease (one generator writes a task's jobs
at a time), and once per (container, site) per chunk -- never per job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from jedictl.errors import JedictlError
from jedictl.model import DatasetState
from jedictl.store.job_outcomes import scope_of
from jedictl.store.schema import catalog_container_members, catalog_datasets, datasets

_OPEN = DatasetState.OPEN.value
#: The columns a site's dataset copies from its container's row.
_COPIED = ("task_id", "type", "status", "stream_name", "destination", "storage_token", "provenance_id")


class NotAContainer(JedictlError):
    """The output container's name is taken in the data catalog by a dataset."""


def site_dataset_name(container_name: str, dataset_id: int) -> str:
    """JEDI's name of a dataset made from a template: the template's name without its trailing '/', a
    dot and the new dataset's id (`user.alice.x_hist.root/` -> `user.alice.x_hist.root.1042`)."""
    return f"{container_name.rstrip('/')}.{dataset_id}"


def site_datasets(conn: Connection, containers: Sequence[Any], sites: Iterable[str], now: datetime) -> dict[str, dict[int, int]]:
    """For each site, container row id -> the id of the open dataset its jobs write into that container,
    made (task row, catalog dataset, membership) where there is none yet. `containers` are `datasets`
    rows of one task."""
    names = sorted(set(sites))
    if not containers or not names:
        return {}
    by_id = {row.id: row for row in containers}
    found: dict[str, dict[int, int]] = {site: {} for site in names}
    existing = conn.execute(
        select(datasets.c.id, datasets.c.template_id, datasets.c.site, catalog_datasets.c.state)
        .outerjoin(catalog_datasets, catalog_datasets.c.name == datasets.c.name)
        .where(datasets.c.task_id == next(iter(by_id.values())).task_id, datasets.c.template_id.in_(list(by_id)),
               datasets.c.site.in_(names))
        .order_by(datasets.c.id))
    for row in existing:
        if row.state == _OPEN:  # the newest open one, should there be several
            found[row.site][row.template_id] = row.id
    for site in names:
        for container in containers:
            if container.id not in found[site]:
                found[site][container.id] = _make(conn, container, site, now)
    return found


def _make(conn: Connection, container: Any, site: str, now: datetime) -> int:
    """The site's dataset in `container`: its task row, then its open catalog dataset inside the catalog
    container (made, or opened again, as needed)."""
    attributes = {key: value for key, value in (container.attributes or {}).items() if key != "per_site"}
    values = {name: getattr(container, name) for name in _COPIED}
    dataset_id = conn.execute(insert(datasets).values(
        **values, name=container.name, container_name=container.name, template_id=container.id, site=site,
        attributes=attributes, created_at=now, modified_at=now).returning(datasets.c.id)).scalar_one()
    name = site_dataset_name(container.name, dataset_id)
    conn.execute(update(datasets).where(datasets.c.id == dataset_id).values(name=name))
    container_id = _catalog_container(conn, container.name, container.task_id, now)
    member_id = conn.execute(select(catalog_datasets.c.id).where(catalog_datasets.c.name == name)).scalar_one_or_none()
    if member_id is None:
        member_id = conn.execute(insert(catalog_datasets).values(
            name=name, scope=scope_of(name), kind="dataset", state=_OPEN,
            attributes={"produced_by": "jedictl", "task_id": container.task_id, "site": site},
            created_at=now, modified_at=now).returning(catalog_datasets.c.id)).scalar_one()
    conn.execute(insert(catalog_container_members).values(container_id=container_id, dataset_id=member_id))
    return dataset_id


def _catalog_container(conn: Connection, name: str, task_id: int, now: datetime) -> int:
    row = conn.execute(select(catalog_datasets.c.id, catalog_datasets.c.kind, catalog_datasets.c.state)
                       .where(catalog_datasets.c.name == name)).first()
    if row is None:
        return conn.execute(insert(catalog_datasets).values(
            name=name, scope=scope_of(name), kind="container", state=_OPEN, attributes={"produced_by": "jedictl", "task_id": task_id},
            created_at=now, modified_at=now).returning(catalog_datasets.c.id)).scalar_one()
    if row.kind != "container":
        raise NotAContainer(f"output container {name} is a dataset in the data catalog: no site's dataset can be added to it")
    if row.state != _OPEN:  # a retried task adds datasets again: the container opens until finalize closes it
        conn.execute(update(catalog_datasets).where(catalog_datasets.c.id == row.id).values(state=_OPEN, modified_at=now))
    return row.id
