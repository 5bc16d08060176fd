"""Decode OTLP log export requests (protobuf and OTLP/JSON) into :class:`LogEvent` records.

The GenAI instrumentations (e.g. ``opentelemetry-instrumentation-openai-v2``) send message content as
log-based events: LogRecords carrying the model-call span's trace and span id and an event name such as
``gen_ai.user.message`` or ``gen_ai.choice``. Each such record becomes a :class:`LogEvent`, which the
store merges into its span's events.

A record without a trace id and span id cannot be attached to anything tracejudge reads, so it is
*rejected* (counted in ``rejected`` with a message saying why, OTLP partial success) rather than stored;
the rest of the request is kept. Records with a malformed id or field are rejected the same way. The
abuse limits of the trace decoder (depth, size, truncation markers) apply to bodies and attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracejudge.store import LogEvent
from tracejudge_collectors.otel._otlp import (
    INT64_MAX,
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
from tracejudge_collectors.otel._proto import ExportLogsServiceRequest

__all__ = ["LogDecodeResult", "decode_logs_json", "decode_logs_json_object", "decode_logs_protobuf"]

NO_SPAN_CONTEXT = (
    "no trace id and span id: tracejudge keeps only log records emitted inside a span "
    "(GenAI events such as gen_ai.user.message); other logs belong in a log backend"
)

_SEVERITY_NAMES = {"SEVERITY_NUMBER_UNSPECIFIED": 0} | {
    f"SEVERITY_NUMBER_{level}{'' if k == 1 else k}": 1 + 4 * i + k - 1
    for i, level in enumerate(("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"))
    for k in range(1, 5)
}


@dataclass(frozen=True, slots=True)
class LogDecodeResult:
    """What one OTLP log request (or file chunk) decoded to."""

    events: list[LogEvent]
    """Records with a span context that passed validation, in request order."""
    rejected: int = 0
    """Records dropped: no span context, bad ids, malformed fields."""
    errors: list[str] = field(default_factory=list)
    """Why records were rejected, and warnings about truncated values (at most 20 lines plus a count)."""

    @property
    def message(self) -> str:
        """The errors as one line, for OTLP's ``partial_success.error_message``."""
        return "; ".join(self.errors)


def _result(notes: Notes, events: list[LogEvent]) -> LogDecodeResult:
    return LogDecodeResult(events=events, rejected=notes.rejected, errors=notes.errors)


class _KeyValue:
    """A stand-in KeyValue so a body (an AnyValue) goes through the attribute decoder and its limits."""

    __slots__ = ("key", "value")

    def __init__(self, value: Any) -> None:
        self.key = "body"
        self.value = value


def _check_span_context(tid: bytes, sid: bytes) -> None:
    """A record is kept only inside a span: both ids present, well formed and not all zero."""
    if not tid.strip(b"\x00") and not sid.strip(b"\x00"):
        raise SpanError(NO_SPAN_CONTEXT)
    if len(tid) != 16 or tid == ZERO_TRACE:
        raise SpanError(f"trace id must be 16 bytes and not all zero (got {len(tid)} bytes)")
    if len(sid) != 8 or sid == ZERO_SPAN:
        raise SpanError(f"span id must be 8 bytes and not all zero (got {len(sid)} bytes)")


def _event(
    tid: bytes,
    sid: bytes,
    event_name: str,
    attrs: dict[str, Any],
    time_ns: int,
    severity: int,
    body: Any,
    dropped: int = 0,
) -> LogEvent:
    _check_span_context(tid, sid)
    if time_ns > INT64_MAX:
        raise SpanError("time beyond the year 2262")
    # Older instrumentations name the event in the ``event.name`` attribute instead.
    legacy = attrs.get("event.name")
    name = event_name or (legacy if isinstance(legacy, str) and legacy else "log")
    return LogEvent(
        trace_id=tid.hex(),
        span_id=sid.hex(),
        name=name,
        time_unix_nano=time_ns,
        severity_number=severity,
        body=body,
        attributes=attrs,
        dropped_attributes_count=dropped,
    )


# ---------------------------------------------------------------- protobuf


def decode_logs_protobuf(body: bytes, *, limits: DecodeLimits | None = None) -> LogDecodeResult:
    """Decode a binary ``ExportLogsServiceRequest``.

    Raises :class:`OtlpDecodeError` when the body is not a readable message (:class:`LimitError`
    when it is beyond ``limits``); bad records are counted in ``rejected`` instead.
    """
    req = parse_pb(
        ExportLogsServiceRequest(),
        body,
        hint="send an OTLP log export request to /v1/logs (traces go to /v1/traces); a truncated "
        "body or a JSON body sent as application/x-protobuf also cause this",
    )
    notes = Notes(limits)
    records = [lr for rl in req.resource_logs for sl in rl.scope_logs for lr in sl.log_records]
    if len(records) > notes.limits.max_spans:
        raise too_many(len(records), notes.limits, "log records")
    events = [event for lr in records if (event := _record_pb(lr, notes)) is not None]
    return _result(notes, events)


def _record_pb(lr: Any, notes: Notes) -> LogEvent | None:
    """One protobuf LogRecord as an event, or None when it is rejected (counted in ``notes``)."""
    check_name(lr.event_name, notes.limits, "a log record's event name")
    label = f"log record {short(lr.event_name) if lr.event_name else '(no event name)'}"
    try:
        attrs = attrs_pb(lr.attributes, notes, label)
        value = attrs_pb([_KeyValue(lr.body)], notes, label)["body"] if lr.HasField("body") else None
        return _event(
            lr.trace_id,
            lr.span_id,
            lr.event_name,
            attrs,
            lr.time_unix_nano or lr.observed_time_unix_nano,
            lr.severity_number,
            value,
            lr.dropped_attributes_count,
        )
    except (SpanError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        ids = f"span {lr.span_id.hex() or '<none>'} of trace {lr.trace_id.hex() or '<none>'}"
        notes.reject(f"{label} of {ids}", str(exc) or type(exc).__name__)
        return None


# ---------------------------------------------------------------- OTLP/JSON


def decode_logs_json(body: bytes | str, *, limits: DecodeLimits | None = None) -> LogDecodeResult:
    """Decode an OTLP/JSON ``ExportLogsServiceRequest`` (hex ids, integer enums, int64 as strings),
    as leniently as the trace decoder (snake_case keys, enum names, base64 ids)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    obj = load_json_body(body, request="ExportLogsServiceRequest", limits=limits)
    return decode_logs_json_object(obj, limits=limits)


def _bad(msg: str) -> OtlpDecodeError:
    return OtlpDecodeError(
        f"malformed OTLP/JSON log request: {msg}",
        hint='send {"resourceLogs": [{"scopeLogs": [{"logRecords": [...]}]}]}',
    )


def decode_logs_json_object(obj: Any, *, limits: DecodeLimits | None = None) -> LogDecodeResult:
    """Decode an already parsed OTLP/JSON log request (see :func:`decode_logs_json`)."""
    if not isinstance(obj, dict):
        raise _bad(f"it must be a JSON object, got {type(obj).__name__}")
    notes = Notes(limits)
    count = count_json(
        obj, ("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records")
    )
    if count > notes.limits.max_spans:
        raise too_many(count, notes.limits, "log records")
    events: list[LogEvent] = []
    for rl in _list_of(obj, "resourceLogs", "resource_logs", "request"):
        for sl in _list_of(rl, "scopeLogs", "scope_logs", "resourceLogs entry"):
            for lr in _list_of(sl, "logRecords", "log_records", "scopeLogs entry"):
                event = _record_json(lr, notes)
                if event is not None:
                    events.append(event)
    return _result(notes, events)


def _list_of(d: Any, camel: str, snake: str, where: str) -> list[Any]:
    if not isinstance(d, dict):
        raise _bad(f"each {where} must be an object")
    v = get(d, camel, snake)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _bad(f"{camel} in the {where} must be a list, got {type(v).__name__}")
    return v


def _record_json(lr: Any, notes: Notes) -> LogEvent | None:
    where = "a log record that is not an object"
    try:
        if not isinstance(lr, dict):
            raise SpanError("not a JSON object")
        event_name = str_json(get(lr, "eventName", "event_name"), "eventName")
        check_name(event_name, notes.limits, "a log record's eventName")
        label = f"log record {short(event_name) if event_name else '(no event name)'}"
        raw_tid = get(lr, "traceId", "trace_id")
        raw_sid = get(lr, "spanId", "span_id")
        where = f"{label} of span {short(raw_sid)} of trace {short(raw_tid)}"
        tid = id_json(raw_tid, 16, "traceId") if raw_tid else b""
        sid = id_json(raw_sid, 8, "spanId") if raw_sid else b""
        attrs = attrs_json(get(lr, "attributes", "attributes"), notes, label)
        raw_body = lr.get("body")
        body = (
            None
            if raw_body is None
            else attrs_json([{"key": "body", "value": raw_body}], notes, label)["body"]
        )
        time_ns = int64_json(get(lr, "timeUnixNano", "time_unix_nano"), "timeUnixNano", unsigned=True)
        if not time_ns:
            time_ns = int64_json(
                get(lr, "observedTimeUnixNano", "observed_time_unix_nano"),
                "observedTimeUnixNano",
                unsigned=True,
            )
        severity = enum_json(get(lr, "severityNumber", "severity_number"), _SEVERITY_NAMES, "severityNumber")
        dropped = int64_json(
            get(lr, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            unsigned=True,
        )
        return _event(tid, sid, event_name, attrs, time_ns, severity, body, dropped)
    except (SpanError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        notes.reject(where, str(exc) or type(exc).__name__)
        return None
