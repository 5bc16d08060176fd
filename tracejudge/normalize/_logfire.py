"""Pydantic Logfire's OpenAI Agents SDK integration (``logfire.instrument_openai_agents()``): the messages of
a ``Responses API with …`` span.

Logfire records such a span's request items as ``raw_input`` and its messages as ``events``, one JSON list
of dicts in the style of the GenAI events (``event.name`` ``gen_ai.system.message``,
``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.unknown``): the
agent's instructions (one event, when it has any) and the input items, then the response's output items,
each with role ``assistant`` (``inputs_to_events`` + ``responses_output_events`` in Logfire's
``llm_providers/openai.py``). Nothing marks where the input ends, so it is counted from ``raw_input`` as
Logfire counts it — a message whose content is a list of parts gives one event per part, any other item
one — and the events are read only when exactly one count fits (every later event has role
``assistant``); otherwise they are not read, and the gap says so.

A function tool's run is a ``Function: {name}`` span recording the tool's ``name``, its arguments as ``input``
and its return value as ``output`` (JSON text when structured): a tool call, whose result may name the
manifest's documents (a search tool).

An item Logfire does not convert (``gen_ai.unknown``: a hosted tool's call such as ``file_search_call``,
its data under ``data``) holds no text: in the input it is a message whose content was not recorded (what
a hosted search returned may have reached the model), in the output a tool call. A hosted search whose
``results`` are null ran without the trace holding what it returned — the Responses API includes them
only when asked (``include=["file_search_call.results"]``) — which the gap says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._hints import HOSTED_FILE_SEARCH
from tracejudge.normalize._values import as_str
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Message, StepKind

EVENTS = "events"
_FUNCTION = "Function: {name}"
RAW_INPUT = "raw_input"
_MARKER = "logfire.span_type"
_SYSTEM = "gen_ai.system.message"
_UNKNOWN = "gen_ai.unknown"


def _events(view: SpanView) -> list[dict[str, Any]] | None:
    """The span's Logfire message events; None on a span that has none (or is not Logfire's)."""
    if _MARKER not in view.attrs or EVENTS not in view.attrs or RAW_INPUT not in view.attrs:
        return None
    events = view.json(EVENTS, view.attrs[EVENTS])
    if not isinstance(events, list) or not all(
        isinstance(e, dict) and isinstance(e.get("event.name"), str) for e in events
    ):
        view.gap("attribute_unparseable", f"{EVENTS}: not a list of message events")
        return None
    return events


def _item_events(item: Any) -> int:
    """How many events Logfire writes for one input item."""
    if not isinstance(item, dict):
        return 1
    content = item.get("content")
    message = item.get("role") and item.get("type") in (None, "message")
    return len(content) if message and isinstance(content, list) and content else 1


def _split(view: SpanView, events: list[dict[str, Any]]) -> int | None:
    """How many of ``events`` are the input; None when the count does not fit exactly one way."""
    raw = view.json(RAW_INPUT, view.attrs[RAW_INPUT])
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        view.gap("attribute_unparseable", f"{RAW_INPUT}: not the request's input items")
        return None
    counted = sum(_item_events(item) for item in items)
    # With instructions the first event is one more system message.
    system = [1] if events and events[0].get("event.name") == _SYSTEM else [0]
    fits = [
        counted + extra
        for extra in sorted({0, *system})
        if counted + extra <= len(events)
        and all(e.get("role") == "assistant" for e in events[counted + extra :])
    ]
    if len(fits) != 1:
        view.gap(
            "attribute_unparseable",
            f"{EVENTS}: the input and output events cannot be told apart ({len(events)} events, "
            f"{counted} input items)",
        )
        return None
    return fits[0]


def _hosted_call(event: dict[str, Any]) -> dict[str, Any] | None:
    """A hosted tool's call (``file_search_call``, …) as a tool call, named as Logfire names the tool
    (``file_search``) and keeping the item's ``type``: what shows the API ran it inside the call (a function
    tool may be named ``file_search`` too); None when the event holds none."""
    data = event.get("data")
    kind = as_str(data.get("type")) if isinstance(data, dict) else None
    if data is None or kind is None or not kind.endswith("_call"):
        return None
    arguments = {k: v for k, v in data.items() if k in ("queries", "query", "action")}
    return {
        "id": as_str(data.get("id")),
        "name": kind.removesuffix("_call"),
        "arguments": arguments,
        "type": kind,
    }


def _message(event: dict[str, Any], *, output: bool) -> Message | None:
    name = event["event.name"]
    role = as_str(event.get("role")) or "unknown"
    if name == _UNKNOWN:
        call = _hosted_call(event) if output else None
        # An input item with no text: what it carried (a hosted search's results) was not recorded.
        return (
            Message(role="assistant", content=None, tool_calls=(call,))
            if call
            else Message(role=role, content=None)
        )
    if not (name.startswith("gen_ai.") and name.endswith(".message")):
        return None
    calls = event.get("tool_calls")
    tools = tuple(
        {
            "id": as_str(c.get("id")),
            "name": as_str(c["function"].get("name")) or "",
            "arguments": c["function"].get("arguments"),
        }
        for c in (calls if isinstance(calls, list) else [])
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
    )
    content = event.get("content")
    return Message(role=role, content=content if isinstance(content, str) else None, tool_calls=tools)


def _hosted_search(events: list[dict[str, Any]]) -> list[Any] | None:
    """The queries of a hosted file search among output events, its results not recorded; None if none."""
    for event in events:
        data = event.get("data")
        if event.get("event.name") != _UNKNOWN or not isinstance(data, dict):
            continue
        if data.get("type") == "file_search_call" and data.get("results") is None:
            queries = data.get("queries")
            return queries if isinstance(queries, list) else []
    return None


def hosted_search_spans(views: Sequence[SpanView]) -> list[str]:
    """Model spans whose output ran OpenAI's hosted file search without recording its results."""
    found = []
    for view in views:
        events = _events(view) if view.step == "model" else None
        n = _split(view, events) if events is not None else None
        if events is not None and n is not None and _hosted_search(events[n:]) is not None:
            found.append(view.span_id)
    return found


def _function(view: SpanView) -> bool:
    return _MARKER in view.attrs and view.attrs.get("logfire.msg_template") == _FUNCTION


def tool_name(view: SpanView) -> str | None:
    """The function tool a ``Function: {name}`` span ran; None on any other span."""
    return as_str(view.attrs.get("name")) if _function(view) else None


class Logfire(NoRecords):
    """Logfire's OpenAI Agents SDK spans: the ``events`` of a Responses API call, split by ``raw_input``, and
    the function tools' runs."""

    name = "logfire"

    def classify(self, view: SpanView) -> StepKind | None:
        return "tool" if _function(view) else None

    def tool_arguments(self, view: SpanView) -> Any | None:
        return view.attrs.get("input") if _function(view) else None

    def tool_result(self, view: SpanView) -> Any | None:
        return view.attrs.get("output") if _function(view) else None

    def input_messages(self, view: SpanView) -> ModelIO | None:
        events = _events(view)
        n = _split(view, events) if events is not None else None
        if events is None or n is None:
            return None
        found = [m for m in (_message(e, output=False) for e in events[:n]) if m is not None]
        return ModelIO(messages=tuple(found))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        events = _events(view)
        n = _split(view, events) if events is not None else None
        if events is None or n is None:
            return None
        queries = _hosted_search(events[n:])
        if queries is not None:
            view.gap(
                "retrieval_documents_not_recorded",
                f"the model ran OpenAI's hosted file_search (queries {queries!r}) and the trace does not"
                " hold what it returned",
                HOSTED_FILE_SEARCH.text,
            )
        found = [m for m in (_message(e, output=True) for e in events[n:]) if m is not None]
        return ModelIO(messages=tuple(found))


CONVENTION = Logfire()
