"""The ``Convention`` protocol: what normalize asks of every tracing convention it reads.

Each convention (OpenInference, OTel GenAI, OpenLLMetry, Langfuse, Haystack, tracejudge's own
attributes, free-form I/O) is one module with one object implementing this protocol. A reader
returns ``None`` when the span holds no such record in that convention: normalize then asks the
next convention of the field's line in the precedence table (``_precedence.py``). Any other value,
even an empty one, is the record: an empty message list is "recorded, and empty", and stops the
search. ``NoRecords`` answers ``None`` to everything, so a module implements only what its
convention records.
"""

# ruff: noqa: ARG002  (NoRecords: the protocol's signatures, answering None to everything)

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message, StepKind

Filter = tuple[Any, str | None]
"""A retrieval filter: the parsed value (None when it has no structured form) and its raw text."""


@dataclass(frozen=True)
class ModelIO:
    """What a convention recorded of a model call's input or output."""

    messages: tuple[Message, ...] | None = None
    """The messages, when recorded as a message list (possibly empty); None when not."""
    texts: tuple[str, ...] = ()
    """Raw texts recorded instead of messages (completion prompts, free-form values); never empty strings."""
    redacted: bool = False
    """Whether a value this convention holds was hidden (``__REDACTED__``)."""

    @property
    def found(self) -> bool:
        """Whether this is the record (later conventions are not asked); a redacted-only read is not."""
        return self.messages is not None or bool(self.texts)


class Convention(Protocol):
    """One tracing convention's readers; ``None`` where the span holds no such record."""

    name: str
    """The name a span read by this convention carries (``SpanNode.convention``)."""

    def classify(self, view: SpanView) -> StepKind | None:
        """The step this span is in this convention."""
        ...

    def input_messages(self, view: SpanView) -> ModelIO | None:
        """A model call's input."""
        ...

    def output_messages(self, view: SpanView) -> ModelIO | None:
        """A model call's output."""
        ...

    def documents(self, view: SpanView) -> list[Document] | None:
        """The documents a retrieval span returned."""
        ...

    def query(self, view: SpanView) -> str | None:
        """The query a retrieval span ran with (may be ``__REDACTED__``)."""
        ...

    def usage(self, view: SpanView) -> Mapping[str, Any] | None:
        """A model call's token counts: ``input``, ``output``, ``total`` (values not yet checked)."""
        ...

    def retrieval_filter(self, view: SpanView) -> Filter | None:
        """The filter a retrieval span ran with."""
        ...

    def tool_arguments(self, view: SpanView) -> Any | None:
        """A tool call's arguments (JSON text or a structured value)."""
        ...

    def tool_result(self, view: SpanView) -> Any | None:
        """A tool call's result (JSON text or a structured value)."""
        ...

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:
        """The user's request of the trace ("" when this convention owns the root and found none)."""
        ...

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:
        """The answer the user got and the span that recorded it ("" text: owned, none found)."""
        ...


class NoRecords:
    """A convention that records nothing: subclass it and override what the convention records."""

    name = ""

    def classify(self, view: SpanView) -> StepKind | None:
        return None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        return None

    def output_messages(self, view: SpanView) -> ModelIO | None:
        return None

    def documents(self, view: SpanView) -> list[Document] | None:
        return None

    def query(self, view: SpanView) -> str | None:
        return None

    def usage(self, view: SpanView) -> Mapping[str, Any] | None:
        return None

    def retrieval_filter(self, view: SpanView) -> Filter | None:
        return None

    def tool_arguments(self, view: SpanView) -> Any | None:
        return None

    def tool_result(self, view: SpanView) -> Any | None:
        return None

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:
        return None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:
        return None
