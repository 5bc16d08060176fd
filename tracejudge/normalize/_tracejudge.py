"""tracejudge's own attributes, for what no convention records (DESIGN 5.4).

- ``tracejudge.step``: force a span's step (``context``, ``retrieval``, ... any StepKind).
- ``tracejudge.retrieval.filter``: JSON equality map or ``$``-operator filter the retrieval ran with.
- ``tracejudge.retrieval.principal``: who the retrieval ran as.
- ``tracejudge.retrieval.candidates``: JSON list ``[{"doc_id", "version", "score", "excluded_by"}]``
  of documents considered before filtering (``excluded_by``: filter, permission, rank or null).
- ``tracejudge.context.included`` / ``tracejudge.context.dropped``: JSON list of ``"doc_id@version"``
  strings or ``{"doc_id", "version", "reason"}`` objects: what context assembly kept and left out.
- ``tracejudge.context.budget``: the token or character budget (int).

A span with ``tracejudge.step = "context"`` or any ``tracejudge.context.*`` attribute is a
context-assembly step. Instrumentations that only record run metadata (LangChain's
``with_config(metadata=...)``) carry these keys there: OpenInference's ``metadata`` JSON,
OpenLLMetry's ``traceloop.association.properties.tracejudge.*``, Langfuse observation metadata
(see ``SpanView``).
"""

from __future__ import annotations

from typing import Any, get_args

from tracejudge.normalize._convention import Filter, NoRecords
from tracejudge.normalize._values import as_float, as_str
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Candidate, StepKind

STEP = "tracejudge.step"
FILTER = "tracejudge.retrieval.filter"
PRINCIPAL = "tracejudge.retrieval.principal"
CANDIDATES = "tracejudge.retrieval.candidates"
RETRIEVAL_PREFIX = "tracejudge.retrieval."
CONTEXT_PREFIX = "tracejudge.context."

_STEP_KINDS: frozenset[str] = frozenset(get_args(StepKind))
_EXCLUDED_BY = frozenset({"filter", "permission", "rank"})


class Tracejudge(NoRecords):
    """``tracejudge.step`` and ``tracejudge.context.*`` decide a span's step before any convention."""

    name = "tracejudge"

    def classify(self, view: SpanView) -> StepKind | None:
        forced = view.attrs.get(STEP)
        if isinstance(forced, str) and forced in _STEP_KINDS:
            return forced  # type: ignore[return-value]  # checked against StepKind above
        if view.has_key_prefix(CONTEXT_PREFIX):
            return "context"
        return None

    def retrieval_filter(self, view: SpanView) -> Filter | None:
        value = view.attrs.get(FILTER)
        if value is None:
            return None
        if isinstance(value, str):
            return view.json(FILTER, value), value
        return value, None


CONVENTION = Tracejudge()


def has_retrieval_attributes(view: SpanView) -> bool:
    """A span carrying ``tracejudge.retrieval.*`` is a retrieval when no convention says what else it is."""
    return view.has_key_prefix(RETRIEVAL_PREFIX)


def candidates(view: SpanView) -> tuple[Candidate, ...] | None:
    """``tracejudge.retrieval.candidates``; None when absent or not a list."""
    entries = _entries(view, CANDIDATES)
    if entries is None:
        return None
    return tuple(found for found in (_candidate(view, item) for item in entries) if found is not None)


def _candidate(view: SpanView, item: Any) -> Candidate | None:
    """One candidate: ``"doc_id@version"`` text or an object (None, with a gap, when it names no doc_id)."""
    if isinstance(item, str):
        ident, at, version = item.rpartition("@")
        return Candidate(doc_id=ident if at else version, version=version if at else None)
    doc_id = _entry_id(view, CANDIDATES, item)
    if doc_id is None:
        return None
    excluded = item.get("excluded_by")
    if excluded is not None and excluded not in _EXCLUDED_BY:
        view.gap("attribute_unparseable", f"{CANDIDATES}: unknown excluded_by {str(excluded)[:40]!r}")
        excluded = None
    return Candidate(
        doc_id=doc_id,
        version=as_str(item.get("version")),
        score=as_float(item.get("score")),
        excluded_by=excluded,
    )


def _entries(view: SpanView, key: str) -> list[Any] | None:
    """The JSON list attribute ``key``; None when absent or not a list (a gap says which)."""
    value = view.attrs.get(key)
    if value is None:
        return None
    parsed = view.json(key, value)
    if not isinstance(parsed, list):
        if parsed is not None:
            view.gap("attribute_unparseable", f"{key}: not a list")
        return None
    return parsed


def _entry_id(view: SpanView, key: str, item: Any) -> str | None:
    """An entry object's ``doc_id`` (or ``id``); None, with a gap, when it names none."""
    doc_id = as_str(item.get("doc_id") or item.get("id")) if isinstance(item, dict) else None
    if doc_id is None:
        view.gap("attribute_unparseable", f"{key}: an entry has no doc_id")
    return doc_id


def identities(view: SpanView, key: str) -> tuple[list[str], dict[str, str]]:
    """``tracejudge.context.included`` / ``.dropped``: ``doc_id@version`` identities and drop reasons."""
    ids: list[str] = []
    reasons: dict[str, str] = {}
    for item in _entries(view, key) or ():
        if isinstance(item, str):
            ids.append(item)
            continue
        doc_id = _entry_id(view, key, item)
        if doc_id is None:
            continue
        version = as_str(item.get("version"))
        identity = f"{doc_id}@{version}" if version else doc_id
        ids.append(identity)
        reason = as_str(item.get("reason"))
        if reason:
            reasons[identity] = reason
    return ids, reasons
