"""SQLite's chunks are capped (``_sql._CHUNK_SPANS`` spans, ``_sql._CHUNK_BYTES`` bytes of span
bodies): one write of a trace past either cap is stored as several chunks, which read back, summarize,
index sessions and deduplicate exactly as the same spans written in small batches, or uncapped in one
chunk, do; a trace within the caps is still one chunk. (PostgreSQL keeps a row per span: no chunks.)"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.store.conftest import sqlite_rows
from tracejudge.schema import RawSpan
from tracejudge.store import EncodedSpan, SqliteStore
from tracejudge.store import _sql as sql_module
from tracejudge.store._chunks import _header, _raw, chunk_span_ids
from tracejudge.store._sql import AnySpan, span_payload
from tracejudge_collectors.otel import decode_protobuf, encode_protobuf

CAP = sql_module._CHUNK_SPANS
BYTES = sql_module._CHUNK_BYTES
TRACE = "7f" * 16


def _json_span(n: int, *, text: str = "", session: str | None = None) -> RawSpan:
    # Starts repeat (n // 3), so the read's order falls to the span id within a start.
    attributes: dict[str, object] = {"n": n, "input.value": text or f"the input of step {n}"}
    if session is not None:
        attributes["session.id"] = session
    return RawSpan(
        trace_id=TRACE,
        span_id=f"{n + 1:016x}",
        parent_span_id=None if n == 0 else f"{1:016x}",
        name="root" if n == 0 else f"step {n}",
        start_time_unix_nano=1_000_000 + (n // 3) * 1000,
        end_time_unix_nano=1_000_000 + (n // 3) * 1000 + 500 + n,
        attributes=attributes,
        source="langfuse",
    )


def _chunks_of(path: Path) -> list[list[str]]:
    """The span ids of each of the trace's chunks, in the order they were written (read with sqlite3)."""
    rows = sqlite_rows(
        path,
        "SELECT data FROM span_chunks WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = ?)"
        " ORDER BY id",
        (TRACE,),
    )
    return [chunk_span_ids(data) for (data,) in rows]


def _envelopes(path: Path) -> list[int]:
    """How many envelopes (resource and scope) each of a store's chunks keeps."""
    rows = sqlite_rows(path, "SELECT data FROM span_chunks ORDER BY id")
    return [len(_header(*_raw(data))[0]) for (data,) in rows]


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


def _written(path: Path, spans: Sequence[AnySpan], batch: int) -> SqliteStore:
    store = SqliteStore(path)
    for i in range(0, len(spans), batch):
        assert store.put_spans(spans[i : i + batch]) == len(spans[i : i + batch])
    return store


def _check_split(
    spans: Sequence[AnySpan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: list[int], batch: int
) -> SqliteStore:
    """Write ``spans`` (one trace) in one ``put_spans``: chunks of ``sizes`` spans, in the order
    given, which read back, summarize and dedup as the spans written ``batch`` at a time do, and as
    one uncapped chunk (before the caps) does. The store, still open."""
    whole = _written(tmp_path / "whole.db", spans, len(spans))
    others = [_written(tmp_path / "small.db", spans, batch)]
    with monkeypatch.context() as uncapped:
        uncapped.setattr(sql_module, "_CHUNK_SPANS", len(spans))
        uncapped.setattr(sql_module, "_CHUNK_BYTES", 1 << 30)
        others.append(_written(tmp_path / "one.db", spans, len(spans)))
    try:
        chunks = _chunks_of(tmp_path / "whole.db")
        assert [len(c) for c in chunks] == sizes
        assert [i for c in chunks for i in c] == [s.span_id for s in spans]
        assert len(_chunks_of(tmp_path / "one.db")) == 1
        got = whole.get_spans(TRACE)
        by_start = sorted(spans, key=lambda s: (s.start_time_unix_nano, s.span_id))
        assert [s.span_id for s in got] == [s.span_id for s in by_start]
        (summary,) = whole.list_traces()
        assert summary.span_count == len(spans)
        assert summary.start_time == _at(min(s.start_time_unix_nano for s in spans))
        assert summary.end_time == _at(max(s.end_time_unix_nano for s in spans))
        for other in others:
            assert other.get_spans(TRACE) == got
            assert [s.model_dump_json() for s in other.get_spans(TRACE)] == [s.model_dump_json() for s in got]
            assert other.list_traces() == [summary]
        # Sent again, at once or in part, by this writer or by one that has read none of its chunks.
        assert whole.put_spans(spans) == 0
        assert whole.put_spans(spans[-3:]) == 0
        fresh = SqliteStore(tmp_path / "whole.db")
        try:
            assert fresh.put_spans(list(reversed(spans))) == 0
        finally:
            fresh.close()
        assert len(_chunks_of(tmp_path / "whole.db")) == len(sizes)
        assert whole.list_traces() == [summary]
    finally:
        for other in others:
            other.close()
    return whole


def test_a_trace_past_the_span_cap_is_several_chunks_that_read_as_small_batches_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans = [_json_span(n) for n in range(2 * CAP + 100)]
    random.Random(7).shuffle(spans)
    # A session named in the first chunk and another in the last: both indexed.
    spans[0] = _json_span(int(spans[0].attributes["n"]), session="s-first")
    spans[-1] = _json_span(int(spans[-1].attributes["n"]), session="s-last")
    store = _check_split(spans, tmp_path, monkeypatch, [CAP, CAP, 100], batch=50)
    try:
        assert [t.trace_id for t in store.session_traces("s-first")] == [TRACE]
        assert [t.trace_id for t in store.session_traces("s-last")] == [TRACE]
    finally:
        store.close()


def test_a_trace_past_the_byte_cap_is_several_chunks_and_a_span_past_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bodies a little under a third of the cap: three fit in a chunk, not four.
    third = "".join(random.Random(3).choices("abcdefgh ", k=BYTES // 3 - 3000))
    spans = [_json_span(n, text=third) for n in range(7)]
    spans.insert(4, _json_span(7, text="z" * BYTES, session="s-big"))
    sizes = [len(span_payload(s).encode()) for s in spans]
    assert all(BYTES // 4 < n <= BYTES // 3 for n in sizes[:4] + sizes[5:])
    assert sizes[4] > BYTES
    # three | one (the next would pass the cap) | the big one alone | three
    store = _check_split(spans, tmp_path, monkeypatch, [3, 1, 1, 3], batch=1)
    try:
        assert store.trace_session(TRACE) == "s-big"
    finally:
        store.close()


def _chunk(spans: Sequence[AnySpan]) -> list[int]:
    """Spans per chunk of one trace's spans written at once."""
    return [len(chunk_span_ids(c)) for c in sql_module._chunk(spans, 1, set())]


def test_a_trace_at_the_caps_is_one_chunk_and_one_past_either_is_two(monkeypatch: pytest.MonkeyPatch) -> None:
    spans = [_json_span(n) for n in range(CAP + 1)]
    assert _chunk(spans[:CAP]) == [CAP]
    assert _chunk(spans) == [CAP, 1]
    few = spans[:5]
    total = sum(len(span_payload(s).encode()) for s in few)
    monkeypatch.setattr(sql_module, "_CHUNK_BYTES", total)
    assert _chunk(few) == [5]
    monkeypatch.setattr(sql_module, "_CHUNK_BYTES", total - 1)
    assert _chunk(few) == [4, 1]


# ---------------------------------------------------------------- the receiver's spans


def _request(count: int, text: str = "") -> bytes:
    """One OTLP request of one trace: ``count`` spans over two resources, three scopes in all, span
    ``n`` in scope ``n % 7 % 3`` (the request lists each scope's spans together)."""
    req = ExportTraceServiceRequest()
    scopes = []
    for service, names in (("agent", ("llm", "tools")), ("retriever", ("index",))):
        rs = req.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = service
        for name in names:
            ss = rs.scope_spans.add()
            ss.scope.name = name
            scopes.append(ss)
    for n in range(count):
        span = scopes[n % 7 % 3].spans.add(
            trace_id=bytes.fromhex(TRACE),
            span_id=(n + 1).to_bytes(8, "big"),
            name=f"step {n}",
            start_time_unix_nano=1_000_000 + (n // 3) * 1000,
            end_time_unix_nano=1_000_000 + (n // 3) * 1000 + 500 + n,
        )
        if n:
            span.parent_span_id = (1).to_bytes(8, "big")
        span.attributes.add(key="input.value").value.string_value = text or f"the input of step {n}"
        if n == count - 1:
            span.attributes.add(key="session.id").value.string_value = "s-otlp"
    return req.SerializeToString()


def test_the_receivers_spans_past_the_span_cap_split_each_chunk_keeping_its_own_envelopes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _request(CAP + 200)
    spans = encode_protobuf(body).spans
    assert all(type(s) is EncodedSpan for s in spans)
    assert len({s.envelope for s in spans[CAP:]}) == 1  # the last scope's spans alone
    store = _check_split(spans, tmp_path, monkeypatch, [CAP, 200], batch=50)
    try:
        # The second chunk keeps the one envelope it uses (the trace's third, its first).
        assert _envelopes(tmp_path / "whole.db") == [3, 1]
        assert store.trace_session(TRACE) == "s-otlp"
        as_json = _written(tmp_path / "json.db", decode_protobuf(body).spans, CAP + 200)
        try:
            assert as_json.get_spans(TRACE) == store.get_spans(TRACE)
        finally:
            as_json.close()
    finally:
        store.close()


def test_the_receivers_spans_past_the_byte_cap_split_each_chunk_keeping_its_own_envelopes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Values under the receiver's own limit (kept encoded), a little under a third of the cap each.
    text = "".join(random.Random(5).choices("abcdefgh ", k=BYTES // 3 - 1000))
    body = _request(8, text)
    spans = encode_protobuf(body).spans
    assert all(type(s) is EncodedSpan for s in spans)
    store = _check_split(spans, tmp_path, monkeypatch, [3, 3, 2], batch=1)
    try:
        # Scope 0 holds spans 0, 3, 6, 7, scope 1 spans 1, 4, scope 2 spans 2, 5, in that order.
        assert _envelopes(tmp_path / "whole.db") == [1, 2, 1]
        assert store.trace_session(TRACE) == "s-otlp"
        as_json = _written(tmp_path / "json.db", decode_protobuf(body).spans, 1)
        try:
            assert as_json.get_spans(TRACE) == store.get_spans(TRACE)
        finally:
            as_json.close()
    finally:
        store.close()
