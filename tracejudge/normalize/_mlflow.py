"""MLflow tracing's own span attributes (mlflow-tracing 3.17), as its ``OtelSpanProcessor`` exports them over
OTLP (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set).

Every span carries ``mlflow.spanType`` (``LLM``, ``CHAT_MODEL``, ``RETRIEVER``, ``TOOL``, ``AGENT``,
``CHAIN``, ``EMBEDDING``, ``RERANKER``, …), the function's inputs as ``mlflow.spanInputs`` and its
return value as ``mlflow.spanOutputs``; a model call also ``mlflow.chat.tokenUsage`` (``input_tokens``,
``output_tokens``, ``total_tokens``). MLflow stores every attribute value as its JSON text — a string in
quotes — so each is decoded once here. A model call's inputs and outputs are the provider's request and
response (the OpenAI autolog: ``{"messages": [...]}`` in, the chat completion with its ``choices`` out); a
retriever returns MLflow ``Document``\\ s (``page_content``, ``metadata``, ``id``); the root's inputs hold
the request and its outputs the answer. With ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`` the processor exports
OTel GenAI attributes instead (read by the GenAI convention) and drops every non-model span's inputs and
outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import documents_from_value, messages_from_value, request_text, user_answer
from tracejudge.normalize._values import REDACTED, maybe_json, text_of
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

SPAN_TYPE = "mlflow.spanType"
INPUTS = "mlflow.spanInputs"
OUTPUTS = "mlflow.spanOutputs"
TOKEN_USAGE = "mlflow.chat.tokenUsage"  # noqa: S105  (an attribute name, not a secret)

_STEPS: dict[str, StepKind] = {
    "LLM": "model",
    "CHAT_MODEL": "model",
    "RETRIEVER": "retrieval",
    "RERANKER": "rerank",
    "EMBEDDING": "embedding",
    "TOOL": "tool",
    "AGENT": "agent",
    "CHAIN": "chain",
    "WORKFLOW": "chain",
    "GUARDRAIL": "guardrail",
}
_MODEL_TYPES = ("LLM", "CHAT_MODEL")


def span_type(view: SpanView) -> str | None:
    """The span's MLflow type (decoded from its JSON text); None on a span MLflow did not write."""
    value = view.attrs.get(SPAN_TYPE)
    if value is None:
        return None
    decoded = maybe_json(value)
    return decoded if isinstance(decoded, str) else None


def _value(view: SpanView, key: str) -> Any | None:
    """A decoded inputs/outputs value of an MLflow span; None when absent, hidden, or not MLflow's."""
    if span_type(view) is None:
        return None
    value = view.attrs.get(key)
    return None if value is None or value == REDACTED else maybe_json(value)


def _model_io(view: SpanView, key: str) -> ModelIO | None:
    """A model call's messages (a request's ``messages``, a response's ``choices``) or its text."""
    if span_type(view) not in _MODEL_TYPES:
        return None
    value = _value(view, key)
    if value is None:
        return None
    messages = messages_from_value(value)
    if messages:
        return ModelIO(messages=tuple(messages))
    text = text_of(value)
    return ModelIO(texts=(text,)) if text else None


class MLflow(NoRecords):
    """MLflow's ``mlflow.span*`` attributes: the span type, the function's inputs and outputs, token usage."""

    name = "mlflow"

    def classify(self, view: SpanView) -> StepKind | None:
        kind = span_type(view)
        return None if kind is None else _STEPS.get(kind.upper(), "other")

    def input_messages(self, view: SpanView) -> ModelIO | None:
        return _model_io(view, INPUTS)

    def output_messages(self, view: SpanView) -> ModelIO | None:
        return _model_io(view, OUTPUTS)

    def documents(self, view: SpanView) -> list[Document] | None:
        if span_type(view) != "RETRIEVER":
            return None
        result = _value(view, OUTPUTS)
        return None if result is None else documents_from_value(view, result)

    def query(self, view: SpanView) -> str | None:
        if span_type(view) != "RETRIEVER":
            return None
        arguments = _value(view, INPUTS)
        return None if arguments is None else request_text(arguments)

    def usage(self, view: SpanView) -> Mapping[str, Any] | None:
        counts = _value(view, TOKEN_USAGE)
        if not isinstance(counts, dict):
            return None
        return {
            "input": counts.get("input_tokens"),
            "output": counts.get("output_tokens"),
            "total": counts.get("total_tokens"),
        }

    def tool_arguments(self, view: SpanView) -> Any | None:
        return _value(view, INPUTS)

    def tool_result(self, view: SpanView) -> Any | None:
        return _value(view, OUTPUTS)

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        arguments = _value(root, INPUTS)
        return None if arguments is None else request_text(arguments)

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        output = _value(root, OUTPUTS)
        text = None if output is None else user_answer(output)
        return (text, root.span_id) if text else None


CONVENTION = MLflow()
