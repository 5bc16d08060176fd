"""Property tests of the decoder: it never fails with anything but its own error, and protobuf
and OTLP/JSON encodings of generated requests decode to exactly the spans they were built from."""

from __future__ import annotations

import base64
import contextlib
import json
import re
from typing import Any

from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracejudge.schema import RawSpan, SpanEvent, SpanLink
from tracejudge_collectors.otel import DecodeResult, OtlpDecodeError, decode_json, decode_protobuf

from .conftest import any_value

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TIME = st.integers(min_value=0, max_value=2**63 - 1)
scalars = (
    st.none()
    | st.booleans()
    | INT64
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
attributes = st.dictionaries(st.text(max_size=12), values, max_size=6)
trace_ids = st.binary(min_size=16, max_size=16).filter(any)
span_ids = st.binary(min_size=8, max_size=8).filter(any)

spans = st.fixed_dictionaries(
    {
        "trace_id": trace_ids,
        "span_id": span_ids,
        "parent_span_id": st.none() | span_ids,
        "name": st.text(max_size=20),
        "kind": st.integers(min_value=0, max_value=5),
        "start": TIME,
        "end": TIME,
        "attributes": attributes,
        "events": st.lists(st.tuples(st.text(max_size=10), TIME, attributes), max_size=3),
        "links": st.lists(st.tuples(trace_ids, span_ids, attributes), max_size=2),
        "status": st.tuples(st.integers(min_value=0, max_value=2), st.text(max_size=10)),
    }
)
requests = st.lists(
    st.tuples(attributes, st.text(max_size=10), st.text(max_size=6), st.lists(spans, max_size=4)),
    min_size=0,
    max_size=3,
)


def _plain(value: Any) -> Any:
    """What the decoder must turn a generated value into."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_plain(x) for x in value]
    if isinstance(value, dict):
        return {k: _plain(x) for k, x in value.items()}
    return value


def _attrs(target: Any, attrs: dict[str, Any]) -> None:
    for k, x in attrs.items():
        target.add(key=k, value=any_value(x))


def build(generated: list[Any]) -> tuple[ExportTraceServiceRequest, list[RawSpan]]:
    req = ExportTraceServiceRequest()
    expected: list[RawSpan] = []
    for resource, scope_name, scope_version, span_dicts in generated:
        rs = req.resource_spans.add()
        _attrs(rs.resource.attributes, resource)
        ss = rs.scope_spans.add()
        ss.scope.name = scope_name
        ss.scope.version = scope_version
        for d in span_dicts:
            sp = ss.spans.add(
                trace_id=d["trace_id"],
                span_id=d["span_id"],
                parent_span_id=d["parent_span_id"] or b"",
                name=d["name"],
                kind=d["kind"],
                start_time_unix_nano=d["start"],
                end_time_unix_nano=d["end"],
            )
            _attrs(sp.attributes, d["attributes"])
            for name, t, attrs in d["events"]:
                ev = sp.events.add(name=name, time_unix_nano=t)
                _attrs(ev.attributes, attrs)
            for tid, sid, attrs in d["links"]:
                ln = sp.links.add(trace_id=tid, span_id=sid)
                _attrs(ln.attributes, attrs)
            sp.status.code = d["status"][0]
            sp.status.message = d["status"][1]
            expected.append(
                RawSpan(
                    trace_id=d["trace_id"].hex(),
                    span_id=d["span_id"].hex(),
                    parent_span_id=d["parent_span_id"].hex() if d["parent_span_id"] else None,
                    name=d["name"],
                    kind=d["kind"],
                    start_time_unix_nano=d["start"],
                    end_time_unix_nano=d["end"],
                    attributes=_plain(d["attributes"]),
                    events=tuple(
                        SpanEvent(name=n, time_unix_nano=t, attributes=_plain(a)) for n, t, a in d["events"]
                    ),
                    links=tuple(
                        SpanLink(trace_id=tid.hex(), span_id=sid.hex(), attributes=_plain(a))
                        for tid, sid, a in d["links"]
                    ),
                    status_code=d["status"][0],
                    status_message=d["status"][1],
                    resource=_plain(resource),
                    scope_name=scope_name,
                    scope_version=scope_version,
                )
            )
    return req, expected


def to_otlp_json(req: ExportTraceServiceRequest, *, hex_ids: bool = True) -> str:
    """OTLP/JSON: the protobuf JSON mapping with integer enums and (per OTLP) hex ids."""
    doc = json_format.MessageToDict(req, use_integers_for_enums=True)
    if hex_ids:
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for sp in ss.get("spans", []):
                    for owner in [sp, *sp.get("links", [])]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in owner:
                                owner[key] = base64.b64decode(owner[key]).hex()
    return json.dumps(doc)


@settings(max_examples=150, deadline=None)
@given(requests)
def test_protobuf_round_trip(generated: list[Any]) -> None:
    req, expected = build(generated)
    result = decode_protobuf(req.SerializeToString())
    assert result.rejected == 0
    assert result.errors == []
    assert result.spans == expected


@settings(max_examples=150, deadline=None)
@given(requests, st.booleans())
def test_otlp_json_round_trip(generated: list[Any], hex_ids: bool) -> None:
    req, expected = build(generated)
    result = decode_json(to_otlp_json(req, hex_ids=hex_ids))
    assert result.rejected == 0
    assert result.errors == []
    assert result.spans == expected


_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")


def _check(result: DecodeResult) -> None:
    for span in result.spans:
        assert _HEX32.fullmatch(span.trace_id)
        assert span.trace_id != "0" * 32
        assert _HEX16.fullmatch(span.span_id)
        assert span.span_id != "0" * 16
        assert span.parent_span_id is None or _HEX16.fullmatch(span.parent_span_id)
        assert 0 <= span.start_time_unix_nano < 2**63
        span.model_dump_json()  # storable: encodable as UTF-8 JSON


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_the_decoder_error(body: bytes) -> None:
    for decode in (decode_protobuf, decode_json):
        with contextlib.suppress(OtlpDecodeError):
            _check(decode(body))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=15,
)
otlp_keys = st.sampled_from(
    [
        "traceId",
        "spanId",
        "parentSpanId",
        "name",
        "kind",
        "startTimeUnixNano",
        "attributes",
        "events",
        "links",
        "status",
        "key",
        "value",
        "stringValue",
        "intValue",
        "doubleValue",
        "arrayValue",
        "kvlistValue",
        "values",
        "bytesValue",
        "boolValue",
        "code",
        "timeUnixNano",
    ]
)
otlp_ish = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(otlp_keys, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(otlp_ish, st.sampled_from(["spans", "scope", "resource", "top"]))
def test_random_json_structures_only_raise_the_decoder_error(junk: Any, where: str) -> None:
    if where == "spans":
        doc: Any = {"resourceSpans": [{"scopeSpans": [{"spans": [junk]}]}]}
    elif where == "scope":
        doc = {
            "resourceSpans": [
                {"scopeSpans": [{"scope": junk, "spans": [{"traceId": "1" * 32, "spanId": "1" * 16}]}]}
            ]
        }
    elif where == "resource":
        doc = {
            "resourceSpans": [
                {"resource": junk, "scopeSpans": [{"spans": [{"traceId": "1" * 32, "spanId": "1" * 16}]}]}
            ]
        }
    else:
        doc = junk
    with contextlib.suppress(OtlpDecodeError):
        _check(decode_json(json.dumps(doc)))


@settings(max_examples=300, deadline=None)
@given(requests, st.data())
def test_corrupted_protobuf_only_raises_the_decoder_error(generated: list[Any], data: st.DataObject) -> None:
    body = bytearray(build(generated)[0].SerializeToString())
    if body:
        for _ in range(data.draw(st.integers(min_value=1, max_value=5))):
            i = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
            body[i] = data.draw(st.integers(min_value=0, max_value=255))
        body = body[: data.draw(st.integers(min_value=0, max_value=len(body)))]
    with contextlib.suppress(OtlpDecodeError):
        _check(decode_protobuf(bytes(body)))
