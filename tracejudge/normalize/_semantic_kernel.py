"""Semantic Kernel's model diagnostics: messages as Python log records.

With ``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true`` Semantic Kernel
logs every message of a chat call through Python ``logging`` (logger
``semantic_kernel.utils.telemetry.model_diagnostics``) with ``event.name`` =
``gen_ai.{system,user,assistant,tool}.message`` or ``gen_ai.choice`` and the message as JSON *text*
in the body (``{"role", "content", "tool_calls"}``; a choice is ``{"message": {...},
"finish_reason"}``). The OpenTelemetry ``LoggingHandler`` sends them as OTLP log records carrying the
chat span's ids; the store merges them into that span's events, a text body under ``body``. The chat
span itself holds no message. Without the OpenTelemetry logging handler the messages are not
exported at all (the trace then records no model input).
"""

from __future__ import annotations

from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import message_from_dict
from tracejudge.normalize._values import maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Message

_INPUT_EVENTS = frozenset(
    {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message"}
)


def _body(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """The event's JSON-text body as an object (only a text body: a map body is read by GenAI)."""
    body = attrs.get("body")
    if not isinstance(body, str) or body[:1] != "{":
        return None
    parsed = maybe_json(body)
    return parsed if isinstance(parsed, dict) else None


def _messages(view: SpanView, *, output: bool) -> ModelIO | None:
    found: list[Message] = []
    for event in view.raw.events:
        if output != (event.name == "gen_ai.choice") or (not output and event.name not in _INPUT_EVENTS):
            continue
        body = _body(event.attributes)
        if body is None:
            continue
        message = message_from_dict(body.get("message") if output else body)
        if message is not None:
            found.append(message)
    return ModelIO(messages=tuple(found)) if found else None


class SemanticKernel(NoRecords):
    """Semantic Kernel: GenAI message events whose body is the message as JSON text."""

    name = "semantic_kernel"

    def input_messages(self, view: SpanView) -> ModelIO | None:
        return _messages(view, output=False)

    def output_messages(self, view: SpanView) -> ModelIO | None:
        return _messages(view, output=True)


CONVENTION = SemanticKernel()
