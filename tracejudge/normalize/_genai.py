"""OpenTelemetry GenAI semantic conventions table.

Attributes read: ``gen_ai.operation.name``, ``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.system_instructions`` (structured or JSON strings, message ``parts``), deprecated
``gen_ai.prompt`` / ``gen_ai.completion``, ``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.{input_tokens,output_tokens,prompt_tokens,completion_tokens}``,
``gen_ai.retrieval.query.text``, ``gen_ai.retrieval.documents``, ``gen_ai.memory.records``,
``gen_ai.retrieval.top_k`` (``gen_ai.request.top_k`` before it), ``gen_ai.data_source.id``,
``gen_ai.tool.{name,call.id,call.arguments,call.result}``, ``gen_ai.conversation.id``, and span
events ``gen_ai.{system,user,assistant,tool}.message``, ``gen_ai.choice``,
``gen_ai.client.inference.operation.details``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import (
    content_and_tools,
    documents_from_value,
    messages_from_value,
)
from tracejudge.normalize._values import REDACTED, as_str, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message, SpanEvent, StepKind

OPERATION = "gen_ai.operation.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_RESULT = "gen_ai.tool.call.result"

_STEPS: dict[str, StepKind] = {
    "chat": "model",
    "generate_content": "model",
    "text_completion": "model",
    "completion": "model",
    "generate": "model",
    "embeddings": "embedding",
    "retrieval": "retrieval",
    "search_memory": "retrieval",
    "create_agent": "agent",
    "invoke_agent": "agent",
    "plan": "agent",
    "execute_tool": "tool",
    "invoke_workflow": "chain",
    "run_guardrail": "guardrail",
    # MLflow's GenAI translation (MLFLOW_ENABLE_OTEL_GENAI_SEMCONV) passes span types it has no operation
    # for through as the operation name, upper-case.
    "retriever": "retrieval",
    "reranker": "rerank",
    "chain": "chain",
}

_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def classify(view: SpanView) -> StepKind | None:
    operation = view.attrs.get(OPERATION)
    step: StepKind | None = None
    if isinstance(operation, str):
        step = _STEPS.get(operation.lower(), "other")
    elif view.attrs.get("gen_ai.tool.name") is not None or view.attrs.get("gen_ai.tool.call.id") is not None:
        step = "tool"
    if step == "tool" and str(view.attrs.get(TOOL_TYPE, "")).lower() == "datastore":
        # A tool over a data store is a retrieval (DESIGN 5.4); its result holds the documents.
        return "retrieval"
    return step


def _messages_attr(
    view: SpanView, key: str, *, sent: bool = False
) -> tuple[list[Message] | None, str | None]:
    """Messages of a ``gen_ai.*.messages`` attribute; raw text when it is not a message list. ``sent``: the
    request's messages, whose no-part messages hold what the trace has no text of (:func:`_no_part`)."""
    value = view.attrs.get(key)
    if value is None:
        return None, None
    parsed = view.json(key, value)
    if parsed is None:
        return None, _raw_text(value)
    listed = _per_message_json(parsed)
    found = messages_from_value(listed)
    if found is None and parsed != []:
        view.gap("attribute_unparseable", f"{key}: not a message list")
        return None, _raw_text(value)
    if sent and found:
        found = _no_part(view, listed, found)
    return found or [], None


# OpenLLMetry's OpenAI instrumentation (0.62) records a message of a role other than system, developer,
# user, assistant and tool not at all: the ``function`` message answering a legacy ``function_call``.
_DROPS_FUNCTION_MESSAGES = ("opentelemetry.instrumentation.openai.",)
_NO_PART = (
    "a message recorded with no part: content null (a refusal, a legacy function_call) or content parts the"
    " instrumentation does not record (opentelemetry-instrumentation-openai-v2 records a text part for string"
    " content only)"
)
_NO_PART_DROPPED = (
    "an assistant turn recorded with no part: a refusal, or a legacy function_call whose function message"
    " OpenLLMetry does not record"
)


def _no_part(view: SpanView, listed: list[Any], found: list[Message]) -> list[Message]:
    """The request's messages, each recorded with ``parts: []`` read as a message the trace holds no text of
    (an unread part: the input reads partial, its gap saying what the message may have been, no content
    switch named — capture was on) rather than as one whose content capture lost. Not as one that said
    nothing: opentelemetry-instrumentation-openai-v2 writes ``parts: []`` for content null (an assistant's
    refusal or legacy ``function_call``) and for content given as a list of parts, text included; and after
    OpenLLMetry's no-part assistant turn the ``function`` message answering it is not recorded at all."""
    if len(listed) != len(found):
        return found  # a listed item read as no message: positions do not line up
    dropping = view.raw.scope_name.startswith(_DROPS_FUNCTION_MESSAGES)
    out = []
    for item, message in zip(listed, found, strict=True):
        empty = isinstance(item, dict) and item.get("parts") == [] and message.content is None
        if empty and not message.tool_calls:
            why = _NO_PART_DROPPED if dropping and message.role == "assistant" else _NO_PART
            message = message.model_copy(update={"content": "", "unread": (*message.unread, why)})
        out.append(message)
    return out


def _raw_text(value: Any) -> str | None:
    """A messages attribute kept as raw text when it is not a message list (strings only)."""
    return value if isinstance(value, str) else None


def _per_message_json(parsed: Any) -> Any:
    """OTel arrays must be homogeneous primitives, so some SDKs send one JSON string per message."""
    if isinstance(parsed, list) and any(isinstance(item, str) for item in parsed):
        return [maybe_json(item) for item in parsed]
    return parsed


def input_messages(view: SpanView) -> tuple[list[Message] | None, str | None]:
    found, raw = _messages_attr(view, "gen_ai.input.messages", sent=True)
    if found is None and raw is None:
        found = _event_messages(view, output=False)
    return found, raw


def output_messages(view: SpanView) -> tuple[list[Message] | None, str | None]:
    found, raw = _messages_attr(view, "gen_ai.output.messages")
    if found is None and raw is None:
        found = _event_messages(view, output=True)
    return found, raw


def _event_messages(view: SpanView, *, output: bool) -> list[Message] | None:
    """Messages from span events (deprecated per-message events, or the operation-details event)."""
    readers = _OUTPUT_EVENTS if output else _INPUT_EVENTS
    found: list[Message] = []
    for event in view.raw.events:
        read = readers.get(event.name)
        if read is not None:
            found.extend(read(view, event))
    return found or None


def _details_event(key: str) -> _EventReader:
    """The reader of the operation-details event's ``key`` message list."""

    def read(view: SpanView, event: SpanEvent) -> list[Message]:
        attrs = event.attributes
        parsed = view.json(key, attrs.get(key)) if key in attrs else None
        return messages_from_value(parsed) or []

    return read


def _role_event(view: SpanView, event: SpanEvent) -> list[Message]:  # noqa: ARG001  (an _EventReader)
    """A deprecated per-message event: its role is the event's unless it records one."""
    attrs = event.attributes
    return [_message(as_str(attrs.get("role")) or _EVENT_ROLES[event.name], attrs.get("content"))]


def _choice_event(view: SpanView, event: SpanEvent) -> list[Message]:
    """A deprecated ``gen_ai.choice`` event: its message, else its content as the assistant's."""
    attrs = event.attributes
    message = view.json("gen_ai.choice.message", attrs.get("message"))
    found = messages_from_value(message) if message is not None else None
    if found:
        return found
    return [] if attrs.get("content") is None else [_message("assistant", attrs.get("content"))]


def _message(role: str, content: Any) -> Message:
    return content_and_tools(content).message(role)


_EventReader = Callable[[SpanView, SpanEvent], list[Message]]
_DETAILS = "gen_ai.client.inference.operation.details"
# Span events holding messages, by name, for the model input and for its output.
_INPUT_EVENTS: dict[str, _EventReader] = {
    _DETAILS: _details_event("gen_ai.input.messages"),
    **dict.fromkeys(_EVENT_ROLES, _role_event),
}
_OUTPUT_EVENTS: dict[str, _EventReader] = {
    _DETAILS: _details_event("gen_ai.output.messages"),
    "gen_ai.choice": _choice_event,
}


def empty_output(view: SpanView) -> str | None:
    """How the model's reply ended when ``gen_ai.output.messages`` records each message with no part and a
    finish reason (a reply withheld by a content filter; a chat refusal, which opentelemetry-instrumentation-
    openai-v2 records as no part): the finish reasons. None for any other value (hidden, cut, absent)."""
    parsed = _per_message_json(maybe_json(view.attrs.get("gen_ai.output.messages")))
    if not isinstance(parsed, list) or not parsed:
        return None
    reasons = []
    for message in parsed:
        ended = as_str(message.get("finish_reason")) if isinstance(message, dict) else None
        if not isinstance(message, dict) or message.get("parts") != [] or not ended:
            return None
        reasons.append(ended)
    return ", ".join(dict.fromkeys(reasons))


def output_finish_reasons(view: SpanView) -> list[str]:
    """The finish reason of each output message ``gen_ai.output.messages`` records (JSON text, or one JSON
    text per message), and of each deprecated ``gen_ai.choice`` event; empty when none is recorded."""
    value = view.attrs.get("gen_ai.output.messages")
    if isinstance(value, str) and "finish_reason" not in value and "\\u" not in value:
        # No message names a finish reason (a JSON key spelled without escapes is in the text as it is):
        # the text is not decoded (asked of every model call; output messages are often long).
        messages: list[Any] = []
    else:
        parsed = _per_message_json(maybe_json(value))
        messages = parsed if isinstance(parsed, list) else []
    reasons = [m.get("finish_reason") for m in messages if isinstance(m, dict)]
    reasons += [e.attributes.get("finish_reason") for e in view.raw.events if e.name == "gen_ai.choice"]
    return [r for r in (as_str(r) for r in reasons) if r]


def system_instructions(view: SpanView) -> tuple[str | None, bool]:
    """``gen_ai.system_instructions`` text (parts joined) and whether it was redacted."""
    value = view.attrs.get("gen_ai.system_instructions")
    if value is None:
        return None, False
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        parsed = view.json("gen_ai.system_instructions", value)
        value = value if parsed is None else parsed
    found = content_and_tools(value)
    return found.text, found.redacted


def retrieval_documents(view: SpanView) -> list[Document] | None:
    """``gen_ai.retrieval.documents`` (``gen_ai.memory.records``); a retrieval tool's result."""
    for key in ("gen_ai.retrieval.documents", "gen_ai.memory.records", TOOL_RESULT):
        value = view.attrs.get(key)
        if value is None:
            continue
        if key == TOOL_RESULT and isinstance(maybe_json(value), str):
            # A retrieval tool returning plain text returned one unidentified document.
            text = None if value == REDACTED else value
            return [Document(doc_id=None, content=text)] if value.strip() else []
        parsed = view.json(key, value)
        docs = documents_from_value(view, parsed) if parsed is not None else None
        if docs is None:
            if parsed is not None:
                view.gap("attribute_unparseable", f"{key}: not a document list")
            continue
        return docs
    return None


def usage(view: SpanView) -> dict[str, Any]:
    a = view.attrs
    return {
        "input": a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens")),
        "output": a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens")),
        "total": a.get("llm.usage.total_tokens", a.get("gen_ai.usage.total_tokens")),
    }


def _io(found: list[Message] | None, raw: str | None) -> ModelIO | None:
    if found is None and raw is None:
        return None
    if raw == REDACTED:
        # The whole list hidden (a redacting processor, OpenInference's hide switches): not its text.
        return ModelIO(redacted=True)
    return ModelIO(messages=None if found is None else tuple(found), texts=(raw,) if raw else ())


class GenAI(NoRecords):
    """OTel GenAI: operation names, ``gen_ai.{input,output}.messages`` (or events), retrieval documents."""

    name = "gen_ai"

    def classify(self, view: SpanView) -> StepKind | None:
        return classify(view)

    def input_messages(self, view: SpanView) -> ModelIO | None:
        return _io(*input_messages(view))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        return _io(*output_messages(view))

    def documents(self, view: SpanView) -> list[Document] | None:
        return retrieval_documents(view)

    def query(self, view: SpanView) -> str | None:
        return as_str(view.attrs.get("gen_ai.retrieval.query.text"))

    def usage(self, view: SpanView) -> Mapping[str, Any] | None:
        return usage(view)

    def tool_arguments(self, view: SpanView) -> Any | None:
        return view.attrs.get("gen_ai.tool.call.arguments")

    def tool_result(self, view: SpanView) -> Any | None:
        return view.attrs.get("gen_ai.tool.call.result")

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        """The last user message of an agent root that records ``gen_ai.input.messages``."""
        if "gen_ai.input.messages" not in root.attrs:
            return None
        found, raw = input_messages(root)
        text = next((m.content for m in reversed(found or []) if m.role == "user" and m.content), None)
        return text or (raw if raw != REDACTED else None) or None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        """The last message of an agent root that records ``gen_ai.output.messages``."""
        if "gen_ai.output.messages" not in root.attrs:
            return None
        found, raw = output_messages(root)
        text = next((m.content for m in reversed(found or []) if m.content), None) or raw
        return (text, root.span_id) if text and text != REDACTED else None


CONVENTION = GenAI()
