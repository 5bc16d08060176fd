"""Agno under OpenLLMetry's opentelemetry-instrumentation-agno (0.62).

Its tool span (``<function>.tool``, scope ``opentelemetry.instrumentation.agno``,
``traceloop.span.kind = tool``) records as ``traceloop.entity.output`` the ``str()`` of Agno's
``FunctionExecutionResult``, a pydantic model: ``status='success' result='<the tool's return value, as a
Python repr>' error=None updated_session_state=None ...``. The tool's result is that ``result`` field
(JSON text when the tool returned documents as JSON). A result that is no Python literal (an object's
repr) is not read. OpenInference's Agno instrumentation records the result itself in ``output.value``:
the standard conventions read it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document

SCOPE = "opentelemetry.instrumentation.agno"
_RESULT = "status='success' result="
_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")


def _value_end(text: str) -> int:
    """Where the first value of ``a b=c``-shaped text (``str()`` of a pydantic model after ``name=``)
    ends: before the next ``name=`` outside brackets, or at the end."""
    depth = 0
    previous: tokenize.TokenInfo | None = None
    lines = text.splitlines(keepends=True)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP:
                depth += (token.string in _OPEN) - (token.string in _CLOSE)
                if (
                    token.string == "="
                    and depth == 0
                    and previous is not None
                    and previous.type == tokenize.NAME
                ):
                    row, col = previous.start
                    return sum(len(line) for line in lines[: row - 1]) + col
            previous = token
    except (tokenize.TokenError, SyntaxError):
        pass
    return len(text)


def function_result(text: str) -> Any | None:
    """The ``result`` field of a successful ``FunctionExecutionResult``'s text, or None."""
    if not text.startswith(_RESULT):
        return None
    rest = text[len(_RESULT) :]
    try:
        return ast.literal_eval(rest[: _value_end(rest)].strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


class Agno(NoRecords):
    """Agno under OpenLLMetry: a tool span's output is the ``result`` of a ``FunctionExecutionResult``."""

    name = "agno"

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its result (JSON text or a list)."""
        result = self.tool_result(view)
        return None if result is None else documents_from_value(view, result)

    def tool_result(self, view: SpanView) -> Any | None:
        if view.raw.scope_name != SCOPE or view.attrs.get("traceloop.span.kind") != "tool":
            return None
        value = view.attrs.get("traceloop.entity.output")
        if not isinstance(value, str) or value == REDACTED:
            return None
        return function_result(value)


CONVENTION = Agno()
