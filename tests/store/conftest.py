"""Store fixtures: every store test runs on SQLite and on a real PostgreSQL.

`make test` starts PostgreSQL (.ci/services.sh) and passes its URL in TRACEJUDGE_TEST_POSTGRES; each
test gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tracejudge.store import SqlStore, open_store


def postgres_admin_url() -> str:
    url = os.environ.get("TRACEJUDGE_TEST_POSTGRES")
    if not url:
        pytest.fail(
            "TRACEJUDGE_TEST_POSTGRES is not set: run the suite with `make test`, which starts PostgreSQL "
            "(.ci/services.sh), or point it at a database whose user may CREATE DATABASE"
        )
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    admin = postgres_admin_url()
    name = f"tj_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base = admin.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def make_store(store_url: str) -> Iterator[Callable[[], SqlStore]]:
    opened: list[SqlStore] = []

    def make() -> SqlStore:
        store = open_store(store_url)
        assert isinstance(store, SqlStore)
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.close()
