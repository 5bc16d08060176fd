"""Langfuse observation table: one mapping for spans from Langfuse's OTel endpoint and its API.

Attributes read: ``langfuse.observation.type`` (GENERATION, RETRIEVER, SPAN, TOOL, AGENT, CHAIN,
EMBEDDING, EVENT, EVALUATOR, GUARDRAIL), ``langfuse.observation.input`` / ``.output`` (raw strings,
often JSON), ``langfuse.observation.metadata`` (dict or JSON; ``attributes`` inside it are read as
span attributes, ``resourceAttributes`` as the resource, top-level ``tracejudge.*`` keys as
attributes), ``langfuse.observation.metadata.tracejudge.*``, ``langfuse.observation.model.name``,
``langfuse.observation.usage_details``, ``langfuse.observation.prompt.{name,version}``,
``langfuse.trace.{name,input,output,tags}``, ``user.id`` / ``langfuse.user.id``,
``session.id`` / ``langfuse.session.id``, ``langfuse.environment``, ``langfuse.release``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import request_text, user_answer
from tracejudge.normalize._values import REDACTED, as_int
from tracejudge.normalize._view import SpanView
from tracejudge.schema import StepKind

TYPE = "langfuse.observation.type"
INPUT = "langfuse.observation.input"
OUTPUT = "langfuse.observation.output"
METADATA = "langfuse.observation.metadata"

_STEPS: dict[str, StepKind] = {
    "GENERATION": "model",
    "RETRIEVER": "retrieval",
    "TOOL": "tool",
    "AGENT": "agent",
    "CHAIN": "chain",
    "EMBEDDING": "embedding",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "other",
}


def classify(view: SpanView) -> StepKind | None:
    """The step of a typed observation; None for SPAN/EVENT, which other conventions may refine."""
    kind = view.attrs.get(TYPE)
    if not isinstance(kind, str):
        return None
    return _STEPS.get(kind.upper())


def is_langfuse(view: SpanView) -> bool:
    return TYPE in view.attrs


def usage(view: SpanView) -> dict[str, Any]:
    value = view.attrs.get("langfuse.observation.usage_details")
    if value is None:
        return {}
    details = view.json("langfuse.observation.usage_details", value)
    if not isinstance(details, dict):
        return {}
    return {
        "input": details.get("input", details.get("prompt_tokens", details.get("input_tokens"))),
        "output": details.get("output", details.get("completion_tokens", details.get("output_tokens"))),
        "total": details.get("total", details.get("total_tokens")),
    }


def prompt(view: SpanView) -> str | None:
    """``name@version`` of the managed prompt a generation used."""
    name = view.attrs.get("langfuse.observation.prompt.name")
    if not isinstance(name, str) or not name:
        return None
    version = as_int(view.attrs.get("langfuse.observation.prompt.version"))
    return f"{name}@{version}" if version is not None else name


def _trace_value(views: Sequence[SpanView], key: str) -> tuple[Any, SpanView] | None:
    for view in views:
        value = view.attrs.get(key)
        if value is not None and value != "":
            return value, view
    return None


class Langfuse(NoRecords):
    """Langfuse observations: typed observations, usage details, the trace's own input and output."""

    name = "langfuse"

    def classify(self, view: SpanView) -> StepKind | None:
        return classify(view)

    def usage(self, view: SpanView) -> Mapping[str, Any] | None:
        return usage(view)

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:
        """``langfuse.trace.input`` (set on any observation; the root's first)."""
        found = _trace_value([root, *views], "langfuse.trace.input")
        if found is None or found[0] == REDACTED:
            return None
        return request_text(found[0]) or None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:
        """``langfuse.trace.output`` (the root's first, then any observation's that holds text)."""
        for view in [root, *views]:
            value = view.attrs.get("langfuse.trace.output")
            if value is not None and value != REDACTED:
                text = user_answer(value)
                if text:
                    return text, view.span_id
        return None


CONVENTION = Langfuse()
