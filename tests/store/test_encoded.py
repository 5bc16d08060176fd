"""A span the receiver stores in its own OTLP bytes (store schema 2) reads back from the store as exactly
the span stored as JSON does: the same trace stored both ways, by ``encode_protobuf`` (the receiver's
form) and by ``decode_protobuf`` (each span as JSON), gives equal ``get_spans`` results — the same
values of the same types in the same order, the same truncation markers and notes for the spans the
receiver decodes instead — over every recorded fixture and generated edge cases."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.store.conftest import create_database, drop_database, postgres_admin_url
from tracejudge.schema import RawSpan
from tracejudge.store import EncodedSpan, SqlStore, open_store
from tracejudge.store._chunks import unpack_chunk
from tracejudge.store._sql import read_spans, stored_forms
from tracejudge_collectors.otel import (
    DEPTH_MARKER,
    MAX_VALUE_CHARS,
    TRUNCATED_MARKER,
    decode_protobuf,
    encode_protobuf,
)

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures" / "traces").glob("*.pb"))
T1 = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
T2 = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")


def _read_all(store: SqlStore) -> dict[str, list[RawSpan]]:
    return {t: store.get_spans(t) for t in sorted(store.iter_trace_ids())}


def _same(json_form: dict[str, list[RawSpan]], otlp_form: dict[str, list[RawSpan]]) -> None:
    """Equal records, and equal in what equality does not see: the JSON they dump to (key order, 1 vs
    1.0, True vs 1), the fields counted as set, and a resource dict of each span's own."""
    assert otlp_form == json_form
    for trace_id, spans in json_form.items():
        got = otlp_form[trace_id]
        assert [s.model_dump_json() for s in got] == [s.model_dump_json() for s in spans]
        assert [s.model_fields_set for s in got] == [s.model_fields_set for s in spans]
        for s in got:
            assert all(e.model_fields_set == set(type(e).model_fields) for e in s.events)
            assert all(ln.model_fields_set == {"trace_id", "span_id", "attributes"} for ln in s.links)
        assert len({id(s.resource) for s in got}) == len(got)


def _otlp_rows(url: str) -> int:
    """Spans a SQLite store holds in their OTLP bytes (in its chunks, read with sqlite3)."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        chunks = conn.execute("SELECT data FROM span_chunks").fetchall()
    return sum(otlp is not None for (data,) in chunks for _, _, _, otlp, _ in unpack_chunk(data))


def _stored_both_ways(
    bodies: Iterable[bytes], open_one: Callable[[str], SqlStore]
) -> tuple[dict[str, list[RawSpan]], dict[str, list[RawSpan]], int]:
    """Each body stored as JSON in one store and as the receiver stores it in another: what each reads
    back, and how many spans the receiver kept in their own bytes."""
    as_json, as_otlp = open_one("json"), open_one("otlp")
    try:
        kept = 0
        for body in bodies:
            as_json.put_spans(decode_protobuf(body).spans)
            encoded = encode_protobuf(body).spans
            kept += sum(isinstance(s, EncodedSpan) for s in encoded)
            as_otlp.put_spans(encoded)
        return _read_all(as_json), _read_all(as_otlp), kept
    finally:
        as_json.close()
        as_otlp.close()


def _sqlite_pair(tmp: Path) -> Callable[[str], SqlStore]:
    def open_one(name: str) -> SqlStore:
        store = open_store(f"sqlite:///{tmp / name}.db")
        assert isinstance(store, SqlStore)
        return store

    return open_one


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_recorded_fixture_reads_back_the_same_from_either_form(fixture: Path, tmp_path: Path) -> None:
    json_form, otlp_form, kept = _stored_both_ways([fixture.read_bytes()], _sqlite_pair(tmp_path))
    assert json_form
    assert otlp_form.keys() == json_form.keys()
    assert kept
    assert _otlp_rows(f"sqlite:///{tmp_path}/otlp.db") == kept  # the OTLP form is what was read
    _same(json_form, otlp_form)


def test_the_fixtures_read_back_the_same_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    """PostgreSQL hands the OTLP bytes back as its own type (bytea): one database per form."""
    admin = postgres_admin_url()
    second = create_database(admin)
    try:
        urls = {"json": postgres_url, "otlp": f"{admin.rsplit('/', 1)[0]}/{second}"}

        def open_one(name: str) -> SqlStore:
            store = open_store(urls[name])
            assert isinstance(store, SqlStore)
            return store

        bodies = [p.read_bytes() for p in FIXTURES[::10]]
        json_form, otlp_form, kept = _stored_both_ways([*bodies, _edge_request()], open_one)
        assert kept
        _same(json_form, otlp_form)
    finally:
        drop_database(admin, second)  # not WITH (FORCE), which autovacuum fails: see there


# ---------------------------------------------------------------- edge cases


def _value(x: Any) -> AnyValue:
    """A Python value as an AnyValue: bytes as bytes, a list as an array, a tuple of (key, value) as a
    key-value list, ``...`` as an AnyValue that is set but holds nothing."""
    v = AnyValue()
    if x is None:
        return v
    if x is ...:
        v.SetInParent()
    elif isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, int):
        v.int_value = x
    elif isinstance(x, float):
        v.double_value = x
    elif isinstance(x, str):
        v.string_value = x
    elif isinstance(x, bytes):
        v.bytes_value = x
    elif isinstance(x, list):
        v.array_value.SetInParent()
        v.array_value.values.extend(_value(i) for i in x)
    else:
        assert isinstance(x, tuple)
        v.kvlist_value.SetInParent()
        v.kvlist_value.values.extend(KeyValue(key=k, value=_value(i)) for k, i in x)
    return v


def _kvs(target: Any, pairs: Iterable[tuple[str, Any]]) -> None:
    for k, x in pairs:
        kv = target.add(key=k)
        if x is not None:
            kv.value.CopyFrom(_value(x))


def _nested(depth: int) -> Any:
    x: Any = "bottom"
    for i in range(depth):
        x = [x, i] if i % 2 else (("k", x),)
    return x


def _edge_request() -> bytes:
    """One request of the values a reader could get wrong, each kept in its own bytes unless noted."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    _kvs(rs.resource.attributes, [("service.name", "agent"), ("n", 3), ("ok", True), ("", "empty key")])
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = "scope", "1.0"
    root = ss.spans.add(trace_id=T1, span_id=b"\x01" * 8, name="root", kind=2, start_time_unix_nano=5)
    _kvs(
        root.attributes,
        [
            ("s", "text"),
            ("empty", ""),  # a set but empty string: one kind of '', beside the unset value below
            ("unset", None),
            ("nothing", ...),
            ("", "a value under an empty key"),
            ("i", -(2**63)),
            ("imax", 2**63 - 1),
            ("zero", 0),
            ("f", 1.0),  # stays a float: 1.0, not 1
            ("negzero", -0.0),
            ("nan", math.nan),  # the JSON form holds no NaN or infinity: None
            ("inf", -math.inf),
            ("t", True),
            ("false", False),
            ("raw", b"\x00\xff\xfe not UTF-8 \xc3\x28"),
            ("nobytes", b""),
            ("arr", [1, "two", 3.5, None, b"\x80", [], (("x", []),), ()]),
            ("emptyarr", []),
            ("kv", (("a", 1), ("a", 2), ("", None), ("b", (("c", math.inf),)))),  # a repeated inner key
            ("emptykv", ()),
            ("deep", _nested(18)),  # as deep as a request parses (~45 message levels)
            ("unicode", "naïve — 中文 \U0001f600 \x00 nul and \u2028"),
            ("s", "the last of a repeated key wins, in the first one's place"),
        ],
    )
    child = ss.spans.add(
        trace_id=T1,
        span_id=b"\x02" * 8,
        parent_span_id=b"\x01" * 8,
        name="child \u00e9",
        kind=9,  # beyond SpanKind's names: kept as the number
        start_time_unix_nano=2**63 - 1,
        end_time_unix_nano=2**63 - 1,
    )
    child.status.code, child.status.message = 2, "failed: \u2603"
    ev = child.events.add(name="ev", time_unix_nano=7)
    _kvs(ev.attributes, [("count", 5), ("doc", "d")])
    child.events.add(name="")  # an event with nothing set
    ln = child.links.add(trace_id=T2, span_id=b"\x03" * 8)
    _kvs(ln.attributes, [("why", "follows")])
    child.links.add(trace_id=T2, span_id=b"\x04" * 8)
    # A parent id of all zeros reads as a root, as from JSON.
    ss.spans.add(trace_id=T1, span_id=b"\x05" * 8, parent_span_id=bytes(8), name="zero parent")
    # Decoded instead (each with its note): a huge value, one past the size limit inside an array, an
    # invalid link id; and a span rejected for an empty span id.
    huge = ss.spans.add(trace_id=T1, span_id=b"\x06" * 8, name="huge")
    _kvs(huge.attributes, [("input.value", "x" * (MAX_VALUE_CHARS + 1)), ("small", 1)])
    big = ss.spans.add(trace_id=T1, span_id=b"\x07" * 8, name="big array")
    _kvs(big.attributes, [("docs", ["y" * (MAX_VALUE_CHARS // 2), "z" * (MAX_VALUE_CHARS // 2 + 1)])])
    bad_link = ss.spans.add(trace_id=T1, span_id=b"\x08" * 8, name="bad link")
    bad_link.links.add(trace_id=b"", span_id=b"\x01" * 8)
    ss.spans.add(trace_id=T1, span_id=b"", name="no span id")
    # A second resource with no attributes and a scope with no name, in a second trace.
    rs2 = req.resource_spans.add()
    ss2 = rs2.scope_spans.add()
    ss2.spans.add(trace_id=T2, span_id=b"\x09" * 8, name="")
    ss3 = rs2.scope_spans.add()
    ss3.scope.name = "other"
    other = ss3.spans.add(trace_id=T2, span_id=b"\x0a" * 8, parent_span_id=b"\x09" * 8)
    _kvs(other.attributes, [("session.id", "s-1")])
    return req.SerializeToString()


def test_edge_values_read_back_the_same_from_either_form(tmp_path: Path) -> None:
    body = _edge_request()
    json_form, otlp_form, kept = _stored_both_ways([body], _sqlite_pair(tmp_path))
    encoded = encode_protobuf(body)
    assert encoded.rejected == 1
    assert len(encoded.errors) == 4
    assert kept == 5  # three of the first trace, both of the second; huge, big array and bad link decoded
    _same(json_form, otlp_form)
    spans = {s.name: s for s in otlp_form[T1.hex()]}
    root = spans["root"].attributes
    assert [root[k] for k in ("nan", "inf", "unset", "nothing", "empty")] == [None, None, None, None, ""]
    assert type(root["f"]) is float
    assert root["deep"] != DEPTH_MARKER
    assert next(iter(root)) == "s"
    assert root["s"].startswith("the last")
    assert spans["huge"].attributes["input.value"].endswith(TRUNCATED_MARKER)
    assert spans["big array"].attributes["docs"] == TRUNCATED_MARKER
    assert spans["bad link"].links == ()


_text = st.text(max_size=12)
_scalars = (
    st.none()
    | st.just(...)
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | _text
    | st.binary(max_size=12)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(st.tuples(st.text(max_size=4), inner), max_size=4).map(tuple)
    ),
    max_leaves=6,
)
_attrs = st.lists(st.tuples(st.sampled_from(["a", "b", "", "session.id"]) | _text, _values), max_size=5)
_ids = st.sampled_from([b"\x11" * 8, b"\x22" * 8, b"\x33" * 8, b"", bytes(8)])
_spans = st.lists(
    st.tuples(_ids, _ids, _text, _attrs, st.lists(_attrs, max_size=2), st.lists(_attrs, max_size=1)),
    max_size=3,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_attrs, _text, _spans), min_size=1, max_size=2))
def test_generated_requests_read_back_the_same_from_either_form(generated: list[Any]) -> None:
    """Repeated and empty keys, unset and empty values of every kind, NaN, arrays and key-value lists,
    bytes, empty and all-zero ids (rejected, or a root): each span as the store reads its row back
    (``read_spans``, what ``get_spans`` calls: a store per example would make this slow)."""
    req = ExportTraceServiceRequest()
    for resource, scope, spans in generated:
        rs = req.resource_spans.add()
        _kvs(rs.resource.attributes, resource)
        ss = rs.scope_spans.add()
        ss.scope.name = scope
        for span_id, parent, name, attrs, events, links in spans:
            sp = ss.spans.add(trace_id=T1, span_id=span_id, parent_span_id=parent, name=name)
            _kvs(sp.attributes, attrs)
            for i, ev_attrs in enumerate(events):
                _kvs(sp.events.add(name=f"e{i}", time_unix_nano=i).attributes, ev_attrs)
            for link_attrs in links:
                _kvs(sp.links.add(trace_id=T2, span_id=b"\x44" * 8).attributes, link_attrs)
    body = req.SerializeToString()
    decoded, encoded = decode_protobuf(body).spans, encode_protobuf(body).spans
    assert len(encoded) == len(decoded)
    rows = [(*stored_forms(s), s.source) for s in encoded]
    json_rows = [(*stored_forms(s), s.source) for s in decoded]
    assert all(otlp is None for _, otlp, _ in json_rows)
    _same({"t": read_spans(json_rows)}, {"t": read_spans(rows)})
    # As SQLite's chunks hand them to the read (store schema 7): each Span with its envelope, unwrapped.
    enveloped = [
        ("", (s.span, s.envelope), s.source) if isinstance(s, EncodedSpan) else (*stored_forms(s), s.source)
        for s in encoded
    ]
    _same({"t": read_spans(json_rows)}, {"t": read_spans(enveloped)})
    assert [s.decode() for s in encoded if isinstance(s, EncodedSpan)] == [
        span for span, s in zip(read_spans(rows), encoded, strict=True) if isinstance(s, EncodedSpan)
    ]
