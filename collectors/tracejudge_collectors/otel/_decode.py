"""Decode OTLP trace payloads (protobuf and OTLP/JSON) into :class:`RawSpan` records.

Validation is per span: a span with a bad trace or span id (or another malformed field) is
*rejected* — counted, with the reason recorded — while the rest of the request is kept, which is
OTLP's partial success. Only a payload that cannot be read at all raises :class:`OtlpDecodeError`.

Attribute values are truncated with a marker past the abuse limits of :mod:`._otlp`; each
truncation is reported in ``DecodeResult.errors`` (a warning; ``rejected`` is not increased).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracejudge.schema import RawSpan, SpanEvent, SpanLink, SpanSource, built_span_record
from tracejudge.store import EncodedSpan, LogEvent, OtlpEnvelope, otlp_session_id
from tracejudge_collectors.otel._otlp import (
    INT64_MAX,
    MAX_VALUE_CHARS,
    ZERO_SPAN,
    ZERO_TRACE,
    DecodeLimits,
    Notes,
    OtlpDecodeError,
    SpanError,
    attrs_json,
    attrs_pb,
    check_name,
    count_json,
    enum_json,
    get,
    id_json,
    int64_json,
    load_json_body,
    parse_pb,
    short,
    str_json,
    too_many,
)
from tracejudge_collectors.otel._proto import ExportTraceServiceRequest, span_bytes

__all__ = [
    "DecodeResult",
    "EncodeResult",
    "decode_json",
    "decode_json_object",
    "decode_protobuf",
    "encode_protobuf",
]

_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


@dataclass(frozen=True, slots=True)
class DecodeResult:
    """What one OTLP request (or file chunk) decoded to."""

    spans: list[RawSpan]
    """Spans that passed validation, in request order."""
    rejected: int = 0
    """Spans dropped because they were invalid (bad ids, malformed fields)."""
    errors: list[str] = field(default_factory=list)
    """Why spans were rejected, and warnings about truncated values (at most 20 lines plus a count)."""
    log_events: list[LogEvent] = field(default_factory=list)
    """Log records with a span context, when a file held an OTLP/JSON log request (``rejected`` and
    ``errors`` then count and explain rejected records too)."""

    @property
    def message(self) -> str:
        """The errors as one line, for OTLP's ``partial_success.error_message``."""
        return "; ".join(self.errors)


def _result(notes: Notes, spans: list[RawSpan]) -> DecodeResult:
    return DecodeResult(spans=spans, rejected=notes.rejected, errors=notes.errors)


# ---------------------------------------------------------------- protobuf


def decode_protobuf(
    body: bytes, *, source: SpanSource = "otlp", limits: DecodeLimits | None = None
) -> DecodeResult:
    """Decode a binary ``ExportTraceServiceRequest``.

    Raises :class:`OtlpDecodeError` when the body is not a readable message (:class:`LimitError`
    when it is beyond ``limits``); bad spans are counted in ``rejected`` instead.
    """
    notes = Notes(limits)
    spans: list[RawSpan] = []
    for _rs, resource, _clean, scopes in _walk_pb(body, notes):
        for ss, _scope in scopes:
            for sp in ss.spans:
                span = _span_pb(sp, resource, ss.scope, source, notes)
                if span is not None:
                    spans.append(span)
    return _result(notes, spans)


@dataclass(frozen=True, slots=True)
class EncodeResult:
    """What one OTLP protobuf request decoded to for the store (:func:`encode_protobuf`)."""

    spans: list[RawSpan | EncodedSpan]
    """Spans that passed validation, in request order: in their own OTLP bytes, or decoded."""
    rejected: int = 0
    """Spans dropped because they were invalid, as in :class:`DecodeResult`."""
    errors: list[str] = field(default_factory=list)
    """Why spans were rejected, and warnings about truncated values, as in :class:`DecodeResult`."""

    @property
    def message(self) -> str:
        """The errors as one line, for OTLP's ``partial_success.error_message``."""
        return "; ".join(self.errors)


def encode_protobuf(
    body: bytes, *, source: SpanSource = "otlp", limits: DecodeLimits | None = None
) -> EncodeResult:
    """:func:`decode_protobuf` for the store: a span that decodes without a note (sizes within the
    limits, link ids valid: checked without decoding its attributes) stays in its own OTLP bytes,
    an :class:`EncodedSpan` whose ``decode()`` is the span as stored and read back; the others are
    decoded as :func:`decode_protobuf` does. Same rejections, errors and refusals."""
    notes = Notes(limits)
    spans: list[RawSpan | EncodedSpan] = []
    # Each span's own bytes, cut from the body rather than serialized again from the parsed span.
    cut = span_bytes(body)
    for r, (rs, resource, clean, scopes) in enumerate(_walk_pb(body, notes, encode=True)):
        res_bytes = rs.resource.SerializeToString()
        for s, (ss, scope_bytes) in enumerate(scopes):
            envelope = OtlpEnvelope(res_bytes, scope_bytes)
            # A truncated resource attribute must be stored truncated: then every span is decoded.
            datas = _span_datas(cut, r, s, ss.spans) if clean else None
            for i, sp in enumerate(ss.spans):
                span: RawSpan | EncodedSpan | None = None
                if datas is not None:
                    span = _encode_pb(sp, datas[i], envelope, source, notes.limits)
                    # Kept by the span (or not needed): the list lets go of its bytes as the spans are
                    # made, so that a request's peak memory holds one copy of its spans' bytes.
                    datas[i] = b""
                if span is None:
                    span = _span_pb(sp, resource, ss.scope, source, notes)
                if span is not None:
                    spans.append(span)
    return EncodeResult(spans=spans, rejected=notes.rejected, errors=notes.errors)


def _walk_pb(
    body: bytes, notes: Notes, *, encode: bool = False
) -> Iterator[tuple[Any, dict[str, Any], bool, list[tuple[Any, bytes]]]]:
    """Each ``ResourceSpans`` of the request with its decoded resource attributes, whether decoding
    them left no note, and its scopes (each with its serialized scope when ``encode``). Refuses a
    request over the span limit or with an overlong scope name."""
    req = parse_pb(
        ExportTraceServiceRequest(),
        body,
        hint="send an OTLP trace export request; a truncated body, a JSON body sent as "
        "application/x-protobuf, or attribute values nested over ~45 levels all cause this",
    )
    count = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    if count > notes.limits.max_spans:
        raise too_many(count, notes.limits, "spans")
    for rs in req.resource_spans:
        noted = notes.count
        resource = attrs_pb(rs.resource.attributes, notes, "resource")
        scopes = []
        for ss in rs.scope_spans:
            check_name(ss.scope.name, notes.limits, "a scope name")
            scopes.append((ss, ss.scope.SerializeToString() if encode else b""))
        yield rs, resource, notes.count == noted, scopes


def _span_datas(cut: list[list[list[bytes]]] | None, r: int, s: int, parsed: Sequence[Any]) -> list[bytes]:
    """The bytes of the spans ``parsed`` of resource ``r``, scope ``s``: as cut from the body, or
    (should the cut not line up with the parsed request) serialized again."""
    if cut is not None and r < len(cut) and s < len(cut[r]) and len(cut[r][s]) == len(parsed):
        datas, cut[r][s] = cut[r][s], []  # the caller's alone, to free as it goes
        return datas
    return [sp.SerializeToString() for sp in parsed]


def _encode_pb(
    sp: Any, data: bytes, envelope: OtlpEnvelope, source: SpanSource, limits: DecodeLimits
) -> EncodedSpan | None:
    """``sp`` in its own bytes ``data`` (which parse to it), when :func:`_span_pb` would decode it
    without rejecting it, refusing the request or noting anything (else None) -- decided from its
    ids, times and sizes, without decoding its attributes. (A value nested past MAX_ATTRIBUTE_DEPTH
    cannot be here: protobuf refuses to parse one ~45 levels deep.)"""
    tid, sid, psid = sp.trace_id, sp.span_id, sp.parent_span_id
    start, end = sp.start_time_unix_nano, sp.end_time_unix_nano
    if not _ids_ok(tid, sid, psid) or start > INT64_MAX or end > INT64_MAX:
        return None
    # Every value's bytes lie within ``data``, so its length bounds theirs.
    if not _fits(sp, len(data), limits):
        return None
    # In field order, positionally: keywords cost a tenth of the tuple's construction.
    return _encoded_span(
        (
            tid.hex(),
            sid.hex(),
            psid.hex() if psid and psid != ZERO_SPAN else None,
            sp.name,
            start,
            end,
            source,
            otlp_session_id(sp, data),
            data,
            envelope,
        )
    )


_encoded_span = EncodedSpan._make


def _fits(sp: Any, size: int, limits: DecodeLimits) -> bool:
    """Are the span's values, names and event times within the limits, and its links' ids valid?"""
    if size > MAX_VALUE_CHARS:  # no value is longer than the span (a character takes >= 1 byte)
        return False
    if size > limits.max_name_chars and not _names_fit(sp, limits.max_name_chars):
        return False
    events, links = sp.events, sp.links
    if events and any(ev.time_unix_nano > INT64_MAX for ev in events):
        return False
    return not links or all(_ids_ok(ln.trace_id, ln.span_id, b"") for ln in links)


def _ids_ok(tid: bytes, sid: bytes, psid: bytes) -> bool:
    return len(tid) == 16 and tid != ZERO_TRACE and len(sid) == 8 and sid != ZERO_SPAN and len(psid) in (0, 8)


def _names_fit(sp: Any, most: int) -> bool:
    """Are the span's name, event names and attribute keys (its own, its events' and links') within
    ``most`` characters?"""
    names = [sp.name, *(ev.name for ev in sp.events)]
    for kvs in (sp.attributes, *(ev.attributes for ev in sp.events), *(ln.attributes for ln in sp.links)):
        names.extend(kv.key for kv in kvs)
    return all(len(n) <= most for n in names)


def _check_pb(sp: Any) -> None:
    """Raise :class:`SpanError` when the span's ids or times are unusable."""
    tid, sid, psid = sp.trace_id, sp.span_id, sp.parent_span_id
    if len(tid) != 16 or tid == ZERO_TRACE:
        raise SpanError(f"trace id must be 16 bytes and not all zero (got {len(tid)} bytes)")
    if len(sid) != 8 or sid == ZERO_SPAN:
        raise SpanError(f"span id must be 8 bytes and not all zero (got {len(sid)} bytes)")
    if psid and len(psid) != 8:
        raise SpanError(f"parent span id must be 8 bytes or empty (got {len(psid)} bytes)")
    if sp.start_time_unix_nano > INT64_MAX or sp.end_time_unix_nano > INT64_MAX:
        raise SpanError("start/end time beyond the year 2262")


def _span_pb(
    sp: Any, resource: dict[str, Any], scope: Any, source: SpanSource, notes: Notes
) -> RawSpan | None:
    try:
        _check_pb(sp)
        psid = sp.parent_span_id
        label = "span " + sp.span_id.hex()
        status = sp.status
        # Every value below has its field's type already (protobuf scalars, decoded attributes), so
        # pydantic's validation would only re-check them; it cost more than the rest of the decode.
        return built_span_record(
            RawSpan,
            {
                "trace_id": sp.trace_id.hex(),
                "span_id": sp.span_id.hex(),
                "parent_span_id": psid.hex() if psid and psid != ZERO_SPAN else None,
                "name": _name_pb(sp.name, f"{label}: the name", notes),
                "kind": sp.kind,
                "start_time_unix_nano": sp.start_time_unix_nano,
                "end_time_unix_nano": sp.end_time_unix_nano,
                "attributes": attrs_pb(sp.attributes, notes, label),
                "events": _events_pb(sp.events, notes, label) if sp.events else (),
                "links": _links_pb(sp.links, notes, label) if sp.links else (),
                "status_code": status.code,
                "status_message": status.message,
                # A copy each, as validation made: spans of one resource must not share a mutable dict.
                "resource": dict(resource),
                "scope_name": scope.name,
                "scope_version": scope.version,
                "source": source,
                "dropped_attributes_count": sp.dropped_attributes_count,
                "dropped_events_count": sp.dropped_events_count,
                "dropped_links_count": sp.dropped_links_count,
            },
        )
    except (SpanError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        where = f"span {sp.span_id.hex() or '<empty>'} of trace {sp.trace_id.hex() or '<empty>'}"
        notes.reject(where, str(exc) or type(exc).__name__)
        return None


def _events_pb(events: Iterable[Any], notes: Notes, label: str) -> tuple[SpanEvent, ...]:
    return tuple(
        built_span_record(
            SpanEvent,
            {
                "name": _name_pb(ev.name, f"{label}: the event name", notes),
                "time_unix_nano": _time_pb(ev.time_unix_nano),
                "attributes": attrs_pb(ev.attributes, notes, label),
                "dropped_attributes_count": ev.dropped_attributes_count,
                "log_record": False,  # a span's own event
            },
        )
        for ev in events
    )


def _time_pb(ns: int) -> int:
    if ns > INT64_MAX:
        raise SpanError("event time beyond the year 2262")
    return ns


def _links_pb(links: Iterable[Any], notes: Notes, label: str) -> tuple[SpanLink, ...]:
    out: list[SpanLink] = []
    for ln in links:
        tid, sid = ln.trace_id, ln.span_id
        if len(tid) != 16 or tid == ZERO_TRACE or len(sid) != 8 or sid == ZERO_SPAN:
            # A dangling link says nothing usable; the span itself is fine.
            notes.add(f"{label}: dropped a link with an invalid trace or span id")
            continue
        out.append(
            built_span_record(
                SpanLink,
                {
                    "trace_id": tid.hex(),
                    "span_id": sid.hex(),
                    "attributes": attrs_pb(ln.attributes, notes, label),
                },
            )
        )
    return tuple(out)


# ---------------------------------------------------------------- OTLP/JSON


def decode_json(
    body: bytes | str, *, source: SpanSource = "otlp", limits: DecodeLimits | None = None
) -> DecodeResult:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest`` (hex ids, integer enums, int64 as strings).

    Lenient where the protobuf JSON mapping is: snake_case keys, enum names, numbers for int64 and
    base64 ids are accepted too. Unknown fields are ignored.
    """
    if isinstance(body, str):
        # Lone surrogates pass through to load_json_body, which replaces them.
        body = body.encode("utf-8", "surrogatepass")
    obj = load_json_body(body, request="ExportTraceServiceRequest", limits=limits)
    return decode_json_object(obj, source=source, limits=limits)


def decode_json_object(
    obj: Any, *, source: SpanSource = "otlp", limits: DecodeLimits | None = None
) -> DecodeResult:
    """Decode an already parsed OTLP/JSON request (see :func:`decode_json`)."""
    if not isinstance(obj, dict):
        raise OtlpDecodeError(
            f"an OTLP/JSON request must be a JSON object, got {type(obj).__name__}",
            hint='send {"resourceSpans": [...]}',
        )
    notes = Notes(limits)
    count = count_json(obj, ("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans",))
    if count > notes.limits.max_spans:
        raise too_many(count, notes.limits, "spans")
    spans: list[RawSpan] = []
    for rs in _list(obj, "resourceSpans", "resource_spans", "request"):
        if not isinstance(rs, dict):
            raise _bad("each resourceSpans entry must be an object")
        resource, resource_error = _resource_json(rs, notes)
        for ss in _list(rs, "scopeSpans", "scope_spans", "resourceSpans entry"):
            scope_name, scope_version, error = _scope_json(ss, notes)
            error = resource_error or error
            for sp in _list(ss, "spans", "spans", "scopeSpans entry"):
                if error is not None:
                    notes.reject(_where_json(sp), error)
                    continue
                span = _span_json(sp, resource, scope_name, scope_version, source, notes)
                if span is not None:
                    spans.append(span)
    return _result(notes, spans)


def _resource_json(rs: dict[str, Any], notes: Notes) -> tuple[dict[str, Any], str | None]:
    """A resourceSpans entry's resource attributes, or why its spans are rejected."""
    res = get(rs, "resource", "resource")
    try:
        return attrs_json(
            get(res, "attributes", "attributes") if isinstance(res, dict) else None, notes, "resource"
        ), None
    except (SpanError, ValueError, TypeError, RecursionError) as exc:
        return {}, f"its resource is malformed: {exc}"


def _scope_json(ss: Any, notes: Notes) -> tuple[str, str, str | None]:
    """A scopeSpans entry's scope name and version, or why its spans are rejected."""
    if not isinstance(ss, dict):
        raise _bad("each scopeSpans entry must be an object")
    scope = get(ss, "scope", "scope")
    if not isinstance(scope, dict):
        return "", "", None
    name = get(scope, "name", "name") or ""
    version = get(scope, "version", "version") or ""
    if not isinstance(name, str) or not isinstance(version, str):
        return "", "", "its scope name/version is not a string"
    check_name(name, notes.limits, "a scope name")
    return name, version, None


def _name(value: Any, what: str, notes: Notes, label: str) -> str:
    name = str_json(value, what)
    check_name(name, notes.limits, f"{label}: the {what}")  # the 400 names the span it refuses
    return name


def _name_pb(name: str, what: str, notes: Notes) -> str:
    check_name(name, notes.limits, what)
    return name


def _bad(msg: str) -> OtlpDecodeError:
    return OtlpDecodeError(
        f"malformed OTLP/JSON request: {msg}", hint="see the OTLP/JSON encoding of ExportTraceServiceRequest"
    )


def _list(d: dict[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    v = get(d, camel, snake)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _bad(f"{camel} in the {where} must be a list, got {type(v).__name__}")
    return v


def _where_json(sp: Any) -> str:
    if not isinstance(sp, dict):
        return "a span that is not an object"
    return f"span {short(get(sp, 'spanId', 'span_id'))} of trace {short(get(sp, 'traceId', 'trace_id'))}"


def _span_json(
    sp: Any, resource: dict[str, Any], scope_name: str, scope_version: str, source: SpanSource, notes: Notes
) -> RawSpan | None:
    try:
        if not isinstance(sp, dict):
            raise SpanError("not a JSON object")
        tid, sid, parent = _ids_json(sp)
        label = f"span {sid}"
        events, links = _events_links_json(sp, notes, label)
        status = get(sp, "status", "status") or {}
        if not isinstance(status, dict):
            raise SpanError("status must be an object")
        return RawSpan(
            trace_id=tid,
            span_id=sid,
            parent_span_id=parent,
            name=_name(get(sp, "name", "name"), "name", notes, label),
            kind=enum_json(get(sp, "kind", "kind"), _KIND_NAMES, "kind"),
            start_time_unix_nano=_time_json(sp, "startTimeUnixNano", "start_time_unix_nano"),
            end_time_unix_nano=_time_json(sp, "endTimeUnixNano", "end_time_unix_nano"),
            attributes=attrs_json(get(sp, "attributes", "attributes"), notes, label),
            events=events,
            links=links,
            status_code=enum_json(get(status, "code", "code"), _STATUS_NAMES, "status.code"),
            status_message=str_json(get(status, "message", "message"), "status.message"),
            resource=resource,
            scope_name=scope_name,
            scope_version=scope_version,
            source=source,
            dropped_attributes_count=_count_json(sp, "droppedAttributesCount", "dropped_attributes_count"),
            dropped_events_count=_count_json(sp, "droppedEventsCount", "dropped_events_count"),
            dropped_links_count=_count_json(sp, "droppedLinksCount", "dropped_links_count"),
        )
    except (SpanError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        notes.reject(_where_json(sp), str(exc) or type(exc).__name__)
        return None


def _events_links_json(
    sp: dict[str, Any], notes: Notes, label: str
) -> tuple[tuple[SpanEvent, ...], tuple[SpanLink, ...]]:
    events_raw = get(sp, "events", "events") or []
    links_raw = get(sp, "links", "links") or []
    if not isinstance(events_raw, list) or not isinstance(links_raw, list):
        raise SpanError("events and links must be lists")
    return tuple(_event_json(ev, notes, label) for ev in events_raw), _links_json(links_raw, notes, label)


def _ids_json(sp: dict[str, Any]) -> tuple[str, str, str | None]:
    """The span's trace, span and parent ids as hex (the parent None for a root)."""
    tid = id_json(get(sp, "traceId", "trace_id"), 16, "traceId")
    sid = id_json(get(sp, "spanId", "span_id"), 8, "spanId")
    if tid == ZERO_TRACE:
        raise SpanError("traceId is all zero")
    if sid == ZERO_SPAN:
        raise SpanError("spanId is all zero")
    parent_raw = get(sp, "parentSpanId", "parent_span_id")
    parent = id_json(parent_raw, 8, "parentSpanId") if parent_raw else ZERO_SPAN
    return tid.hex(), sid.hex(), parent.hex() if parent != ZERO_SPAN else None


def _time_json(d: dict[str, Any], camel: str, snake: str) -> int:
    return int64_json(get(d, camel, snake), camel, unsigned=True)


def _count_json(d: dict[str, Any], camel: str, snake: str) -> int:
    """A dropped count (a number, or a string as some encoders write it); 0 when absent."""
    return int64_json(get(d, camel, snake), camel, unsigned=True)


def _event_json(ev: Any, notes: Notes, label: str) -> SpanEvent:
    if not isinstance(ev, dict):
        raise SpanError("each event must be an object")
    return SpanEvent(
        name=_name(get(ev, "name", "name"), "event name", notes, label),
        time_unix_nano=int64_json(
            get(ev, "timeUnixNano", "time_unix_nano"), "event timeUnixNano", unsigned=True
        ),
        attributes=attrs_json(get(ev, "attributes", "attributes"), notes, label),
        dropped_attributes_count=_count_json(ev, "droppedAttributesCount", "dropped_attributes_count"),
    )


def _links_json(links: list[Any], notes: Notes, label: str) -> tuple[SpanLink, ...]:
    out: list[SpanLink] = []
    for ln in links:
        if not isinstance(ln, dict):
            raise SpanError("each link must be an object")
        try:
            tid = id_json(get(ln, "traceId", "trace_id"), 16, "link traceId")
            sid = id_json(get(ln, "spanId", "span_id"), 8, "link spanId")
        except SpanError:
            tid, sid = ZERO_TRACE, ZERO_SPAN
        if tid == ZERO_TRACE or sid == ZERO_SPAN:
            notes.add(f"{label}: dropped a link with an invalid trace or span id")
            continue
        out.append(
            SpanLink(
                trace_id=tid.hex(),
                span_id=sid.hex(),
                attributes=attrs_json(get(ln, "attributes", "attributes"), notes, label),
            )
        )
    return tuple(out)
