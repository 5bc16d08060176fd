"""``encode_protobuf`` (what the receiver stores): a span kept in its own OTLP bytes reads back exactly
as the span ``decode_protobuf`` makes would after being stored as JSON, and every request gets the
same rejections, warnings and refusals; a span that needs a note is decoded instead."""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracejudge.schema import SESSION_KEYS, RawSpan, span_session_id
from tracejudge.store import EncodedSpan
from tracejudge.store._sql import span_payload
from tracejudge_collectors.otel import (
    MAX_ATTRIBUTE_DEPTH,
    MAX_VALUE_CHARS,
    TRUNCATED_MARKER,
    DecodeLimits,
    LimitError,
    OtlpDecodeError,
    decode_protobuf,
    encode_protobuf,
)

from .conftest import any_value
from .test_decode_properties import build, requests

T1 = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
S1 = bytes.fromhex("00f067aa0ba902b7")
S2 = bytes.fromhex("1111111111111111")


def _stored(span: RawSpan | EncodedSpan) -> RawSpan:
    """What the store reads back for a span it was given."""
    if isinstance(span, EncodedSpan):
        return span.decode()
    return RawSpan.model_validate_json(span_payload(span))


def _same_as_decoding(body: bytes, limits: DecodeLimits | None = None) -> list[RawSpan | EncodedSpan]:
    encoded, decoded = encode_protobuf(body, limits=limits), decode_protobuf(body, limits=limits)
    assert (encoded.rejected, encoded.errors, encoded.message) == (
        decoded.rejected,
        decoded.errors,
        decoded.message,
    )
    assert len(encoded.spans) == len(decoded.spans)
    for enc, dec in zip(encoded.spans, decoded.spans, strict=True):
        assert _stored(enc) == _stored(dec)
        if isinstance(enc, EncodedSpan):
            assert (enc.trace_id, enc.span_id, enc.parent_span_id, enc.name, enc.source) == (
                dec.trace_id,
                dec.span_id,
                dec.parent_span_id,
                dec.name,
                dec.source,
            )
            assert (enc.start_time_unix_nano, enc.end_time_unix_nano) == (
                dec.start_time_unix_nano,
                dec.end_time_unix_nano,
            )
            assert enc.session_id == span_session_id(dec)
    return encoded.spans


session_values = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6) | st.floats()
sessions = st.lists(
    st.tuples(st.sampled_from(SESSION_KEYS), session_values),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(requests, st.lists(sessions, max_size=12), st.lists(st.floats(), max_size=3))
def test_spans_in_their_own_bytes_read_back_as_their_json_would(
    generated: list[Any], extra: list[list[tuple[str, Any]]], doubles: list[float]
) -> None:
    req, _ = build(generated)
    spans = [sp for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    for sp, added in zip(spans, extra, strict=False):
        # Session keys, repeated ones too (the last wins, as in a decoded span), of every value kind.
        for key, value in added:
            sp.attributes.add(key=key, value=any_value(value))
        for x in doubles:  # NaN and infinities included: the JSON form reads them back as None
            sp.attributes.add(key="d", value=AnyValue(double_value=x))
    encoded = _same_as_decoding(req.SerializeToString())
    assert all(isinstance(s, EncodedSpan) for s in encoded)  # generated spans need no note


def _request(*, resource: dict[str, Any] | None = None) -> tuple[ExportTraceServiceRequest, Any]:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    for k, v in (resource or {"service.name": "agent"}).items():
        rs.resource.attributes.add(key=k, value=any_value(v))
    ss = rs.scope_spans.add()
    ss.scope.name = "scope"
    ok = ss.spans.add(trace_id=T1, span_id=S1, name="plain")
    ok.attributes.add(key="session.id", value=any_value("s-1"))
    return req, ss


def test_a_non_finite_double_reads_back_as_none_as_from_json() -> None:
    req, ss = _request()
    sp = ss.spans.add(trace_id=T1, span_id=S2, name="nan")
    sp.attributes.add(key="x", value=AnyValue(double_value=math.nan))
    sp.attributes.add(key="y", value=AnyValue(double_value=-math.inf))
    spans = _same_as_decoding(req.SerializeToString())
    assert _stored(spans[1]).attributes == {"x": None, "y": None}


def test_a_span_with_an_invalid_link_is_decoded_with_its_note() -> None:
    req, ss = _request()
    sp = ss.spans.add(trace_id=T1, span_id=S2, name="linked")
    sp.links.add(trace_id=bytes(16), span_id=S1)
    spans = _same_as_decoding(req.SerializeToString())
    assert [type(s) for s in spans] == [EncodedSpan, RawSpan]
    assert encode_protobuf(req.SerializeToString()).errors == [
        f"span {S2.hex()}: dropped a link with an invalid trace or span id"
    ]


def test_a_value_past_the_size_limit_is_decoded_truncated() -> None:
    req, ss = _request()
    sp = ss.spans.add(trace_id=T1, span_id=S2, name="huge")
    sp.attributes.add(key="input.value", value=any_value("x" * (MAX_VALUE_CHARS + 1)))
    spans = _same_as_decoding(req.SerializeToString())
    assert isinstance(spans[1], RawSpan)
    assert spans[1].attributes["input.value"].endswith(TRUNCATED_MARKER)


def test_a_truncated_resource_attribute_decodes_every_span_of_the_resource() -> None:
    req, ss = _request(resource={"service.name": "agent", "blob": "y" * (MAX_VALUE_CHARS + 1)})
    ss.spans.add(trace_id=T1, span_id=S2, name="second")
    spans = _same_as_decoding(req.SerializeToString())
    assert [type(s) for s in spans] == [RawSpan, RawSpan]
    assert spans[0].resource["blob"] == TRUNCATED_MARKER or spans[0].resource["blob"].endswith(
        TRUNCATED_MARKER
    )


def test_a_long_key_in_a_large_span_is_refused_as_decoding_refuses_it() -> None:
    limits = DecodeLimits(max_name_chars=64)
    req, ss = _request()
    sp = ss.spans.add(trace_id=T1, span_id=S2, name="long key")
    sp.attributes.add(key="k" * 65, value=any_value("v"))
    body = req.SerializeToString()
    with pytest.raises(LimitError) as decoded:
        decode_protobuf(body, limits=limits)
    with pytest.raises(LimitError) as encoded:
        encode_protobuf(body, limits=limits)
    assert str(encoded.value) == str(decoded.value)
    # The same span with short names but larger than the limit is kept in its bytes.
    req2, ss2 = _request()
    sp2 = ss2.spans.add(trace_id=T1, span_id=S2, name="big")
    sp2.attributes.add(key="input.value", value=any_value("v" * 500))
    assert [type(s) for s in _same_as_decoding(req2.SerializeToString(), limits)] == [
        EncodedSpan,
        EncodedSpan,
    ]


def test_bad_ids_and_times_are_rejected_as_decoding_rejects_them() -> None:
    req, ss = _request()
    ss.spans.add(trace_id=bytes(16), span_id=S2, name="zero trace")
    ss.spans.add(trace_id=T1, span_id=b"\x01", name="short span id")
    ss.spans.add(trace_id=T1, span_id=S2, parent_span_id=b"\x01\x02", name="short parent")
    late = ss.spans.add(trace_id=T1, span_id=S2, name="event past 2262")
    late.events.add(name="e", time_unix_nano=2**63)
    ss.spans.add(trace_id=T1, span_id=S2, name="past 2262", start_time_unix_nano=2**63)
    spans = _same_as_decoding(req.SerializeToString())
    assert len(spans) == 1
    assert encode_protobuf(req.SerializeToString()).rejected == 5


def test_protobuf_cannot_carry_a_value_nested_past_the_depth_limit() -> None:
    """Why a span in its own bytes needs no depth check: protobuf refuses to parse a value nested
    anywhere near MAX_ATTRIBUTE_DEPTH. (If a protobuf release lifts its limit, this fails: then the
    receiver must check depth before keeping a span in its bytes.)"""
    req, ss = _request()
    v = ss.spans[0].attributes.add(key="deep").value
    for _ in range(MAX_ATTRIBUTE_DEPTH + 1):
        v = v.array_value.values.add()
    v.string_value = "bottom"
    body = req.SerializeToString()
    with pytest.raises(OtlpDecodeError):
        decode_protobuf(body)
    with pytest.raises(OtlpDecodeError):
        encode_protobuf(body)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _fields(data: bytes) -> list[bytes]:
    """The top-level fields of a serialized message, each with its tag, in order."""
    out, i = [], 0
    while i < len(data):
        start, shift, tag = i, 0, 0
        while True:
            b = data[i]
            tag |= (b & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if b < 0x80:
                break
        wire = tag & 7
        if wire == 0:
            while data[i] & 0x80:
                i += 1
            i += 1
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            n, shift = 0, 0
            while True:
                b = data[i]
                n |= (b & 0x7F) << shift
                i, shift = i + 1, shift + 7
                if b < 0x80:
                    break
            i += n
        out.append(data[start:i])
    return out


def _sub(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _scrambled(req: ExportTraceServiceRequest) -> tuple[bytes, list[bytes]]:
    """``req`` serialized as no SDK would: each span's fields reversed and an unknown field inside,
    an unknown field between spans and before each scope, resources after their scopes. Returns the
    body and each span's bytes in it."""
    unknown = _varint(99 << 3) + _varint(7)  # field 99, a varint
    body, cut = b"", []
    for rs in req.resource_spans:
        scopes = b""
        for ss in rs.scope_spans:
            inner = unknown + _sub(1, ss.scope.SerializeToString())
            for sp in ss.spans:
                data = b"".join(reversed(_fields(sp.SerializeToString()))) + unknown
                cut.append(data)
                inner += _sub(2, data) + unknown
            scopes += _sub(2, inner)
        body += _sub(1, scopes + _sub(1, rs.resource.SerializeToString()))
    return body, cut


@settings(max_examples=60, deadline=None)
@given(requests)
def test_each_span_is_kept_in_the_bytes_it_arrived_in(generated: list[Any]) -> None:
    """Spans are cut from the body, not serialized again: the bytes stored are the bytes sent, in
    whatever order their fields came, and read back as decoding the same body does."""
    req, _ = build(generated)
    body, cut = _scrambled(req)
    encoded = _same_as_decoding(body)
    assert len(encoded) == len(cut)
    assert [s.otlp.endswith(data) for s, data in zip(encoded, cut, strict=True)] == [True] * len(cut)


def test_a_span_repeating_a_field_is_kept_as_protobuf_reads_it() -> None:
    """A field given twice in a span's bytes: the last one counts, when received and when read back."""
    req, _ = _request()
    span = req.resource_spans[0].scope_spans[0].spans[0]
    data = span.SerializeToString() + _sub(5, b"renamed")  # Span.name again
    ss = _sub(1, req.resource_spans[0].scope_spans[0].scope.SerializeToString()) + _sub(2, data)
    body = _sub(1, _sub(1, req.resource_spans[0].resource.SerializeToString()) + _sub(2, ss))
    (encoded,) = _same_as_decoding(body)
    assert isinstance(encoded, EncodedSpan)
    assert (encoded.name, encoded.decode().name, encoded.session_id) == ("renamed", "renamed", "s-1")


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ([("session.id", " s-1 ")], "s-1"),  # stripped, as from the decoded span
        ([("session.id", "  ")], None),
        ([("session.id", "  "), ("gen_ai.conversation.id", "c-1")], "c-1"),
        ([("session.id", 7)], "7"),
        ([("session.id", True)], None),
        ([("session.id", "a"), ("session.id", "b")], "b"),  # the last of a repeated key
        ([("langfuse.session.id", "l-1"), ("session.id", "s-1")], "s-1"),  # session.id first
        ([("session.id.note", "x"), ("my.session.id", "y")], None),  # the hint alone is no key
        # Another key holding the hint (ion.id) first, then a session key or none.
        ([("region.id", "r"), ("session.id", "s-1")], "s-1"),
        ([("region.id", "r"), ("gen_ai.conversation.id", "c-1")], "c-1"),
        ([("region.id", "r"), ("conversation.identity", "c")], None),
        # The span's one session.id: read without the attributes after it.
        ([("session.id", "s-1"), ("gen_ai.conversation.id", "c-1"), ("input.value", "q")], "s-1"),
        ([("gen_ai.conversation.id", "c-1"), ("session.id", " s-1 ")], "s-1"),
        ([("session.id", ""), ("gen_ai.conversation.id", "c-1")], "c-1"),  # no text: read on
        ([("session.id", 7), ("gen_ai.conversation.id", "c-1")], "7"),
        # session.id named twice in the bytes (a value, the key repeated): every attribute read.
        ([("session.id", "a"), ("note", "session.id"), ("session.id", "b")], "b"),
        ([("session.id", "a"), ("langfuse.session.id", "l-1")], "a"),
    ],
)
def test_the_session_a_span_names_is_read_as_from_the_decoded_span(
    attributes: list[tuple[str, Any]], expected: str | None
) -> None:
    req, ss = _request()
    sp = ss.spans.add(trace_id=T1, span_id=S2, name="turn")
    for key, value in attributes:
        sp.attributes.add(key=key, value=any_value(value))
    encoded = _same_as_decoding(req.SerializeToString())[1]
    assert isinstance(encoded, EncodedSpan)
    assert encoded.session_id == expected


def test_a_request_holds_one_copy_of_its_spans_bytes_at_a_time() -> None:
    """The bytes cut from the body are let go as each span is wrapped for the store: the encode's
    peak (Python's allocations, traced) stays near one copy of the spans, not the cut and the
    wrapped copies together (2x; a 64 MB request would hold 64 MB more)."""
    req, ss = _request()
    for i in range(40):
        sp = ss.spans.add(trace_id=T1, span_id=(i + 2).to_bytes(8, "big"), name="big")
        sp.attributes.add(key="input.value", value=any_value(f"{i}" * 25_000))
    body = req.SerializeToString()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        encoded = encode_protobuf(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(encoded.spans) == 41
    assert all(isinstance(s, EncodedSpan) for s in encoded.spans)
    assert peak < 1.4 * len(body), (peak, len(body))
