"""LangChain 1.x tools under openinference-instrumentation-langchain (0.1.80), OpenLLMetry's
opentelemetry-instrumentation-langchain (0.62) and the Langfuse SDK's LangChain ``CallbackHandler``
(langfuse 5.2).

A tool run by a LangChain agent (``create_agent``'s tool node, LangGraph's ``ToolNode``) returns a
``ToolMessage``; the tool span (TOOL) records it as ``output.value`` in LangChain's serialized form,
``{"type": "tool", "data": {"content": ..., "tool_call_id": ..., ...}}``. The Langfuse handler's ``tool``
observation records it as ``langfuse.observation.output``, the message's fields at the top level:
``{"content": ..., "type": "tool", "tool_call_id": ..., "status": ...}``. OpenLLMetry's ``execute_tool`` span
records ``{"output": <the serialized message>, "kwargs": ...}`` as ``gen_ai.tool.call.result`` (and
``traceloop.entity.output``), the message in LangChain's constructor form ``{"lc": 1, "type": "constructor",
"id": [..., "ToolMessage"], "kwargs": {"content": ..., "tool_call_id": ...}}``. The tool's result is that
``content`` (JSON text when the tool returned documents). Model calls, retrievers and chains are plain
OpenInference (or plain Langfuse observations).

A prompt template's run (OpenLLMetry's ``execute_task ChatPromptTemplate``) records the prompt it rendered as
``traceloop.entity.output``: ``{"outputs": <a ChatPromptValue in constructor form>}``, its ``kwargs.messages``
each in constructor form (``SystemMessage``, ``HumanMessage`` …). In a ``prompt | model`` sequence that prompt
is what the chat model was sent (:func:`rendered_roles`).
"""

from __future__ import annotations

from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._langfuse import OUTPUT as LANGFUSE_OUTPUT
from tracejudge.normalize._langfuse import TYPE as LANGFUSE_TYPE
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document

SCOPE = "openinference.instrumentation.langchain"
OPENLLMETRY_SCOPE = "opentelemetry.instrumentation.langchain"


class LangChain(NoRecords):
    """LangChain: a tool span's serialized ``ToolMessage`` output is the tool's result ``content``."""

    name = "langchain"

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its ``ToolMessage``'s content."""
        result = self.tool_result(view)
        return None if result is None else documents_from_value(view, maybe_json(result))

    def tool_result(self, view: SpanView) -> Any | None:
        if view.raw.scope_name == SCOPE and view.attrs.get("openinference.span.kind") == "TOOL":
            parsed = _parsed(view.attrs.get("output.value"))
            data = parsed.get("data") if isinstance(parsed, dict) and parsed.get("type") == "tool" else None
            return data.get("content") if isinstance(data, dict) else None
        operation = view.attrs.get("gen_ai.operation.name")
        if view.raw.scope_name == OPENLLMETRY_SCOPE and operation == "execute_tool":
            value = view.attrs.get("gen_ai.tool.call.result", view.attrs.get("traceloop.entity.output"))
            parsed = _parsed(value)
            message = parsed.get("output") if isinstance(parsed, dict) else None
            return _constructed_content(message)
        kind = view.attrs.get(LANGFUSE_TYPE)
        if isinstance(kind, str) and kind.upper() == "TOOL":
            # Only a ToolMessage's dump (its type and the call it answers): a tool observation of any other
            # output is the tool's own value, read as such by the free-form reader.
            parsed = _parsed(view.attrs.get(LANGFUSE_OUTPUT))
            if isinstance(parsed, dict) and parsed.get("type") == "tool" and "tool_call_id" in parsed:
                return parsed.get("content")
        return None


def _constructed_content(message: Any) -> Any | None:
    """The ``content`` of a ``ToolMessage`` in LangChain's constructor form; None for anything else."""
    if not isinstance(message, dict) or message.get("type") != "constructor":
        return None
    path, kwargs = message.get("id"), message.get("kwargs")
    if not isinstance(path, list) or not path or path[-1] != "ToolMessage" or not isinstance(kwargs, dict):
        return None
    return kwargs.get("content")


# A rendered prompt's message classes -> their roles.
_ROLES = {"SystemMessage": "system", "HumanMessage": "user", "AIMessage": "assistant", "ToolMessage": "tool"}


def rendered_roles(view: SpanView) -> list[str] | None:
    """The roles of the messages of the ``ChatPromptValue`` a LangChain step returned (a prompt template's
    run under OpenLLMetry: ``traceloop.entity.output`` ``{"outputs": ...}``), in order (a message class not
    known here by its class name); None for a span that returned no rendered prompt."""
    value = view.attrs.get("traceloop.entity.output")
    if not isinstance(value, str) or "ChatPromptValue" not in value:
        return None  # decided on the raw text: most task outputs are no prompt
    parsed = _parsed(value)
    prompt = parsed.get("outputs") if isinstance(parsed, dict) else None
    if not isinstance(prompt, dict) or prompt.get("type") != "constructor":
        return None
    path, kwargs = prompt.get("id"), prompt.get("kwargs")
    messages = kwargs.get("messages") if isinstance(kwargs, dict) else None
    if (
        not isinstance(path, list)
        or not path
        or path[-1] != "ChatPromptValue"
        or not isinstance(messages, list)
    ):
        return None
    return [
        _ROLES.get(str(m["id"][-1]), str(m["id"][-1])) if _constructed(m) else "unknown" for m in messages
    ]


def _constructed(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("id"), list) and bool(message["id"])


def _parsed(value: Any) -> Any:
    return None if value is None or value == REDACTED else maybe_json(value)


CONVENTION = LangChain()
