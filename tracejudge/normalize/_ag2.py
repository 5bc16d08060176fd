"""AG2 (the ``autogen`` package of ag2 0.x) under openinference-instrumentation-ag2.

The tool span (``execute_function``, TOOL) records as ``output.value`` what AG2's ``execute_function``
returns: ``[success, {"name", "role": "function", "content"}]``. The tool's result is that ``content``
(JSON text when the tool returned documents). Model calls are the OpenAI client's instrumentation's.
"""

from __future__ import annotations

from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document

SCOPE = "openinference.instrumentation.ag2"


class AG2(NoRecords):
    """AG2: a tool span's ``[success, {"content": ...}]`` output is the tool's result ``content``."""

    name = "ag2"

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its result's ``content``."""
        result = self.tool_result(view)
        return None if result is None else documents_from_value(view, maybe_json(result))

    def tool_result(self, view: SpanView) -> Any | None:
        if view.raw.scope_name != SCOPE or view.attrs.get("tool.name") is None:
            return None
        value = view.attrs.get("output.value")
        if value is None or value == REDACTED:
            return None
        parsed = maybe_json(value)
        if isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], dict):
            return parsed[1].get("content")
        return None


CONVENTION = AG2()
