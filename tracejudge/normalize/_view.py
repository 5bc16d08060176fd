"""One span as the convention tables see it: merged attributes, indexed groups, gap reporting."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tracejudge.normalize._values import decode, group_indexed, maybe_json, nanos_to_datetime
from tracejudge.schema import Gap, RawSpan, StepKind

_LF_METADATA = "langfuse.observation.metadata"
_LF_METADATA_PREFIX = _LF_METADATA + "."
_OI_METADATA = "metadata"
_TL_ASSOCIATION_PREFIX = "traceloop.association.properties."
_LF_COPIED = _LF_METADATA_PREFIX + "tracejudge."
_TL_COPIED = _TL_ASSOCIATION_PREFIX + "tracejudge."
_MLFLOW_SPAN_TYPE = "mlflow.spanType"
_OWN_PREFIX = "tracejudge."


class Gaps:
    """Collects gaps once each (the same attribute is never reported twice for one span)."""

    def __init__(self) -> None:
        self._items: list[Gap] = []
        self._seen: set[tuple[str, str | None, str]] = set()

    def add(self, kind: str, span_id: str | None, detail: str = "", switch: str = "") -> None:
        """A gap of ``kind``; with ``switch``, its detail goes on to name it (``Gap.switched``)."""
        gap = Gap.model_validate({"kind": kind, "span_id": span_id, "detail": detail})
        self.add_gap(gap.switched(switch) if switch else gap)

    def add_gap(self, gap: Gap) -> None:
        key = (gap.kind, gap.span_id, gap.detail)
        if key in self._seen:
            return
        self._seen.add(key)
        self._items.append(gap)

    def items(self) -> tuple[Gap, ...]:
        return tuple(self._items)


def _copied_keys(attrs: dict[str, Any], keys: str, extra: dict[str, Any]) -> None:
    """``tracejudge.*`` keys a tracer copied under its own prefix, without the prefix (``keys``: the keys
    joined, ``SpanView.keys``: without "tracejudge." in any, none is such a key)."""
    if _OWN_PREFIX not in keys:
        return
    for key, value in attrs.items():
        if key.startswith(_LF_COPIED):
            # The Langfuse SDK JSON-encodes each metadata value, strings included.
            extra[key[len(_LF_METADATA_PREFIX) :]] = maybe_json(value)
        elif key.startswith(_TL_COPIED):
            # OpenLLMetry copies LangChain run metadata into association properties.
            extra[key[len(_TL_ASSOCIATION_PREFIX) :]] = value


def _mlflow_encoded(attrs: dict[str, Any]) -> dict[str, Any]:
    """``tracejudge.*`` values of an MLflow span, decoded: MLflow's ``set_attribute`` stores every value as
    its JSON text, so a string arrives in quotes (``"buyer-cn"``) and a dict as JSON text."""
    return {
        key: maybe_json(value)
        for key, value in attrs.items()
        if key.startswith(_OWN_PREFIX) and isinstance(value, str)
    }


def _run_metadata(value: str, extra: dict[str, Any]) -> None:
    """``tracejudge.*`` keys of run metadata: OpenInference writes it (e.g. LangChain's
    ``with_config(metadata=...)``) as one JSON object, the only channel such instrumentations offer
    for our keys."""
    metadata = maybe_json(value)
    if not isinstance(metadata, dict):
        return
    for key, item in metadata.items():
        if isinstance(key, str) and key.startswith("tracejudge."):
            extra.setdefault(key, item)


class SpanView:
    """A raw span with the attributes every convention reads (Langfuse metadata merged in)."""

    __slots__ = (
        "_groups",
        "attrs",
        "convention",
        "gaps",
        "keys",
        "parsed",
        "raw",
        "resource",
        "span_id",
        "start",
        "step",
    )

    def __init__(self, raw: RawSpan, gaps: Gaps) -> None:
        self.raw = raw
        self.gaps = gaps
        self.span_id = raw.span_id
        self.start: datetime | None = nanos_to_datetime(raw.start_time_unix_nano)
        self.resource: dict[str, Any] = raw.resource
        self.parsed: dict[int, tuple[str, Any]] = {}
        """Texts :meth:`json` parsed as JSON, by ``id``, with what they decode to: each closes as a JSON
        document, and ``cut_values`` reads its strings from it instead of parsing it again (the text is held,
        so its id is not reused meanwhile)."""
        self.keys = ""
        """The attribute keys joined by newlines (:meth:`has_key_prefix`)."""
        self.attrs = self._merge(raw.attributes)
        self._groups: dict[str, dict[int, dict[str, Any]]] | None = None
        self.step: StepKind = "other"
        self.convention = ""

    def _merge(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Read attributes that Langfuse moved into observation metadata as if they were span attributes.

        Spans sent to Langfuse's OTel endpoint by other SDKs keep their attributes under
        ``metadata.attributes`` (values stringified); a user may also put ``tracejudge.*`` keys
        straight into observation metadata. ``tracejudge.*`` keys of run metadata recorded by
        LangChain instrumentations (OpenInference ``metadata`` JSON, OpenLLMetry
        ``traceloop.association.properties.*``) are read the same way. Real span attributes win, except
        on an MLflow span, whose ``tracejudge.*`` values are read decoded from the JSON text MLflow stores.
        """
        extra: dict[str, Any] = {}
        self.keys = "\n".join(attrs)
        if _LF_METADATA in attrs:
            self._langfuse_metadata(attrs[_LF_METADATA], extra)
        _copied_keys(attrs, self.keys, extra)
        if isinstance(attrs.get(_OI_METADATA), str) and "tracejudge." in attrs[_OI_METADATA]:
            _run_metadata(attrs[_OI_METADATA], extra)
        decoded = _mlflow_encoded(attrs) if _MLFLOW_SPAN_TYPE in attrs else {}
        if not extra and not decoded:
            return attrs
        extra.update(attrs)
        extra.update(decoded)
        self.keys = "\n".join(extra)
        return extra

    def _langfuse_metadata(self, value: Any, extra: dict[str, Any]) -> None:
        """Langfuse observation metadata: other SDKs' ``attributes``, ``tracejudge.*`` keys and the
        ``resourceAttributes`` (the resource, when the span carries none of its own)."""
        metadata = self.json(_LF_METADATA, value)
        if not isinstance(metadata, dict):
            return
        inner = self.json("langfuse.observation.metadata.attributes", metadata.get("attributes"))
        if isinstance(inner, dict):
            extra.update(inner)
        extra.update((key, item) for key, item in metadata.items() if key.startswith("tracejudge."))
        resource = metadata.get("resourceAttributes")
        if isinstance(resource, dict) and not self.resource:
            self.resource = resource

    def json(self, key: str, value: Any, *, python_literal: bool = False) -> Any:
        """Decode a value that must be structured; record ``attribute_unparseable`` and return None if not."""
        parsed, ok = decode(value, python_literal=python_literal)
        if not ok:
            self.gap("attribute_unparseable", f"{key}: not valid JSON")
            return None
        if isinstance(value, str) and not python_literal:  # parsed by json.loads, not as a Python literal
            self.parsed[id(value)] = value, parsed
        return parsed

    def has_key_prefix(self, prefix: str) -> bool:
        """Whether any attribute key starts with ``prefix``. Asked of every span by several conventions: a
        prefix that is in no key is ruled out by one search of the joined keys, without a walk over them."""
        return prefix in self.keys and any(key.startswith(prefix) for key in self.attrs)

    def get(self, *keys: str) -> Any:
        """The first present, non-empty attribute among ``keys``."""
        if self.attrs.keys().isdisjoint(keys):  # most keys asked for are absent: none is looked up in turn
            return None
        for key in keys:
            value = self.attrs.get(key)
            if value is not None and value != "":
                return value
        return None

    def indexed(self, prefix: str) -> dict[int, dict[str, Any]] | None:
        """Flattened ``<prefix>.<N>.<suffix>`` attributes, grouped once per span."""
        if self._groups is None:
            self._groups = group_indexed(self.attrs)
        return self._groups.get(prefix)

    def gap(self, kind: str, detail: str = "", switch: str = "") -> None:
        self.gaps.add(kind, self.span_id, detail, switch)
