"""LangChain 1.x tools under openinference-instrumentation-langchain (0.1.80).

A tool run by a LangChain agent (``create_agent``'s tool node, LangGraph's ``ToolNode``) returns a
``ToolMessage``; the tool span (TOOL) records it as ``output.value`` in LangChain's serialized form,
``{"type": "tool", "data": {"content": ..., "tool_call_id": ..., ...}}``. The tool's result is that
``content`` (JSON text when the tool returned documents). Model calls, retrievers and chains are plain
OpenInference.
"""

from __future__ import annotations

from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document

SCOPE = "openinference.instrumentation.langchain"


class LangChain(NoRecords):
    """LangChain: a tool span's serialized ``ToolMessage`` output is the tool's result ``content``."""

    name = "langchain"

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its ``ToolMessage``'s content."""
        result = self.tool_result(view)
        return None if result is None else documents_from_value(view, maybe_json(result))

    def tool_result(self, view: SpanView) -> Any | None:
        if view.raw.scope_name != SCOPE or view.attrs.get("openinference.span.kind") != "TOOL":
            return None
        value = view.attrs.get("output.value")
        parsed = None if value is None or value == REDACTED else maybe_json(value)
        if not isinstance(parsed, dict) or parsed.get("type") != "tool":
            return None
        data = parsed.get("data")
        return data.get("content") if isinstance(data, dict) else None


CONVENTION = LangChain()
