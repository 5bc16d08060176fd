"""Shape readers shared by every convention: messages, content parts, documents, free-form I/O."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from tracejudge.normalize._values import REDACTED, as_float, as_str, maybe_json, text_of
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message

_DOC_ID_KEYS = ("doc_id", "document_id", "source")
_CONTENT_KEYS = ("content", "page_content", "pageContent", "text", "document")
_RAW_ID_KEYS = ("id", "id_", "doc_id", "document_id", "_id", "uuid", "node_id")
_ROLE_ALIASES = {"human": "user", "ai": "assistant", "AIMessage": "assistant", "HumanMessage": "user"}
_SCORE_KEYS = ("score", "relevance_score", "similarity", "similarity_score")


# --- messages ---------------------------------------------------------------------------------


def _tool_call(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict):
        name, arguments = function.get("name"), function.get("arguments")
    else:
        name, arguments = value.get("name"), value.get("arguments", value.get("args", value.get("input")))
    if name is None and arguments is None:
        return None
    return {"id": as_str(value.get("id")), "name": as_str(name), "arguments": maybe_json(arguments)}


# Content part types (tuples, not sets: a part's "type" may be any JSON value, lists included).
_TOOL_CALL_PARTS = ("tool_call", "tool_use", "function_call")
_TOOL_RESULT_PARTS = ("tool_call_response", "tool_result")
_MEDIA_PARTS = ("image", "image_url", "blob", "file", "uri", "audio", "input_audio")
_NO_TEXT_PARTS = (*_TOOL_CALL_PARTS, *_MEDIA_PARTS)
# OpenLLMetry's OpenAI instrumentation records a chat refusal as a GenAI part of this type.
_REFUSAL_PART = "refusal"
# Anthropic's ``document`` content block: its text is its ``source`` (``{"type": "text", "data"}``, or
# ``{"type": "content", "content": [blocks]}``); a PDF, image or file source holds no text the checks read.
_DOCUMENT_PART = "document"


class Content(NamedTuple):
    """What a message's content holds, read in one walk over its parts."""

    text: str | None
    """The parts' texts joined (a string content as is); None when none holds text."""
    tool_calls: tuple[dict[str, Any], ...]
    """The tool calls found among its parts."""
    redacted: bool
    """Whether its text (or a part's) was redacted."""
    unread: tuple[str, ...] = ()
    """The kinds of its parts that hold no text the checks can read (an image, a file, audio): a
    message carrying one gave the model more than its text (a document as a PDF, a screenshot)."""
    refusal: str | None = None
    """The text of its ``refusal`` parts (a GenAI part OpenLLMetry records for OpenAI's refusal), joined;
    their text is in ``text`` too."""

    def message(self, role: str, tool_calls: Iterable[dict[str, Any]] = ()) -> Message:
        """The message of ``role`` holding this content, with ``tool_calls`` recorded beside it."""
        return Message(
            role=role,
            content=self.text,
            tool_calls=(*self.tool_calls, *tool_calls),
            redacted=self.redacted,
            unread=self.unread,
            refusal=self.refusal,
        )


def content_and_tools(content: Any) -> Content:
    """Text of a message content (string or parts list), tool calls found among parts, redaction, and
    the kinds of parts holding no text."""
    if isinstance(content, str) and content[:1] == "[":
        parts = maybe_json(content)
        if isinstance(parts, list):
            found = _parts_content(parts)
            if found.text is not None or found.tool_calls or found.redacted:
                return found
            # A JSON list holding no content part (a tool's result: a list of records, such as documents
            # with ``page_content``) is the message's text, not parts whose text is missing.
            return Content(content, (), False, found.unread)
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return _parts_content(content)
    if isinstance(content, str):
        return Content(None, (), True) if content == REDACTED else Content(content, (), False)
    return Content(as_str(content), (), False)


def _parts_content(parts: list[Any]) -> Content:
    """``content_and_tools`` of a parts list: the parts' texts joined, their tool calls, redaction and
    the kinds of its media parts (which ``_part_text`` passes over as ``_NO_TEXT_PARTS``)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    unread: list[str] = []
    refused: list[str] = []
    redacted = False
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TOOL_CALL_PARTS:
            calls.append(part)
        elif (media := media_kind(kind)) is not None:
            unread.append(media)
        elif kind == _DOCUMENT_PART and document_text(part) is None:
            # A document sent as a PDF, an image or a file: the model was given more than the trace's text.
            unread.append(_DOCUMENT_PART)
        unread += _kept_as_type(part)
        text = _part_text(part)
        if text == REDACTED:
            redacted = True
        elif text is not None:
            texts.append(text)
            if kind == _REFUSAL_PART:
                refused.append(text)
    if not texts and any(map(_empty_text_part, parts)):
        # A text part recorded with the empty text: the message said nothing (not a part without text).
        return Content("", tuple(_tool_calls(calls)), redacted, tuple(unread))
    joined = "\n".join(texts) if texts else None
    refusal = "\n".join(refused) if refused else None
    return Content(joined, tuple(_tool_calls(calls)), redacted, tuple(unread), refusal)


def _kept_as_type(part: Any) -> list[str]:
    """The kinds of the blocks a part holds nothing of but their type: the anthropic SDK's own spans keep
    of a block it does not read (a ``document``, an image, a server tool's block) only
    ``{"type": "anthropic_<block>"}``, and of a tool result's block other than text and search results only
    ``{"type": "<block>"}`` — the model was given more than the trace's text."""
    if not isinstance(part, dict):
        return []
    kind = part.get("type")
    if isinstance(kind, str) and kind.startswith("anthropic_") and _part_text(part) is None:
        return [kind]
    if kind not in _TOOL_RESULT_PARTS:
        return []
    result = part.get("response", part.get("result", part.get("content")))
    blocks = result if isinstance(result, list) else []
    return [
        str(b["type"]) for b in blocks if isinstance(b, dict) and list(b) == ["type"] and b["type"] != "text"
    ]


def _empty_text_part(part: Any) -> bool:
    """Whether a content part is a text recorded as the empty text ("", or a text part whose text is "")."""
    if isinstance(part, str):
        return part == ""
    if not isinstance(part, dict) or part.get("type") in (*_NO_TEXT_PARTS, *_TOOL_RESULT_PARTS):
        return False
    return part.get("content", part.get("text")) == ""


def document_text(part: dict[str, Any]) -> str | None:
    """The text of an Anthropic ``document`` block: its plain-text source's ``data``, or the texts of its
    content source's blocks; None for any other source (base64 PDF, URL, file id, image) or none."""
    source = part.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return str(source["data"])
    if source.get("type") == "content":
        return text_of(source.get("content"))
    return None


def media_kind(kind: Any) -> str | None:
    """A part's kind, when it is one of the media kinds holding no text the checks can read."""
    return str(kind) if kind in _MEDIA_PARTS else None


def _part_text(part: Any) -> str | None:
    """The text of one content part: a string part as is (even empty), a tool result's payload, a
    text part's text; None for tool calls, media and parts without text."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in _TOOL_RESULT_PARTS:
        text = text_of(part.get("response", part.get("result", part.get("content"))))
    elif kind == _DOCUMENT_PART and "source" in part:
        text = document_text(part)
    elif kind in _NO_TEXT_PARTS:
        return None
    else:
        text = part.get("content", part.get("text"))
        text = text if isinstance(text, str) else text_of(text)
    return text or None


def _tool_calls(raws: Any) -> list[dict[str, Any]]:
    """The tool calls among raw tool-call records (ones with neither name nor arguments are none)."""
    return [call for call in map(_tool_call, raws) if call is not None]


def _tool_results_only(parts: Any) -> bool:
    return (
        isinstance(parts, list)
        and bool(parts)
        and all(isinstance(p, dict) and p.get("type") in ("tool_call_response", "tool_result") for p in parts)
    )


def message_from_dict(value: Any) -> Message | None:
    """One message from any dialect's dict shape (OpenAI, OTel GenAI parts, LangChain)."""
    if not isinstance(value, dict):
        return None
    role = as_str(value.get("role")) or as_str(value.get("type"))
    found = _message_content(value)
    if found is None:
        if isinstance(value.get("kwargs"), dict):
            return message_from_dict({"role": role, **value["kwargs"]})  # LangChain's serialized message
        if role is None:
            return None
        found = Content(None, (), False)
    refusal = as_str(value.get("refusal"))
    if refusal:
        # OpenAI's chat message: a refusal comes in place of the content (null), and is the model's reply.
        found = found._replace(text=found.text or refusal, refusal=refusal)
    return found.message(_message_role(role, value.get("parts")), _tool_calls(value.get("tool_calls") or ()))


def _message_content(value: dict[str, Any]) -> Content | None:
    """``content_and_tools`` of a message's GenAI parts or content (text); None when it has neither."""
    if "parts" in value:
        return content_and_tools(value.get("parts"))
    if "content" in value or "text" in value:
        return content_and_tools(value.get("content", value.get("text")))
    return None


def _message_role(role: str | None, parts: Any) -> str:
    if _tool_results_only(parts):
        # GenAI parts: tool results may travel in a "user" message (pydantic-ai); it is a tool message.
        return "tool"
    role = role or "unknown"
    return _ROLE_ALIASES.get(role, role)


# LangChain's serialized messages (a rendered ChatPromptValue) name the role ``type``; other dicts
# with a ``type`` (content parts, documents) must not pass for messages.
_MESSAGE_TYPES = frozenset(
    {"system", "human", "ai", "tool", "chat", "function", "developer", "user", "assistant"}
)


def _typed(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind in _MESSAGE_TYPES and "content" in item


def messages_from_value(value: Any) -> list[Message] | None:
    """Messages from a decoded value: a message list, ``{"messages": [...]}``, or chat-completion choices."""
    items = _message_items(value) if isinstance(value, dict) else value
    if not isinstance(items, list) or not items or not all(_message_like(item) for item in items):
        return None
    found = [
        m for m in (message_from_dict(item) for item in items if not _tool_declaration(item)) if m is not None
    ]
    return found or None


def _tool_declaration(item: dict[str, Any]) -> bool:
    """Whether a listed "message" is a tool the request declared: Langfuse's LangChain ``CallbackHandler``
    (5.2) appends a model call's tool definitions to its input as ``{"role": "tool", "content": {"type":
    "function", "function": {...}}}``. Not a message the model was sent (a tool's result answers a call,
    ``tool_call_id``), so not one whose content is missing either."""
    content = item.get("content")
    return (
        item.get("role") == "tool"
        and "tool_call_id" not in item
        and isinstance(content, dict)
        and content.get("type") == "function"
        and isinstance(content.get("function"), dict)
    )


def _message_items(value: dict[str, Any]) -> Any:
    """The message list a dict holds: ``messages``, the choices' messages, or the dict as one message."""
    if isinstance(value.get("messages"), list):
        return value["messages"]
    if isinstance(value.get("choices"), list):
        return [c.get("message", c) if isinstance(c, dict) else c for c in value["choices"]]
    if "role" in value:
        return [value]
    return None


def _message_like(item: Any) -> bool:
    return isinstance(item, dict) and ("role" in item or "kwargs" in item or _typed(item))


# --- free-form input and output -----------------------------------------------------------------

_ANSWER_KEYS = ("output", "answer", "final_answer", "response", "result", "content", "text", "outputs")
# The three after user_input are LlamaIndex's argument names (OpenLLMetry records a call's bound arguments).
_INPUT_KEYS = (
    "input",
    "query",
    "question",
    "prompt",
    "inputs",
    "user_input",
    "str_or_query_bundle",
    "query_bundle",
    "query_str",
    "input_args",
)
# The last is DSPy's ``ReAct.forward(**input_args)``: openinference-instrumentation-dspy records its keyword
# arguments under that name (``{"input_args": {"question": …}}``).


# A wrapper's inner value: ``_unwrapped`` found none.
_NOT_WRAPPED = object()


@dataclass(frozen=True)
class _TextReader:
    """Finds the text of one kind (an answer, a request) inside a recorded value, however nested."""

    keys: tuple[str, ...]
    """Keys of a dict that hold the text, first first."""
    role: str
    """The role whose last message is the text, when the value is a message list."""
    strict: bool = False
    """Whether a structured value holding no such text reads as none (else as its JSON text)."""

    def text(self, value: Any, depth: int = 0) -> str | None:
        if depth > 5:
            return None
        value = maybe_json(value)
        if isinstance(value, str):
            value = prediction_fields(value) or value
        if value is None or isinstance(value, str):
            return value
        messages = messages_from_value(value)
        if messages:
            return self._last_text(messages)
        return self._structured(value, depth)

    def _last_text(self, messages: list[Message]) -> str | None:
        """The last text of the reader's role in a message list, else the last text of any role."""
        chosen = [m for m in messages if m.role == self.role and m.content] or [
            m for m in messages if m.content
        ]
        return chosen[-1].content if chosen else None

    def _structured(self, value: Any, depth: int) -> str | None:
        """The text under the first key that holds some, else inside a wrapper, else the value itself."""
        if isinstance(value, dict):
            found = next(
                filter(None, (self.text(value[key], depth + 1) for key in self.keys if key in value)), None
            )
            if found:
                return found
        inner = _unwrapped(value)
        if inner is not _NOT_WRAPPED:
            return self.text(inner, depth + 1)
        if self.strict and isinstance(value, dict | list):
            return None
        if isinstance(value, dict) and value.get("messages") == []:
            return None  # a chat request that sent no message holds no text (not its JSON as the text)
        return text_of(value)


def prediction_fields(text: str) -> dict[str, Any] | None:
    """The fields of a DSPy ``Prediction`` as its ``repr`` prints it (``Prediction(\n    answer='…'\n)``),
    which older openinference-instrumentation-dspy (0.1.13 does; 0.1.48 writes JSON) records as a module's
    ``output.value``: a prediction holds the context passed in beside the answer, and read as one text the
    answer states every passage.
    None unless the text is such a repr whose every field is a Python literal (read with
    ``ast.literal_eval``: no code run); a prediction with several completions prints ``(N completions
    omitted)`` after it and stays text."""
    if not text.startswith("Prediction(\n") or not text.endswith(")"):
        return None
    try:
        call = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(call, ast.Call) or call.args or not call.keywords:
        return None
    fields: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        try:
            fields[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return fields


def _unwrapped(value: Any) -> Any:
    """What a wrapper holds: the first argument (or keyword arguments) of a recorded call
    ``{"args": [...], "kwargs": {...}}``, the one item of a one-item list; ``_NOT_WRAPPED`` if not one."""
    if isinstance(value, list):
        return value[0] if len(value) == 1 else _NOT_WRAPPED
    if not isinstance(value, dict) or not set(value) <= {"args", "kwargs"}:
        return _NOT_WRAPPED
    args, kwargs = value.get("args"), value.get("kwargs")
    if isinstance(args, list) and args:
        return args[0]
    return kwargs if isinstance(kwargs, dict) else _NOT_WRAPPED


_ANSWER = _TextReader(_ANSWER_KEYS, "assistant")
_USER_ANSWER = _TextReader(_ANSWER_KEYS, "assistant", strict=True)
_REQUEST = _TextReader(_INPUT_KEYS, "user")


def answer_text(value: Any) -> str | None:
    """The answer inside a recorded output (plain text, JSON string, messages or an output dict)."""
    return _ANSWER.text(value)


def user_answer(value: Any) -> str | None:
    """The answer a user got inside a trace-level output; None when the output is a structured object
    with no answer in it (a framework's state: LangGraph's root output is the whole graph state,
    retrieved documents and history included, and reading it as the answer judges the wrong text)."""
    return _USER_ANSWER.text(value)


def request_text(value: Any) -> str | None:
    """The user's request inside a recorded input."""
    return _REQUEST.text(value)


# --- documents ----------------------------------------------------------------------------------


def make_document(
    view: SpanView,
    *,
    raw_id: Any,
    content: Any,
    score: Any,
    metadata: Any,
    position: int,
    top: dict[str, Any] | None = None,
) -> Document:
    """A Document with identity from metadata ``doc_id``/``document_id``/``source`` and ``version``."""
    md = (
        view.json("document.metadata", metadata, python_literal=True)
        if isinstance(metadata, str)
        else metadata
    )
    if not isinstance(md, dict):
        md = {}
    top = top or {}
    raw = as_str(raw_id)
    version = as_str(md.get("version")) or as_str(top.get("version"))
    text = content if isinstance(content, str) else text_of(content)
    return Document(
        doc_id=_first_str(md, _DOC_ID_KEYS) or _first_str(top, _DOC_ID_KEYS) or raw,
        version=version,
        raw_id=raw,
        content=None if text == REDACTED else text,
        score=as_float(score),
        metadata=md,
        position=position,
    )


def _first_str(mapping: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` whose value reads as text."""
    for key in keys:
        found = as_str(mapping.get(key))
        if found is not None:
            return found
    return None


def _encoded_node(value: str) -> dict[str, Any] | None:
    """A LlamaIndex node serialized to JSON text (OpenLLMetry's node lists hold one JSON string per
    ``NodeWithScore``); None for any other text, which stays a document's content."""
    if not value.startswith("{") or '"class_name"' not in value:
        return None
    parsed = maybe_json(value)
    if isinstance(parsed, dict) and ("node" in parsed or str(parsed.get("class_name", "")).endswith("Node")):
        return parsed
    return None


def document_from_dict(view: SpanView, value: Any, position: int) -> Document | None:
    """A document from a generic dict (Langfuse output, GenAI documents, LangChain/LlamaIndex shapes)."""
    if isinstance(value, str):
        node = _encoded_node(value)
        if node is None:
            return Document(doc_id=None, content=value, position=position)
        value = node
    if not isinstance(value, dict):
        return None
    value = _document_fields(value)
    return make_document(
        view,
        raw_id=_first_present(value, _RAW_ID_KEYS),
        content=_first_present(value, _CONTENT_KEYS),
        score=_first_present(value, _SCORE_KEYS),
        metadata=value.get("metadata", value.get("meta")),
        position=position,
        top=value,
    )


def _document_fields(value: dict[str, Any]) -> dict[str, Any]:
    """A document's own fields, out of the wrappers around them: LangChain's serialized ``kwargs``,
    LlamaIndex's ``NodeWithScore`` (``{"node": {...}, "score": ...}``), a ``document`` beside its score."""
    if isinstance(value.get("kwargs"), dict):
        value = value["kwargs"]
    if isinstance(value.get("node"), dict):
        node = value["node"]
        value = {**node, "score": value.get("score", node.get("score"))}
    if isinstance(value.get("document"), dict):
        value = {**value["document"], **{k: v for k, v in value.items() if k != "document"}}
    return value


def _first_present(value: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first of ``keys`` that is present and not null."""
    return next((value[k] for k in keys if value.get(k) is not None), None)


# Keys under which a retriever output object holds its document list, first first.
_DOCUMENT_LIST_KEYS = ("documents", "docs", "results", "nodes", "source_nodes", "output", "records")


def documents_from_value(view: SpanView, value: Any) -> list[Document] | None:
    """Documents from a decoded retriever output: a list, or ``{"documents": [...]}`` and similar."""
    value = maybe_json(value)
    if isinstance(value, dict):
        value = next((value[key] for key in _DOCUMENT_LIST_KEYS if isinstance(value.get(key), list)), None)
    if not isinstance(value, list):
        return None
    docs = [d for d in (document_from_dict(view, item, i) for i, item in enumerate(value)) if d is not None]
    if value and not docs:
        return None
    return docs


def dumps(value: Any) -> str:
    """Compact JSON for free-form values kept as text."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)
