"""SQLite's stored form of spans from store schema 6 (``tracejudge.store._chunks``): a trace's spans of
one commit packed into one chunk, LZ4-compressed when that makes it smaller, read back as packed (from
schema 7 with the resource and scope the receiver's spans share kept once, schema 6's chunks still
read); a damaged chunk is a ``StoreDamageError`` that points at ``tracejudge doctor``, never a codec's or a
parser's exception leaking out of a read.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import lz4.block
import orjson
import pytest

from tracejudge._errors import StoreDamageError
from tracejudge.schema import RawSpan
from tracejudge.store import SqliteStore
from tracejudge.store import _sql as sql_module
from tracejudge.store._chunks import (
    ENVELOPED,
    LZ4,
    RAW,
    SpanIdCache,
    chunk_span_ids,
    pack_chunk,
    pack_spans,
    sorted_rows,
    unpack_chunk,
)
from tracejudge.store._encoded import OtlpEnvelope

TEXT = "The prepayment cap is two percent of the outstanding balance per year. " * 8
OTLP = ("00000000000000b2", 20, "otlp", "", b"\x0a\x10" + TEXT.encode())
JSON = ("00000000000000a1", 10, "langfuse", '{"name":"tool","é":"\u00e9 ✓"}', None)
EMPTY_OTLP = ("00000000000000c3", 30, "otlp", "", b"")


def _row(span: tuple[str, int, str, str, bytes | None]) -> tuple[str, int, str, bytes | None, str]:
    """What :func:`unpack_chunk` gives for a span given to :func:`pack_spans`."""
    span_id, start, source, payload, otlp = span
    return (span_id, start, payload, otlp, source)


def _chunk(header: object, bodies: bytes = b"", *, codec: int = RAW) -> bytes:
    """A chunk written by hand: ``header`` as its JSON, then ``bodies`` (schema 6's layout, unless
    ``codec`` has ENVELOPED)."""
    head = orjson.dumps(header)
    raw = len(head).to_bytes(4, "little") + head + bodies
    if codec & ~ENVELOPED == LZ4:
        return bytes([codec]) + lz4.block.compress(raw, store_size=True)
    return bytes([codec]) + raw


def _chunk7(envelopes: object, entries: object, bodies: bytes = b"", *, codec: int = RAW) -> bytes:
    """A schema-7 chunk written by hand."""
    return _chunk([envelopes, entries], bodies, codec=codec | ENVELOPED)


def test_a_chunk_reads_back_its_spans_in_the_order_they_were_packed() -> None:
    spans = [OTLP, JSON, EMPTY_OTLP]
    chunk = pack_spans(spans)
    assert unpack_chunk(chunk) == [_row(s) for s in spans]
    assert chunk_span_ids(chunk) == [s[0] for s in spans]
    # OTLP spans keep their bytes (payload empty), JSON ones their text (otlp None), each its source.
    rows = unpack_chunk(chunk)
    assert rows[0][2:] == ("", OTLP[4], "otlp")
    assert rows[1][2:] == (JSON[3], None, "langfuse")
    assert rows[2][2:] == ("", b"", "otlp")  # an OTLP span of no bytes is still an OTLP span
    assert unpack_chunk(memoryview(chunk)) == rows  # type: ignore[arg-type]  # as a driver may hand it
    assert unpack_chunk(pack_spans([])) == []
    assert chunk_span_ids(pack_spans([])) == []


def test_the_rows_are_ordered_by_start_then_span_id_as_schema_5_read_them() -> None:
    rows = [
        ("0000000000000003", 5, "", b"c", "otlp"),
        ("0000000000000002", 7, '{"b":1}', None, "langfuse"),
        ("0000000000000001", 5, "", b"a", "otlp"),
        ("0000000000000000", 9, "", b"z", "otlp"),
    ]
    assert sorted_rows(rows) == [
        ("", b"a", "otlp"),
        ("", b"c", "otlp"),
        ('{"b":1}', None, "langfuse"),
        ("", b"z", "otlp"),
    ]
    assert sorted_rows(unpack_chunk(pack_spans([JSON, OTLP]))) == sorted_rows(
        unpack_chunk(pack_spans([OTLP, JSON]))
    )


def test_short_chunks_and_bytes_that_do_not_compress_are_kept_raw_and_text_that_repeats_compresses() -> None:
    short = pack_spans([("0000000000000001", 1, "otlp", "", b"x" * 100)])
    assert short[0] == RAW | ENVELOPED  # too short to be worth the codec, however well it would compress
    assert len(lz4.block.compress(short[1:], store_size=True)) < len(short) - 1
    noise = random.Random(7).randbytes(4096)
    random_chunk = pack_spans([("0000000000000002", 2, "otlp", "", noise)])
    assert random_chunk[0] == RAW | ENVELOPED
    assert noise in random_chunk
    repeating = [(f"{i:016x}", i, "otlp", "", f"{i}: {TEXT}".encode()) for i in range(40)]
    compressed = pack_spans(repeating)
    assert compressed[0] == LZ4 | ENVELOPED
    assert len(compressed) * 4 < sum(len(s[4]) for s in repeating)
    assert unpack_chunk(compressed) == [_row(s) for s in repeating]
    assert chunk_span_ids(compressed) == [s[0] for s in repeating]


def test_a_chunk_is_its_codec_byte_then_the_length_and_header_then_the_bodies() -> None:
    chunk = pack_spans([JSON, OTLP])
    assert chunk[0] in (RAW | ENVELOPED, LZ4 | ENVELOPED)
    raw = lz4.block.decompress(chunk[1:]) if chunk[0] & LZ4 else chunk[1:]
    size = int.from_bytes(raw[:4], "little")
    assert orjson.loads(raw[4 : 4 + size]) == [
        [],
        [
            [JSON[0], JSON[1], JSON[2], 0, len(JSON[3].encode())],
            [OTLP[0], OTLP[1], OTLP[2], 1, len(OTLP[4])],
        ],
    ]
    assert raw[4 + size :] == JSON[3].encode() + OTLP[4]


RESOURCE = b"\x0a\x1a\x0a\x0cservice.name\x12\x0a\x0a\x08checkout"
SCOPE = b"\x0a\x0bopeninference"
OTHER_SCOPE = b"\x0a\x09langchain"


def test_spans_sharing_a_resource_and_scope_keep_them_once_and_read_back_wrapped() -> None:
    first, second = OtlpEnvelope(RESOURCE, SCOPE), OtlpEnvelope(RESOURCE, OTHER_SCOPE)
    spans = [(b"\x0a\x10" + f"{i}: {TEXT}".encode(), first if i % 3 else second) for i in range(12)]
    header = [
        (f"{i:016x}", 100 - i, "otlp", 2 + (0 if env is first else 1), len(body))
        for i, (body, env) in enumerate(spans)
    ]
    header.append((JSON[0], JSON[1], JSON[2], 0, len(JSON[3].encode())))
    chunk = pack_chunk(header, [*(body for body, _ in spans), JSON[3].encode()], [first, second])
    assert chunk[0] == LZ4 | ENVELOPED
    assert lz4.block.decompress(chunk[1:]).count(RESOURCE) == 2  # once per envelope, not once per span
    rows = unpack_chunk(chunk)
    assert [r[3] for r in rows[:12]] == [env.wrap(body) for body, env in spans]
    assert [(r[0], r[1], r[2], r[4]) for r in rows[:12]] == [(h[0], h[1], "", "otlp") for h in header[:12]]
    assert rows[12] == _row(JSON)
    assert chunk_span_ids(chunk) == [h[0] for h in header]
    short = spans[0][0][:10]
    raw = pack_chunk([("0000000000000001", 1, "otlp", 2, len(short))], [short], [second])
    assert raw[0] == RAW | ENVELOPED
    assert unpack_chunk(raw) == [("0000000000000001", 1, "", second.wrap(short), "otlp")]


def test_the_read_path_takes_each_span_with_its_envelope_unwrapped() -> None:
    # get_spans parses each Span alone and decodes a chunk's envelope once (wrap=False): the bytes and the
    # envelope it gets are what the wrapped row is made of, the spans of an envelope sharing one object.
    first, second = OtlpEnvelope(RESOURCE, SCOPE), OtlpEnvelope(RESOURCE, OTHER_SCOPE)
    spans = [(b"\x0a\x10" + f"{i}: {TEXT}".encode(), first if i % 2 else second) for i in range(6)]
    header = [
        (f"{i:016x}", i, "otlp", 2 + (0 if env is first else 1), len(b)) for i, (b, env) in enumerate(spans)
    ]
    chunk = pack_chunk(
        [*header, (OTLP[0], OTLP[1], OTLP[2], 1, len(OTLP[4]))],
        [*(b for b, _ in spans), OTLP[4]],
        [first, second],
    )
    wrapped, unwrapped = unpack_chunk(chunk), unpack_chunk(chunk, wrap=False)
    assert [r[:3] + r[4:] for r in unwrapped] == [r[:3] + r[4:] for r in wrapped]
    pairs = [r[3] for r in unwrapped[:6]]
    assert all(isinstance(p, tuple) for p in pairs)
    assert [body for body, _ in pairs] == [body for body, _ in spans]
    assert [env.wrap(body) for body, env in pairs] == [r[3] for r in wrapped[:6]]
    assert len({id(env) for _, env in pairs[1::2]}) == len({id(env) for _, env in pairs[::2]}) == 1
    assert unwrapped[6] == wrapped[6] == _row(OTLP)  # a ResourceSpans (schema 6's form) stays as it is


def test_schema_6_chunks_still_read() -> None:
    bodies = JSON[3].encode() + OTLP[4]
    header = [
        [JSON[0], JSON[1], JSON[2], 0, len(JSON[3].encode())],
        [OTLP[0], OTLP[1], OTLP[2], 1, len(OTLP[4])],
    ]
    for codec in (RAW, LZ4):
        chunk = _chunk(header, bodies, codec=codec)
        assert unpack_chunk(chunk) == [_row(JSON), _row(OTLP)]
        assert chunk_span_ids(chunk) == [JSON[0], OTLP[0]]


def _adding_up() -> bytes:
    """A header whose first length is negative and whose second makes up for it: the lengths add up to
    the bytes (the second span starts a byte back, in the header), and the spans they cut are not the
    ones packed."""
    bodies = b"abc"
    return _chunk([["a", 1, "otlp", 1, -1], ["b", 1, "otlp", 1, len(bodies) + 1]], bodies)


GOOD = pack_spans([OTLP, JSON])
assert GOOD[0] == LZ4 | ENVELOPED  # the damaged chunks below cut or change an LZ4 chunk too

# Chunks no tracejudge writes: a damaged file or another program's writes. Each of them is refused
# by both reads (the spans, and the ids alone that the dedup of late spans reads).
DAMAGED_HEADERS = {
    "empty blob": b"",
    "unknown codec byte": b"\x07" + GOOD[1:],
    "truncated LZ4 data": GOOD[: len(GOOD) // 2],
    "LZ4 data of its size alone": GOOD[:5],
    "raw, shorter than its length": b"\x00\x01",
    "header not JSON": b"\x00" + (2).to_bytes(4, "little") + b"{[",
    "header not a list": _chunk({"spans": []}),
    "header a number": _chunk(3),
    "header entries not lists": _chunk([1, 2]),
    "header entry empty": _chunk([[]]),
    "a codec byte alone": GOOD[:1],
    "LZ4 of a stored size past 2 GiB": b"\x01" + (2**32 - 1).to_bytes(4, "little") + b"\x00" * 8,
    "header entries objects": _chunk([{"id": "a", "start": 1, "source": "otlp", "otlp": 1, "length": 0}]),
    "header entries text": _chunk(["abcde"]),
    "unknown codec byte with the envelopes' flag": b"\x06" + GOOD[1:],
    "schema 7: header not a pair": _chunk([[]], codec=RAW | ENVELOPED),
    "schema 7: header of three": _chunk([[], [], []], codec=RAW | ENVELOPED),
    "schema 7: envelopes not a list": _chunk7({"a": 1}, []),
    "schema 7: an envelope of one size": _chunk7([[3]], []),
    "schema 7: an envelope size negative": _chunk7([[3, -1]], []),
    "schema 7: an envelope size as text": _chunk7([[3, "1"]], []),
    "schema 7: a form past its envelopes": _chunk7([[1, 1]], [["a", 1, "otlp", 3, 1]], b"rsx"),
    "schema 7: a form as a float": _chunk7([], [["a", 1, "otlp", 1.0, 1]], b"x"),
    "schema 7: a negative form": _chunk7([], [["a", 1, "otlp", -1, 1]], b"x"),
    "schema 6: a form of an envelope": _chunk([["a", 1, "otlp", 2, 1]], b"x"),
}
# A header that reads but does not describe the bytes after it: only the read of the spans sees it.
DAMAGED_BODIES = {
    "lengths short of the bytes": _chunk([["a", 1, "otlp", 1, 2]], b"abc"),
    "lengths past the bytes": _chunk([["a", 1, "otlp", 1, 5]], b"abc"),
    "lengths past the bytes, compressed": _chunk([["a", 1, "otlp", 1, 500]], b"abc" * 100, codec=LZ4),
    "a negative length": _chunk([["a", 1, "otlp", 1, -1]], b"abc"),
    "a length as text": _chunk([["a", 1, "otlp", 1, "3"]], b"abc"),
    "a length as a float": _chunk([["a", 1, "otlp", 1, 3.0]], b"abc"),
    "an entry of four fields": _chunk([["a", 1, "otlp", 1]], b"abc"),
    "an entry of six fields": _chunk([["a", 1, "otlp", 1, 3, 0]], b"abc"),
    "a JSON body not UTF-8": _chunk([["a", 1, "langfuse", 0, 2]], b"\xff\xfe"),
    "a header length past the bytes": b"\x00" + (10**6).to_bytes(4, "little") + b"[]",
    "a span id not text": _chunk([[None, 1, "otlp", 1, 1], ["a", 1, "otlp", 1, 1]], b"xy"),
    "a start not a number": _chunk([["a", "x", "otlp", 1, 1], ["b", 1, "otlp", 1, 1]], b"xy"),
    "a source not text": _chunk([["a", 1, None, 0, 2]], b"{}"),
    "negative lengths that add up": _adding_up(),
    "schema 7: envelopes past the bytes": _chunk7([[5, 5]], [["a", 1, "otlp", 2, 1]], b"rsx"),
    "schema 7: envelopes short of the bytes": _chunk7([[1, 1]], [["a", 1, "otlp", 2, 1]], b"rsxyz"),
    "schema 7: a JSON body not UTF-8": _chunk7([], [["a", 1, "langfuse", 0, 2]], b"\xff\xfe"),
}

# A chunk that unpacks but whose spans do not parse: only the read of the spans themselves sees it.
DAMAGED_SPANS = {
    "schema 7: a Span not protobuf": _chunk7([[0, 0]], [["a", 1, "otlp", 2, 3]], b"\xff\xff\xff"),
    "schema 7: an envelope's resource not protobuf": _chunk7(
        [[3, 0]], [["a", 1, "otlp", 2, 2]], b"\xff\xff\xff" + b"\x0a\x00"
    ),
    "schema 7: an envelope's scope not protobuf": _chunk7(
        [[0, 3]], [["a", 1, "otlp", 2, 2]], b"\xff\xff\xff\x0a\x00"
    ),
    "schema 6: a ResourceSpans not protobuf": _chunk([["a", 1, "otlp", 1, 3]], b"\xff\xff\xff"),
    "a JSON span not JSON": _chunk([["a", 1, "langfuse", 0, 2]], b"{x"),
    "a JSON span missing its ids": _chunk([["a", 1, "langfuse", 0, 2]], b"{}"),
}


def _refused(read: object, chunk: bytes) -> None:
    with pytest.raises(StoreDamageError) as caught:
        read(chunk)  # type: ignore[operator]
    assert caught.value.hint is not None
    assert "tracejudge doctor" in caught.value.hint


@pytest.mark.parametrize("chunk", DAMAGED_HEADERS.values(), ids=DAMAGED_HEADERS.keys())
def test_a_damaged_chunk_is_a_store_error_naming_doctor(chunk: bytes) -> None:
    _refused(unpack_chunk, chunk)
    _refused(chunk_span_ids, chunk)


def _read_as_the_store_does(chunk: bytes) -> object:
    return sorted_rows(unpack_chunk(chunk))


@pytest.mark.parametrize("chunk", DAMAGED_BODIES.values(), ids=DAMAGED_BODIES.keys())
def test_a_header_that_does_not_describe_its_bytes_is_a_store_error_naming_doctor(chunk: bytes) -> None:
    _refused(_read_as_the_store_does, chunk)


@pytest.mark.parametrize("chunk", DAMAGED_SPANS.values(), ids=DAMAGED_SPANS.keys())
def test_a_span_that_does_not_parse_is_a_store_error_naming_doctor(chunk: bytes) -> None:
    # get_spans' own path: the chunk unwrapped, its rows sorted, each span parsed (a protobuf DecodeError or
    # a pydantic ValidationError leaked out of the read before).
    _refused(lambda c: sql_module.read_spans(sorted_rows(unpack_chunk(c, wrap=False))), chunk)
    _refused(lambda c: sql_module.read_spans(sorted_rows(unpack_chunk(c))), chunk)
    assert chunk_span_ids(chunk) == ["a"]  # the dedup of late spans reads the header alone


def _span(trace_id: str, span_id: str, start: int) -> RawSpan:
    return RawSpan(
        trace_id=trace_id,
        span_id=span_id,
        name="step",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1000,
        attributes={"input.value": TEXT},
        source="langfuse",
    )


def test_a_damaged_chunk_in_a_store_is_a_store_error_on_read_and_on_a_late_span(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    tid, other = "a" * 32, "b" * 32
    store = SqliteStore(path)
    try:
        assert store.put_spans([_span(tid, f"{i:016x}", 100 - i) for i in range(5)]) == 5
        assert store.put_spans([_span(other, "00000000000000ff", 1)]) == 1
        assert [s.span_id for s in store.get_spans(tid)] == [f"{i:016x}" for i in range(4, -1, -1)]
        conn = sqlite3.connect(path)
        ((data,),) = conn.execute(
            "SELECT data FROM span_chunks WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = ?)",
            (tid,),
        ).fetchall()
        assert data[0] == LZ4 | ENVELOPED
        conn.execute(
            "UPDATE span_chunks SET data = ? WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = ?)",
            (data[: len(data) // 2], tid),
        )
        conn.commit()
        conn.close()
        _refused(store.get_spans, tid)  # type: ignore[arg-type]
        with pytest.raises(StoreDamageError, match="does not decompress"):
            store.put_spans([_span(tid, "00000000000000ee", 50)])  # its dedup reads the stored ids
        assert [s.span_id for s in store.get_spans(other)] == ["00000000000000ff"]  # the rest still reads
        assert next(t for t in store.list_traces() if t.trace_id == tid).span_count == 5  # nothing stored
    finally:
        store.close()


def test_a_chunk_whose_header_misnames_its_spans_in_a_store_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    tid = "c" * 32
    store = SqliteStore(path)
    try:
        assert store.put_spans([_span(tid, f"{i:016x}", 100 - i) for i in range(2)]) == 2
        conn = sqlite3.connect(path)
        conn.execute("UPDATE span_chunks SET data = ?", (DAMAGED_BODIES["a start not a number"],))
        conn.commit()
        conn.close()
        _refused(store.get_spans, tid)  # type: ignore[arg-type]
    finally:
        store.close()


def _one(trace: str, n: int) -> RawSpan:
    return RawSpan(
        trace_id=trace, span_id=f"{n:016x}", name=f"s{n}", start_time_unix_nano=n, end_time_unix_nano=n + 1
    )


def test_the_span_id_cache_keeps_the_last_chunk_read_and_lets_the_oldest_trace_go() -> None:
    cache = SpanIdCache(most=2)
    assert (cache.since(1), cache.ids(1)) == (0, set())
    cache.keep(1, 7, {"a"})
    cache.keep(2, 9, {"b"})
    cache.ids(1).add("c")  # the caller adds the ids of chunks read later to the cache's own set
    assert (cache.since(1), cache.ids(1)) == (7, {"a", "c"})
    cache.keep(1, 8, cache.ids(1))  # trace 1 is now the most recently used
    cache.keep(3, 4, {"d"})
    assert (cache.since(2), cache.ids(2)) == (0, set())  # let go
    assert (cache.since(1), cache.since(3)) == (8, 4)


def test_a_trace_sent_a_span_at_a_time_reads_each_stored_chunk_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One span per export (an SDK's simple span processor): each batch's dedup reads only the chunks
    # stored since the last, not every chunk of the trace again (quadratic in the trace's length).
    reads: list[int] = []
    real = sql_module.chunk_span_ids

    def counted(chunk: bytes) -> list[str]:
        reads.append(1)
        return real(chunk)

    monkeypatch.setattr(sql_module, "chunk_span_ids", counted)
    store = SqliteStore(tmp_path / "s.db")
    try:
        trace = "ab" * 16
        for n in range(1, 51):
            assert store.put_spans([_one(trace, n)]) == 1
        assert len(reads) == 49
        # Everything sent again, in one batch and one at a time: nothing stored twice.
        assert store.put_spans([_one(trace, n) for n in range(1, 51)]) == 0
        assert all(store.put_spans([_one(trace, n)]) == 0 for n in (1, 25, 50))
        assert [s.span_id for s in store.get_spans(trace)] == [f"{n:016x}" for n in range(1, 51)]
        assert store.list_traces()[0].span_count == 50
    finally:
        store.close()


def test_writers_taking_turns_on_one_file_find_each_others_spans(tmp_path: Path) -> None:
    # Two receivers on one SQLite file: each one's cache of a trace's span ids is completed by the
    # chunks the other stored since (chunk ids only grow), so neither stores a span twice.
    first, second = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    trace = "cd" * 16
    try:
        assert first.put_spans([_one(trace, 1)]) == 1
        assert second.put_spans([_one(trace, 1), _one(trace, 2)]) == 1
        assert first.put_spans([_one(trace, 2), _one(trace, 3)]) == 1
        assert second.put_spans([_one(trace, 1), _one(trace, 2), _one(trace, 3)]) == 0
        assert first.put_spans([_one(trace, 3)]) == 0
        assert [s.span_id for s in first.get_spans(trace)] == [f"{n:016x}" for n in (1, 2, 3)]
    finally:
        first.close()
        second.close()


def test_a_trace_the_cache_let_go_is_read_whole_again(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store._span_ids = SpanIdCache(most=1)
    traces = [f"{t:032x}" for t in (1, 2, 3)]
    try:
        for n in range(1, 4):
            for trace in traces:
                assert store.put_spans([_one(trace, n)]) == 1
        for trace in traces:
            assert store.put_spans([_one(trace, n) for n in range(1, 5)]) == 1  # only span 4 is new
        assert [t.span_count for t in store.list_traces()] == [4, 4, 4]
    finally:
        store.close()
