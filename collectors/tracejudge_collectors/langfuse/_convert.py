"""Langfuse observations (both API generations) -> RawSpans. Pure functions.

Attribute names follow Langfuse's own OTel attributes (``langfuse.observation.*``, ``langfuse.trace.*``),
which the normalizer reads. Trace-level facts go on the trace's single root observation; when a
trace has no single root (none, or several top-level observations), a synthetic root span
(``langfuse.synthetic_root = true``) carries them and adopts the top-level observations; an adopted
observation that names a parent not in the trace keeps the id it names
(``langfuse.observation.parent_observation_id``).
Scores on the trace ride along as ``langfuse.scores`` (a list of plain dicts) on that same span.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracejudge.schema import RawSpan
from tracejudge_collectors._time import to_ns


def _text(value: Any) -> str | None:
    """I/O as the raw string (v4 sends strings), or the JSON text of a structured value (legacy)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _metadata(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"value": value}
    if isinstance(value, dict):
        return value
    return {"value": value}


PARENT_NOT_RECEIVED = "langfuse.observation.parent_observation_id"


def synthetic_root_id(trace_id: str) -> str:
    """Span id of the synthetic root span of a trace (deterministic, 16 hex)."""
    return hashlib.sha256(f"langfuse-trace:{trace_id}".encode()).hexdigest()[:16]


def _boolean_value(value: Any, _label: Any) -> Any:
    return value.lower() == "true" if isinstance(value, str) else bool(value)


def _numeric_value(value: Any, _label: Any) -> Any:
    return float(value) if isinstance(value, int | float) else value


def _label_value(value: Any, label: Any) -> Any:
    return value if label is None else label


# A score's typed value by its data type, from ``value`` and ``stringValue`` (the label, when there is one).
_SCORE_VALUE = {"BOOLEAN": _boolean_value, "NUMERIC": _numeric_value}


def _score_observation(score: Mapping[str, Any]) -> Any:
    """The observation a score is on: ``observationId`` (v1), or a v3 subject of kind observation."""
    subject = score.get("subject") or {}
    if score.get("observationId") is None and subject.get("kind") == "observation":
        return subject.get("id")
    return score.get("observationId")


def normalize_score(score: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 (legacy) or v3 score as a plain dict with a typed value."""
    data_type = str(score.get("dataType") or "NUMERIC")
    typed = _SCORE_VALUE.get(data_type, _label_value)
    out = {
        "id": score.get("id"),
        "name": score.get("name"),
        "value": typed(score.get("value"), score.get("stringValue")),
        "data_type": data_type,
        "source": score.get("source"),
        "comment": score.get("comment"),
        "observation_id": _score_observation(score),
        "timestamp": score.get("timestamp"),
        "config_id": score.get("configId"),
        "queue_id": score.get("queueId"),
        "author_user_id": score.get("authorUserId"),
    }
    return {k: v for k, v in out.items() if v is not None}


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != "" and value != [] and value != {}:
        attrs[key] = value


def observation_attributes(o: Mapping[str, Any]) -> dict[str, Any]:
    """The ``langfuse.observation.*`` attributes of one observation (v2 or legacy shape)."""
    attrs: dict[str, Any] = {}
    _put(attrs, "langfuse.observation.id", o.get("id"))
    _put(attrs, "langfuse.observation.type", o.get("type"))
    _put(attrs, "langfuse.observation.input", _text(o.get("input")))
    _put(attrs, "langfuse.observation.output", _text(o.get("output")))
    _put(attrs, "langfuse.observation.metadata", _metadata(o.get("metadata")))
    _put(attrs, "langfuse.observation.model.name", o.get("providedModelName") or o.get("model"))
    _put(attrs, "langfuse.observation.model.parameters", o.get("modelParameters"))
    _put(attrs, "langfuse.observation.usage_details", o.get("usageDetails"))
    _put(attrs, "langfuse.observation.cost_details", o.get("costDetails"))
    _put(attrs, "langfuse.observation.prompt.name", o.get("promptName"))
    _put(attrs, "langfuse.observation.prompt.version", o.get("promptVersion"))
    _put(attrs, "langfuse.observation.level", o.get("level"))
    _put(attrs, "langfuse.observation.status_message", o.get("statusMessage"))
    _put(attrs, "langfuse.observation.completion_start_time", o.get("completionStartTime"))
    _put(attrs, "langfuse.version", o.get("version"))
    _put(attrs, "langfuse.environment", o.get("environment"))
    return attrs


def trace_attributes(trace: Mapping[str, Any], scores: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``langfuse.trace.*`` attributes (and user, session, environment, scores) of a trace."""
    attrs: dict[str, Any] = {}
    _put(attrs, "langfuse.trace.id", trace.get("id"))
    _put(attrs, "langfuse.trace.name", trace.get("name"))
    _put(attrs, "langfuse.trace.tags", list(trace.get("tags") or []))
    _put(attrs, "langfuse.trace.input", _text(trace.get("input")))
    _put(attrs, "langfuse.trace.output", _text(trace.get("output")))
    _put(attrs, "langfuse.trace.metadata", _metadata(trace.get("metadata")))
    _put(attrs, "langfuse.environment", trace.get("environment"))
    _put(attrs, "langfuse.release", trace.get("release"))
    _put(attrs, "user.id", trace.get("userId"))
    _put(attrs, "session.id", trace.get("sessionId"))
    _put(attrs, "langfuse.scores", [normalize_score(s) for s in scores])
    return attrs


def _span(o: Mapping[str, Any], trace_id: str, parent: str | None, extra: Mapping[str, Any]) -> RawSpan:
    level = o.get("level")
    return RawSpan(
        trace_id=trace_id,
        span_id=str(o["id"]).lower(),
        parent_span_id=parent,
        name=str(o.get("name") or o.get("type") or "observation"),
        start_time_unix_nano=to_ns(o.get("startTime")),
        end_time_unix_nano=to_ns(o.get("endTime")),
        attributes={**observation_attributes(o), **extra},
        status_code=2 if level == "ERROR" else 0,
        status_message=str(o.get("statusMessage") or "") if level == "ERROR" else "",
        scope_name="langfuse",
        source="langfuse",
    )


def _oid(o: Mapping[str, Any]) -> str:
    return str(o["id"]).lower()


def _parent(o: Mapping[str, Any]) -> str | None:
    parent = o.get("parentObservationId")
    return str(parent).lower() if parent else None


def _synthetic_root(
    trace: Mapping[str, Any], trace_id: str, obs: Sequence[Mapping[str, Any]], attrs: Mapping[str, Any]
) -> RawSpan:
    """The span that carries the trace-level facts when no single observation is the root: it spans
    the trace's timestamp and every observation."""
    starts = [n for o in obs if (n := to_ns(o.get("startTime")))]
    ends = [n for o in obs if (n := to_ns(o.get("endTime")))]
    start = to_ns(trace.get("timestamp")) or (min(starts) if starts else 0)
    return RawSpan(
        trace_id=trace_id,
        span_id=synthetic_root_id(trace_id),
        parent_span_id=None,
        name=str(trace.get("name") or "trace"),
        start_time_unix_nano=min([start, *starts]) if start else 0,
        end_time_unix_nano=max(ends) if ends else start,
        attributes={**attrs, "langfuse.synthetic_root": True},
        scope_name="langfuse",
        source="langfuse",
    )


def trace_to_spans(
    trace: Mapping[str, Any],
    observations: Iterable[Mapping[str, Any]],
    scores: Sequence[Mapping[str, Any]] = (),
) -> list[RawSpan]:
    """One trace's observations as RawSpans. ``trace`` holds trace-level fields (``id``, ``name``,
    ``tags``, ``input``, ``output``, ``userId``, ``sessionId``, ``environment``, ``timestamp``): from
    ``GET /traces/{id}`` on the legacy API, or gathered from the root observation's
    ``trace_context`` fields on v4. Ids are lowercased as the store keys them."""
    trace_id = str(trace["id"]).lower()
    obs = sorted(observations, key=lambda o: (str(o.get("startTime") or ""), str(o.get("id"))))
    ids = {_oid(o) for o in obs}
    # Top-level: no parent, or a parent that is not in the trace.
    top_ids = [_oid(o) for o in obs if _parent(o) not in ids]
    t_attrs = trace_attributes(trace, scores)
    if len(top_ids) == 1:
        return [_span(o, trace_id, _parent(o), t_attrs if _oid(o) == top_ids[0] else {}) for o in obs]
    root = _synthetic_root(trace, trace_id, obs, t_attrs)
    adopted = set(top_ids)
    return [
        root,
        *(
            _span(o, trace_id, root.span_id, _lost_parent(o))
            if _oid(o) in adopted
            else _span(o, trace_id, _parent(o), {})
            for o in obs
        ),
    ]


def _lost_parent(o: Mapping[str, Any]) -> dict[str, Any]:
    """An adopted observation that names a parent not in the trace keeps the id it names
    (``langfuse.observation.parent_observation_id``): its parent was not received — a lost span of its run,
    or another run's root under a reused trace id — where one naming none is a run's own root."""
    parent = _parent(o)
    return {PARENT_NOT_RECEIVED: parent} if parent else {}


def trace_fields_from_root(root: Mapping[str, Any]) -> dict[str, Any]:
    """Trace-level fields from a v4 root observation (basic, io and trace_context field groups)."""
    return {
        "id": root.get("traceId"),
        "name": root.get("traceName") or root.get("name"),
        "tags": root.get("tags") or [],
        "input": root.get("input"),
        "output": root.get("output"),
        "userId": root.get("userId"),
        "sessionId": root.get("sessionId"),
        "environment": root.get("environment"),
        "release": root.get("release"),
        "timestamp": root.get("startTime"),
    }
