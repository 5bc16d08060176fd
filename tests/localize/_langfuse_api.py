"""A trace as `collect langfuse` reads it back from a Langfuse server it was sent to (its OTel endpoint).

Langfuse makes each span an observation (``id`` the span id, ``parentObservationId`` its parent), its
``langfuse.observation.*`` attributes the observation's fields (type, input, output, metadata keys, model,
usage), the other attributes ``metadata.attributes``, the resource and scope ``metadata.resourceAttributes``
and ``metadata.scope``; the
trace's own record takes its input and output from the spans that set ``langfuse.trace.input`` / ``.output``,
else from the root's. The collector's own conversion (``trace_to_spans``) then gives the spans tracejudge
reads: one top-level observation is the root, several are adopted by a synthetic root carrying the trace's
record. ``generation``: ``v3`` reads the trace record (``GET /traces/{id}``: written by each root in turn, the
last one written wins), ``v4`` the root observations (``GET /v2/observations``: the trace's input and output
only where a single observation is the root). Span events are not kept (Langfuse reads some into I/O only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from tracejudge.schema import RawSpan
from tracejudge_collectors.langfuse import trace_to_spans
from tracejudge_collectors.langfuse._pull import _v4_trace_fields

__all__ = ["Generation", "api_spans"]

Generation = Literal["v3", "v4"]

_OWN = "langfuse.observation."
_META = "langfuse.observation.metadata."
_FIELDS = {
    "input": "langfuse.observation.input",
    "output": "langfuse.observation.output",
    "providedModelName": "langfuse.observation.model.name",
    "modelParameters": "langfuse.observation.model.parameters",
    "usageDetails": "langfuse.observation.usage_details",
    "level": "langfuse.observation.level",
    "statusMessage": "langfuse.observation.status_message",
}
# Where Langfuse's OTel ingestion finds a span's input and output when no langfuse.* key sets them (its I/O
# precedence, the keys of the conventions a root records its task in).
_IO = {
    f: (
        f"langfuse.trace.{f}",
        f"langfuse.observation.{f}",
        f"{f}.value",
        f"traceloop.entity.{f}",
        f"gen_ai.{f}.messages",
    )
    for f in ("input", "output")
}


def _iso(ns: int) -> str | None:
    if not ns:
        return None
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)
    return at.isoformat().replace("+00:00", "Z")


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _io(span: RawSpan, field: str) -> Any:
    return next((span.attributes[k] for k in _IO[field] if span.attributes.get(k) not in (None, "")), None)


def _observation(span: RawSpan, roots: set[str]) -> dict[str, Any]:
    attrs = dict(span.attributes)
    trace_level = (_OWN, "langfuse.trace.", "langfuse.internal.")
    own = {k: attrs.pop(k) for k in list(attrs) if k.startswith(trace_level)}
    metadata = {k.removeprefix(_META): _decoded(v) for k, v in own.items() if k.startswith(_META)}
    if attrs:
        metadata["attributes"] = attrs
    # What Langfuse gives every observation it made of an OpenTelemetry span.
    metadata["resourceAttributes"] = dict(span.resource)
    metadata["scope"] = {"name": span.scope_name}
    kind = own.get(_OWN + "type")
    out: dict[str, Any] = {
        "id": span.span_id,
        "traceId": span.trace_id,
        "parentObservationId": span.parent_span_id or None,
        "isRootObservation": not span.parent_span_id,
        "name": span.name,
        "startTime": _iso(span.start_time_unix_nano),
        "endTime": _iso(span.end_time_unix_nano),
        "type": str(kind).upper() if kind else "SPAN",
        "metadata": metadata or None,
        **{field: own[key] for field, key in _FIELDS.items() if key in own},
    }
    if span.status_code == 2:
        out["level"], out["statusMessage"] = "ERROR", span.status_message
    if span.span_id in roots:
        # A root's observation carries the task's input and output as Langfuse reads them for the trace.
        out.update({field: value for field in _IO if (value := _io(span, field)) is not None})
        out.update(
            traceName=span.attributes.get("langfuse.trace.name") or span.name,
            sessionId=span.attributes.get("session.id"),
            userId=span.attributes.get("user.id"),
        )
    return out


def _trace_record(spans: Sequence[RawSpan], roots: list[RawSpan]) -> dict[str, Any]:
    """The legacy trace record: each root (and each span setting a trace field) writes it in turn, in end
    order, a later write replacing the fields it sets."""
    trace: dict[str, Any] = {"id": spans[0].trace_id}
    starts = [s.start_time_unix_nano for s in spans if s.start_time_unix_nano]
    trace["timestamp"] = _iso(min(starts, default=0))
    writers = sorted(
        (s for s in spans if s in roots or any(k.startswith("langfuse.trace.") for k in s.attributes)),
        key=lambda s: s.end_time_unix_nano,
    )
    for span in writers:
        fields = {
            "name": span.attributes.get("langfuse.trace.name") or (span.name if span in roots else None),
            "sessionId": span.attributes.get("session.id"),
            "userId": span.attributes.get("user.id"),
            "input": _io(span, "input") if span in roots else span.attributes.get("langfuse.trace.input"),
            "output": _io(span, "output") if span in roots else span.attributes.get("langfuse.trace.output"),
        }
        trace.update({k: v for k, v in fields.items() if v not in (None, "")})
    return trace


def api_spans(spans: Sequence[RawSpan], generation: Generation) -> list[RawSpan]:
    """``spans`` sent to Langfuse's OTel endpoint and collected back through its API (``generation``)."""
    roots = [s for s in spans if not s.parent_span_id]
    observations = [_observation(s, {r.span_id for r in roots}) for s in spans]
    if generation == "v4":
        trace = _v4_trace_fields(spans[0].trace_id, observations)
    else:
        trace = _trace_record(spans, roots)
    return trace_to_spans(trace, observations)
