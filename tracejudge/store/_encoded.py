"""A span kept in its own OTLP bytes (store schema 2), and how it is read back.

The OTLP receiver (and ``collect file``, for protobuf files) stores each span it takes as the
protobuf it arrived in — a ``ResourceSpans`` message holding the span alone with its resource and
scope, cut from the request without decoding its attributes — instead of JSON re-encoded from
decoded attributes: decoding every attribute into Python values and encoding them again was most of
the cost of intake. The attributes are decoded when the span is read, to exactly the
:class:`RawSpan` the JSON form reads back as. An :class:`EncodedSpan` holds the ``Span``'s bytes and
its :class:`OtlpEnvelope` (the resource and scope it shares with the rest of its ``ScopeSpans``), and
is wrapped into its ``ResourceSpans`` (``EncodedSpan.otlp``) only where a store keeps it that way
(PostgreSQL; SQLite keeps each envelope once per chunk from store schema 7, ``_chunks``): wrapping
every span took a tenth of the receiver's encode.

Only spans that decode without a note are kept this way (the receiver checks that cheaply: sizes
within the limits, valid link ids); the others, and spans from every other source, are stored as
JSON as before. The cost moves to reading: pydantic-core reads a span's JSON in one call, while a
span's protobuf is read through the protobuf library's (upb) objects, a call or two per key and
value. Reading the OTLP form back takes about 1.6x the CPU of reading the JSON form
(``benchmarks/bench_intake.py`` measures both, ``benchmarks/bench_sweep.py --form both`` a sweep over
each), near the floor of any walk over the parsed message from Python — parsing and touching each
attribute once, building nothing, costs about what reading the JSON form back does — and a small
share of reading and normalizing a trace.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from tracejudge._errors import StoreDamageError
from tracejudge.schema import (
    SESSION_KEYS,
    RawSpan,
    SpanEvent,
    SpanLink,
    SpanSource,
    attributes_session_id,
    built_span_record,
)

__all__ = [
    "DAMAGED_HINT",
    "EncodedSpan",
    "OtlpEnvelope",
    "OtlpForm",
    "otlp_session_id",
    "span_from_otlp",
    "spans_from_otlp",
]

_ZERO_SPAN = bytes(8)

DAMAGED_HINT = (
    "the store's file is damaged or was changed by something other than tracejudge: run"
    " `tracejudge doctor --deep` to list the traces that no longer read back, and restore the store from a"
    " backup"
)
"""What to do about stored spans that do not read back."""


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_FIELD_1 = b"\x0a"  # ResourceSpans.resource and ScopeSpans.scope: field 1, length-delimited
_FIELD_2 = b"\x12"  # ResourceSpans.scope_spans and ScopeSpans.spans: field 2, length-delimited
# Substrings every session key contains (langfuse.session.id contains session.id): a span whose
# bytes hold neither names no session, and its attribute keys need not be read.
_SESSION_HINTS = (b"session.id", b"conversation.id")
# A substring of both (every session key ends in it), searched for first: a span naming no session
# is searched once instead of twice (1.5-1.9 instead of 2.5-3.0 us for a 2.5 KB span).
_SESSION_HINT = b"ion.id"
_HINT_AT = tuple(hint.index(_SESSION_HINT) for hint in _SESSION_HINTS)
_SESSION_KEYS = frozenset(SESSION_KEYS)
_SESSION_ID = SESSION_KEYS[0]


class OtlpEnvelope:
    """Wraps spans of one resource and scope, each alone, into a serialized ``ResourceSpans``."""

    __slots__ = ("_prefixes", "resource", "scope")

    def __init__(self, resource: bytes, scope: bytes) -> None:
        """``resource`` and ``scope``: the serialized ``Resource`` and ``InstrumentationScope``."""
        self.resource = resource
        """The serialized ``Resource``."""
        self.scope = scope
        """The serialized ``InstrumentationScope``."""
        # Made at the first wrap: a read parses each span alone and never wraps one.
        self._prefixes: tuple[bytes, bytes] | None = None

    def wrap(self, span: bytes) -> bytes:
        """The ``ResourceSpans`` holding the serialized ``Span`` ``span`` alone."""
        prefixes = self._prefixes
        if prefixes is None:
            # Each with the tag of the field that follows it (scope_spans, spans): one piece fewer a span.
            prefixes = self._prefixes = (
                _FIELD_1 + _varint(len(self.resource)) + self.resource + _FIELD_2,
                _FIELD_1 + _varint(len(self.scope)) + self.scope + _FIELD_2,
            )
        resource, scope = prefixes
        n = len(span)
        inner = _varint(n)
        return b"".join((resource, _varint(len(scope) + len(inner) + n), scope, inner, span))


class EncodedSpan(NamedTuple):
    """A span in its own OTLP bytes, with what the store indexes read out of it. (A named tuple, not
    a frozen dataclass: the receiver makes one per span, and a frozen dataclass's __init__ cost a
    fifth of encoding one.)"""

    trace_id: str
    """Trace id, 32 lowercase hex characters."""
    span_id: str
    """Span id, 16 lowercase hex characters."""
    parent_span_id: str | None
    """Parent span id, or None for a root span."""
    name: str
    """Span name."""
    start_time_unix_nano: int
    """Start, nanoseconds since the Unix epoch."""
    end_time_unix_nano: int
    """End, nanoseconds since the Unix epoch."""
    source: SpanSource
    """Which collector brought the span in."""
    session_id: str | None
    """The session its attributes name (:func:`tracejudge.schema.span_session_id`), or None."""
    span: bytes
    """The serialized OTLP ``Span``, as cut from the request it arrived in."""
    envelope: OtlpEnvelope
    """The span's resource and scope (shared by the spans of one ``ScopeSpans``)."""

    @property
    def otlp(self) -> bytes:
        """A serialized OTLP ``ResourceSpans``: the span's resource, its scope and the span alone."""
        return self.envelope.wrap(self.span)

    def decode(self) -> RawSpan:
        """The span as the store reads it back (what its JSON form would read back as)."""
        return span_from_otlp((self.span, self.envelope), self.source)


def otlp_session_id(sp: Any, data: bytes) -> str | None:
    """The session an OTLP ``Span`` message's attributes name (as :func:`tracejudge.schema.span_session_id`
    reads it from the decoded span); ``data`` is its serialized form, searched first."""
    at = _session_at(data)
    if at is None:
        return None
    # The bytes name session.id once: the one attribute holding it is the span's only session.id, and
    # as attributes_session_id reads session.id first, no attribute after it changes the answer when
    # it holds text. Then the attributes after it are not read: each read makes a Python object of
    # the attribute and of its key, which for every one of a span's ~10 was half the receiver's
    # encoding CPU when every span names its session.
    once = at >= 0 and data.find(_SESSION_HINTS[0], at + 1) < 0
    found: dict[str, Any] | None = None
    for kv in sp.attributes:
        key = kv.key
        if key in _SESSION_KEYS:
            if once and key == _SESSION_ID:
                only: str = kv.value.string_value.strip()
                if only:
                    return only
            if found is None:
                found = {}
            found[key] = kv.value  # the last of a repeated key, as in the decoded attributes
    if found is None:
        return None
    if len(found) == 1 and (first := found.get(SESSION_KEYS[0])) is not None:
        # The usual case, one session.id with a string: what attributes_session_id makes of it.
        text: str = first.string_value.strip()
        if text:
            return text
    return attributes_session_id({k: _value(v) for k, v in found.items()})


def _session_at(data: bytes) -> int | None:
    """Where a span's bytes first hold ``session.id`` (-1: nowhere, but they hold ``conversation.id``);
    None when they can name no session."""
    hint = data.find(_SESSION_HINT)
    if hint < 0:
        return None
    # Each hint holds it this far in, so neither starts before: the first is usually session.id's.
    at = hint - _HINT_AT[0]
    if at >= 0 and data.startswith(_SESSION_HINTS[0], at):
        return at
    at = data.find(_SESSION_HINTS[0], max(at, 0))
    if at < 0 and data.find(_SESSION_HINTS[1], max(hint - _HINT_AT[1], 0)) < 0:
        return None
    return at


# ---------------------------------------------------------------- reading


def _double(v: Any) -> float | None:
    x: float = v.double_value
    # The JSON form holds no NaN or infinity: it wrote them as null, and they read back as None.
    return x if math.isfinite(x) else None


def _value(v: Any) -> Any:
    """An ``AnyValue`` as the JSON value the decoder makes of it. No size or depth limit applies: the
    receiver keeps a span this way only when its values are within them (and protobuf parsing stops
    far short of the decoder's depth limit)."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return _double(v)
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode("ascii")
    return None


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        v = kv.value
        # Most values are non-empty strings, read with one call: a oneof member that is not set reads
        # as its default, so a non-empty string_value is the value (this loop is most of a read).
        s = v.string_value
        out[kv.key] = s if s else _value(v)
    return out


def _events(events: Any) -> tuple[SpanEvent, ...]:
    return tuple(
        built_span_record(
            SpanEvent,
            {
                "name": ev.name,
                "time_unix_nano": ev.time_unix_nano,
                "attributes": _attributes(ev.attributes),
                "dropped_attributes_count": ev.dropped_attributes_count,
                "log_record": False,  # a span's own event
            },
        )
        for ev in events
    )


def _links(links: Any) -> tuple[SpanLink, ...]:
    return tuple(
        built_span_record(
            SpanLink,
            {
                "trace_id": ln.trace_id.hex(),
                "span_id": ln.span_id.hex(),
                "attributes": _attributes(ln.attributes),
            },
        )
        for ln in links
    )


_proto: tuple[Any, Any, Any, Any, type[Exception]] | None = None


def _types() -> tuple[Any, Any, Any, Any, type[Exception]]:
    """``ResourceSpans``, ``Span``, ``Resource``, ``InstrumentationScope`` and protobuf's ``DecodeError``
    (imported when first needed: most commands never read this form)."""
    global _proto
    if _proto is None:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
        from opentelemetry.proto.resource.v1.resource_pb2 import Resource
        from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

        _proto = (ResourceSpans, Span, Resource, InstrumentationScope, DecodeError)
    return _proto


def _resource_key(otlp: bytes) -> bytes:
    """The serialized resource field an encoded span starts with (spans of one request share it)."""
    n, m = otlp[1], otlp[2]
    if n < 0x80:  # a resource under 128 bytes: its length is one byte
        return otlp[: 2 + n]
    if m < 0x80:  # under 16 KB (an SDK's resource is a few hundred bytes): two
        return otlp[: 3 + (n & 0x7F | m << 7)]
    n = shift = 0
    i = 1
    while True:
        b = otlp[i]
        n |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return otlp[: i + n]
        shift += 7


OtlpForm = bytes | tuple[bytes, OtlpEnvelope]
"""A span stored in its OTLP bytes: its ``ResourceSpans`` (``EncodedSpan.otlp``), or its ``Span`` and the
envelope it was stored with (``EncodedSpan.span`` and ``.envelope``: SQLite's chunks from store schema 7)."""


def span_from_otlp(otlp: OtlpForm, source: SpanSource) -> RawSpan:
    """The :class:`RawSpan` in an :class:`EncodedSpan`'s bytes (``EncodedSpan.otlp``)."""
    return spans_from_otlp([(otlp, source)])[0]


def spans_from_otlp(encoded: Sequence[tuple[OtlpForm, SpanSource]]) -> list[RawSpan]:
    """The :class:`RawSpan` in each (OTLP form, source), each resource's attributes decoded once (every span
    gets its own copy, as from JSON). A ``Span`` with its envelope is parsed alone, its envelope's resource
    and scope once each: wrapping it into a ``ResourceSpans`` to parse it copied every span's bytes and
    parsed its resource and scope again. Bytes that do not parse (a damaged store) are a
    :class:`~tracejudge.StoreDamageError` saying what to do."""
    resource_spans, span_type, resource_type, scope_type, decode_error = _types()
    try:
        return _spans_from_otlp(encoded, resource_spans, span_type, resource_type, scope_type)
    except decode_error as exc:
        raise StoreDamageError(f"a stored OTLP span does not parse: {exc}", hint=DAMAGED_HINT) from exc


def _spans_from_otlp(
    encoded: Sequence[tuple[OtlpForm, SpanSource]],
    resource_spans: Any,
    span_type: Any,
    resource_type: Any,
    scope_type: Any,
) -> list[RawSpan]:
    parse, parse_span = resource_spans.FromString, span_type.FromString
    resources: dict[bytes, dict[str, Any]] = {}
    # By envelope (an object per stored chunk, shared by its spans; compared by identity): its resource's
    # attributes (by its bytes, shared with every chunk of the same resource), its scope's name and version.
    envelopes: dict[OtlpEnvelope, tuple[dict[str, Any], str, str]] = {}
    out: list[RawSpan] = []
    for otlp, source in encoded:
        if isinstance(otlp, tuple):
            data, envelope = otlp
            found = envelopes.get(envelope)
            if found is None:
                key = b"\x00" + envelope.resource  # apart from the ResourceSpans' keys, which start 0x0a
                resource = resources.get(key)
                if resource is None:
                    resource = resources[key] = _attributes(
                        resource_type.FromString(envelope.resource).attributes
                    )
                scope = scope_type.FromString(envelope.scope)
                found = envelopes[envelope] = (resource, scope.name, scope.version)
            out.append(_span(parse_span(data), found[1], found[2], dict(found[0]), source))
            continue
        rs = parse(otlp)
        key = _resource_key(otlp)
        resource = resources.get(key)
        if resource is None:
            resource = resources[key] = _attributes(rs.resource.attributes)
        ss = rs.scope_spans[0]
        scope = ss.scope
        out.append(_span(ss.spans[0], scope.name, scope.version, dict(resource), source))
    return out


def _span(
    sp: Any, scope_name: str, scope_version: str, resource: dict[str, Any], source: SpanSource
) -> RawSpan:
    psid = sp.parent_span_id
    events = sp.events
    links = sp.links
    if sp.HasField("status"):  # most spans have none: one call instead of three
        status = sp.status
        code, message = status.code, status.message
    else:
        code, message = 0, ""
    span: RawSpan = built_span_record(
        RawSpan,
        {
            "trace_id": sp.trace_id.hex(),
            "span_id": sp.span_id.hex(),
            "parent_span_id": psid.hex() if psid and psid != _ZERO_SPAN else None,
            "name": sp.name,
            "kind": sp.kind,
            "start_time_unix_nano": sp.start_time_unix_nano,
            "end_time_unix_nano": sp.end_time_unix_nano,
            "attributes": _attributes(sp.attributes),
            "events": _events(events) if events else (),
            "links": _links(links) if links else (),
            "status_code": code,
            "status_message": message,
            "resource": resource,
            "scope_name": scope_name,
            "scope_version": scope_version,
            "source": source,
            "dropped_attributes_count": sp.dropped_attributes_count,
            "dropped_events_count": sp.dropped_events_count,
            "dropped_links_count": sp.dropped_links_count,
        },
    )
    return span
