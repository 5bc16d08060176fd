"""Google ADK 1.x's built-in tracing (tracer ``gcp.vertex.agent``, ``gen_ai.system = gcp.vertex.agent``).

ADK 2 writes plain OTel GenAI spans instead (read by the GenAI convention; content only with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``).

ADK records a model call (``call_llm``) as the request and response it exchanged with the model, each
one JSON attribute in Gemini's shape rather than as GenAI messages:

- ``gcp.vertex.agent.llm_request``: ``{"model", "config": {"system_instruction", "tools", ...},
  "contents": [{"role": "user" | "model", "parts": [{"text"} | {"function_call": {"id", "name",
  "args"}} | {"function_response": {"id", "name", "response"}}]}]}``; a tool's result reaches the
  model as a ``function_response`` part;
- ``gcp.vertex.agent.llm_response``: ``{"content": {"role": "model", "parts": [...]}, ...}``.

A tool execution (``execute_tool <name>``, ``gen_ai.operation.name = execute_tool``) records its
arguments in ``gcp.vertex.agent.tool_call_args`` and its result in ``gcp.vertex.agent.tool_response``
(JSON); its ``llm_request`` / ``llm_response`` are ``{}``. ADK sets no content switch: the content is
always recorded (facts in reference/frameworks.md).
"""

from __future__ import annotations

import json
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED, as_str
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message

SYSTEM = "gcp.vertex.agent"
LLM_REQUEST = "gcp.vertex.agent.llm_request"
LLM_RESPONSE = "gcp.vertex.agent.llm_response"
TOOL_ARGS = "gcp.vertex.agent.tool_call_args"
TOOL_RESPONSE = "gcp.vertex.agent.tool_response"
_ROLES = {"model": "assistant", "user": "user", "system": "system", "tool": "tool"}


def is_adk(view: SpanView) -> bool:
    return view.attrs.get("gen_ai.system") == SYSTEM or any(
        key in view.attrs for key in (LLM_REQUEST, TOOL_RESPONSE)
    )


def _object(view: SpanView, key: str) -> dict[str, Any] | None:
    """The JSON object of an ADK attribute; None when absent, empty (``{}``) or not an object."""
    value = view.attrs.get(key)
    if value is None or value in ("", "{}", REDACTED):
        return None
    parsed = view.json(key, value) if isinstance(value, str) else value
    if not isinstance(parsed, dict) or not parsed:
        if parsed is not None:
            view.gap("attribute_unparseable", f"{key}: not a JSON object")
        return None
    return parsed


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _message(content: Any) -> list[Message]:
    """One Gemini ``Content`` as messages: text and function calls in the role's message, each
    function response as a ``tool`` message (what the model was sent as the tool's result)."""
    if not isinstance(content, dict):
        return []
    parts = [part for part in content.get("parts") or () if isinstance(part, dict)]
    responses = [
        Message(role="tool", content=_text(r.get("response")))
        for r in _part_objects(parts, "function_response")
    ]
    return _said(_role(content), parts) + responses


def _role(content: dict[str, Any]) -> str:
    role = as_str(content.get("role"))
    return _ROLES.get(role or "", role or "user")


def _said(role: str, parts: list[dict[str, Any]]) -> list[Message]:
    """The role's own message: its text parts and function calls (none when it has neither)."""
    texts = [part["text"] for part in parts if isinstance(part.get("text"), str)]
    calls = [
        {"id": as_str(call.get("id")), "name": as_str(call.get("name")), "arguments": call.get("args")}
        for call in _part_objects(parts, "function_call")
    ]
    if not texts and not calls:
        return []
    return [Message(role=role, content="\n".join(texts) or None, tool_calls=tuple(calls))]


def _part_objects(parts: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The ``key`` objects of the parts that hold one (``function_call``, ``function_response``)."""
    return [part[key] for part in parts if isinstance(part.get(key), dict)]


class ADK(NoRecords):
    """Google ADK: model calls from ``llm_request`` / ``llm_response``, tool I/O from its own attributes."""

    name = "adk"

    def input_messages(self, view: SpanView) -> ModelIO | None:
        request = _object(view, LLM_REQUEST)
        if request is None:
            return None
        messages: list[Message] = []
        config = request.get("config")
        system = config.get("system_instruction") if isinstance(config, dict) else None
        if isinstance(system, str) and system:
            messages.append(Message(role="system", content=system))
        for content in request.get("contents") or ():
            messages.extend(_message(content))
        return ModelIO(messages=tuple(messages))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        response = _object(view, LLM_RESPONSE)
        if response is None:
            return None
        return ModelIO(messages=tuple(_message(response.get("content"))))

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its result (a tool is a retrieval when marked or when its
        result names documents of the manifest)."""
        # A missing or redacted result is no document list: documents_from_value reads it as None.
        return documents_from_value(view, self.tool_result(view))

    def tool_arguments(self, view: SpanView) -> Any | None:
        return view.attrs.get(TOOL_ARGS) if is_adk(view) else None

    def tool_result(self, view: SpanView) -> Any | None:
        return view.attrs.get(TOOL_RESPONSE) if is_adk(view) else None


CONVENTION = ADK()
