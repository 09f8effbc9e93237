"""store.site_datasets on a connection, both backends: a site's dataset inside an output container is made
once (task row, open catalog dataset, membership), used while it is open in the catalog, and replaced by a
new one -- the container opened again -- once finalize closed it (a retried task)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select, update

from jedictl.store import completion
from jedictl.store.schema import catalog_container_members, catalog_datasets, datasets
from jedictl.store.site_datasets import NotAContainer, site_dataset_name, site_datasets
from tests.store.rows import T0, add_task


def _container(conn, task_id: int, name: str, type: str = "output") -> object:
    dataset_id = conn.execute(insert(datasets).values(
        task_id=task_id, name=name, container_name=name, type=type, status="defined", stream_name="OUTPUT0",
        attributes={"per_site": True}, destination="NUCLEUS_DISK", created_at=T0, modified_at=T0).returning(datasets.c.id)).scalar_one()
    return conn.execute(select(datasets).where(datasets.c.id == dataset_id)).one()


def _members(conn, container: str) -> list[str]:
    member = catalog_datasets.alias("member")
    outer = catalog_datasets.alias("outer")
    return sorted(conn.execute(
        select(member.c.name).join(catalog_container_members, catalog_container_members.c.dataset_id == member.c.id)
        .join(outer, outer.c.id == catalog_container_members.c.container_id).where(outer.c.name == container)).scalars())


def _state(conn, name: str) -> tuple[str, str]:
    return tuple(conn.execute(select(catalog_datasets.c.kind, catalog_datasets.c.state).where(catalog_datasets.c.name == name)).one())


def test_site_datasets_are_made_once_and_replaced_once_closed(db):
    with db.begin() as conn:
        task_id = add_task(conn, "user.alice.x/", status="running")
        hist, log = _container(conn, task_id, "user.alice.x_hist.root/"), _container(conn, task_id, "user.alice.x.log/", "log")
        first = site_datasets(conn, [hist, log], ["SITE_A", "SITE_B", "SITE_A"], T0)
        assert set(first) == {"SITE_A", "SITE_B"} and all(set(ids) == {hist.id, log.id} for ids in first.values())
        made = {row.id: row for row in conn.execute(select(datasets).where(datasets.c.template_id.is_not(None)))}
        assert len(made) == 4
        for site, ids in first.items():
            for template, dataset_id in ids.items():
                row, container = made[dataset_id], (hist if template == hist.id else log)
                assert (row.name, row.site, row.template_id, row.container_name, row.type, row.destination, row.stream_name) == (
                    site_dataset_name(container.name, dataset_id), site, container.id, container.name, container.type,
                    "NUCLEUS_DISK", "OUTPUT0")
                assert "per_site" not in (row.attributes or {})
        assert site_dataset_name("user.alice.x_hist.root/", 42) == "user.alice.x_hist.root.42"
        assert _state(conn, hist.name) == ("container", "open")
        assert _members(conn, hist.name) == sorted(made[first[site][hist.id]].name for site in first)
        # The next chunk (or a retry) at a site uses its dataset; a new site gets one.
        again = site_datasets(conn, [hist, log], ["SITE_A", "SITE_C"], T0)
        assert again["SITE_A"] == first["SITE_A"] and set(again["SITE_C"].values()).isdisjoint(made)

        # finalize closes them and the container: a retried task's next job at SITE_A gets a new dataset.
        names = [row.name for row in conn.execute(select(datasets).where(datasets.c.task_id == task_id))]
        closed = completion.close_catalog_datasets(conn, names, T0)
        assert hist.name in closed and made[first["SITE_A"][hist.id]].name in closed
        retried = site_datasets(conn, [hist], ["SITE_A"], T0)
        assert retried["SITE_A"][hist.id] not in made
        assert _state(conn, hist.name) == ("container", "open")
        assert len(_members(conn, hist.name)) == 4  # SITE_A's closed one, B, C and the new one for A


def test_a_catalog_dataset_of_the_container_s_name_is_refused(db):
    with db.begin() as conn:
        task_id = add_task(conn, "user.alice.y/", status="running")
        hist = _container(conn, task_id, "user.alice.y_hist.root/")
        conn.execute(insert(catalog_datasets).values(name=hist.name, kind="dataset", state="open", attributes={}, created_at=T0,
                                                     modified_at=T0))
        with pytest.raises(NotAContainer, match="is a dataset in the data catalog"):
            site_datasets(conn, [hist], ["SITE_A"], T0)


def test_nothing_to_do_without_containers_or_sites(db):
    with db.begin() as conn:
        task_id = add_task(conn, "user.alice.z/", status="running")
        hist = _container(conn, task_id, "user.alice.z_hist.root/")
        assert site_datasets(conn, [], ["SITE_A"], T0) == {} and site_datasets(conn, [hist], [], T0) == {}
        conn.execute(update(datasets).where(datasets.c.id == hist.id).values(status="running"))
        assert conn.execute(select(datasets.c.id).where(datasets.c.template_id.is_not(None))).all() == []
