"""A SQLite store written at schema 2 (spans keyed by trace id, those the receiver took in their own
OTLP bytes) is upgraded in place when it is opened — to schema 3, its spans copied into a table keyed
by their trace's ``seq``, and on to this version's — in the set-up's one transaction, so an interrupted
upgrade leaves it as it was and the next open finishes it — and reads back exactly what that version
read from it. (``test_upgrade_v3.py`` tests the step to schema 4 on a store written at 3.)

The store is ``fixtures/store_v2.sql``, dumped from a store the schema-2 code wrote, and
``fixtures/store_v2_reads.json`` is what that code read back from it (``fixtures/make_store_v2.py``).
PostgreSQL keeps its spans' key (``test_upgrade.py`` takes its schema-1 store to this version's).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.store.conftest import chunked_spans, read_as_before, sqlite_from_dump, sqlite_rows, sqlite_tables
from tracejudge._errors import StoreError
from tracejudge.store import STORE_SCHEMA_VERSION, SqlStore, open_store
from tracejudge.store import _sql as sql_module
from tracejudge_collectors.otel import encode_protobuf

FIXTURES = Path(__file__).with_name("fixtures")
DUMP = (FIXTURES / "store_v2.sql").read_text(encoding="utf-8")
READS = json.loads((FIXTURES / "store_v2_reads.json").read_text(encoding="utf-8"))
T1 = "0af7651916cd43dd8448eb211c80319c"
T4 = bytes.fromhex("9f2c1d7e5b8a4c3d2e1f0a9b8c7d6e5f")


@pytest.fixture
def v2_path(tmp_path: Path) -> Path:
    return sqlite_from_dump(tmp_path / "v2.db", DUMP, page_size=16384)


def _reads(store: SqlStore) -> dict[str, Any]:
    return {
        "traces": [t.model_dump(mode="json") for t in store.list_traces()],
        "spans": {t: [read_as_before(s) for s in store.get_spans(t)] for t in store.iter_trace_ids()},
        "sessions": {t: store.trace_session(t) for t in store.iter_trace_ids()},
    }


def _open(path: Path) -> SqlStore:
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqlStore)
    return store


def test_the_fixture_is_a_schema_2_store_with_spans_in_both_forms(v2_path: Path) -> None:
    assert sqlite_rows(v2_path, "SELECT version FROM schema_info") == [(2,)]
    assert {r[1] for r in sqlite_rows(v2_path, "PRAGMA table_info(spans)")} >= {"trace_id", "otlp", "payload"}
    assert "trace_seq" not in {r[1] for r in sqlite_rows(v2_path, "PRAGMA table_info(spans)")}
    forms = sqlite_rows(v2_path, "SELECT otlp IS NOT NULL, count(*) FROM spans GROUP BY 1 ORDER BY 1")
    assert forms == [(0, 1), (1, 4)]


def test_opening_upgrades_to_spans_keyed_by_their_traces_seq_and_reads_what_schema_2_read(
    v2_path: Path,
) -> None:
    store = _open(v2_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION == 7
        assert _reads(store) == READS
    finally:
        store.close()
    # Every span is kept under its own trace's seq (in chunks from schema 6), and nothing is left of
    # the copies.
    seqs = dict(sqlite_rows(v2_path, "SELECT seq, trace_id FROM traces"))
    assert sorted((seqs[seq], span_id) for seq, span_id in chunked_spans(v2_path)) == sorted(
        (t, s["span_id"]) for t, spans in READS["spans"].items() for s in spans
    )
    assert len(chunked_spans(v2_path)) == 5
    assert "spans" not in sqlite_tables(v2_path)
    assert sqlite_rows(v2_path, "SELECT name FROM sqlite_master WHERE name LIKE 'spans_%'") == []
    again = _open(v2_path)  # a second open finds nothing left to upgrade
    try:
        assert again.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(again) == READS
    finally:
        again.close()


def test_an_upgrade_interrupted_after_the_copy_leaves_schema_2_and_the_next_open_finishes_it(
    v2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sql_module._upgrades

    def failing(blob: str, *, by_seq: bool) -> dict[int, tuple[sql_module.UpgradeStep, ...]]:
        steps = real(blob, by_seq=by_seq)
        return {**steps, 3: (*steps[3], "SELECT no_such_column FROM spans")}  # after the swap

    before = sqlite_rows(v2_path, "SELECT * FROM spans ORDER BY trace_id, span_id")
    monkeypatch.setattr(sql_module, "_upgrades", failing)
    with pytest.raises(Exception, match="no_such_column"):
        open_store(f"sqlite:///{v2_path}")
    assert sqlite_rows(v2_path, "SELECT version FROM schema_info") == [(2,)]
    assert sqlite_rows(v2_path, "SELECT * FROM spans ORDER BY trace_id, span_id") == before
    assert sqlite_rows(v2_path, "SELECT name FROM sqlite_master WHERE name LIKE 'spans_%'") == []
    monkeypatch.setattr(sql_module, "_upgrades", real)
    store = _open(v2_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(store) == READS
    finally:
        store.close()


def test_a_span_whose_trace_has_no_summary_stops_the_upgrade_and_loses_nothing(v2_path: Path) -> None:
    conn = sqlite3.connect(v2_path)
    # A copy of the JSON span under a trace id no traces row has.
    conn.execute(
        "INSERT INTO spans (trace_id, span_id, parent_span_id, name, start_ns, end_ns, source, payload,"
        " received_at) SELECT 'ab' || substr(trace_id, 3), span_id, NULL, name, start_ns, end_ns, source,"
        " payload, received_at FROM spans WHERE source = 'langfuse'"
    )
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="1 span\\(s\\) belong to no trace"):
        open_store(f"sqlite:///{v2_path}")
    assert sqlite_rows(v2_path, "SELECT version FROM schema_info") == [(2,)]
    assert sqlite_rows(v2_path, "SELECT count(*) FROM spans") == [(6,)]


def _request(trace_id: bytes, span_id: str, name: str, start: int) -> bytes:
    req = ExportTraceServiceRequest()
    sp = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=trace_id, span_id=bytes.fromhex(span_id), name=name)
    )
    sp.start_time_unix_nano, sp.end_time_unix_nano = start, start + 1_000_000
    return req.SerializeToString()


def test_after_the_upgrade_spans_dedup_by_trace_and_span_and_new_traces_follow_the_highest_seq(
    v2_path: Path,
) -> None:
    store = _open(v2_path)
    try:
        top = max(r[0] for r in sqlite_rows(v2_path, "SELECT seq FROM traces"))
        late = encode_protobuf(
            _request(bytes.fromhex(T1), "6666666666666666", "later", 1_790_000_000_960_000_000)
        )
        new = encode_protobuf(_request(T4, "7777777777777777", "root", 1_790_000_300_000_000_000))
        # A span stored before the upgrade (T1's "late", sent again) is not stored twice.
        again = encode_protobuf(
            _request(bytes.fromhex(T1), "5555555555555555", "late", 1_790_000_000_900_000_000)
        )
        assert store.put_spans([*again.spans, *late.spans, *new.spans]) == 2
        assert store.put_spans([*again.spans, *late.spans, *new.spans]) == 0
        t1 = next(t for t in store.list_traces() if t.trace_id == T1)
        assert t1.span_count == len(READS["spans"][T1]) + 1
        assert [s.span_id for s in store.get_spans(T1)][-1] == "6666666666666666"
        assert [s.name for s in store.get_spans(T4.hex())] == ["root"]
        assert sqlite_rows(v2_path, f"SELECT seq FROM traces WHERE trace_id = '{T4.hex()}'") == [(top + 1,)]
        assert [seq for seq, span_id in chunked_spans(v2_path) if span_id == "7777777777777777"] == [top + 1]
    finally:
        store.close()


def test_opened_for_reading_a_schema_2_store_is_read_as_it_is_until_spans_are_stored(v2_path: Path) -> None:
    store = open_store(f"sqlite:///{v2_path}", upgrade=False)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == 2
        assert _reads(store) == READS
        assert "trace_seq" not in {r[1] for r in sqlite_rows(v2_path, "PRAGMA table_info(spans)")}
        new = encode_protobuf(_request(T4, "7777777777777777", "root", 1_790_000_300_000_000_000))
        assert store.put_spans(new.spans) == 1
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert [s.name for s in store.get_spans(T4.hex())] == ["root"]
        assert {t: v for t, v in _reads(store)["spans"].items() if t != T4.hex()} == READS["spans"]
    finally:
        store.close()
    assert "spans" not in sqlite_tables(v2_path)
    top = max(r[0] for r in sqlite_rows(v2_path, "SELECT seq FROM traces"))
    assert (top, "7777777777777777") in chunked_spans(v2_path)


def test_a_reader_opened_at_schema_2_reads_what_a_writer_stored_after_upgrading_the_store(
    v2_path: Path,
) -> None:
    # A long-running reader (serve, mcp) opened the schema-2 store as it was; a newer receiver then
    # upgraded it (the spans table copied into the new key) and stored spans: the reader reads them all.
    reader = open_store(f"sqlite:///{v2_path}", upgrade=False)
    assert isinstance(reader, SqlStore)
    try:
        assert reader.get_spans(T1)  # read once at schema 2
        writer = _open(v2_path)
        try:
            new = encode_protobuf(_request(T4, "7777777777777777", "root", 1_790_000_300_000_000_000))
            assert writer.put_spans(new.spans) == 1
            assert writer.schema_version() == STORE_SCHEMA_VERSION
            assert _reads(reader) == _reads(writer)
        finally:
            writer.close()
        assert [s.name for s in reader.get_spans(T4.hex())] == ["root"]
    finally:
        reader.close()
