"""Haystack under OpenInference (openinference-instrumentation-haystack).

Every component run is a span named ``<Component>.run`` with ``input.value`` / ``output.value`` the
run's arguments and result as JSON, Haystack objects inside as their Python repr; the pipeline is
the root span ``Pipeline.run`` (``AsyncPipeline.run_async`` …) whose input is
``{"data": {component: {argument: value}}}`` and whose output is ``{component: {output: value}}``.
Chat replies there are ``ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>,
_content=[TextContent(text='…')], …)`` reprs. Retrievers are ``RETRIEVER`` spans with
``retrieval.documents.N.document.*``; their ``filters`` argument is Haystack's filter syntax
(``{"field": "meta.region", "operator": "==", "value": "CN"}``, ``{"operator": "AND",
"conditions": [...]}``), read here into the ``$``-operator form the filter replay understands.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import Filter, NoRecords
from tracejudge.normalize._shapes import answer_text
from tracejudge.normalize._values import REDACTED, as_str, maybe_json
from tracejudge.normalize._view import SpanView

_PIPELINE_SPAN = re.compile(r"^(?:Async)?Pipeline\.run(?:_async)?$")
_TEXT_CONTENT = re.compile(r"TextContent\(text=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\)")
_COMPARE = {
    "==": "$eq",
    "!=": "$ne",
    ">": "$gt",
    ">=": "$gte",
    "<": "$lt",
    "<=": "$lte",
    "in": "$in",
    "not in": "$nin",
}
_LOGICAL = {"AND": "$and", "OR": "$or"}
_QUESTION_KEYS = ("question", "query", "text", "prompt")


def is_pipeline(view: SpanView) -> bool:
    return bool(_PIPELINE_SPAN.match(view.raw.name))


def message_text(value: Any) -> str | None:
    """The text of a ChatMessage repr (several text parts joined); None for anything else."""
    if not isinstance(value, str) or not value.startswith("ChatMessage("):
        return None
    parts = []
    for match in _TEXT_CONTENT.finditer(value):
        try:
            text = ast.literal_eval(match.group(1))
        except (ValueError, SyntaxError):
            return None
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(parts) or None


def pipeline_answer(view: SpanView) -> str | None:
    """The last reply of the last component that returned ``replies`` in the pipeline's output."""
    value = view.attrs.get("output.value")
    if value is None or value == REDACTED:
        return None
    parsed = maybe_json(value)
    if not isinstance(parsed, dict):
        return None
    texts = [text for text in map(_last_reply, parsed.values()) if text]
    return texts[-1] if texts else None


def _last_reply(outputs: Any) -> str | None:
    """The text of a component's last reply (a ChatMessage repr or a string); None when it has none."""
    replies = outputs.get("replies") if isinstance(outputs, dict) else None
    if not isinstance(replies, list) or not replies:
        return None
    last = replies[-1]
    return message_text(last) or (last if isinstance(last, str) else None)


def pipeline_input(view: SpanView) -> str | None:
    """The question among the pipeline's component inputs (``question``, then ``query`` …)."""
    value = view.attrs.get("input.value")
    if value is None or value == REDACTED:
        return None
    parsed = maybe_json(value)
    data = parsed.get("data") if isinstance(parsed, dict) else None
    if not isinstance(data, dict):
        return None
    for key in _QUESTION_KEYS:
        for arguments in data.values():
            if isinstance(arguments, dict):
                text = as_str(arguments.get(key))
                if text:
                    return text
    return None


def retriever_filter(view: SpanView) -> tuple[Any, str | None] | None:
    """A retriever run's ``filters`` argument as a ``$``-operator filter, with its JSON text."""
    value = view.attrs.get("input.value")
    if not isinstance(value, str) or '"filters"' not in value:
        return None
    parsed = maybe_json(value)
    filters = parsed.get("filters") if isinstance(parsed, dict) else None
    if not isinstance(filters, dict) or "operator" not in filters:
        return None
    return _translate(filters), json.dumps(filters, ensure_ascii=False)


def _translate(node: Any) -> Any:
    """Haystack filter syntax -> ``$``-operators; what has no equivalent becomes an unknown operator,
    which the replay answers "cannot tell" rather than guessing."""
    if not isinstance(node, dict):
        return {"$unknown": node}
    operator = str(node.get("operator", ""))
    if "conditions" in node:
        return _logical(node, operator.upper())
    return _comparison(node, operator)


def _logical(node: dict[str, Any], operator: str) -> Any:
    conditions = node.get("conditions")
    if not isinstance(conditions, list):
        return {"$unknown": node}
    parts = [_translate(c) for c in conditions]
    if operator == "NOT":  # Haystack's NOT negates the conjunction of its conditions
        return {"$not": {"$and": parts}}
    op = _LOGICAL.get(operator)
    return {"$unknown": node} if op is None else {op: parts}


def _comparison(node: dict[str, Any], operator: str) -> Any:
    field = as_str(node.get("field"))
    op = _COMPARE.get(operator)
    if field is None or op is None:
        return {"$unknown": node}
    return {field.removeprefix("meta."): {op: node.get("value")}}


class Haystack(NoRecords):
    """Haystack under OpenInference: the pipeline root's question and answer, retriever filters.

    A pipeline root's free-form input and output are per-component maps, not the request and the
    answer: it owns them, so an empty read here stops the search (``""``).
    """

    name = "openinference"  # spans are OpenInference's; Haystack is a dialect of their values

    def retrieval_filter(self, view: SpanView) -> Filter | None:
        return retriever_filter(view)

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        return (pipeline_input(root) or "") if is_pipeline(root) else None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        if not is_pipeline(root):
            return None
        value = pipeline_answer(root)
        text = answer_text(value) if value is not None and value != REDACTED else None
        return text or "", root.span_id


CONVENTION = Haystack()
