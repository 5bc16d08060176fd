"""Mirascope 2's own tracing, ``mirascope.ops`` (2.8).

``ops.instrument_llm()`` records each model call as an OTel GenAI span (scope ``mirascope.llm``,
``gen_ai.input.messages`` / ``gen_ai.output.messages``): the GenAI convention reads those. Mirascope does
not trace tool execution; an application function decorated with ``@ops.trace`` (scope ``mirascope.ops``,
``mirascope.type = trace``) records its bound arguments as ``mirascope.trace.arg_values`` (JSON) and its
return value as ``mirascope.trace.output`` (JSON, or the text of a string). Such a function below the root
is read as a tool call — its arguments and result — so a search function whose result names documents of
the manifest is a retrieval; the root function is the task: its arguments hold the request, its output
the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import documents_from_value, request_text, user_answer
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

SCOPE = "mirascope.ops"
ARGUMENTS = "mirascope.trace.arg_values"
OUTPUT = "mirascope.trace.output"


def _traced(view: SpanView) -> bool:
    """An ``@ops.trace`` function's span."""
    return view.raw.scope_name == SCOPE and view.attrs.get("mirascope.type") == "trace"


def _value(view: SpanView, key: str) -> Any | None:
    value = view.attrs.get(key) if _traced(view) else None
    return None if value is None or value == REDACTED else maybe_json(value)


class Mirascope(NoRecords):
    """Mirascope ``ops``: an ``@ops.trace`` function is a tool call below the root, the task at the root."""

    name = "mirascope"

    def classify(self, view: SpanView) -> StepKind | None:
        if not _traced(view):
            return None
        return "chain" if view.raw.parent_span_id is None else "tool"

    def documents(self, view: SpanView) -> list[Document] | None:
        result = _value(view, OUTPUT)
        return None if result is None else documents_from_value(view, result)

    def query(self, view: SpanView) -> str | None:
        arguments = _value(view, ARGUMENTS)
        return None if arguments is None else request_text(arguments)

    def tool_arguments(self, view: SpanView) -> Any | None:
        return _value(view, ARGUMENTS)

    def tool_result(self, view: SpanView) -> Any | None:
        return _value(view, OUTPUT)

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        arguments = _value(root, ARGUMENTS)
        return None if arguments is None else request_text(arguments)

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        output = _value(root, OUTPUT)
        text = None if output is None else user_answer(output)
        return (text, root.span_id) if text else None


CONVENTION = Mirascope()
