"""AgentOps' own span attributes (agentops 0.4.21).

A function decorated with ``@agentops.trace`` / ``@agentops.tool`` / ``@agentops.agent`` / … records
``agentops.span.kind`` (``session``, ``tool``, ``agent``, ``task``, ``workflow``, …) and its arguments and
return value as JSON text: ``agentops.<kind>.input`` (``{"args": [...], "kwargs": {...}}``) and
``agentops.<kind>.output`` — ``agentops.entity.input`` / ``.output`` on a ``session`` (the root a
``@agentops.trace`` function opens). A ``tool`` span is a tool call (its result names the documents of a
search); the root holds the request and the answer. AgentOps' OpenAI instrumentation writes OpenLLMetry's
flat ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` (read by that convention) and, under each model call
that asked for a tool, a ``tool_call.<name>`` span whose kind is the enum's repr
(``AgentOpsSpanKindValues.TOOL``): the request, not the tool's run, so it is left unclassified (the answer
rule reads it as the call's reply, ``_replied``: the call's output records only its role and finish reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._shapes import documents_from_value, request_text, user_answer
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, StepKind

SPAN_KIND = "agentops.span.kind"

_STEPS: dict[str, StepKind] = {
    "session": "chain",
    "workflow": "chain",
    "task": "chain",
    "operation": "chain",
    "chain": "chain",
    "agent": "agent",
    "tool": "tool",
    "llm": "model",
    "guardrail": "guardrail",
}


def _kind(view: SpanView) -> str | None:
    value = view.attrs.get(SPAN_KIND)
    return value if isinstance(value, str) and value in _STEPS else None


def _value(view: SpanView, direction: str) -> Any | None:
    """A decorated function's decoded arguments (``input``) or return value (``output``); None on any other
    span."""
    kind = _kind(view)
    if kind is None:
        return None
    value = view.get(f"agentops.{kind}.{direction}", f"agentops.entity.{direction}")
    return None if value is None or value == REDACTED else maybe_json(value)


def _arguments(view: SpanView) -> Any | None:
    """The keyword arguments of a recorded call, else the whole ``{"args", "kwargs"}`` record."""
    value = _value(view, "input")
    if (
        isinstance(value, dict)
        and set(value) <= {"args", "kwargs"}
        and isinstance(value.get("kwargs"), dict)
        and value["kwargs"]
        and not value.get("args")
    ):
        return value["kwargs"]
    return value


class AgentOps(NoRecords):
    """AgentOps' decorated functions: the kind, arguments and return value of each."""

    name = "agentops"

    def classify(self, view: SpanView) -> StepKind | None:
        kind = _kind(view)
        return None if kind is None else _STEPS[kind]

    def documents(self, view: SpanView) -> list[Document] | None:
        result = _value(view, "output") if _kind(view) == "tool" else None
        return None if result is None else documents_from_value(view, result)

    def tool_arguments(self, view: SpanView) -> Any | None:
        return _arguments(view) if _kind(view) == "tool" else None

    def tool_result(self, view: SpanView) -> Any | None:
        return _value(view, "output") if _kind(view) == "tool" else None

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        arguments = _value(root, "input")
        return None if arguments is None else request_text(arguments)

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        output = _value(root, "output")
        text = None if output is None else user_answer(output)
        return (text, root.span_id) if text else None


CONVENTION = AgentOps()
