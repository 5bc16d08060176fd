"""The tool requests of a model call's reply that its output does not record, where another record does.

Some instrumentations never record a reply's tool calls on the model call's output, though the trace holds
them elsewhere, or holds that the reply asked for some:

- AgentOps' OpenAI instrumentation records a reply that asked for tools as its role and finish reason alone,
  and each request as a ``tool_call.<name>`` child span of the call (``tool.name``, ``tool.parameters``,
  ``tool.call.id``; kind ``AgentOpsSpanKindValues.TOOL``): the request, not the tool's run.
- OpenLLMetry's LangChain instrumentation records no output on a chat model's span whose reply has no text;
  the LangGraph node that called it (``execute_task model``) records what the node returned as
  ``gen_ai.task.output`` (and ``traceloop.entity.output``): the ``AIMessage`` in LangChain's constructor form,
  its ``tool_calls`` (name, ``args``, id), told the call's by ``response_metadata.id`` — the response id the
  call's span records as ``gen_ai.response.id``.
- A reply with no text recorded that ended on a tool request (finish reason ``tool_calls``, ``tool_call``,
  ``tool_use``, ``function_call``: OpenLLMetry's mistralai records a reply's role and finish reason but never
  its tool calls) asked for tools whose names, arguments and ids were not recorded.
- OpenLLMetry's Ollama instrumentation records a reply's content whenever it has any (and the input's under
  the same switch), never its tool calls: a reply recorded by its role alone, beside a recorded input, wrote
  no text — it asked for tools not recorded, or said nothing, and gave no answer either way.

A request whose details were not recorded is ``{}``: it says the reply asked for a tool, not which.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tracejudge.normalize._agentops import SPAN_KIND
from tracejudge.normalize._values import REDACTED, as_str, as_str_list, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import ModelCall

__all__ = ["TOOL_CALL_ENDS", "replied_requests"]

# The finish reasons of a reply that ended asking for tools: OpenAI's and Mistral's ``tool_calls``, the GenAI
# conventions' ``tool_call``, Anthropic's ``tool_use``, OpenAI's legacy ``function_call``.
TOOL_CALL_ENDS = frozenset({"tool_calls", "tool_call", "tool_use", "function_call"})
_AGENTOPS_TOOL = "AgentOpsSpanKindValues.TOOL"
_TASK_OUTPUTS = ("gen_ai.task.output", "traceloop.entity.output")
# How deep a task's output is searched for the reply's message (LangGraph nests it in a Command's update).
_DEPTH = 8


def replied_requests(
    view: SpanView, call: ModelCall, children: Sequence[SpanView], parent: SpanView | None
) -> tuple[dict[str, Any], ...]:
    """The tool requests of the call's reply (``{"id", "name", "arguments"}``, ``{}`` for one whose details
    were not recorded) that other records say it made, when its output records none; empty when none does.
    ``view``: the call's span, ``children`` its child spans, ``parent`` its parent span (None for a root)."""
    if any(message.tool_calls for message in call.output_messages):
        return ()
    found = _agentops_requests(children) or _langchain_requests(view, parent)
    if found or call.output_text is not None:
        return found
    return ({},) if _ended_on_tool(view) or _ollama_without_text(view, call) else ()


def _agentops_requests(children: Sequence[SpanView]) -> tuple[dict[str, Any], ...]:
    """AgentOps' ``tool_call.<name>`` children of the call, in start order."""
    found = [
        child
        for child in children
        if child.raw.name.startswith("tool_call.") and child.attrs.get(SPAN_KIND) == _AGENTOPS_TOOL
    ]
    found.sort(key=lambda child: child.raw.start_time_unix_nano)
    return tuple(
        {
            "id": _unhidden(child.attrs.get("tool.call.id")),
            "name": _unhidden(child.attrs.get("tool.name")) or child.raw.name[len("tool_call.") :],
            "arguments": maybe_json(_unhidden(child.attrs.get("tool.parameters"))),
        }
        for child in found
    )


def _unhidden(value: Any) -> str | None:
    """The value as text; None when not recorded or hidden (a hidden value compares with nothing)."""
    text = as_str(value)
    return None if text is None or text == REDACTED else text


def _langchain_requests(view: SpanView, parent: SpanView | None) -> tuple[dict[str, Any], ...]:
    """The tool calls of the ``AIMessage`` the LangGraph node above the call returned, when that message is
    the call's reply (its ``response_metadata.id`` is the call's ``gen_ai.response.id``)."""
    response = as_str(view.attrs.get("gen_ai.response.id"))
    if parent is None or not response or parent.attrs.get("gen_ai.operation.name") != "execute_task":
        return ()
    value = next((v for v in map(parent.attrs.get, _TASK_OUTPUTS) if isinstance(v, str)), None)
    # Decided on the raw text first: most task outputs hold no reply of this call asking for a tool.
    if value is None or response not in value or '"tool_calls"' not in value:
        return ()
    for message in _ai_messages(maybe_json(value), _DEPTH):
        metadata = message.get("response_metadata")
        if isinstance(metadata, dict) and metadata.get("id") == response:
            calls = message.get("tool_calls")
            return (
                tuple(_langchain_request(c) for c in calls if isinstance(c, dict))
                if isinstance(calls, list)
                else ()
            )
    return ()


def _langchain_request(call: dict[str, Any]) -> dict[str, Any]:
    return {"id": as_str(call.get("id")), "name": as_str(call.get("name")), "arguments": call.get("args")}


def _ai_messages(value: Any, depth: int) -> Iterator[dict[str, Any]]:
    """The ``kwargs`` of every ``AIMessage`` in constructor form within ``value``, ``depth`` levels down."""
    if depth <= 0:
        return
    if isinstance(value, list):
        for item in value:
            yield from _ai_messages(item, depth - 1)
    elif isinstance(value, dict):
        path, kwargs = value.get("id"), value.get("kwargs")
        if value.get("type") == "constructor" and isinstance(path, list) and path and path[-1] in _AI_CLASSES:
            if isinstance(kwargs, dict):
                yield kwargs
            return
        for item in value.values():
            yield from _ai_messages(item, depth - 1)


_AI_CLASSES = frozenset({"AIMessage", "AIMessageChunk"})


def _ended_on_tool(view: SpanView) -> bool:
    """Whether a finish reason the call's span records says the reply asked for tools: OpenLLMetry's
    ``gen_ai.completion.N.finish_reason``, the GenAI ``gen_ai.response.finish_reasons``."""
    reasons = [
        as_str(item.get("finish_reason")) for item in (view.indexed("gen_ai.completion") or {}).values()
    ]
    listed = view.attrs.get("gen_ai.response.finish_reasons")
    if listed is not None:
        reasons += as_str_list(list(listed) if isinstance(listed, tuple) else listed) or []
    return any(reason and reason.strip("[]'\" ").lower() in TOOL_CALL_ENDS for reason in reasons)


def _ollama_without_text(view: SpanView, call: ModelCall) -> bool:
    """Whether OpenLLMetry's Ollama instrumentation recorded the reply by its role alone beside a recorded
    input: its content, recorded whenever there is any, was empty."""
    if str(view.attrs.get("gen_ai.system", "")).casefold() != "ollama" or not call.input_recorded:
        return False
    if call.input_redacted or call.input_partial:
        return False
    replies = view.indexed("gen_ai.completion") or {}
    return len(replies) == 1 and all(set(item) == {"role"} for item in replies.values())
