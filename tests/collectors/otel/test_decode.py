"""The OTLP decoder: protobuf and OTLP/JSON into RawSpan, partial success, abuse limits."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.internal.encoder import _VarintBytes
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracejudge.schema import RawSpan
from tracejudge_collectors.otel import (
    DEPTH_MARKER,
    MAX_ATTRIBUTE_DEPTH,
    MAX_VALUE_CHARS,
    TRUNCATED_MARKER,
    OtlpDecodeError,
    decode_json,
    decode_protobuf,
)

TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"

# The example of opentelemetry-proto (examples/trace.json), in its spec form: hex ids, int enums,
# int64 as strings, plus an unknown field that must be ignored.
SPEC_EXAMPLE = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}]},
            "scopeSpans": [
                {
                    "scope": {
                        "name": "my.library",
                        "version": "1.0.0",
                        "attributes": [
                            {"key": "my.scope.attribute", "value": {"stringValue": "some scope attribute"}}
                        ],
                    },
                    "spans": [
                        {
                            "traceId": "5B8EFFF798038103D269B633813FC60C",
                            "spanId": "EEE19B7EC3C1B174",
                            "parentSpanId": "EEE19B7EC3C1B173",
                            "name": "I'm a server span",
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": 1544712661000000000,
                            "kind": 2,
                            "someFutureField": {"x": 1},
                            "attributes": [
                                {"key": "my.span.attr", "value": {"stringValue": "some value"}},
                                {"key": "count", "value": {"intValue": "42"}},
                                {"key": "ratio", "value": {"doubleValue": 0.25}},
                                {"key": "ok", "value": {"boolValue": True}},
                                {"key": "blob", "value": {"bytesValue": "AAEC"}},
                                {"key": "empty", "value": {}},
                                {
                                    "key": "msgs",
                                    "value": {
                                        "arrayValue": {
                                            "values": [
                                                {
                                                    "kvlistValue": {
                                                        "values": [
                                                            {"key": "role", "value": {"stringValue": "user"}},
                                                            {"key": "n", "value": {"intValue": 3}},
                                                        ]
                                                    }
                                                }
                                            ]
                                        }
                                    },
                                },
                            ],
                            "events": [
                                {
                                    "name": "db.query.result",
                                    "timeUnixNano": "1544712660500000000",
                                    "attributes": [{"key": "id", "value": {"stringValue": "doc-7"}}],
                                }
                            ],
                            "links": [
                                {"traceId": "5b8efff798038103d269b633813fc60d", "spanId": "eee19b7ec3c1b175"}
                            ],
                            "status": {"code": 2, "message": "boom"},
                        }
                    ],
                }
            ],
        }
    ]
}


def test_json_spec_example_decodes_every_field() -> None:
    result = decode_json(json.dumps(SPEC_EXAMPLE))
    assert result.rejected == 0
    assert result.errors == []
    (span,) = result.spans
    assert span.trace_id == "5b8efff798038103d269b633813fc60c"
    assert span.span_id == "eee19b7ec3c1b174"
    assert span.parent_span_id == "eee19b7ec3c1b173"
    assert span.kind == 2
    assert span.start_time_unix_nano == 1544712660000000000
    assert span.end_time_unix_nano == 1544712661000000000
    assert span.attributes == {
        "my.span.attr": "some value",
        "count": 42,
        "ratio": 0.25,
        "ok": True,
        "blob": "AAEC",
        "empty": None,
        "msgs": [{"role": "user", "n": 3}],
    }
    assert span.resource == {"service.name": "my.service"}
    assert (span.scope_name, span.scope_version) == ("my.library", "1.0.0")
    assert span.events[0].name == "db.query.result"
    assert span.events[0].time_unix_nano == 1544712660500000000
    assert span.events[0].attributes == {"id": "doc-7"}
    assert span.links[0].trace_id == "5b8efff798038103d269b633813fc60d"
    assert (span.status_code, span.status_message) == (2, "boom")
    assert span.source == "otlp"


def test_protobuf_and_json_of_the_same_request_agree() -> None:
    # The protobuf runtime's own JSON parser needs base64 ids: convert, parse, re-encode as binary.
    doc = json.loads(json.dumps(SPEC_EXAMPLE))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
                for ln in sp["links"]:
                    for key in ("traceId", "spanId"):
                        ln[key] = base64.b64encode(bytes.fromhex(ln[key])).decode()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    msg = json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    from_pb = decode_protobuf(msg.SerializeToString())
    from_json = decode_json(json.dumps(SPEC_EXAMPLE).encode())
    assert from_pb == from_json


def test_the_counts_an_sdk_dropped_are_kept_from_protobuf_and_json() -> None:
    # OTLP/JSON writes uint32 as a number; some encoders quote it. Absent, a count is 0.
    doc = json.loads(json.dumps(SPEC_EXAMPLE))
    sp = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    sp.update(droppedAttributesCount=3, droppedEventsCount="2", droppedLinksCount=1)
    sp["events"][0]["droppedAttributesCount"] = 4
    (from_json,) = decode_json(json.dumps(doc)).spans
    counts = (
        from_json.dropped_attributes_count,
        from_json.dropped_events_count,
        from_json.dropped_links_count,
    )
    assert counts == (3, 2, 1)
    assert from_json.events[0].dropped_attributes_count == 4
    for key in ("traceId", "spanId", "parentSpanId"):
        sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    for ln in sp["links"]:
        for key in ("traceId", "spanId"):
            ln[key] = base64.b64encode(bytes.fromhex(ln[key])).decode()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    msg = json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    assert decode_protobuf(msg.SerializeToString()).spans == [from_json]
    (plain,) = decode_json(json.dumps(SPEC_EXAMPLE)).spans
    assert (
        plain.dropped_attributes_count,
        plain.dropped_events_count,
        plain.events[0].dropped_attributes_count,
    ) == (
        0,
        0,
        0,
    )


def test_json_hex_ids_are_not_base64_decoded() -> None:
    # json_format.Parse would read this 32-char hex id as base64 (24 wrong bytes); we must not.
    body = {
        "resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": TRACE_HEX, "spanId": "00f067aa0ba902b7"}]}]}]
    }
    (span,) = decode_json(json.dumps(body)).spans
    assert span.trace_id == TRACE_HEX


def test_json_base64_ids_and_enum_names_are_accepted() -> None:
    tid = base64.b64encode(bytes.fromhex(TRACE_HEX)).decode()
    sid = base64.b64encode(bytes.fromhex("00f067aa0ba902b7")).decode()
    body = {
        "resource_spans": [
            {
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "trace_id": tid,
                                "span_id": sid,
                                "kind": "SPAN_KIND_CLIENT",
                                "status": {"code": "STATUS_CODE_ERROR"},
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (span,) = decode_json(json.dumps(body)).spans
    assert (span.trace_id, span.span_id, span.kind, span.status_code) == (TRACE_HEX, "00f067aa0ba902b7", 3, 2)


def _json_span(**fields: Any) -> dict[str, Any]:
    span = {"traceId": TRACE_HEX, "spanId": "00f067aa0ba902b7", "name": "s"}
    span.update(fields)
    return span


def _json_body(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"traceId": "00000000000000000000000000000000"}, "all zero"),
        ({"traceId": "4bf92f35"}, "traceId must be 32 hex"),
        ({"traceId": "zz" * 16}, "traceId must be 32 hex"),
        ({"spanId": "0000000000000000"}, "all zero"),
        ({"spanId": None}, "spanId must be a hex string"),
        ({"parentSpanId": "abc"}, "parentSpanId"),
        ({"startTimeUnixNano": "soon"}, "startTimeUnixNano"),
        ({"startTimeUnixNano": str(2**64)}, "out of range"),
        ({"kind": "sideways"}, "kind"),
        ({"attributes": [{"key": 1, "value": {"stringValue": "x"}}]}, "key must be a string"),
        ({"attributes": [{"key": "n", "value": {"intValue": "1e3"}}]}, "intValue"),
        ({"attributes": "not a list"}, "attributes must be a list"),
        ({"events": [{"name": 3}]}, "event name"),
    ],
)
def test_json_bad_span_is_rejected_and_the_rest_kept(fields: dict[str, Any], reason: str) -> None:
    good = _json_span(spanId="1111111111111111")
    result = decode_json(_json_body(_json_span(**fields), good))
    assert result.rejected == 1
    assert [s.span_id for s in result.spans] == ["1111111111111111"]
    assert reason in result.errors[0]
    assert result.errors[0].startswith("rejected span")


def test_protobuf_bad_ids_are_rejected_and_the_rest_kept(
    make_request: Callable[..., Any], good_span: Callable[..., dict[str, Any]]
) -> None:
    req = make_request(
        [
            good_span(1),
            good_span(2, trace_id=b"\x01" * 8),
            good_span(3, trace_id=bytes(16)),
            good_span(0),  # span id all zero
            good_span(5, parent_span_id=b"\x01\x02"),
            good_span(6, parent=1),
        ]
    )
    result = decode_protobuf(req.SerializeToString())
    assert result.rejected == 4
    assert [s.span_id for s in result.spans] == ["0000000000000001", "0000000000000006"]
    assert result.spans[1].parent_span_id == "0000000000000001"
    joined = result.message
    assert "trace id must be 16 bytes and not all zero (got 8 bytes)" in joined
    assert "span id must be 8 bytes and not all zero" in joined
    assert "parent span id must be 8 bytes" in joined


def test_protobuf_all_zero_parent_means_root(
    make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    req = make_request([good_span(1, parent_span_id=bytes(8))])
    (span,) = decode_protobuf(req.SerializeToString()).spans
    assert span.parent_span_id is None


def test_protobuf_any_values_become_plain_json(
    make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    attrs = {
        "s": "text",
        "b": False,
        "i": -(2**63),
        "d": 1.5,
        "raw": b"\x00\xff",
        "arr": [1, "two", [3.0]],
        "kv": {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
    }
    req = make_request(
        [good_span(1, attributes=attrs)], resource={"service.name": "agent", "deploy": {"env": "prod"}}
    )
    (span,) = decode_protobuf(req.SerializeToString(), source="file").spans
    assert span.attributes == {**attrs, "raw": base64.b64encode(b"\x00\xff").decode()}
    assert span.resource == {"service.name": "agent", "deploy": {"env": "prod"}}
    assert (span.scope_name, span.scope_version, span.source) == ("tests", "1.0", "file")
    assert isinstance(span, RawSpan)


def _nested_json(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


def test_json_attribute_nested_beyond_the_limit_is_truncated_with_a_marker() -> None:
    body = _json_body(
        _json_span(attributes=[{"key": "deep", "value": _nested_json(MAX_ATTRIBUTE_DEPTH + 20)}])
    )
    result = decode_json(body)
    assert result.rejected == 0
    (span,) = result.spans
    value = span.attributes["deep"]
    depth = 0
    while isinstance(value, list):
        (value,) = value
        depth += 1
    assert depth == MAX_ATTRIBUTE_DEPTH
    assert value == DEPTH_MARKER
    assert "nested deeper than 64 levels" in result.message


def test_json_attribute_within_the_depth_limit_is_kept_whole() -> None:
    (span,) = decode_json(_json_body(_json_span(attributes=[{"key": "d", "value": _nested_json(10)}]))).spans
    value = span.attributes["d"]
    for _ in range(10):
        (value,) = value
    assert value == "bottom"


def test_json_nested_past_the_parser_limit_is_a_clear_error() -> None:
    body = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(OtlpDecodeError, match="nested too deeply"):
        decode_json(body)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (the protobuf runtime refuses to build messages this deep)."""
    return _VarintBytes(number << 3 | 2) + _VarintBytes(len(payload)) + payload


def deep_protobuf_request(
    make_request: Callable[..., Any], good_span: Callable[..., Any], depth: int
) -> bytes:
    value = AnyValue(string_value="bottom").SerializeToString()
    for _ in range(depth):
        value = _field(5, _field(1, value))  # AnyValue.array_value -> ArrayValue.values
    span = Span()
    span.ParseFromString(
        make_request([good_span(1)]).resource_spans[0].scope_spans[0].spans[0].SerializeToString()
    )
    span_bytes = span.SerializeToString() + _field(9, _field(1, b"deep") + _field(2, value))
    return _field(1, _field(2, _field(2, span_bytes)))


def test_protobuf_nested_past_the_parser_limit_is_a_clear_error(
    make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    with pytest.raises(OtlpDecodeError, match="not a valid OTLP ExportTraceServiceRequest") as info:
        decode_protobuf(deep_protobuf_request(make_request, good_span, 200))
    assert "nested" in (info.value.hint or "")


def test_huge_string_attribute_is_truncated_with_a_marker(
    make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    huge = "x" * (MAX_VALUE_CHARS + 10)
    req = make_request([good_span(1, attributes={"input.value": huge, "small": "ok"})])
    for result in (
        decode_protobuf(req.SerializeToString()),
        decode_json(
            _json_body(_json_span(attributes=[{"key": "input.value", "value": {"stringValue": huge}}]))
        ),
    ):
        (span,) = result.spans
        value = span.attributes["input.value"]
        assert value.endswith(TRUNCATED_MARKER)
        assert len(value) == MAX_VALUE_CHARS + len(TRUNCATED_MARKER)
        assert result.rejected == 0
        assert "input.value" in result.message
        assert "truncated" in result.message


def test_huge_structured_attribute_becomes_the_marker(
    make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    chunk = "y" * (MAX_VALUE_CHARS // 4)
    req = make_request([good_span(1, attributes={"docs": [chunk] * 5, "fine": [chunk]})])
    (span,) = decode_protobuf(req.SerializeToString()).spans
    assert span.attributes["docs"] == TRUNCATED_MARKER
    assert span.attributes["fine"] == [chunk]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'"x"',
        b'{"resourceSpans": 5}',
        b'{"resourceSpans": [5]}',
        b"\xff\xfe\x00",
        b'{"resourceSpans": [{"scopeSpans": {}}]}',
    ],
)
def test_json_unreadable_request_raises_decode_error(body: bytes) -> None:
    with pytest.raises(OtlpDecodeError) as info:
        decode_json(body)
    assert info.value.hint


def test_json_empty_request_is_full_success() -> None:
    result = decode_json(b"{}")
    assert (result.spans, result.rejected, result.errors) == ([], 0, [])


def test_json_lone_surrogates_are_replaced_not_fatal() -> None:
    body = _json_body(_json_span(attributes=[{"key": "k\\ud800", "value": {"stringValue": "a\\udc00b"}}]))
    body = body.replace(b"\\\\u", b"\\u")
    (span,) = decode_json(body).spans
    assert span.attributes == {"k\ufffd": "a\ufffdb"}
    span.model_dump_json()  # encodable


def test_many_rejections_keep_the_error_list_short() -> None:
    spans = [_json_span(traceId="00" * 16, spanId=f"{i + 1:016x}") for i in range(500)]
    result = decode_json(_json_body(*spans))
    assert result.rejected == 500
    assert len(result.errors) == 21
    assert result.errors[-1] == "… and 480 more"


def test_protobuf_garbage_raises_decode_error_with_hint() -> None:
    with pytest.raises(OtlpDecodeError) as info:
        decode_protobuf(b"\x0a\xff\xff\xff\xff\x0f")
    assert "protobuf" in info.value.message
    assert info.value.exit_code == 2


def test_invalid_links_are_dropped_but_the_span_kept() -> None:
    body = _json_body(
        _json_span(
            links=[
                {"traceId": "00" * 16, "spanId": "00" * 8},
                {"traceId": TRACE_HEX, "spanId": "1111111111111111"},
            ]
        )
    )
    result = decode_json(body)
    (span,) = result.spans
    assert [ln.span_id for ln in span.links] == ["1111111111111111"]
    assert "dropped a link" in result.message


def test_protobuf_nested_within_the_parser_limit_is_kept(
    make_request: Callable[..., Any], good_span: Callable[..., Any]
) -> None:
    (span,) = decode_protobuf(deep_protobuf_request(make_request, good_span, 40)).spans
    value = span.attributes["deep"]
    for _ in range(40):
        (value,) = value
    assert value == "bottom"
