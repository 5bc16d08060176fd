"""A store written by the previous version (schema 1: every span as JSON) is upgraded in place when it
is opened — in one transaction, so an interrupted upgrade leaves it as it was and the next open
finishes it — and reads back exactly what that version read from it; spans received after the upgrade
are stored in their own OTLP bytes beside the old JSON ones.

The store is ``fixtures/store_v1.sql``, dumped from a store tracejudge 0.1.0 at schema 1 wrote, and
``fixtures/store_v1_reads.json`` is what that code read back from it (``fixtures/make_store_v1.py``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.store.conftest import read_as_before, sqlite_tables
from tracejudge.store import STORE_SCHEMA_VERSION, EncodedSpan, SqlStore, open_store
from tracejudge.store import _sql as sql_module
from tracejudge_collectors.otel import encode_protobuf

FIXTURES = Path(__file__).with_name("fixtures")
DUMP = (FIXTURES / "store_v1.sql").read_text(encoding="utf-8")
READS = json.loads((FIXTURES / "store_v1_reads.json").read_text(encoding="utf-8"))
T3 = bytes.fromhex("5b8efff798038103d269b633813fc60c")


def _v1_store(kind: str, tmp_path: Path, postgres: str | None) -> str:
    """The fixture loaded into a SQLite file (16 KiB pages, as 0.1.0 made them) or a PostgreSQL database."""
    if kind == "sqlite":
        path = tmp_path / "v1.db"
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA page_size=16384")
        conn.executescript(DUMP)
        conn.close()
        return f"sqlite:///{path}"
    assert postgres is not None
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(DUMP.encode())  # the schema-1 DDL is the portable SQL both engines ran
    return postgres


def _reads(store: SqlStore) -> dict[str, Any]:
    return {
        "traces": [t.model_dump(mode="json") for t in store.list_traces()],
        "spans": {t: [read_as_before(s) for s in store.get_spans(t)] for t in store.iter_trace_ids()},
        "sessions": {t: store.trace_session(t) for t in store.iter_trace_ids()},
    }


def _columns(url: str) -> tuple[set[str], set[str]]:
    """The spans table's columns and the store's index names, read without tracejudge."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(spans)")}
            idx = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        finally:
            conn.close()
        return cols, idx
    with psycopg.connect(url) as pg:
        cols = {
            r[0]
            for r in pg.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'spans'"
            )
        }
        idx = {r[0] for r in pg.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'spans'")}
    return cols, idx


def _spans_as_this_version_keeps_them(url: str) -> bool:
    """SQLite's spans in chunks (schema 6: no spans table); PostgreSQL's a row each, with ``otlp``."""
    if url.startswith("sqlite:///"):
        tables = sqlite_tables(Path(url.removeprefix("sqlite:///")))
        return "span_chunks" in tables and "spans" not in tables
    return "otlp" in _columns(url)[0]


def _version(url: str) -> int:
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return int(conn.execute("SELECT version FROM schema_info").fetchone()[0])
        finally:
            conn.close()
    with psycopg.connect(url) as pg:
        row = pg.execute("SELECT version FROM schema_info").fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture(params=["sqlite", "postgresql"])
def v1_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    postgres = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    return _v1_store(request.param, tmp_path, postgres)


def test_the_fixture_is_a_schema_1_store(v1_url: str) -> None:
    assert _version(v1_url) == 1
    cols, idx = _columns(v1_url)
    assert "otlp" not in cols
    assert "payload" in cols
    assert "spans_start" in idx


def test_opening_upgrades_in_place_and_reads_what_the_previous_version_read(v1_url: str) -> None:
    store = open_store(v1_url)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION == 7
        assert _reads(store) == READS
    finally:
        store.close()
    assert _spans_as_this_version_keeps_them(v1_url)
    assert "spans_start" not in _columns(v1_url)[1]
    again = open_store(v1_url)  # a second open finds nothing left to upgrade
    assert isinstance(again, SqlStore)
    try:
        assert again.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(again) == READS
    finally:
        again.close()


def _request() -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name", value=AnyValue(string_value="procurement-agent"))
    ss = rs.scope_spans.add()
    ss.scope.name = "openinference.instrumentation.openai"
    sp = ss.spans.add(trace_id=T3, span_id=bytes.fromhex("4444444444444444"), name="agent.run")
    sp.start_time_unix_nano, sp.end_time_unix_nano = 1_790_000_200_000_000_000, 1_790_000_201_000_000_000
    sp.attributes.add(key="session.id", value=AnyValue(string_value="session-7"))
    sp.attributes.add(key="input.value", value=AnyValue(string_value="and the cap for C-18?"))
    # A span of a trace the old version stored: its JSON spans and this one are read as one trace.
    late = ss.spans.add(
        trace_id=bytes.fromhex(next(iter(READS["spans"]))),
        span_id=bytes.fromhex("5555555555555555"),
        parent_span_id=bytes.fromhex("00f067aa0ba902b7"),
        name="late",
    )
    late.start_time_unix_nano, late.end_time_unix_nano = 1_790_000_000_900_000_000, 1_790_000_000_950_000_000
    return req.SerializeToString()


def test_spans_received_after_the_upgrade_are_stored_in_their_own_bytes_beside_the_json(v1_url: str) -> None:
    encoded = encode_protobuf(_request()).spans
    assert all(isinstance(s, EncodedSpan) for s in encoded)
    store = open_store(v1_url)
    assert isinstance(store, SqlStore)
    try:
        assert store.put_spans(encoded) == 2
        old_trace = next(iter(READS["spans"]))
        got = [read_as_before(s) for s in store.get_spans(old_trace)]
        late = next(s for s in encoded if isinstance(s, EncodedSpan) and s.span_id == "5555555555555555")
        assert got == sorted(
            [*READS["spans"][old_trace], read_as_before(late.decode())],
            key=lambda s: (s["start_time_unix_nano"], s["span_id"]),
        )
        assert [s.span_id for s in store.get_spans(T3.hex())] == ["4444444444444444"]
        assert [t.trace_id for t in store.session_traces("session-7")] == [old_trace, T3.hex()]
        summary = next(t for t in store.list_traces() if t.trace_id == old_trace)
        assert summary.span_count == len(READS["spans"][old_trace]) + 1
    finally:
        store.close()


def test_an_interrupted_upgrade_leaves_the_store_as_it_was_and_the_next_open_finishes_it(
    v1_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sql_module._upgrades

    def failing(blob: str, *, by_seq: bool) -> dict[int, tuple[sql_module.UpgradeStep, ...]]:
        steps = real(blob, by_seq=by_seq)
        return {**steps, 2: (*steps[2], "SELECT no_such_column FROM spans")}  # fails after the ALTER

    monkeypatch.setattr(sql_module, "_upgrades", failing)
    with pytest.raises(Exception, match="no_such_column"):
        open_store(v1_url)
    assert _version(v1_url) == 1
    cols, idx = _columns(v1_url)
    assert "otlp" not in cols
    assert "spans_start" in idx
    monkeypatch.setattr(sql_module, "_upgrades", real)
    store = open_store(v1_url)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(store) == READS
    finally:
        store.close()


def test_a_store_newer_than_this_tracejudge_is_refused_untouched(v1_url: str) -> None:
    if v1_url.startswith("sqlite:///"):
        conn = sqlite3.connect(v1_url.removeprefix("sqlite:///"))
        conn.execute("UPDATE schema_info SET version = ?", (STORE_SCHEMA_VERSION + 1,))
        conn.commit()
        conn.close()
    else:
        with psycopg.connect(v1_url, autocommit=True) as pg:
            pg.execute("UPDATE schema_info SET version = %s", (STORE_SCHEMA_VERSION + 1,))
    newer = STORE_SCHEMA_VERSION + 1
    with pytest.raises(Exception, match=f"schema version {newer}, newer than this tracejudge knows"):
        open_store(v1_url)
    assert "otlp" not in _columns(v1_url)[0]


def test_opened_for_reading_a_schema_1_store_is_read_as_it_is_and_left_at_schema_1(v1_url: str) -> None:
    store = open_store(v1_url, upgrade=False)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == 1
        assert _reads(store) == READS
    finally:
        store.close()
    assert _version(v1_url) == 1
    cols, idx = _columns(v1_url)
    assert "otlp" not in cols
    assert "spans_start" in idx


def test_storing_spans_in_a_store_opened_for_reading_upgrades_it_first(v1_url: str) -> None:
    encoded = encode_protobuf(_request()).spans
    store = open_store(v1_url, upgrade=False)
    assert isinstance(store, SqlStore)
    try:
        assert store.put_spans(encoded) == 2
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert [s.span_id for s in store.get_spans(T3.hex())] == ["4444444444444444"]
    finally:
        store.close()
    assert _version(v1_url) == STORE_SCHEMA_VERSION
    assert _spans_as_this_version_keeps_them(v1_url)


def test_a_new_store_opened_for_reading_starts_at_this_versions_schema(store_url: str) -> None:
    store = open_store(store_url, upgrade=False)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
    finally:
        store.close()
    assert _spans_as_this_version_keeps_them(store_url)


def test_a_reader_opened_before_another_process_upgraded_the_store_reads_its_new_spans(v1_url: str) -> None:
    # A long-running reader (serve, mcp) opened a schema-1 store as it was; a newer receiver then upgraded
    # it and stored spans in their own OTLP bytes (payload empty): the reader still reads them.
    reader = open_store(v1_url, upgrade=False)
    assert isinstance(reader, SqlStore)
    try:
        writer = open_store(v1_url)
        try:
            assert writer.put_spans(encode_protobuf(_request()).spans) == 2
        finally:
            writer.close()
        assert [s.span_id for s in reader.get_spans(T3.hex())] == ["4444444444444444"]
        fresh = open_store(v1_url)
        assert isinstance(fresh, SqlStore)
        try:
            assert _reads(reader) == _reads(fresh)
        finally:
            fresh.close()
    finally:
        reader.close()


def test_on_sqlite_a_reader_reads_the_version_and_the_spans_of_one_snapshot_across_an_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race: a reader opened at schema 1 reads the version, another process then upgrades the
    # store (to chunks: the spans table is dropped) and stores spans, then the reader reads the
    # spans. It reads them from the snapshot its version came from: the store as it was.
    url = _v1_store("sqlite", tmp_path, None)
    reader = open_store(url, upgrade=False)
    assert isinstance(reader, SqlStore)
    execute = reader._execute
    upgraded = [False]

    def upgrade_after_the_version_read(sql: str, params: Any = ()) -> Any:
        cursor = execute(sql, params)
        if not upgraded[0] and sql.startswith("SELECT version FROM schema_info"):
            upgraded[0] = True
            writer = open_store(url)
            try:
                assert writer.put_spans(encode_protobuf(_request()).spans) == 2
            finally:
                writer.close()
        return cursor

    monkeypatch.setattr(reader, "_execute", upgrade_after_the_version_read)
    try:
        old = next(iter(READS["spans"]))
        assert [read_as_before(s) for s in reader.get_spans(old)] == READS["spans"][old]
        assert upgraded[0]
        assert _version(url) == STORE_SCHEMA_VERSION
        # The next read sees the upgraded store and the spans stored since (the old trace's late one).
        assert [s.span_id for s in reader.get_spans(T3.hex())] == ["4444444444444444"]
        assert [s.span_id for s in reader.get_spans(old)] == [
            *(s["span_id"] for s in READS["spans"][old]),
            "5555555555555555",
        ]
    finally:
        reader.close()


def test_on_postgresql_a_reader_whose_schema_read_came_just_before_an_upgrade_reads_the_new_spans(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race: the reader reads the schema version (1), another process upgrades the store and
    # stores spans in their OTLP bytes, then the reader reads the spans as schema 1 would (each of
    # PostgreSQL's statements reads its own snapshot; SQLite's one snapshot is the test above).
    v1_url = _v1_store("postgresql", tmp_path, postgres_url)
    reader = open_store(v1_url, upgrade=False)
    assert isinstance(reader, SqlStore)
    try:
        writer = open_store(v1_url)
        try:
            assert writer.put_spans(encode_protobuf(_request()).spans) == 2
        finally:
            writer.close()
        execute = reader._execute
        stale = [True]

        def version_read_before_the_upgrade(sql: str, params: Any = ()) -> Any:
            if stale[0] and sql.startswith("SELECT version FROM schema_info"):
                stale[0] = False
                return execute("SELECT 1")
            return execute(sql, params)

        monkeypatch.setattr(reader, "_execute", version_read_before_the_upgrade)
        assert [s.span_id for s in reader.get_spans(T3.hex())] == ["4444444444444444"]
        assert not stale[0]  # the stale read did happen
    finally:
        reader.close()
