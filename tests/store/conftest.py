"""The store layer tested on a connection: the `db` fixture opens the `store` fixture's store (both
backends) the way the engine opens it."""

from __future__ import annotations

from typing import Iterator

import pytest

from jedictl.store.database import Store, open_store


@pytest.fixture
def db(store: str) -> Iterator[Store]:
    opened = open_store(store)
    yield opened
    opened.close()
