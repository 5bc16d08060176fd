"""Phoenix REST spans -> RawSpans. Pure functions.

Phoenix returns a span's attributes flattened to dotted keys, with the JSON strings it parses on
ingest (``metadata``, ``document.metadata``, ``llm.prompt_template.variables``, ``tool.parameters``)
flattened too (``retrieval.documents.0.document.metadata.source``), and ``openinference.span.kind``
moved out of the attributes into ``span_kind``. The conversion undoes only that: those values are
folded back into one structured value under their own key, and the span kind is put back. Every
other attribute stays as Phoenix returned it (the normalizer reads flattened indexed keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracejudge.schema import RawSpan, SpanEvent, built_span_record
from tracejudge_collectors._time import parse_time, to_ns

__all__ = ["fold_attributes", "parse_time", "span_to_raw", "to_ns"]

_KIND = "openinference.span.kind"
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}
# Keys Phoenix parses from JSON strings on ingest, matched at the start of an attribute key.
_LEADING = ("llm.prompt_template.variables", "tool.parameters", "metadata")
# ... and anywhere inside one (each document of retrieval.documents / reranker.*_documents).
_INNER = ".document.metadata"
_STARTS = tuple(f"{base}." for base in _LEADING)
_LEADING_DOTTED = tuple(zip(_LEADING, _STARTS, strict=True))
_INNER_DOTTED = _INNER + "."
_ABSENT = object()


def _fold_base(key: str) -> str | None:
    if "metadata." not in key and not key.startswith(_STARTS):
        return None  # most keys: two scans in C instead of four prefix tests and a search
    for base, dotted in _LEADING_DOTTED:
        if key.startswith(dotted):
            return base
    at = key.find(_INNER_DOTTED)
    if at >= 0:
        return key[: at + len(_INNER)]
    if key.startswith("document.metadata."):
        return "document.metadata"
    return None


def _nest(flat: Mapping[str, Any]) -> Any:
    """Dotted keys back into nested dicts; a level whose keys are 0..n-1 holding objects becomes a list
    (Phoenix indexes only lists of objects)."""
    if "." not in "".join(flat) and not any(isinstance(v, dict) for v in flat.values()):
        # One level of scalars (a document's metadata, most often): nothing to nest, no level a list.
        return dict(flat)
    root: dict[str, Any] = {}
    # The levels made here, by id: a value that is itself an object (or null) is a leaf like any
    # other, never a level to put keys in (that changed the caller's value, and lost a null).
    made = {id(root)}
    for path, value in flat.items():
        parts = path.split(".")
        node = root
        for i, part in enumerate(parts[:-1]):
            child = node.get(part, _ABSENT)
            if child is _ABSENT:
                child = node[part] = {}
                made.add(id(child))
            elif id(child) not in made:
                # A leaf and a subtree share a prefix: keep the rest of this key whole.
                node[".".join(parts[i:])] = value
                break
            node = child
        else:
            node[path if id(node.get(parts[-1])) in made else parts[-1]] = value
    return _lists(root)


def _lists(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    converted = {k: _lists(v) for k, v in value.items()}
    if _is_indexed_objects(converted):
        return [converted[str(i)] for i in range(len(converted))]
    return converted


def _is_indexed_objects(level: dict[str, Any]) -> bool:
    """Whether a level is how Phoenix flattens a list: keys "0".."n-1", each an object (n distinct
    keys that all are among them are exactly them; most levels fail at "0")."""
    return (
        "0" in level
        and all(str(i) in level for i in range(1, len(level)))
        and all(isinstance(v, dict) for v in level.values())
    )


# How to fold one set of attribute keys: the keys folded (deleted from a copy of the attributes,
# which keeps the others in their order: a dict's copy and a few deletions take less than a
# comprehension over every key kept), and per base the keys folded under it with what follows the
# base, and whether the base is itself a key (then they stay flat, put back after the others).
# Spans of one kind from one instrumentor share their keys, so the plan is made once per set of
# keys; a bounded cache (emptied when full) keeps odd key sets from growing it.
_Plan = tuple[tuple[str, ...], tuple[tuple[str, tuple[tuple[str, str], ...], bool], ...]]
_PLANS: dict[tuple[str, ...], _Plan] = {}
_MAX_PLANS = 1024


def _plan(keys: tuple[str, ...]) -> _Plan:
    bases = {k: b for k in keys if (b := _fold_base(k)) is not None}
    groups: dict[str, list[tuple[str, str]]] = {}
    for key, base in bases.items():
        groups.setdefault(base, []).append((key, key[len(base) + 1 :]))
    kept = {k for k in keys if k not in bases}
    return tuple(bases), tuple((base, tuple(pairs), base in kept) for base, pairs in groups.items())


def fold_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Fold the flattened JSON-valued attributes back into structured values (see module doc)."""
    keys = tuple(attributes)
    plan = _PLANS.get(keys)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[keys] = _plan(keys)
    folded, groups = plan
    out = dict(attributes)
    for key in folded:
        del out[key]
    for base, pairs, base_is_a_key in groups:
        if base_is_a_key:
            # The value was not JSON Phoenix could parse, yet sub-keys exist: keep both as they came.
            out.update({key: attributes[key] for key, _ in pairs})
        else:
            out[base] = _nest({sub: attributes[key] for key, sub in pairs})
    return out


def span_to_raw(span: Mapping[str, Any], *, project: str | None = None) -> RawSpan:
    """One span of ``GET /v1/projects/{p}/spans`` as a RawSpan (``source="phoenix"``).

    Phoenix does not keep links or the OTLP span kind, and returns no resource attributes; the
    project rides along as the resource attribute ``openinference.project.name``."""
    context = span.get("context") or {}
    parent = span.get("parent_id")
    status = str(span.get("status_code") or "UNSET").upper()
    return built_span_record(
        RawSpan,
        {
            "trace_id": str(context["trace_id"]).lower(),
            "span_id": str(context["span_id"]).lower(),
            "parent_span_id": str(parent).lower() if parent else None,
            "name": str(span.get("name") or ""),
            "kind": 0,
            "start_time_unix_nano": to_ns(span.get("start_time")),
            "end_time_unix_nano": to_ns(span.get("end_time")),
            "attributes": _attributes(span),
            "events": _events(span),
            "links": (),
            "status_code": _STATUS.get(status, 0),
            "status_message": str(span.get("status_message") or ""),
            "resource": {"openinference.project.name": project} if project else {},
            "scope_name": "",
            "scope_version": "",
            "source": "phoenix",
            # Phoenix's span API returns no dropped counts.
            "dropped_attributes_count": 0,
            "dropped_events_count": 0,
            "dropped_links_count": 0,
        },
    )


def _attributes(span: Mapping[str, Any]) -> dict[str, Any]:
    """The span's attributes folded back, with the span kind Phoenix moved out of them put back."""
    attributes = fold_attributes(span.get("attributes") or {})
    kind = span.get("span_kind")
    if isinstance(kind, str) and kind and kind.upper() != "UNKNOWN" and _KIND not in attributes:
        attributes[_KIND] = kind.upper()
    return attributes


def _events(span: Mapping[str, Any]) -> tuple[SpanEvent, ...]:
    events = span.get("events")
    if not events:
        return ()  # most spans: no generator to set up
    return tuple(
        built_span_record(
            SpanEvent,
            {
                "name": str(e.get("name") or ""),
                "time_unix_nano": to_ns(e.get("timestamp")),
                "attributes": dict(e.get("attributes") or {}),
                "dropped_attributes_count": 0,
                "log_record": False,  # a span's own event
            },
        )
        for e in events
        if isinstance(e, Mapping)
    )
