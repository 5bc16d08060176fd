"""Raw spans as collected, before any interpretation."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

SCHEMA_VERSION = 1

SpanSource = Literal["otlp", "file", "langfuse", "phoenix"]


class _Frozen(BaseModel):
    # defer_build: a record's validator is built when first used, not on import — a command builds
    # the few dozen records it uses, not all of them (same validation, same schema).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def _id_text(value: Any) -> Any:
    # YAML reads `version: 2` or `ticket: 311` as a number; an id is still the text the user wrote.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


IdText = Annotated[str, BeforeValidator(_id_text)]
"""An id or version as text: a number (``version: 2`` in YAML) becomes ``"2"``."""
MaybeIdText = Annotated[str | None, BeforeValidator(_id_text)]
"""An optional :data:`IdText`."""


def _not_a_number(value: Any) -> Any:
    # pydantic would read `task_time: 123` as 123 seconds after 1970 — a verdict-changing guess.
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(
            "a time must be a date or an ISO 8601 date-time such as 2026-03-01T09:00:00Z, "
            f"not the number {value}"
        )
    return value


Time = Annotated[datetime, BeforeValidator(_not_a_number)]
"""A time read from a file the user wrote: a date or ISO 8601 text, never a number of seconds."""


class SpanEvent(_Frozen):
    """An event recorded on a span (for example OpenLLMetry's ``db.query.result``)."""

    name: str
    """Event name as sent."""
    time_unix_nano: int = 0
    """When the event happened, nanoseconds since the Unix epoch (0 when unknown)."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Event attributes, decoded to plain JSON values."""
    dropped_attributes_count: int = 0
    """Attributes the SDK dropped from the event at its limit (OTLP ``Event.dropped_attributes_count``, or a
    log record's ``LogRecord.dropped_attributes_count``): what they held is not in ``attributes``."""
    log_record: bool = False
    """Whether it reached the span as an OTLP log record (a GenAI event sent as a log, merged into its
    span's events): what it dropped, it dropped at the log SDK's limit
    (OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT)."""


class SpanLink(_Frozen):
    """A link from a span to another span."""

    trace_id: str
    """Linked trace id, 32 lowercase hex characters."""
    span_id: str
    """Linked span id, 16 lowercase hex characters."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Link attributes, decoded to plain JSON values."""


class RawSpan(_Frozen):
    """One span exactly as a collector received it, with attribute values decoded to JSON values.

    Structured OTLP values (arrays, key-value lists) become lists and dicts; strings stay strings
    (JSON inside a string is parsed later, by the normalizer, which knows which keys carry JSON).
    """

    trace_id: str
    """Trace id, 32 lowercase hex characters."""
    span_id: str
    """Span id, 16 lowercase hex characters."""
    parent_span_id: str | None = None
    """Parent span id, or None for a root span."""
    name: str = ""
    """Span name."""
    kind: int = 0
    """OTLP span kind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer."""
    start_time_unix_nano: int = 0
    """Start, nanoseconds since the Unix epoch."""
    end_time_unix_nano: int = 0
    """End, nanoseconds since the Unix epoch."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Span attributes, decoded to plain JSON values."""
    events: tuple[SpanEvent, ...] = ()
    """Span events in recorded order."""
    links: tuple[SpanLink, ...] = ()
    """Span links."""
    status_code: int = 0
    """OTLP status: 0 unset, 1 ok, 2 error."""
    status_message: str = ""
    """Status description, if any."""
    resource: dict[str, Any] = Field(default_factory=dict)
    """Resource attributes of the process that produced the span."""
    scope_name: str = ""
    """Instrumentation scope name (which library produced the span)."""
    scope_version: str = ""
    """Instrumentation scope version."""
    source: SpanSource = "otlp"
    """Which collector brought the span in."""
    dropped_attributes_count: int = 0
    """Attributes the SDK dropped at its limit (OTLP ``Span.dropped_attributes_count``; the SDK's
    ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``, 128 by default): the span recorded more than ``attributes``
    holds. 0 from sources that do not say (spans stored as JSON before it was kept)."""
    dropped_events_count: int = 0
    """Events the SDK dropped at its limit (OTLP ``Span.dropped_events_count``;
    ``OTEL_SPAN_EVENT_COUNT_LIMIT``, 128 by default): the span recorded more than ``events`` holds."""
    dropped_links_count: int = 0
    """Links the SDK dropped at its limit (OTLP ``Span.dropped_links_count``;
    ``OTEL_SPAN_LINK_COUNT_LIMIT``)."""


_SpanRecord = TypeVar("_SpanRecord", RawSpan, SpanEvent, SpanLink)
# Each record's fields, copied as a built record's fields set (a set's copy takes half what
# set(frozenset) does).
_FIELDS: dict[type[Any], set[str]] = {cls: set(cls.model_fields) for cls in (RawSpan, SpanEvent, SpanLink)}
_setattr = object.__setattr__  # frozen records: what pydantic itself uses to fill one in


def built_span_record(cls: type[_SpanRecord], values: dict[str, Any]) -> _SpanRecord:
    """``cls.model_construct(**values)`` for ``values`` that name every field of ``cls`` with a value
    of its type, without model_construct's per-field default and alias walk, which is slower than
    validating. For readers that build records from input already checked field by field (the OTLP
    decoder, the store's OTLP-form reader, the Phoenix conversion); their tests hold each result
    equal to the validated record. Never for values a user wrote."""
    record = cls.__new__(cls)
    _setattr(record, "__dict__", values)
    _setattr(record, "__pydantic_fields_set__", _FIELDS[cls].copy())
    _setattr(record, "__pydantic_extra__", None)
    _setattr(record, "__pydantic_private__", None)
    return record


SESSION_KEYS = ("session.id", "gen_ai.conversation.id", "langfuse.session.id")
"""Span attributes naming the conversation a trace is one turn of (OpenInference and Langfuse's
``session.id``, OTel GenAI's ``gen_ai.conversation.id``, Langfuse's own OTel attribute), in the
order they are read."""


def span_session_id(span: RawSpan) -> str | None:
    """The session (conversation) a span says its trace belongs to, or None."""
    return attributes_session_id(span.attributes)


def attributes_session_id(attributes: Mapping[str, Any]) -> str | None:
    """The session a span's attributes name (see :data:`SESSION_KEYS`), or None."""
    for key in SESSION_KEYS:
        value = attributes.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None
