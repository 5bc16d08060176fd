"""The Vercel AI SDK's telemetry (``experimental_telemetry: {isEnabled: true}``): ``ai.*`` attributes.

A call (``ai.operationId`` ``ai.generateText``, ``ai.streamText``, ``ai.generateObject``,
``ai.streamObject``) opens a span recording ``ai.prompt`` — JSON ``{"prompt": "…"}`` or ``{"system",
"messages"}`` — and the result, ``ai.response.text`` or ``ai.response.object``; each request to the
provider is a child ``….doGenerate`` / ``….doStream`` span recording ``ai.prompt.messages`` (the message
list sent, content as text parts) and ``ai.response.text`` / ``ai.response.toolCalls``. The child is the
model call; the call's own span is the user's request and answer when it is the trace's root.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import messages_from_value, request_text
from tracejudge.normalize._values import as_str, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Message, StepKind

OPERATION = "ai.operationId"
PROMPT = "ai.prompt"
MESSAGES = "ai.prompt.messages"
TEXT = "ai.response.text"
OBJECT = "ai.response.object"
TOOL_CALLS = "ai.response.toolCalls"
_CALLS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
_REQUESTS = frozenset(f"{call}.{step}" for call in _CALLS for step in ("doGenerate", "doStream"))


def _operation(view: SpanView) -> str | None:
    return as_str(view.attrs.get(OPERATION))


def _tool_call(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or as_str(item.get("toolName")) is None:
        return None
    arguments = item.get("args", item.get("input"))
    return {
        "id": as_str(item.get("toolCallId")),
        "name": item["toolName"],
        "arguments": maybe_json(arguments),
    }


class Vercel(NoRecords):
    """The AI SDK: its provider requests are the model calls, its call span the request and answer."""

    name = "vercel-ai"

    def classify(self, view: SpanView) -> StepKind | None:
        return "model" if _operation(view) in _REQUESTS else None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        if _operation(view) not in _REQUESTS or MESSAGES not in view.attrs:
            return None
        found = messages_from_value(view.json(MESSAGES, view.attrs[MESSAGES]))
        if found is None:
            view.gap("attribute_unparseable", f"{MESSAGES}: not a message list")
            return None
        return ModelIO(messages=tuple(found))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        if _operation(view) not in _REQUESTS:
            return None
        text = as_str(view.attrs.get(TEXT)) or as_str(view.attrs.get(OBJECT))
        calls = maybe_json(view.attrs.get(TOOL_CALLS))
        tools = tuple(c for c in map(_tool_call, calls if isinstance(calls, list) else []) if c is not None)
        if text is None and not tools:
            return None
        return ModelIO(messages=(Message(role="assistant", content=text, tool_calls=tools),))

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        if _operation(root) not in _CALLS or PROMPT not in root.attrs:
            return None
        return request_text(maybe_json(root.attrs[PROMPT])) or None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        if _operation(root) not in _CALLS:
            return None
        text = as_str(root.attrs.get(TEXT)) or as_str(root.attrs.get(OBJECT))
        return (text, root.span_id) if text else None


CONVENTION = Vercel()
