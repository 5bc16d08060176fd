"""MLflow's own trace export (``Trace.to_json()``, ``mlflow traces get``) as an OTLP/JSON request.

An MLflow trace is ``{"info": {...}, "data": {"spans": [...]}}``; ``TraceData.to_json()`` is the
``{"spans": [...]}`` part alone (MLflow 2 adds ``request`` and ``response``). Each span is MLflow's
``Span.to_dict()`` — the OpenTelemetry span it wraps, with its attributes as MLflow stored them
(``mlflow.spanType``, ``mlflow.spanInputs``, ``mlflow.spanOutputs``, …, each value the JSON text of the Python
value), which is what MLflow's OTLP export sends too: the spans are re-wrapped, value for value, and read as
any OTLP request (normalize's MLflow convention reads them).

Three span shapes, by MLflow version (``mlflow/entities/span.py``):

- MLflow 2: ``context`` ``{span_id, trace_id}`` (``0x``-prefixed hex), ``parent_id``, ``start_time`` /
  ``end_time`` (ns), ``status_code`` / ``status_message``, events with ``timestamp``;
- MLflow 3: the OTLP proto as a dict — ``trace_id``, ``span_id``,
  ``parent_span_id`` base64, ``start_time_unix_nano`` / ``end_time_unix_nano``, ``status``
  ``{code: "STATUS_CODE_OK", message}``, events with ``time_unix_nano``;
- newer MLflow (span dict version 4): ``trace_id`` is MLflow's (``tr-…``), ``otel_trace_id`` the
  OpenTelemetry one, span ids hex, ``status.code`` ``OK`` / ``ERROR`` / ``UNSET``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tracejudge_collectors.otel._otlp import OtlpDecodeError

__all__ = ["attributes_json", "mlflow_request"]

_SCOPE = "mlflow"


def _spans_of(obj: dict[str, Any]) -> list[Any] | None:
    """The span list of an MLflow trace or trace data object; None when ``obj`` is neither."""
    data = obj.get("data")
    if isinstance(obj.get("info"), dict) and isinstance(data, dict) and isinstance(data.get("spans"), list):
        spans: list[Any] = data["spans"]
        return spans
    if isinstance(obj.get("spans"), list) and set(obj) <= {"spans", "request", "response"}:
        spans = obj["spans"]
        if spans and all(_mlflow_span(s) for s in spans):
            return spans  # TraceData.to_json(): its spans say they are MLflow's
    return None


def _mlflow_span(span: object) -> bool:
    """Whether a span dict is MLflow's: MLflow 2's ``context``, or attributes MLflow writes on every span."""
    if not isinstance(span, dict) or not isinstance(span.get("attributes"), dict):
        return False
    return "context" in span or any(str(k).startswith("mlflow.") for k in span["attributes"])


def mlflow_request(obj: object) -> dict[str, Any] | None:
    """``obj`` as an OTLP/JSON export request when it is an MLflow trace (or MLflow 2's trace data); None
    when it is not one. Raises :class:`OtlpDecodeError` naming the span when a span cannot be read (an
    id MLflow would not write, such as one redacted by hand)."""
    if not isinstance(obj, dict):
        return None
    spans = _spans_of(obj)
    if spans is None:
        return None
    converted = []
    for n, span in enumerate(spans):
        if not isinstance(span, dict):
            raise OtlpDecodeError(f"MLflow trace: span {n} is not an object")
        converted.append(_span(span, n))
    scope = {"scope": {"name": _SCOPE}, "spans": converted}
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]}


def _span(span: dict[str, Any], n: int) -> dict[str, Any]:
    context = span.get("context")
    if isinstance(context, dict):  # MLflow 2
        trace_id, span_id, parent = context.get("trace_id"), context.get("span_id"), span.get("parent_id")
        start, end = span.get("start_time"), span.get("end_time")
        status = span.get("status_code")
        message = span.get("status_message")
    else:
        trace_id = span.get("otel_trace_id", span.get("trace_id"))
        span_id, parent = span.get("span_id"), span.get("parent_span_id")
        start, end = span.get("start_time_unix_nano"), span.get("end_time_unix_nano")
        given = span.get("status")
        status = given.get("code") if isinstance(given, dict) else given
        message = given.get("message") if isinstance(given, dict) else None
    name = span.get("name")
    where = f"MLflow trace: span {n} ({name!r})"
    out: dict[str, Any] = {
        "traceId": _hex_id(trace_id, 16, f"{where}: trace id"),
        "spanId": _hex_id(span_id, 8, f"{where}: span id"),
        "name": name if isinstance(name, str) else "",
        "kind": 1,
        "startTimeUnixNano": _nanos(start, f"{where}: start time"),
        "endTimeUnixNano": _nanos(end, f"{where}: end time") if end is not None else "0",
        "attributes": attributes_json(span.get("attributes"), where),
        "events": [_event(e, where) for e in span.get("events") or []],
        "status": {"code": _status(status), **({"message": message} if isinstance(message, str) else {})},
    }
    if parent:
        out["parentSpanId"] = _hex_id(parent, 8, f"{where}: parent span id")
    return out


def _hex_id(value: Any, size: int, what: str) -> str:
    """An id as OTLP/JSON's hex: MLflow writes hex (``0x``-prefixed in MLflow 2), base64 of the bytes (its
    proto dicts), or, for a trace, its own ``tr-`` + hex."""
    if isinstance(value, str):
        text = value.removeprefix("0x").removeprefix("tr-")
        try:
            if len(text) == 2 * size and bytes.fromhex(text):
                return text.lower()
        except ValueError:
            pass
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw.hex()
    elif isinstance(value, int) and 0 < value < 1 << (8 * size):
        return f"{value:0{2 * size}x}"
    raise OtlpDecodeError(f"{what} {value!r} is not an id MLflow writes (hex, 0x-hex or base64)")


def _nanos(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise OtlpDecodeError(f"{what} {value!r} is not nanoseconds")
    try:
        return str(int(value))
    except ValueError as exc:
        raise OtlpDecodeError(f"{what} {value!r} is not nanoseconds") from exc


def _status(code: Any) -> int:
    text = str(code or "").upper()
    return 2 if "ERROR" in text else 1 if text.endswith("OK") else 0


def _value(value: Any) -> dict[str, Any]:
    """A JSON value as an OTLP/JSON ``AnyValue`` (an object as a ``kvlistValue``, null as an empty one)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": _key_values(value)}}
    if value is None:
        return {}
    return {"stringValue": value if isinstance(value, str) else str(value)}


def _key_values(values: dict[Any, Any]) -> list[dict[str, Any]]:
    return [{"key": str(key), "value": _value(value)} for key, value in values.items()]


def attributes_json(values: Any, where: str) -> list[dict[str, Any]]:
    """A span's attributes (an object, or null for none) as OTLP/JSON key-values; ``where`` names the
    span in the error raised when they are not an object."""
    if values is None:
        return []
    if not isinstance(values, dict):
        raise OtlpDecodeError(f"{where}: attributes are not an object")
    return _key_values(values)


def _event(event: Any, where: str) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise OtlpDecodeError(f"{where}: an event is not an object")
    time = event.get("time_unix_nano", event.get("timestamp"))
    return {
        "name": event.get("name") if isinstance(event.get("name"), str) else "",
        "timeUnixNano": _nanos(time, f"{where}: event time") if time is not None else "0",
        "attributes": attributes_json(event.get("attributes"), where),
    }
