"""The Vercel AI SDK's telemetry (``experimental_telemetry: {isEnabled: true}``): ``ai.*`` attributes.

A call (``ai.operationId`` ``ai.generateText``, ``ai.streamText``, ``ai.generateObject``,
``ai.streamObject``) opens a span recording ``ai.prompt`` — JSON ``{"prompt": "…"}`` or ``{"system",
"messages"}`` — and the result, ``ai.response.text`` or ``ai.response.object``; each request to the
provider is a child ``….doGenerate`` / ``….doStream`` span recording ``ai.prompt.messages`` (the message
list sent: content as ``text`` parts, the model's earlier calls as ``tool-call`` parts and their results as
``tool-result`` parts) and ``ai.response.text`` / ``ai.response.toolCalls``. The child is the model call; the
call's own span is the user's request and answer when it is the trace's root.

Each tool the SDK runs for the model is an ``ai.toolCall`` span (vercel/ai's
``packages/otel/src/legacy-open-telemetry.ts``): ``ai.toolCall.name``, ``ai.toolCall.id`` (the model's call
id), ``ai.toolCall.args`` (the arguments, JSON text) and ``ai.toolCall.result`` (the return value, JSON
text), the last two only where inputs and outputs are recorded (``recordInputs`` / ``recordOutputs``). A
tool call, whose result may name the manifest's documents (a search tool): it is not read as a retrieval
unless marked as one.
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
TOOL_CALL = "ai.toolCall"
TOOL_NAME = "ai.toolCall.name"
TOOL_ID = "ai.toolCall.id"
TOOL_ARGS = "ai.toolCall.args"
TOOL_RESULT = "ai.toolCall.result"
_CALLS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
_REQUESTS = frozenset(f"{call}.{step}" for call in _CALLS for step in ("doGenerate", "doStream"))


def _operation(view: SpanView) -> str | None:
    return as_str(view.attrs.get(OPERATION))


def _runs_tool(view: SpanView) -> bool:
    return _operation(view) == TOOL_CALL


def tool_name(view: SpanView) -> str | None:
    """The tool an ``ai.toolCall`` span ran; None on any other span."""
    return as_str(view.attrs.get(TOOL_NAME)) if _runs_tool(view) else None


def tool_call_id(view: SpanView) -> str | None:
    """The model's id of the call an ``ai.toolCall`` span ran; None on any other span."""
    return as_str(view.attrs.get(TOOL_ID)) if _runs_tool(view) else None


def _part(part: Any) -> Any:
    """An AI SDK content part in the shape the shared readers know: ``tool-call`` (``toolCallId``,
    ``toolName``, ``input`` / ``args``) a tool call, ``tool-result`` (``output`` ``{type, value}``, or
    ``result``) a tool result; any other part as it is."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "tool-call":
        arguments = part.get("input", part.get("args"))
        return {
            "type": "tool_call",
            "id": part.get("toolCallId"),
            "name": part.get("toolName"),
            "arguments": arguments,
        }
    if kind == "tool-result":
        output = part.get("output", part.get("result"))
        if isinstance(output, dict) and "value" in output and isinstance(output.get("type"), str):
            output = output["value"]  # LanguageModelV2ToolResultOutput: {type: text | json | …, value}
        return {"type": "tool_result", "result": output}
    return part


def _prompt_messages(value: Any) -> Any:
    """``ai.prompt.messages`` with each message's content parts in the shared readers' shapes."""
    if not isinstance(value, list):
        return value
    return [
        m | {"content": [_part(p) for p in m["content"]]}
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        else m
        for m in value
    ]


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
    """The AI SDK: its provider requests are the model calls, its call span the request and answer, its
    ``ai.toolCall`` spans the tools it ran."""

    name = "vercel-ai"

    def classify(self, view: SpanView) -> StepKind | None:
        operation = _operation(view)
        if operation == TOOL_CALL:
            return "tool"
        return "model" if operation in _REQUESTS else None

    def tool_arguments(self, view: SpanView) -> Any | None:
        return view.attrs.get(TOOL_ARGS) if _runs_tool(view) else None

    def tool_result(self, view: SpanView) -> Any | None:
        return view.attrs.get(TOOL_RESULT) if _runs_tool(view) else None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        if _operation(view) not in _REQUESTS or MESSAGES not in view.attrs:
            return None
        found = messages_from_value(_prompt_messages(view.json(MESSAGES, view.attrs[MESSAGES])))
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
