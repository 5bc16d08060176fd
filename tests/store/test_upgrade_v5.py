"""A SQLite store written at schema 5 (a row per span in ``spans``) is upgraded in place to schema 6
when it is opened — each trace's spans copied into one compressed row of ``span_chunks`` (or a few,
past ``_CHUNK_SPANS``), in the set-up's one transaction, so an interrupted upgrade leaves it
as it was and the next open finishes it — and reads back exactly what that version read from it: the
traces list, each trace's spans and session, each session's traces. After it, spans sent again are
found in the chunks (stored once), late spans of old traces are read in order among the old ones.

The store is ``fixtures/store_v5.sql``, dumped from a store the schema-5 code wrote, and
``fixtures/store_v5_reads.json`` is what that code read back from it (``fixtures/make_store_v5.py``;
its spans carry the SDK's dropped counts, so they are compared as read, not with ``read_as_before``).
PostgreSQL keeps a row per span: its step 6 is the version alone.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import lz4.block
import psycopg
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.store.conftest import (
    dumped,
    postgres_set_back,
    sqlite_from_dump,
    sqlite_rows,
    sqlite_tables,
    store_reads,
)
from tracejudge._errors import StoreError
from tracejudge.schema import RawSpan
from tracejudge.store import STORE_SCHEMA_VERSION, SqlStore, open_store
from tracejudge.store import _sql as sql_module
from tracejudge.store._chunks import ENVELOPED, LZ4, RAW, chunk_span_ids, unpack_chunk
from tracejudge_collectors.otel import encode_protobuf

FIXTURES = Path(__file__).with_name("fixtures")
DUMP = (FIXTURES / "store_v5.sql").read_text(encoding="utf-8")
READS = json.loads((FIXTURES / "store_v5_reads.json").read_text(encoding="utf-8"))
T1 = "0af7651916cd43dd8448eb211c80319c"  # session-7's first turn, spans in two requests
T2 = "4bf92f3577b34da6a3ce929d0e0e4736"  # an OTLP span and a JSON one from langfuse
T5 = "c3d4e5f60718293a4b5c6d7e8f901a2b"  # session-7's second turn
T8 = "8a8b8c8d8e8f80818283848586878889"  # 40 spans of repeating text, two to each start time
T9 = "9a9b9c9d9e9f90919293949596979899"  # one span of 4 KB of random bytes
T10 = bytes.fromhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf")  # a new trace
SPANS = sum(len(v) for v in READS["spans"].values())


@pytest.fixture
def v5_path(tmp_path: Path) -> Path:
    return sqlite_from_dump(tmp_path / "v5.db", DUMP, page_size=16384)


def _reads(store: SqlStore) -> dict[str, Any]:
    return store_reads(store, READS["session_traces"])


def _open(path: Path, *, upgrade: bool = True) -> SqlStore:
    store = open_store(f"sqlite:///{path}", upgrade=upgrade)
    assert isinstance(store, SqlStore)
    return store


def _seqs(path: Path) -> dict[str, int]:
    return dict(sqlite_rows(path, "SELECT trace_id, seq FROM traces"))


def _span_rows(path: Path) -> list[Any]:
    """Schema 5's span rows, every column, in key order."""
    return sqlite_rows(path, "SELECT * FROM spans ORDER BY trace_seq, span_id")


def _chunks(path: Path) -> dict[int, list[bytes]]:
    """Each trace's chunks (by seq), in the order they were stored."""
    found: dict[int, list[bytes]] = {}
    for seq, data in sqlite_rows(path, "SELECT trace_seq, data FROM span_chunks ORDER BY rowid"):
        found.setdefault(int(seq), []).append(bytes(data))
    return found


def _fixture_requests() -> list[bytes]:
    """The OTLP requests make_store_v5.py stored, encoded again (its scripts import each other by
    their names, so the fixtures folder is on the path while it is imported)."""
    sys.path.insert(0, str(FIXTURES))
    try:
        v3: ModuleType = importlib.import_module("make_store_v3")  # its fill's requests
        made: ModuleType = importlib.import_module("make_store_v5")
    finally:
        sys.path.remove(str(FIXTURES))
    return [v3._request(), v3._late_request(), v3._later_request(), made._big_request()]


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


def _new_turn() -> bytes:
    return _request(T10, "bbbbbbbbbbbbbbbb", "agent.run", 1_790_000_500_000_000_000, "session-7")


def test_the_fixture_is_a_schema_5_store_with_a_row_per_span(v5_path: Path) -> None:
    assert sqlite_rows(v5_path, "SELECT version FROM schema_info") == [(5,)]
    assert "spans" in sqlite_tables(v5_path)
    assert "span_chunks" not in sqlite_tables(v5_path)
    assert sqlite_rows(v5_path, "SELECT count(*) FROM spans") == [(SPANS,)]
    seqs = _seqs(v5_path)
    # The cases the upgrade must carry over: a trace stored over two commits, a JSON span beside OTLP
    # ones, 40 spans of one trace sharing start times in pairs, a span of bytes that do not compress.
    assert sqlite_rows(
        v5_path, "SELECT count(DISTINCT received_at) FROM spans WHERE trace_seq = ?", (seqs[T1],)
    ) == [(2,)]
    assert sqlite_rows(v5_path, "SELECT source FROM spans WHERE otlp IS NULL") == [("langfuse",)]
    assert sqlite_rows(
        v5_path, "SELECT count(*), count(DISTINCT start_ns) FROM spans WHERE trace_seq = ?", (seqs[T8],)
    ) == [(40, 20)]
    assert sqlite_rows(v5_path, "SELECT length(otlp) > 4096 FROM spans WHERE trace_seq = ?", (seqs[T9],)) == [
        (1,)
    ]
    assert READS["sessions"][T1] == READS["sessions"][T5] == "session-7"


def test_opening_upgrades_to_a_chunk_per_trace_and_reads_what_schema_5_read(v5_path: Path) -> None:
    seqs = _seqs(v5_path)
    rows = sqlite_rows(
        v5_path, "SELECT trace_seq, span_id, start_ns, payload, otlp, source FROM spans ORDER BY 1, 3, 2"
    )
    span_bytes = dict(
        sqlite_rows(
            v5_path,
            "SELECT trace_seq, sum(length(payload)) + sum(coalesce(length(otlp), 0)) FROM spans GROUP BY 1",
        )
    )
    store = _open(v5_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION == 7
        assert _reads(store) == READS
    finally:
        store.close()
    assert "spans" not in sqlite_tables(v5_path)
    assert _seqs(v5_path) == seqs  # the traces keep their arrival numbers, which the chunks refer to
    assert "span_chunks_trace" in {r[0] for r in sqlite_rows(v5_path, "SELECT name FROM sqlite_master")}
    chunks = _chunks(v5_path)
    assert sorted(chunks) == sorted(seqs.values())
    assert all(len(c) == 1 for c in chunks.values())  # a trace's spans in one chunk here
    # Each chunk holds its trace's span rows as they were: ids, starts, sources, the bytes themselves.
    for seq, (data,) in chunks.items():
        assert unpack_chunk(data) == [
            (r[1], r[2], r[3], None if r[4] is None else bytes(r[4]), r[5]) for r in rows if r[0] == seq
        ]
    # The 40 spans of repeating text compress; the random bytes are kept as they are, since LZ4 would
    # not make them smaller.
    (t8,) = chunks[seqs[T8]]
    assert t8[0] == LZ4 | ENVELOPED  # packed by the upgrade, in the current layout
    assert len(t8) < span_bytes[seqs[T8]]
    (t9,) = chunks[seqs[T9]]
    assert t9[0] == RAW | ENVELOPED
    assert len(lz4.block.compress(t9[1:], store_size=True)) >= len(t9) - 1
    again = _open(v5_path)  # a second open finds nothing left to upgrade
    try:
        assert again.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(again) == READS
    finally:
        again.close()
    assert _chunks(v5_path) == chunks
    assert "spans" not in sqlite_tables(v5_path)


def test_an_upgrade_interrupted_after_the_drop_leaves_schema_5_and_the_next_open_finishes_it(
    v5_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sql_module._upgrades

    def failing(blob: str, *, by_seq: bool) -> dict[int, tuple[sql_module.UpgradeStep, ...]]:
        steps = real(blob, by_seq=by_seq)
        assert steps[6][-1] == "DROP TABLE spans"
        return {**steps, 6: (*steps[6], "SELECT no_such_column FROM traces")}  # after the drop

    before = _span_rows(v5_path)
    monkeypatch.setattr(sql_module, "_upgrades", failing)
    with pytest.raises(Exception, match="no_such_column"):
        open_store(f"sqlite:///{v5_path}")
    assert sqlite_rows(v5_path, "SELECT version FROM schema_info") == [(5,)]
    assert _span_rows(v5_path) == before
    assert "span_chunks" not in sqlite_tables(v5_path)
    monkeypatch.setattr(sql_module, "_upgrades", real)
    store = _open(v5_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(store) == READS
    finally:
        store.close()
    assert "spans" not in sqlite_tables(v5_path)


@pytest.mark.parametrize(
    "stray",
    [
        # A seq no trace has.
        "SELECT 999, span_id, trace_id, parent_span_id, name, start_ns, end_ns, source, payload, otlp,"
        " received_at FROM spans WHERE trace_seq = 1 LIMIT 1",
        # Trace 1's seq with another trace's id: schema 5 read a trace's spans by its seq and its id,
        # so this row was never read; keyed by the seq alone in a chunk, it would join trace 1's.
        "SELECT 1, 'ffffffffffffffff', trace_id, parent_span_id, name, start_ns, end_ns, source, payload,"
        " otlp, received_at FROM spans WHERE trace_seq = 2 LIMIT 1",
    ],
    ids=["seq-of-no-trace", "seq-of-another-trace"],
)
def test_a_span_row_of_no_trace_stops_the_upgrade_and_loses_nothing(v5_path: Path, stray: str) -> None:
    conn = sqlite3.connect(v5_path)
    conn.execute(f"INSERT INTO spans {stray}")
    conn.commit()
    conn.close()
    before = _span_rows(v5_path)
    with pytest.raises(StoreError, match="1 span\\(s\\) belong to no trace"):
        open_store(f"sqlite:///{v5_path}")
    assert sqlite_rows(v5_path, "SELECT version FROM schema_info") == [(5,)]
    assert _span_rows(v5_path) == before
    assert "span_chunks" not in sqlite_tables(v5_path)


def test_opened_for_reading_a_schema_5_store_is_read_as_it_is_until_spans_are_stored(v5_path: Path) -> None:
    store = _open(v5_path, upgrade=False)
    try:
        assert store.schema_version() == 5
        assert _reads(store) == READS
        assert "span_chunks" not in sqlite_tables(v5_path)
        assert sqlite_rows(v5_path, "SELECT count(*) FROM spans") == [(SPANS,)]
        assert store.put_spans(encode_protobuf(_new_turn()).spans) == 1
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert [t.trace_id for t in store.session_traces("session-7")] == [T1, T5, T10.hex()]
        assert {t: dumped(store.get_spans(t)) for t in READS["spans"]} == READS["spans"]
    finally:
        store.close()
    assert "spans" not in sqlite_tables(v5_path)
    assert len(_chunks(v5_path)) == len(READS["spans"]) + 1


def test_after_the_upgrade_spans_sent_again_are_found_in_the_chunks_and_late_ones_read_in_order(
    v5_path: Path,
) -> None:
    store = _open(v5_path)
    try:
        top = max(_seqs(v5_path).values())
        before = _chunks(v5_path)
        # Every span the fixture holds, sent again: OTLP ones and the JSON one, all found.
        again = [s for body in _fixture_requests() for s in encode_protobuf(body).spans]
        assert len(again) == SPANS - 1
        json_span = RawSpan.model_validate(next(s for s in READS["spans"][T2] if s["source"] == "langfuse"))
        assert store.put_spans([*again, json_span]) == 0
        assert _chunks(v5_path) == before
        # A late span of T8 whose start falls among the old ones (and equals one: then by span id),
        # and a new turn of session-7.
        late = encode_protobuf(
            _request(bytes.fromhex(T8), "0000000000007fff", "late", 1_790_000_300_003_000_000)
        )
        turn = encode_protobuf(_new_turn())
        assert store.put_spans([*late.spans, *turn.spans]) == 2
        assert store.put_spans([*late.spans, *turn.spans, *again]) == 0
        old = [(s["start_time_unix_nano"], s["span_id"]) for s in READS["spans"][T8]]
        assert old == sorted(old)
        read = store.get_spans(T8)
        assert [(s.start_time_unix_nano, s.span_id) for s in read] == sorted(
            [*old, (1_790_000_300_003_000_000, "0000000000007fff")]
        )
        assert dumped([s for s in read if s.span_id != "0000000000007fff"]) == READS["spans"][T8]
        t8 = next(t for t in store.list_traces() if t.trace_id == T8)
        assert t8.span_count == 41
        assert [t.trace_id for t in store.session_traces("session-7")] == [T1, T5, T10.hex()]
        assert store.trace_session(T10.hex()) == "session-7"
        seqs = _seqs(v5_path)
        assert seqs[T10.hex()] == top + 1
        chunks = _chunks(v5_path)
        assert len(chunks[seqs[T8]]) == 2  # the upgrade's chunk, then the late span's
        assert chunk_span_ids(chunks[seqs[T8]][1]) == ["0000000000007fff"]
        # The traces the late span and the new turn did not touch read as before.
        untouched = {t: v for t, v in READS["spans"].items() if t != T8}
        assert {t: dumped(store.get_spans(t)) for t in untouched} == untouched
    finally:
        store.close()


def test_a_trace_of_more_spans_than_a_chunk_takes_is_copied_into_several_and_reads_whole(
    v5_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_module, "_CHUNK_SPANS", 7)
    seqs = _seqs(v5_path)
    store = _open(v5_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert _reads(store) == READS
    finally:
        store.close()
    chunks = _chunks(v5_path)
    t8 = [chunk_span_ids(c) for c in chunks[seqs[T8]]]
    assert [len(ids) for ids in t8] == [7, 7, 7, 7, 7, 5]
    # Copied in the order the trace is read (start, then span id), a chunk after another.
    assert [i for ids in t8 for i in ids] == [s["span_id"] for s in READS["spans"][T8]]
    assert all(len(chunks[seqs[t]]) == 1 for t in READS["spans"] if t != T8)


def test_the_upgrade_caps_a_chunk_by_its_spans_bytes_too(
    v5_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As put_spans does (_CHUNK_BYTES): a cap of one byte leaves every span alone in its chunk, a span
    # larger than the cap included; the trace still reads whole and in order.
    monkeypatch.setattr(sql_module, "_CHUNK_BYTES", 1)
    seqs = _seqs(v5_path)
    store = _open(v5_path)
    try:
        assert _reads(store) == READS
    finally:
        store.close()
    chunks = _chunks(v5_path)
    for trace, spans in READS["spans"].items():
        ids = [chunk_span_ids(c) for c in chunks[seqs[trace]]]
        assert [i for one in ids for i in one] == [s["span_id"] for s in spans]
        assert all(len(one) == 1 for one in ids)


def test_an_upgrade_of_more_spans_than_one_read_batch_copies_every_one(
    v5_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,200 JSON spans of one trace, a chunk each: the copy reads the spans 1,000 at a time and writes
    # the chunks a few hundred at a time; none is left out or stored twice.
    monkeypatch.setattr(sql_module, "_CHUNK_SPANS", 1)
    tid = "b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    start = 1_790_000_600_000_000_000
    spans = [
        RawSpan(
            trace_id=tid,
            span_id=f"{i:016x}",
            name=f"bulk-{i}",
            start_time_unix_nano=start + (1199 - i) * 1000,  # stored in the reverse of the read order
            end_time_unix_nano=start + 2_000_000,
            attributes={"i": i},
            source="langfuse",
        )
        for i in range(1200)
    ]
    conn = sqlite3.connect(v5_path)
    seq = conn.execute("SELECT max(seq) + 1 FROM traces").fetchone()[0]
    conn.execute(
        "INSERT INTO traces VALUES (?, ?, 'bulk-1199', ?, ?, 1200, 'langfuse', 'then')",
        (seq, tid, start, start + 2_000_000),
    )
    conn.executemany(
        "INSERT INTO spans VALUES (?, ?, ?, NULL, ?, ?, ?, 'langfuse', ?, NULL, 'then')",
        [
            (
                seq,
                s.span_id,
                tid,
                s.name,
                s.start_time_unix_nano,
                s.end_time_unix_nano,
                sql_module.span_payload(s),
            )
            for s in spans
        ],
    )
    conn.commit()
    conn.close()
    store = _open(v5_path)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert {t: dumped(store.get_spans(t)) for t in READS["spans"]} == READS["spans"]
        assert store.get_spans(tid) == spans[::-1]
    finally:
        store.close()
    chunks = _chunks(v5_path)
    assert len(chunks[seq]) == 1200
    assert sum(len(c) for c in chunks.values()) == SPANS + 1200
    assert [i for c in chunks[seq] for i in chunk_span_ids(c)] == [s.span_id for s in spans[::-1]]


def test_a_reader_opened_at_schema_5_reads_the_spans_after_another_store_upgraded_it(v5_path: Path) -> None:
    # A long-running reader (serve, mcp) opened the schema-5 store as it was; a newer receiver then
    # upgraded it (spans gone, their chunks in their place) and stored a late span and a new turn.
    reader = _open(v5_path, upgrade=False)
    try:
        assert dumped(reader.get_spans(T8)) == READS["spans"][T8]  # read once at schema 5
        writer = _open(v5_path)
        try:
            late = encode_protobuf(
                _request(bytes.fromhex(T8), "0000000000007fff", "late", 1_790_000_300_003_000_000)
            )
            assert writer.put_spans([*late.spans, *encode_protobuf(_new_turn()).spans]) == 2
            assert "spans" not in sqlite_tables(v5_path)
            assert _reads(reader) == _reads(writer)
        finally:
            writer.close()
        assert len(reader.get_spans(T8)) == 41
        assert [s.span_id for s in reader.get_spans(T10.hex())] == ["bbbbbbbbbbbbbbbb"]
        assert [t.trace_id for t in reader.session_traces("session-7")] == [T1, T5, T10.hex()]
    finally:
        reader.close()


def test_a_reader_whose_schema_read_came_just_before_the_upgrade_reads_the_spans(
    v5_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race: the reader reads the schema version (5), another process then upgrades the store (its
    # spans table dropped, the chunks in its place), and the reader reads the trace's spans.
    reader = _open(v5_path, upgrade=False)
    try:
        execute = reader._execute
        upgraded: list[int] = []

        def upgrade_after_the_version_read(sql: str, params: Any = ()) -> Any:
            cur = execute(sql, params)
            if not upgraded and sql.startswith("SELECT version FROM schema_info"):
                writer = _open(v5_path)
                upgraded.append(writer.schema_version())
                writer.close()
            return cur

        monkeypatch.setattr(reader, "_execute", upgrade_after_the_version_read)
        assert dumped(reader.get_spans(T8)) == READS["spans"][T8]
        assert upgraded == [STORE_SCHEMA_VERSION]  # the upgrade did come between the two reads
        assert "spans" not in sqlite_tables(v5_path)
        assert _reads(reader) == READS
    finally:
        reader.close()


def test_a_postgresql_store_at_5_is_upgraded_by_its_version_and_keeps_a_row_per_span(
    postgres_url: str,
) -> None:
    reads = postgres_set_back(postgres_url, _fixture_requests(), 5)
    store = open_store(postgres_url)
    assert isinstance(store, SqlStore)
    try:
        assert store.schema_version() == STORE_SCHEMA_VERSION
        assert {t: dumped(store.get_spans(t)) for t in store.iter_trace_ids()} == reads
        assert store.put_spans([s for body in _fixture_requests() for s in encode_protobuf(body).spans]) == 0
    finally:
        store.close()
    with psycopg.connect(postgres_url) as pg:
        row = pg.execute("SELECT count(*), to_regclass('span_chunks') IS NULL FROM spans").fetchone()
    assert row == (sum(len(v) for v in reads.values()), True)
