"""TruLens' OTel tracing (``trulens.otel.semconv``: ``ai.observability.*``).

TruLens marks what a span is with ``ai.observability.span_type``: ``record_root`` (the app's call:
``record_root.input`` / ``.output`` are the user's request and the answer), ``retrieval``
(``retrieval.query_text``, and ``retrieval.retrieved_contexts``: the returned texts, a string list with
no ids — identified by the manifest's ``content``) and ``generation`` (a model call). A generation span
records only the instrumented function's arguments and return value (``call.kwargs.<name>``,
``call.return``): the model input read is a ``prompt`` string or LangChain's prompt value, which
TruLens writes as its repr (``messages=[HumanMessage(content='…'), …]``) and which is read here as a
Python expression, so the contexts keep their line breaks; any other argument is not read as the
input (the model input is then not recorded, never guessed from a repr's escaped text). A retrieval
inside a retrieval (LlamaIndex's query engine, retriever, ``_retrieve``) is one retrieval call.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import messages_from_value
from tracejudge.normalize._values import as_str, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

_BASE = "ai.observability"
SPAN_TYPE = f"{_BASE}.span_type"
ROOT_INPUT = f"{_BASE}.record_root.input"
ROOT_OUTPUT = f"{_BASE}.record_root.output"
QUERY = f"{_BASE}.retrieval.query_text"
CONTEXTS = f"{_BASE}.retrieval.retrieved_contexts"
RETURN = f"{_BASE}.call.return"
_KWARGS = f"{_BASE}.call.kwargs."
# The generation arguments read as the model input: a prompt string, or a LangChain prompt value.
_PROMPT_ARGUMENTS = ("prompt", "input", "messages")
_STEPS: dict[str, StepKind] = {"retrieval": "retrieval", "generation": "model"}
# LangChain message classes -> the ``type`` their serialized form carries.
_MESSAGE_TYPES = {
    "HumanMessage": "human",
    "SystemMessage": "system",
    "AIMessage": "ai",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
}


def _span_type(view: SpanView) -> str | None:
    return as_str(view.attrs.get(SPAN_TYPE))


def _message(node: ast.expr) -> dict[str, Any] | None:
    """``HumanMessage(content='…', …)`` as ``{"type": "human", "content": "…"}``; None for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
    content = keywords.get("content")
    if not (isinstance(content, ast.Constant) and isinstance(content.value, str)):
        return None
    kind = _MESSAGE_TYPES.get(node.func.id)
    role = keywords.get("role")
    if kind is None and node.func.id == "ChatMessage" and isinstance(role, ast.Constant):
        kind = as_str(role.value)
    return {"type": kind, "content": content.value} if kind else None


def prompt_value_messages(text: str) -> list[dict[str, Any]] | None:
    """The messages of a LangChain prompt value's repr (``messages=[HumanMessage(content='…')]``)."""
    if not text.startswith("messages=["):
        return None
    try:
        tree = ast.parse(f"_({text})", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or len(call.keywords) != 1 or call.args:
        return None
    items = call.keywords[0].value
    if not isinstance(items, ast.List):
        return None
    found = [_message(item) for item in items.elts]
    return None if not found or None in found else [m for m in found if m is not None]


class TruLens(NoRecords):
    """TruLens: ``ai.observability.span_type`` and the records of each span type."""

    name = "trulens"

    def classify(self, view: SpanView) -> StepKind | None:
        kind = _span_type(view)
        return _STEPS.get(kind) if kind is not None else None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        if _span_type(view) != "generation":
            return None
        for name in _PROMPT_ARGUMENTS:
            value = as_str(view.attrs.get(_KWARGS + name))
            if not value:
                continue
            dicts = prompt_value_messages(value)
            messages = messages_from_value(dicts) if dicts is not None else None
            if messages:
                return ModelIO(messages=tuple(messages))
            if name == "prompt" and not value.startswith("messages=["):
                # A prompt value's repr not read above is no prompt text: its escapes would hide a
                # clause spanning a line break, and "not in the model input" would be concluded.
                return ModelIO(texts=(value,))
            view.gap(
                "attribute_unparseable", f"{_KWARGS + name}: not a prompt string or a LangChain prompt value"
            )
        return None

    def output_messages(self, view: SpanView) -> ModelIO | None:
        if _span_type(view) != "generation":
            return None
        value = as_str(view.attrs.get(RETURN))
        return ModelIO(texts=(value,)) if value else None

    def documents(self, view: SpanView) -> list[Document] | None:
        if _span_type(view) != "retrieval" or CONTEXTS not in view.attrs:
            return None
        texts = maybe_json(view.attrs.get(CONTEXTS))
        if not isinstance(texts, list | tuple):
            # One string is not split at its commas: it may be one context or a list's text.
            view.gap("attribute_unparseable", f"{CONTEXTS}: not a list of texts")
            return None
        return [Document(doc_id=None, content=as_str(text), position=i) for i, text in enumerate(texts)]

    def query(self, view: SpanView) -> str | None:
        return as_str(view.attrs.get(QUERY)) if _span_type(view) == "retrieval" else None

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        return as_str(root.attrs.get(ROOT_INPUT)) if _span_type(root) == "record_root" else None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        if _span_type(root) != "record_root":
            return None
        text = as_str(root.attrs.get(ROOT_OUTPUT))
        return (text, root.span_id) if text else None


CONVENTION = TruLens()
