"""Decode OTLP trace payloads (protobuf and OTLP/JSON) into :class:`RawSpan` records.

Validation is per span: a span with a bad trace or span id (or another malformed field) is
*rejected* — counted, with the reason recorded — while the rest of the request is kept, which is
OTLP's partial success. Only a payload that cannot be read at all raises :class:`OtlpDecodeError`.

Abuse limits (a value is *truncated with a marker*, never rejected, so the span keeps its place in
the trace tree and the truncation is visible to whoever reads the span):

- a structured attribute value nested deeper than ``MAX_ATTRIBUTE_DEPTH`` levels: the part below the
  limit becomes the string ``DEPTH_MARKER``;
- a string attribute longer than ``MAX_VALUE_CHARS`` characters keeps its first ``MAX_VALUE_CHARS``
  characters followed by ``TRUNCATED_MARKER``; a structured value whose strings add up to more than
  that becomes the string ``TRUNCATED_MARKER``.

Each truncation is reported in ``DecodeResult.errors`` (a warning; ``rejected`` is not increased).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from tracejudge._errors import InputError
from tracejudge.schema import RawSpan, SpanEvent, SpanLink, SpanSource
from tracejudge.store import LogEvent
from tracejudge_collectors.otel._proto import ExportTraceServiceRequest

__all__ = [
    "DEPTH_MARKER",
    "MAX_ATTRIBUTE_DEPTH",
    "MAX_VALUE_CHARS",
    "TRUNCATED_MARKER",
    "DecodeResult",
    "OtlpDecodeError",
    "decode_json",
    "decode_protobuf",
    "iter_otlp_file",
    "read_otlp_file",
]

MAX_ATTRIBUTE_DEPTH = 64
"""Deepest nesting of array / key-value-list attribute values kept as structure."""
MAX_VALUE_CHARS = 4 * 1024 * 1024
"""Largest single attribute value kept whole (characters of its strings and bytes)."""
TRUNCATED_MARKER = "…[tracejudge: value truncated]"
DEPTH_MARKER = "[tracejudge: value nested too deeply, truncated]"

_MAX_ERRORS = 20
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
# json.loads turns an escaped lone surrogate into a str that cannot be encoded as UTF-8 later
# (SQLite, JSON dumps); only bodies that contain such an escape get the scrubbing walk.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_GZIP_MAGIC = b"\x1f\x8b"


class OtlpDecodeError(InputError):
    """The payload is not a readable OTLP trace export request."""


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


class _SpanError(Exception):
    """A span cannot be used; it is rejected and the rest of the request is kept."""


class _TooBig(Exception):
    """A structured value exceeds the size budget."""


class _Notes:
    """Rejections and warnings, capped so a request of a million bad spans stays small."""

    __slots__ = ("dropped", "lines", "rejected")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.dropped = 0
        self.rejected = 0

    def add(self, line: str) -> None:
        if len(self.lines) < _MAX_ERRORS:
            self.lines.append(line)
        else:
            self.dropped += 1

    def reject(self, where: str, why: str) -> None:
        self.rejected += 1
        self.add(f"rejected {where}: {why}")

    def result(self, spans: list[RawSpan]) -> DecodeResult:
        errors = self.lines
        if self.dropped:
            errors = [*errors, f"… and {self.dropped} more"]
        return DecodeResult(spans=spans, rejected=self.rejected, errors=errors)


class _Budget:
    __slots__ = ("deep", "remaining")

    def __init__(self) -> None:
        self.remaining = MAX_VALUE_CHARS
        self.deep = False


def _short(value: object, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 1] + "…"


def _deep_note(label: str, key: str) -> str:
    return f"{label}: attribute {_short(key)} nested deeper than {MAX_ATTRIBUTE_DEPTH} levels, truncated"


def _truncate(s: str) -> str:
    return s[:MAX_VALUE_CHARS] + TRUNCATED_MARKER


# ---------------------------------------------------------------- protobuf


def decode_protobuf(body: bytes, *, source: SpanSource = "otlp") -> DecodeResult:
    """Decode a binary ``ExportTraceServiceRequest``.

    Raises :class:`OtlpDecodeError` when the body is not a readable message; bad spans are counted
    in ``rejected`` instead.
    """
    req = _parse_pb(
        ExportTraceServiceRequest(),
        body,
        hint="send an OTLP trace export request; a truncated body, a JSON body sent as "
        "application/x-protobuf, or attribute values nested over ~45 levels all cause this",
    )
    notes = _Notes()
    spans: list[RawSpan] = []
    for rs in req.resource_spans:
        resource = _attrs_pb(rs.resource.attributes, notes, "resource")
        for ss in rs.scope_spans:
            scope_name = ss.scope.name
            scope_version = ss.scope.version
            for sp in ss.spans:
                span = _span_pb(sp, resource, scope_name, scope_version, source, notes)
                if span is not None:
                    spans.append(span)
    return notes.result(spans)


def _parse_pb(message: Any, body: bytes, *, hint: str) -> Any:
    """``message`` parsed from ``body``, or an :class:`OtlpDecodeError` naming the message type."""
    try:
        message.ParseFromString(body)
    except Exception as exc:  # the protobuf runtime raises DecodeError, and others on odd input
        raise OtlpDecodeError(
            f"the body is not a valid OTLP {type(message).__name__} protobuf ({exc})", hint=hint
        ) from exc
    return message


def _load_json_body(body: bytes, *, request: str) -> Any:
    """Parse an OTLP/JSON body, mapping every failure to an :class:`OtlpDecodeError`; lone surrogates
    escaped in the text are replaced rather than fatal."""
    try:
        obj = json.loads(body)
    except RecursionError as exc:
        raise OtlpDecodeError(
            "the JSON body is nested too deeply to read",
            hint=f"keep attribute values under {MAX_ATTRIBUTE_DEPTH} levels of nesting",
        ) from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise OtlpDecodeError(
            f"the body is not valid JSON ({exc})",
            hint=f"send OTLP/JSON (an {request} object), UTF-8 encoded; "
            "a truncated body or a protobuf body sent as application/json cause this",
        ) from exc
    return _scrub(obj) if _SURROGATE_ESCAPE.search(body) else obj


def _span_pb(
    sp: Any, resource: dict[str, Any], scope_name: str, scope_version: str, source: SpanSource, notes: _Notes
) -> RawSpan | None:
    tid = sp.trace_id
    sid = sp.span_id
    try:
        if len(tid) != 16 or tid == _ZERO_TRACE:
            raise _SpanError(f"trace id must be 16 bytes and not all zero (got {len(tid)} bytes)")
        if len(sid) != 8 or sid == _ZERO_SPAN:
            raise _SpanError(f"span id must be 8 bytes and not all zero (got {len(sid)} bytes)")
        psid = sp.parent_span_id
        if psid and len(psid) != 8:
            raise _SpanError(f"parent span id must be 8 bytes or empty (got {len(psid)} bytes)")
        start = sp.start_time_unix_nano
        end = sp.end_time_unix_nano
        if start > _INT64_MAX or end > _INT64_MAX:
            raise _SpanError("start/end time beyond the year 2262")
        span_id = sid.hex()
        label = "span " + span_id
        events = (
            tuple(
                _trusted(
                    SpanEvent,
                    {
                        "name": ev.name,
                        "time_unix_nano": _time_pb(ev.time_unix_nano),
                        "attributes": _attrs_pb(ev.attributes, notes, label),
                    },
                )
                for ev in sp.events
            )
            if sp.events
            else ()
        )
        links = _links_pb(sp.links, notes, label) if sp.links else ()
        status = sp.status
        # Every value below has its field's type already (protobuf scalars, decoded attributes), so
        # pydantic's validation would only re-check them; it cost more than the rest of the decode.
        return _trusted(
            RawSpan,
            {
                "trace_id": tid.hex(),
                "span_id": span_id,
                "parent_span_id": psid.hex() if psid and psid != _ZERO_SPAN else None,
                "name": sp.name,
                "kind": sp.kind,
                "start_time_unix_nano": start,
                "end_time_unix_nano": end,
                "attributes": _attrs_pb(sp.attributes, notes, label),
                "events": events,
                "links": links,
                "status_code": status.code,
                "status_message": status.message,
                # A copy each, as validation made: spans of one resource must not share a mutable dict.
                "resource": dict(resource),
                "scope_name": scope_name,
                "scope_version": scope_version,
                "source": source,
            },
        )
    except (_SpanError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        where = f"span {sid.hex() or '<empty>'} of trace {tid.hex() or '<empty>'}"
        notes.reject(where, str(exc) or type(exc).__name__)
        return None


_Model = TypeVar("_Model", RawSpan, SpanEvent, SpanLink)
_FIELDS: dict[type[Any], frozenset[str]] = {
    cls: frozenset(cls.model_fields) for cls in (RawSpan, SpanEvent, SpanLink)
}
_setattr = object.__setattr__


def _trusted(cls: type[_Model], values: dict[str, Any]) -> _Model:
    """``cls.model_construct(**values)`` for values that name every field with a value of its type,
    without model_construct's per-field default and alias walk (a third of the decode time)."""
    model = cls.__new__(cls)
    _setattr(model, "__dict__", values)
    _setattr(model, "__pydantic_fields_set__", set(_FIELDS[cls]))
    _setattr(model, "__pydantic_extra__", None)
    _setattr(model, "__pydantic_private__", None)
    return model


def _time_pb(ns: int) -> int:
    if ns > _INT64_MAX:
        raise _SpanError("event time beyond the year 2262")
    return ns


def _links_pb(links: Iterable[Any], notes: _Notes, label: str) -> tuple[SpanLink, ...]:
    out: list[SpanLink] = []
    for ln in links:
        tid, sid = ln.trace_id, ln.span_id
        if len(tid) != 16 or tid == _ZERO_TRACE or len(sid) != 8 or sid == _ZERO_SPAN:
            # A dangling link says nothing usable; the span itself is fine.
            notes.add(f"{label}: dropped a link with an invalid trace or span id")
            continue
        out.append(
            _trusted(
                SpanLink,
                {
                    "trace_id": tid.hex(),
                    "span_id": sid.hex(),
                    "attributes": _attrs_pb(ln.attributes, notes, label),
                },
            )
        )
    return tuple(out)


def _attrs_pb(kvs: Iterable[Any], notes: _Notes, label: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        v = kv.value
        kind = v.WhichOneof("value")
        if kind == "string_value":
            s = v.string_value
            if len(s) > MAX_VALUE_CHARS:
                notes.add(
                    f"{label}: attribute {_short(kv.key)} longer than {MAX_VALUE_CHARS} characters, truncated"
                )
                s = _truncate(s)
            out[kv.key] = s
        elif kind == "int_value":
            out[kv.key] = v.int_value
        elif kind == "double_value":
            out[kv.key] = v.double_value
        elif kind == "bool_value":
            out[kv.key] = v.bool_value
        elif kind == "array_value" or kind == "kvlist_value":
            budget = _Budget()
            try:
                out[kv.key] = _value_pb(v, kind, 1, budget)
            except _TooBig:
                notes.add(
                    f"{label}: attribute {_short(kv.key)} larger than {MAX_VALUE_CHARS} characters, truncated"
                )
                out[kv.key] = TRUNCATED_MARKER
                continue
            if budget.deep:
                notes.add(_deep_note(label, kv.key))
        else:
            out[kv.key] = _scalar_pb(v, kind, notes, label, kv.key)
    return out


def _scalar_pb(v: Any, kind: str | None, notes: _Notes, label: str, key: str) -> Any:
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    if kind == "bytes_value":
        raw = v.bytes_value
        if len(raw) > MAX_VALUE_CHARS:
            notes.add(f"{label}: attribute {_short(key)} longer than {MAX_VALUE_CHARS} bytes, truncated")
            return TRUNCATED_MARKER
        return base64.b64encode(raw).decode("ascii")
    # Unset values, and string_value_strindex (an index into a dictionary that only profiles carry).
    return None


def _value_pb(v: Any, kind: str | None, depth: int, budget: _Budget) -> Any:
    if kind == "string_value":
        s: str = v.string_value
        budget.remaining -= len(s)
        if budget.remaining < 0:
            raise _TooBig
        return s
    if kind == "array_value" or kind == "kvlist_value":
        if depth > MAX_ATTRIBUTE_DEPTH:
            budget.deep = True
            return DEPTH_MARKER
        if kind == "array_value":
            return [_value_pb(x, x.WhichOneof("value"), depth + 1, budget) for x in v.array_value.values]
        out: dict[str, Any] = {}
        for kv in v.kvlist_value.values:
            budget.remaining -= len(kv.key)
            x = kv.value
            out[kv.key] = _value_pb(x, x.WhichOneof("value"), depth + 1, budget)
        return out
    if kind == "bytes_value":
        budget.remaining -= len(v.bytes_value)
        if budget.remaining < 0:
            raise _TooBig
        return base64.b64encode(v.bytes_value).decode("ascii")
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    return None


# ---------------------------------------------------------------- OTLP/JSON


def decode_json(body: bytes | str, *, source: SpanSource = "otlp", logs: bool = False) -> DecodeResult:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest`` (hex ids, integer enums, int64 as strings).

    Lenient where the protobuf JSON mapping is: snake_case keys, enum names, numbers for int64 and
    base64 ids are accepted too. Unknown fields are ignored. With ``logs``, an OTLP/JSON log request
    (``resourceLogs``) is decoded too, into ``log_events`` (files may hold either).
    """
    if isinstance(body, str):
        try:
            body = body.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise OtlpDecodeError(
                "the JSON text contains characters that cannot be encoded as UTF-8",
                hint="send UTF-8 encoded OTLP/JSON",
            ) from exc
    obj = _load_json_body(body, request="ExportTraceServiceRequest")
    return decode_json_object(obj, source=source, logs=logs)


def decode_json_object(obj: Any, *, source: SpanSource = "otlp", logs: bool = False) -> DecodeResult:
    """Decode an already parsed OTLP/JSON request (see :func:`decode_json`)."""
    if not isinstance(obj, dict):
        raise OtlpDecodeError(
            f"an OTLP/JSON request must be a JSON object, got {type(obj).__name__}",
            hint='send {"resourceSpans": [...]}',
        )
    notes = _Notes()
    spans: list[RawSpan] = []
    for rs in _list(obj, "resourceSpans", "resource_spans", "request"):
        if not isinstance(rs, dict):
            raise _bad("each resourceSpans entry must be an object")
        res = _get(rs, "resource", "resource")
        res_attrs = _get(res, "attributes", "attributes") if isinstance(res, dict) else None
        resource_error: str | None = None
        resource: dict[str, Any] = {}
        try:
            resource = _attrs_json(res_attrs, notes, "resource")
        except (_SpanError, ValueError, TypeError, RecursionError) as exc:
            resource_error = f"its resource is malformed: {exc}"
        for ss in _list(rs, "scopeSpans", "scope_spans", "resourceSpans entry"):
            if not isinstance(ss, dict):
                raise _bad("each scopeSpans entry must be an object")
            scope = _get(ss, "scope", "scope")
            scope_name = scope_version = ""
            scope_error = resource_error
            if isinstance(scope, dict):
                scope_name = _get(scope, "name", "name") or ""
                scope_version = _get(scope, "version", "version") or ""
                if not isinstance(scope_name, str) or not isinstance(scope_version, str):
                    scope_error = scope_error or "its scope name/version is not a string"
            for sp in _list(ss, "spans", "spans", "scopeSpans entry"):
                if scope_error is not None:
                    notes.reject(_where_json(sp), scope_error)
                    continue
                span = _span_json(sp, resource, scope_name, scope_version, source, notes)
                if span is not None:
                    spans.append(span)
    result = notes.result(spans)
    if logs and _get(obj, "resourceLogs", "resource_logs") is not None:
        # Imported here: the log decoder builds on this module's helpers.
        from tracejudge_collectors.otel._logs import decode_logs_json_object

        found = decode_logs_json_object(obj)
        result = DecodeResult(
            spans=spans,
            rejected=result.rejected + found.rejected,
            errors=[*result.errors, *found.errors][: _MAX_ERRORS + 2],
            log_events=found.events,
        )
    return result


def _bad(msg: str) -> OtlpDecodeError:
    return OtlpDecodeError(
        f"malformed OTLP/JSON request: {msg}", hint="see the OTLP/JSON encoding of ExportTraceServiceRequest"
    )


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    v = d.get(camel)
    if v is None and snake != camel:
        v = d.get(snake)
    return v


def _list(d: dict[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    v = _get(d, camel, snake)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _bad(f"{camel} in the {where} must be a list, got {type(v).__name__}")
    return v


def _where_json(sp: Any) -> str:
    if not isinstance(sp, dict):
        return "a span that is not an object"
    return f"span {_short(_get(sp, 'spanId', 'span_id'))} of trace {_short(_get(sp, 'traceId', 'trace_id'))}"


def _id_json(value: Any, nbytes: int, what: str) -> bytes:
    if not isinstance(value, str):
        raise _SpanError(f"{what} must be a hex string, got {type(value).__name__}")
    raw: bytes | None = None
    if len(value) == 2 * nbytes:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
        if raw is not None and len(raw) != nbytes:  # fromhex skips whitespace
            raw = None
    if raw is None and value:
        # Some producers send proto3-JSON base64 ids; their length tells them apart from hex.
        try:
            candidate = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            candidate = b""
        if len(candidate) == nbytes:
            raw = candidate
    if raw is None:
        raise _SpanError(f"{what} must be {2 * nbytes} hex characters, got {_short(value)}")
    return raw


def _int64_json(value: Any, what: str, *, unsigned: bool = False) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise _SpanError(f"{what} must be an integer, got a boolean")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and 0 < len(value) <= 21:
        try:
            n = int(value, 10)
        except ValueError:
            raise _SpanError(f"{what} must be a decimal integer, got {_short(value)}") from None
    elif isinstance(value, float) and value.is_integer() and math.isfinite(value):
        n = int(value)
    else:
        raise _SpanError(f"{what} must be an integer, got {_short(value)}")
    if n > _INT64_MAX or n < (0 if unsigned else _INT64_MIN):
        raise _SpanError(f"{what} out of range: {_short(value)}")
    return n


def _enum_json(value: Any, names: dict[str, int], what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31:
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise _SpanError(f"{what} must be an integer enum value, got {_short(value)}")


def _str_json(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _SpanError(f"{what} must be a string, got {type(value).__name__}")
    return value


def _span_json(
    sp: Any, resource: dict[str, Any], scope_name: str, scope_version: str, source: SpanSource, notes: _Notes
) -> RawSpan | None:
    try:
        if not isinstance(sp, dict):
            raise _SpanError("not a JSON object")
        tid = _id_json(_get(sp, "traceId", "trace_id"), 16, "traceId")
        sid = _id_json(_get(sp, "spanId", "span_id"), 8, "spanId")
        if tid == _ZERO_TRACE:
            raise _SpanError("traceId is all zero")
        if sid == _ZERO_SPAN:
            raise _SpanError("spanId is all zero")
        parent_raw = _get(sp, "parentSpanId", "parent_span_id")
        parent: str | None = None
        if parent_raw:
            p = _id_json(parent_raw, 8, "parentSpanId")
            parent = p.hex() if p != _ZERO_SPAN else None
        label = f"span {sid.hex()}"
        events_raw = _get(sp, "events", "events") or []
        links_raw = _get(sp, "links", "links") or []
        if not isinstance(events_raw, list) or not isinstance(links_raw, list):
            raise _SpanError("events and links must be lists")
        events = tuple(_event_json(ev, notes, label) for ev in events_raw)
        links = _links_json(links_raw, notes, label)
        status = _get(sp, "status", "status") or {}
        if not isinstance(status, dict):
            raise _SpanError("status must be an object")
        return RawSpan(
            trace_id=tid.hex(),
            span_id=sid.hex(),
            parent_span_id=parent,
            name=_str_json(_get(sp, "name", "name"), "name"),
            kind=_enum_json(_get(sp, "kind", "kind"), _KIND_NAMES, "kind"),
            start_time_unix_nano=_int64_json(
                _get(sp, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", unsigned=True
            ),
            end_time_unix_nano=_int64_json(
                _get(sp, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", unsigned=True
            ),
            attributes=_attrs_json(_get(sp, "attributes", "attributes"), notes, label),
            events=events,
            links=links,
            status_code=_enum_json(_get(status, "code", "code"), _STATUS_NAMES, "status.code"),
            status_message=_str_json(_get(status, "message", "message"), "status.message"),
            resource=resource,
            scope_name=scope_name,
            scope_version=scope_version,
            source=source,
        )
    except (_SpanError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        notes.reject(_where_json(sp), str(exc) or type(exc).__name__)
        return None


def _event_json(ev: Any, notes: _Notes, label: str) -> SpanEvent:
    if not isinstance(ev, dict):
        raise _SpanError("each event must be an object")
    return SpanEvent(
        name=_str_json(_get(ev, "name", "name"), "event name"),
        time_unix_nano=_int64_json(
            _get(ev, "timeUnixNano", "time_unix_nano"), "event timeUnixNano", unsigned=True
        ),
        attributes=_attrs_json(_get(ev, "attributes", "attributes"), notes, label),
    )


def _links_json(links: list[Any], notes: _Notes, label: str) -> tuple[SpanLink, ...]:
    out: list[SpanLink] = []
    for ln in links:
        if not isinstance(ln, dict):
            raise _SpanError("each link must be an object")
        try:
            tid = _id_json(_get(ln, "traceId", "trace_id"), 16, "link traceId")
            sid = _id_json(_get(ln, "spanId", "span_id"), 8, "link spanId")
        except _SpanError:
            tid, sid = _ZERO_TRACE, _ZERO_SPAN
        if tid == _ZERO_TRACE or sid == _ZERO_SPAN:
            notes.add(f"{label}: dropped a link with an invalid trace or span id")
            continue
        out.append(
            SpanLink(
                trace_id=tid.hex(),
                span_id=sid.hex(),
                attributes=_attrs_json(_get(ln, "attributes", "attributes"), notes, label),
            )
        )
    return tuple(out)


def _attrs_json(kvs: Any, notes: _Notes, label: str) -> dict[str, Any]:
    if kvs is None:
        return {}
    if not isinstance(kvs, list):
        raise _SpanError("attributes must be a list of {key, value} objects")
    out: dict[str, Any] = {}
    for kv in kvs:
        if not isinstance(kv, dict):
            raise _SpanError("each attribute must be a {key, value} object")
        key = kv.get("key", "")  # proto3 JSON omits an empty key
        if not isinstance(key, str):
            raise _SpanError(f"attribute key must be a string, got {_short(key)}")
        v = kv.get("value")
        if v is None:
            out[key] = None
            continue
        if not isinstance(v, dict):
            raise _SpanError(f"attribute {_short(key)}: value must be an AnyValue object")
        s = v.get("stringValue")
        if isinstance(s, str):
            if len(s) > MAX_VALUE_CHARS:
                notes.add(
                    f"{label}: attribute {_short(key)} longer than {MAX_VALUE_CHARS} characters, truncated"
                )
                s = _truncate(s)
            out[key] = s
            continue
        budget = _Budget()
        try:
            out[key] = _value_json(v, 1, budget, key)
        except _TooBig:
            notes.add(f"{label}: attribute {_short(key)} larger than {MAX_VALUE_CHARS} characters, truncated")
            out[key] = TRUNCATED_MARKER
            continue
        if budget.deep:
            notes.add(
                f"{label}: attribute {_short(key)} nested deeper than {MAX_ATTRIBUTE_DEPTH} levels, truncated"
            )
    return out


def _value_json(v: Any, depth: int, budget: _Budget, key: str) -> Any:
    if not isinstance(v, dict):
        raise _SpanError(f"attribute {_short(key)}: value must be an AnyValue object")
    if not v:
        return None
    if (s := v.get("stringValue", v.get("string_value"))) is not None:
        if not isinstance(s, str):
            raise _SpanError(f"attribute {_short(key)}: stringValue must be a string")
        budget.remaining -= len(s)
        if budget.remaining < 0:
            raise _TooBig
        return s
    if (b := v.get("boolValue", v.get("bool_value"))) is not None:
        if not isinstance(b, bool):
            raise _SpanError(f"attribute {_short(key)}: boolValue must be true or false")
        return b
    if (i := v.get("intValue", v.get("int_value"))) is not None:
        return _int64_json(i, f"attribute {_short(key)}: intValue")
    if (d := v.get("doubleValue", v.get("double_value"))) is not None:
        return _double_json(d, key)
    arr = v.get("arrayValue", v.get("array_value"))
    kvl = v.get("kvlistValue", v.get("kvlist_value"))
    if arr is not None or kvl is not None:
        if depth > MAX_ATTRIBUTE_DEPTH:
            budget.deep = True
            return DEPTH_MARKER
        container = arr if arr is not None else kvl
        if not isinstance(container, dict):
            raise _SpanError(f"attribute {_short(key)}: arrayValue/kvlistValue must be an object")
        values = container.get("values") or []
        if not isinstance(values, list):
            raise _SpanError(f"attribute {_short(key)}: values must be a list")
        if arr is not None:
            return [_value_json(x, depth + 1, budget, key) for x in values]
        out: dict[str, Any] = {}
        for kv in values:
            if not isinstance(kv, dict) or not isinstance(k := kv.get("key", ""), str):
                raise _SpanError(
                    f"attribute {_short(key)}: kvlistValue entries must be {{key, value}} objects"
                )
            budget.remaining -= len(k)
            inner = kv.get("value")
            out[k] = None if inner is None else _value_json(inner, depth + 1, budget, key)
        return out
    if (by := v.get("bytesValue", v.get("bytes_value"))) is not None:
        if not isinstance(by, str):
            raise _SpanError(f"attribute {_short(key)}: bytesValue must be a base64 string")
        budget.remaining -= len(by)
        if budget.remaining < 0:
            raise _TooBig
        return by
    # Unknown value kinds (newer OTLP) are ignored like unknown fields.
    return None


def _double_json(d: Any, key: str) -> float:
    if isinstance(d, bool):
        raise _SpanError(f"attribute {_short(key)}: doubleValue must be a number")
    if isinstance(d, int | float):
        return float(d)
    if isinstance(d, str) and len(d) <= 64:
        try:
            return float(d)
        except ValueError:
            pass
    raise _SpanError(f"attribute {_short(key)}: doubleValue must be a number, got {_short(d)}")


def _scrub(obj: Any) -> Any:
    """Replace lone surrogates in every string and key (iteratively: the input may be deep)."""

    def fix(s: str) -> str:
        return s.encode("utf-8", "replace").decode("utf-8")

    root: list[Any] = [obj]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, idx = stack.pop()
        value = container[idx]
        if isinstance(value, str):
            container[idx] = fix(value)
        elif isinstance(value, list):
            stack.extend((value, i) for i in range(len(value)))
        elif isinstance(value, dict):
            fixed = {fix(k): v for k, v in value.items()}
            container[idx] = fixed
            stack.extend((fixed, k) for k in fixed)
    return root[0]


# ---------------------------------------------------------------- files


def read_otlp_file(path: Path) -> Iterator[RawSpan]:
    """Spans of an OTLP file, streamed: protobuf ``ExportTraceServiceRequest`` (any extension other
    than ``.json``/``.jsonl``; also the OTel Collector's length-prefixed proto files), OTLP/JSON
    (``.json``: one request, or one per line) or JSON lines (``.jsonl``), each optionally gzip-compressed.

    Invalid spans are skipped (see :func:`iter_otlp_file` for counts). Raises :class:`InputError`
    naming the file (and line) when it cannot be read.
    """
    for result in iter_otlp_file(path):
        yield from result.spans


def iter_otlp_file(path: Path, *, source: SpanSource = "file") -> Iterator[DecodeResult]:
    """Like :func:`read_otlp_file`, one :class:`DecodeResult` per request in the file."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    try:
        with path.open("rb") as raw:
            gzipped = raw.read(2) == _GZIP_MAGIC
        if name.endswith(".jsonl"):
            yield from _iter_jsonl(path, gzipped, source)
        elif name.endswith(".json"):
            yield from _iter_json(path, _read_all(path, gzipped), source)
        else:
            yield from _iter_proto(path, _read_all(path, gzipped), source)
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="check that the path exists and is a readable file",
        ) from exc


def _corrupt_gzip(path: Path, exc: Exception) -> InputError:
    return InputError(
        f"{path} is a truncated or corrupt gzip file ({exc})",
        hint="re-copy or re-export the file; `gzip -t FILE` checks it",
    )


def _read_all(path: Path, gzipped: bool) -> bytes:
    if not gzipped:
        return path.read_bytes()
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise _corrupt_gzip(path, exc) from exc


def _open(path: Path, gzipped: bool) -> BinaryIO:
    if gzipped:
        return gzip.open(path, "rb")  # type: ignore[return-value]  # GzipFile is a binary stream
    return path.open("rb")


def _iter_jsonl(path: Path, gzipped: bool, source: SpanSource) -> Iterator[DecodeResult]:
    with _open(path, gzipped) as fh:
        lineno = 0
        while True:
            try:
                line = fh.readline()
            except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
                raise _corrupt_gzip(path, exc) from exc
            if not line:
                return
            lineno += 1
            if not line.strip():
                continue
            yield _decode_line(path, lineno, line, source)


def _decode_line(path: Path, lineno: int, line: bytes, source: SpanSource) -> DecodeResult:
    try:
        return decode_json(line, source=source, logs=True)
    except OtlpDecodeError as exc:
        raise InputError(
            f"{path}, line {lineno}: {exc.message}",
            hint="the file is truncated or that line is not an OTLP/JSON request; fix or delete the line "
            "and run again (spans already read are stored, repeats are ignored)",
        ) from exc


def _iter_json(path: Path, data: bytes, source: SpanSource) -> Iterator[DecodeResult]:
    try:
        yield decode_json(data, source=source, logs=True)
        return
    except OtlpDecodeError as exc:
        cause = exc.__cause__
        # The Collector's file exporter writes one request per line even into a file named .json.
        if not (isinstance(cause, json.JSONDecodeError) and cause.msg == "Extra data"):
            raise InputError(
                f"{path}: {exc.message}",
                hint="the file is truncated or not OTLP/JSON; re-export it "
                "(protobuf files must not be named .json)",
            ) from exc
    for lineno, line in enumerate(data.splitlines(), 1):
        if line.strip():
            yield _decode_line(path, lineno, line, source)


def _iter_proto(path: Path, data: bytes, source: SpanSource) -> Iterator[DecodeResult]:
    def fail(exc: OtlpDecodeError, frame: int | None) -> InputError:
        at = f" (message {frame})" if frame is not None else ""
        return InputError(
            f"{path}{at}: {exc.message}",
            hint="the file is truncated or not an OTLP protobuf ExportTraceServiceRequest; "
            "OTLP/JSON files must end in .json or .jsonl",
        )

    frames = _length_prefixed(data)
    if frames is None:
        try:
            yield decode_protobuf(data, source=source)
        except OtlpDecodeError as exc:
            raise fail(exc, None) from exc
        return
    for i, frame in enumerate(frames, 1):
        try:
            yield decode_protobuf(frame, source=source)
        except OtlpDecodeError as exc:
            raise fail(exc, i) from exc


def _length_prefixed(data: bytes) -> list[bytes] | None:
    """Split the OTel Collector file exporter's proto format (4-byte big-endian length, message, …).

    A bare request starts with field 1 (byte 0x0a), which as a length prefix would mean a message of
    over 160 MB, so the two layouts do not collide for real files.
    """
    if len(data) < 4 or data[0] == 0x0A:
        return None
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            return None
        n = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if pos + n > len(data):
            return None
        frames.append(data[pos : pos + n])
        pos += n
    return frames
