"""OpenLIT's instrumentation of the OpenAI Agents SDK (openlit 1.45, scope
``openlit.instrumentation.openai_agents``).

Its spans are OTel GenAI (``invoke_workflow``, ``invoke_agent``, ``execute_tool`` with
``gen_ai.tool.call.arguments`` / ``.result``), read by that convention — but a tool's arguments and result are
written as ``str()`` of the value: a tool returning a list or a dict leaves its Python repr
(``[{'doc_id': 'C-17/attachment', ...}]``), not JSON, so the documents a search tool returned read as text.
On that scope's spans such a value is read as a Python literal (``ast.literal_eval``, no code run); JSON text
and plain text are left to the GenAI convention.
"""

from __future__ import annotations

from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._values import decode
from tracejudge.normalize._view import SpanView

SCOPE = "openlit.instrumentation.openai_agents"


def _literal(view: SpanView, key: str) -> Any | None:
    """A list or dict written as its Python repr on an OpenLIT agents span; None for anything else."""
    if view.raw.scope_name != SCOPE:
        return None
    value = view.attrs.get(key)
    if not isinstance(value, str) or value.lstrip()[:1] not in ("[", "{"):
        return None
    parsed, ok = decode(value, python_literal=True)
    return parsed if ok and isinstance(parsed, list | dict) else None


class OpenLIT(NoRecords):
    """OpenLIT's agents instrumentation: tool arguments and results written as Python reprs."""

    name = "openlit"

    def tool_arguments(self, view: SpanView) -> Any | None:
        return _literal(view, "gen_ai.tool.call.arguments")

    def tool_result(self, view: SpanView) -> Any | None:
        return _literal(view, "gen_ai.tool.call.result")


CONVENTION = OpenLIT()
