"""A SQLite store written at schema 3 (``traces`` keyed by trace id, ``trace_sessions`` by session and
trace id) is upgraded in place to schema 4 when it is opened — both tables copied into tables keyed by
the trace's ``seq``, in the set-up's one transaction, so an interrupted upgrade leaves it as it was and
the next open finishes it — and reads back exactly what that version read from it: the traces list,
each trace's spans and session, each session's traces.

The store is ``fixtures/store_v3.sql``, dumped from a store the schema-3 code wrote, and
``fixtures/store_v3_reads.json`` is what that code read back from it (``fixtures/make_store_v3.py``).
PostgreSQL keeps its tables' keys at schema 4 (``test_upgrade.py`` takes its schema-1 store to 4).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.store.conftest import chunked_spans, read_as_before, sqlite_from_dump, sqlite_rows, sqlite_tables
from tracejudge._errors import StoreError
from tracejudge.store import STORE_SCHEMA_VERSION, SqlStore, open_store
from tracejudge.store import _sql as sql_module
from tracejudge_collectors.otel import encode_protobuf

FIXTURES = Path(__file__).with_name("fixtures")
DUMP = (FIXTURES / "store_v3.sql").read_text(encoding="utf-8")
READS = json.loads((FIXTURES / "store_v3_reads.json").read_text(encoding="utf-8"))
T1 = "0af7651916cd43dd8448eb211c80319c"  # session-7's first turn, spans in two requests
T5 = "c3d4e5f60718293a4b5c6d7e8f901a2b"  # session-7's second turn
T6 = "1e2d3c4b5a69788796a5b4c3d2e1f001"  # sessions "zeta" and "alpha"
T7 = bytes.fromhex("7a7b7c7d7e7f70717273747576777879")


@pytest.fixture
def v3_path(tmp_path: Path) -> Path:
    return sqlite_from_dump(tmp_path / "v3.db", DUMP, page_size=16384)


def _reads(store: SqlStore) -> dict[str, Any]:
    ids = list(store.iter_trace_ids())
    return {
        "traces": [t.model_dump(mode="json") for t in store.list_traces()],
        "spans": {t: [read_as_before(s) for s in store.get_spans(t)] for t in ids},
        "sessions": {t: store.trace_session(t) for t in ids},
        "session_traces": {
            sid: [t.model_dump(mode="json") for t in store.session_traces(sid)]
            for sid in READS["session_traces"]
        },
    }


def _open(path: Path, *, upgrade: bool = True) -> SqlStore:
    store = open_store(f"sqlite:///{path}", upgrade=upgrade)
    assert isinstance(store, SqlStore)
    return store


def _key(path: Path, table: str) -> list[str]:
    """The columns of a table's primary key, in key order."""
    return [r[1] for r in sorted(r for r in sqlite_rows(path, f"PRAGMA table_info({table})") if r[5]) if r[5]]


def _indexes(path: Path) -> set[str]:
    return {
        r[0]
        for r in sqlite_rows(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    }


def test_the_fixture_is_a_schema_3_store_with_traces_and_sessions_keyed_by_trace_id(v3_path: Path) -> None:
    assert sqlite_rows(v3_path, "SELECT version FROM schema_info") == [(3,)]
    assert _key(v3_path, "traces") == ["trace_id"]
    assert _key(v3_path, "trace_sessions") == ["session_id", "trace_id"]
    assert {"traces_seq", "trace_sessions_trace"} <= _indexes(v3_path)
    # The cases the upgrade must carry over: a session of two traces, a trace of two sessions.
    assert READS["sessions"][T6] == "alpha"
    assert [t["trace_id"] for t in READS["session_traces"]["session-7"]] == [T1, T5]
    assert [t["trace_id"] for t in READS["session_traces"]["zeta"]] == [T6]


def test_opening_upgrades_to_traces_and_sessions_keyed_by_seq_and_reads_what_schema_3_read(
    v3_path: Path,
) -> None:
    seqs = dict(sqlite_rows(v3_path, "SELECT trace_id, seq FROM traces"))
    store = _open(v3_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION == 7
        assert _reads(store) == READS
    finally:
        store.close()
    assert _key(v3_path, "traces") == ["seq"]
    assert _key(v3_path, "trace_sessions") == ["trace_seq", "session_id"]
    # The traces keep their arrival numbers, which the spans' key refers to.
    assert dict(sqlite_rows(v3_path, "SELECT trace_id, seq FROM traces")) == seqs
    by_seq = {seq: t for t, seq in seqs.items()}
    assert sorted((by_seq[seq], span_id) for seq, span_id in chunked_spans(v3_path)) == sorted(
        (t, s["span_id"]) for t, spans in READS["spans"].items() for s in spans
    )
    assert "spans" not in sqlite_tables(v3_path)
    indexes = _indexes(v3_path)
    assert {"traces_id", "traces_start", "trace_sessions_session"} <= indexes
    assert not {"traces_seq", "trace_sessions_trace"} & indexes
    assert not {t for t in sqlite_tables(v3_path) if t.endswith("_4")}
    again = _open(v3_path)  # a second open finds nothing left to upgrade
    try:
        assert again.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(again) == READS
    finally:
        again.close()
    assert not {"traces_seq", "trace_sessions_trace"} & _indexes(v3_path)


def test_an_upgrade_interrupted_after_the_swap_leaves_schema_3_and_the_next_open_finishes_it(
    v3_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sql_module._upgrades

    def failing(blob: str, *, by_seq: bool) -> dict[int, tuple[sql_module.UpgradeStep, ...]]:
        steps = real(blob, by_seq=by_seq)
        return {**steps, 4: (*steps[4], "SELECT no_such_column FROM traces")}  # after the swap

    before = {
        t: sqlite_rows(v3_path, f"SELECT * FROM {t} ORDER BY 1, 2") for t in ("traces", "trace_sessions")
    }
    monkeypatch.setattr(sql_module, "_upgrades", failing)
    with pytest.raises(Exception, match="no_such_column"):
        open_store(f"sqlite:///{v3_path}")
    assert sqlite_rows(v3_path, "SELECT version FROM schema_info") == [(3,)]
    assert {t: sqlite_rows(v3_path, f"SELECT * FROM {t} ORDER BY 1, 2") for t in before} == before
    assert _key(v3_path, "traces") == ["trace_id"]
    assert not {t for t in sqlite_tables(v3_path) if t.endswith("_4")}
    monkeypatch.setattr(sql_module, "_upgrades", real)
    store = _open(v3_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(store) == READS
    finally:
        store.close()


def test_a_session_row_of_no_trace_stops_the_upgrade_and_loses_nothing(v3_path: Path) -> None:
    conn = sqlite3.connect(v3_path)
    conn.execute("INSERT INTO trace_sessions (session_id, trace_id) VALUES ('orphan', ?)", ("f" * 32,))
    conn.commit()
    conn.close()
    before = sqlite_rows(v3_path, "SELECT * FROM trace_sessions ORDER BY 1, 2")
    with pytest.raises(StoreError, match="1 session row\\(s\\) name no trace"):
        open_store(f"sqlite:///{v3_path}")
    assert sqlite_rows(v3_path, "SELECT version FROM schema_info") == [(3,)]
    assert sqlite_rows(v3_path, "SELECT * FROM trace_sessions ORDER BY 1, 2") == before
    assert _key(v3_path, "trace_sessions") == ["session_id", "trace_id"]


def test_two_traces_sharing_a_seq_stop_the_upgrade_and_lose_nothing(v3_path: Path) -> None:
    conn = sqlite3.connect(v3_path)
    conn.execute(f"UPDATE traces SET seq = (SELECT min(seq) FROM traces) WHERE trace_id = '{T6}'")
    conn.commit()
    conn.close()
    before = sqlite_rows(v3_path, "SELECT * FROM traces ORDER BY 1")
    with pytest.raises(StoreError, match="1 trace\\(s\\) share their arrival number"):
        open_store(f"sqlite:///{v3_path}")
    assert sqlite_rows(v3_path, "SELECT version FROM schema_info") == [(3,)]
    assert sqlite_rows(v3_path, "SELECT * FROM traces ORDER BY 1") == before


def _request(trace_id: bytes, span_id: str, name: str, start: int, session: str | None = None) -> bytes:
    req = ExportTraceServiceRequest()
    sp = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=trace_id, span_id=bytes.fromhex(span_id), name=name)
    )
    sp.start_time_unix_nano, sp.end_time_unix_nano = start, start + 1_000_000
    if session is not None:
        sp.attributes.add(key="session.id", value=AnyValue(string_value=session))
    return req.SerializeToString()


def test_after_the_upgrade_new_turns_join_their_sessions_and_old_traces_take_late_spans(
    v3_path: Path,
) -> None:
    store = _open(v3_path)
    try:
        top = max(r[0] for r in sqlite_rows(v3_path, "SELECT seq FROM traces"))
        turn = encode_protobuf(
            _request(T7, "bbbbbbbbbbbbbbbb", "agent.run", 1_790_000_300_000_000_000, "session-7")
        )
        # A late span of an old trace, naming a second session for it.
        late = encode_protobuf(
            _request(bytes.fromhex(T5), "cccccccccccccccc", "late", 1_790_000_200_500_000_000, "a-first")
        )
        assert store.put_spans([*turn.spans, *late.spans]) == 2
        assert store.put_spans([*turn.spans, *late.spans]) == 0
        assert [t.trace_id for t in store.session_traces("session-7")] == [T1, T5, T7.hex()]
        assert store.trace_session(T7.hex()) == "session-7"
        assert store.trace_session(T5) == "a-first"  # the first of its sessions by name, as before
        assert [t.trace_id for t in store.session_traces("a-first")] == [T5]
        t5 = next(t for t in store.list_traces() if t.trace_id == T5)
        assert t5.span_count == len(READS["spans"][T5]) + 1
        assert t5.end_time is not None
        assert t5.end_time.timestamp() == pytest.approx(1_790_000_201)
        assert sqlite_rows(v3_path, f"SELECT seq FROM traces WHERE trace_id = '{T7.hex()}'") == [(top + 1,)]
        assert sqlite_rows(v3_path, "SELECT trace_seq FROM trace_sessions WHERE session_id = 'a-first'") == [
            (dict(sqlite_rows(v3_path, "SELECT trace_id, seq FROM traces"))[T5],)
        ]
    finally:
        store.close()


def test_opened_for_reading_a_schema_3_store_is_read_as_it_is_until_spans_are_stored(v3_path: Path) -> None:
    store = _open(v3_path, upgrade=False)
    try:
        assert store.schema_version() == 3
        assert _reads(store) == READS
        assert _key(v3_path, "traces") == ["trace_id"]
        assert "trace_sessions_trace" in _indexes(v3_path)
        new = encode_protobuf(
            _request(T7, "bbbbbbbbbbbbbbbb", "agent.run", 1_790_000_300_000_000_000, "session-7")
        )
        assert store.put_spans(new.spans) == 1
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert [t.trace_id for t in store.session_traces("session-7")] == [T1, T5, T7.hex()]
    finally:
        store.close()
    assert _key(v3_path, "traces") == ["seq"]


def test_a_reader_opened_at_schema_3_reads_sessions_after_another_process_upgraded_the_store(
    v3_path: Path,
) -> None:
    # A long-running reader (serve, mcp) opened the schema-3 store as it was; a newer receiver then
    # upgraded it (trace_sessions re-keyed: its trace_id column gone) and stored a new turn.
    reader = _open(v3_path, upgrade=False)
    try:
        assert reader.trace_session(T6) == "alpha"  # read once at schema 3
        writer = _open(v3_path)
        try:
            new = encode_protobuf(
                _request(T7, "bbbbbbbbbbbbbbbb", "agent.run", 1_790_000_300_000_000_000, "session-7")
            )
            assert writer.put_spans(new.spans) == 1
            assert _reads(reader) == _reads(writer)
        finally:
            writer.close()
        assert reader.trace_session(T7.hex()) == "session-7"
        assert [t.trace_id for t in reader.session_traces("session-7")] == [T1, T5, T7.hex()]
        assert reader.trace_session(T6) == "alpha"
    finally:
        reader.close()
