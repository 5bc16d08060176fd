"""LiteLLM's ``otel`` callback (``litellm.callbacks = ["otel"]``).

With ``USE_OTEL_LITELLM_REQUEST_SPAN=true`` (or outside any span of the caller) LiteLLM opens a
``litellm_request`` span with the OTel GenAI messages, which the GenAI convention reads. Inside a caller's
span without that switch it opens none: the GenAI attributes it then sets land on the caller's span
after that span has ended and are lost, and the only record of the call is a ``raw_gen_ai_request``
span whose ``llm.<provider>.messages`` / ``llm.<provider>.choices`` hold the provider's request and
response as Python reprs (``{'role': 'user', ...}``), read here as Python literals. That span is a
model call; under a ``litellm_request`` span it is the innermost of two, so the one read.
"""

from __future__ import annotations

from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import messages_from_value
from tracejudge.normalize._values import decode
from tracejudge.normalize._view import SpanView
from tracejudge.schema import StepKind

RAW_SPAN = "raw_gen_ai_request"


def _raw(view: SpanView, suffix: str) -> tuple[str, Any] | None:
    """The ``llm.<provider>.<suffix>`` attribute of a raw request span: its key and value."""
    if view.raw.name != RAW_SPAN:
        return None
    for key, value in view.attrs.items():
        if key.startswith("llm.") and key.endswith(f".{suffix}") and key.count(".") == 2:
            return key, value
    return None


def _messages(view: SpanView, suffix: str) -> ModelIO | None:
    found = _raw(view, suffix)
    if found is None:
        return None
    key, value = found
    parsed, ok = decode(value, python_literal=True)
    messages = messages_from_value({"choices": parsed} if suffix == "choices" else parsed) if ok else None
    if messages is None:
        view.gap("attribute_unparseable", f"{key}: not a message list (JSON or Python literal)")
        return None
    return ModelIO(messages=tuple(messages))


class LiteLLM(NoRecords):
    """LiteLLM's ``raw_gen_ai_request`` span: the provider request and response as Python literals."""

    name = "litellm"

    def classify(self, view: SpanView) -> StepKind | None:
        return "model" if _raw(view, "messages") is not None else None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        return _messages(view, "messages")

    def output_messages(self, view: SpanView) -> ModelIO | None:
        return _messages(view, "choices")


CONVENTION = LiteLLM()
