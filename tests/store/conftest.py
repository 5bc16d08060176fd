"""Store fixtures: every store test runs on SQLite and on a real PostgreSQL.

`make test` starts PostgreSQL (.ci/services.sh) and passes its URL in TRACEJUDGE_TEST_POSTGRES; each
test gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.store.private_postgres import PrivatePostgres
from tracejudge.schema import RawSpan
from tracejudge.store import SqlStore, open_store

_DROPPED = ("dropped_attributes_count", "dropped_events_count", "dropped_links_count")


def read_as_before(span: RawSpan) -> dict[str, Any]:
    """A span's JSON as stores read it before the SDK's dropped counts were kept (the recorded reads of
    older versions): the counts, 0 for every span those stores hold, left out, and whether an event came
    as a log record (merged into its span's events as before)."""
    dumped = span.model_dump(mode="json")
    assert [dumped.pop(key) for key in _DROPPED] == [0, 0, 0]
    for event in dumped["events"]:
        assert event.pop("dropped_attributes_count") == 0
        assert isinstance(event.pop("log_record"), bool)
    return dumped


def postgres_admin_url() -> str:
    url = os.environ.get("TRACEJUDGE_TEST_POSTGRES")
    if not url:
        pytest.fail(
            "TRACEJUDGE_TEST_POSTGRES is not set: run the suite with `make test`, which starts PostgreSQL "
            "(.ci/services.sh), or point it at a database whose user may CREATE DATABASE"
        )
    return url


def drop_database(admin: str, name: str) -> None:
    """Drop a test database, ending the sessions of ours still in it.

    Not ``DROP DATABASE … WITH (FORCE)``: it checks the right to signal every backend in the
    database, and a user that is not a superuser has none over an autovacuum worker, so it fails
    ("must be a member of the role whose process is being terminated or member of pg_signal_backend")
    whenever autovacuum happens to be visiting — a test that passed then errored in its teardown.
    A plain DROP DATABASE stops an autovacuum worker itself (and waits for it), so this ends our own
    sessions (waiting for each to exit), then drops."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f"DROP DATABASE IF EXISTS {name}")


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
        drop_database(admin, name)


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


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of this test's own, started, to stop and restart (private_postgres.py)."""
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.close()
