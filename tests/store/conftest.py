"""Store fixtures: every store test runs on SQLite and on a real PostgreSQL.

`make test` starts PostgreSQL (.ci/services.sh) and passes its URL in TRACEJUDGE_TEST_POSTGRES; each
test gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.store.private_postgres import PrivatePostgres
from tracejudge.schema import RawSpan
from tracejudge.store import SqlStore, open_store
from tracejudge.store._chunks import chunk_span_ids

_DROPPED = ("dropped_attributes_count", "dropped_events_count", "dropped_links_count")


def sqlite_rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """The rows of ``sql`` on a SQLite file, read with sqlite3 (not through the store)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def sqlite_from_dump(path: Path, dump: str, *, page_size: int | None = None) -> Path:
    """``path``, a SQLite file made from a fixture store's SQL dump (with the page size the version that
    wrote it gave new stores, when given)."""
    conn = sqlite3.connect(path)
    try:
        if page_size is not None:
            conn.execute(f"PRAGMA page_size={page_size}")
        conn.executescript(dump)
    finally:
        conn.close()
    return path


def postgres_set_back(url: str, requests: Iterable[bytes], version: int) -> dict[str, list[dict[str, Any]]]:
    """Store the OTLP ``requests`` in the PostgreSQL store at ``url``, then set its recorded schema back
    to ``version`` (PostgreSQL's upgrades since are version bumps); what it read of each trace before."""
    from tracejudge_collectors.otel import encode_protobuf

    store = open_store(url)
    try:
        for body in requests:
            store.put_spans(encode_protobuf(body).spans)
        reads = {t: dumped(store.get_spans(t)) for t in store.iter_trace_ids()}
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("UPDATE schema_info SET version = %s", (version,))
    return reads


def chunked_spans(path: Path) -> list[tuple[int, str]]:
    """(trace seq, span id) of each span a SQLite store at schema 6 or later holds, in the order its
    chunks were written (read with sqlite3, not through the store's reads)."""
    rows = sqlite_rows(path, "SELECT trace_seq, data FROM span_chunks ORDER BY rowid")
    return [(int(seq), span_id) for seq, data in rows for span_id in chunk_span_ids(data)]


def sqlite_tables(path: Path) -> set[str]:
    """The tables of a SQLite file."""
    return {r[0] for r in sqlite_rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def dumped(spans: list[RawSpan]) -> list[dict[str, Any]]:
    """Spans as JSON values, as the recorded reads of a fixture store hold them."""
    return [s.model_dump(mode="json") for s in spans]


def store_reads(store: SqlStore, session_ids: Iterable[str]) -> dict[str, Any]:
    """What a store reads back -- the traces list, each trace's spans and session, each of
    ``session_ids``' traces -- as ``make_store_v3.reads_of`` recorded it for a fixture store."""
    ids = list(store.iter_trace_ids())
    return {
        "traces": [t.model_dump(mode="json") for t in store.list_traces()],
        "spans": {t: dumped(store.get_spans(t)) for t in ids},
        "sessions": {t: store.trace_session(t) for t in ids},
        "session_traces": {
            sid: [t.model_dump(mode="json") for t in store.session_traces(sid)] for sid in session_ids
        },
    }


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
    sessions (waiting for each to exit), then drops. A session of ours that opened in between (a
    client of the test reconnecting) fails the drop ("is being accessed by other users"): ended in
    turn, and the drop made again."""
    with psycopg.connect(admin, autocommit=True) as conn:
        for attempt in range(3):
            conn.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()",
                (name,),
            )
            try:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                return
            except psycopg.errors.ObjectInUse:
                if attempt == 2:
                    raise


# Every test database says which process made it, so that one a killed test process left (a timeout,
# kill -9, a cancelled CI job: no teardown ran) is dropped by the next test process on this host rather
# than left on the shared server for good.
_MADE_BY = "tracejudge test database of "
_swept: list[str] = []


def _made_by_me() -> str:
    return f"{_MADE_BY}{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def drop_orphaned_databases(admin: str) -> list[str]:
    """Drop the test databases that a test process of this host made and did not live to drop (the
    process is gone and no session is in them); their names."""
    mine = f"{_MADE_BY}{socket.gethostname()}:"
    with psycopg.connect(admin, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT d.datname, shobj_description(d.oid, 'pg_database') FROM pg_database d"
            " WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)"
        ).fetchall()
    dropped = []
    for name, made_by in rows:
        if not (made_by or "").startswith(mine):
            continue
        pid = made_by[len(mine) :]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(psycopg.Error):  # another process's sweep got there first
            drop_database(admin, name)
            dropped.append(name)
    return dropped


def create_database(admin: str, prefix: str = "tj") -> str:
    """A new, empty database on ``admin``'s server, marked as this process's; its name. Drop it with
    :func:`drop_database`."""
    if admin not in _swept:  # once a process
        _swept.append(admin)
        drop_orphaned_databases(admin)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(_made_by_me()))
        )
    return name


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    admin = postgres_admin_url()
    name = create_database(admin)
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
