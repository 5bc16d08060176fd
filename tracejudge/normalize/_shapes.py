"""Shape readers shared by every convention: messages, content parts, documents, free-form I/O."""

from __future__ import annotations

import json
from typing import Any

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


def content_and_tools(content: Any) -> tuple[str | None, list[dict[str, Any]], bool]:
    """Text of a message content (string or parts list), tool calls found among parts, and redaction."""
    content = maybe_json(content) if isinstance(content, str) and content[:1] == "[" else content
    if content is None:
        return None, [], False
    if isinstance(content, str):
        if content == REDACTED:
            return None, [], True
        return content, [], False
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return as_str(content), [], False
    texts: list[str] = []
    tools: list[dict[str, Any]] = []
    redacted = False
    for part in content:
        if isinstance(part, str):
            if part == REDACTED:
                redacted = True
            else:
                texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("tool_call", "tool_use", "function_call"):
            call = _tool_call(part)
            if call is not None:
                tools.append(call)
            continue
        if kind in ("tool_call_response", "tool_result"):
            payload = part.get("response", part.get("result", part.get("content")))
            text = text_of(payload)
        elif kind in ("image", "image_url", "blob", "file", "uri", "audio", "input_audio"):
            continue
        else:
            text = part.get("content", part.get("text"))
            text = text if isinstance(text, str) else text_of(text)
        if text == REDACTED:
            redacted = True
        elif text:
            texts.append(text)
    return ("\n".join(texts) if texts else None), tools, redacted


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
    if "parts" in value:
        content, tools, redacted = content_and_tools(value.get("parts"))
    elif "content" in value or "text" in value:
        content, tools, redacted = content_and_tools(value.get("content", value.get("text")))
    elif "kwargs" in value and isinstance(value["kwargs"], dict):
        return message_from_dict({"role": role, **value["kwargs"]})
    elif role is None:
        return None
    else:
        content, tools, redacted = None, [], False
    if role is None:
        role = "unknown"
    if _tool_results_only(value.get("parts")):
        # GenAI parts: tool results may travel in a "user" message (pydantic-ai); it is a tool message.
        role = "tool"
    role = {"human": "user", "ai": "assistant", "AIMessage": "assistant", "HumanMessage": "user"}.get(
        role, role
    )
    for raw in value.get("tool_calls") or ():
        call = _tool_call(raw)
        if call is not None:
            tools.append(call)
    return Message(role=role, content=content, tool_calls=tuple(tools), redacted=redacted)


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
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            value = value["messages"]
        elif isinstance(value.get("choices"), list):
            value = [c.get("message", c) if isinstance(c, dict) else c for c in value["choices"]]
        elif "role" in value:
            value = [value]
        else:
            return None
    if not isinstance(value, list) or not value:
        return None
    if not all(
        isinstance(item, dict) and ("role" in item or "kwargs" in item or _typed(item)) for item in value
    ):
        return None
    found = [m for m in (message_from_dict(item) for item in value) if m is not None]
    return found or None


# --- free-form input and output -----------------------------------------------------------------

_ANSWER_KEYS = ("output", "answer", "final_answer", "response", "result", "content", "text", "outputs")
# The last three are LlamaIndex's argument names (OpenLLMetry records a call's bound arguments).
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
)


def _first_text(value: Any, keys: tuple[str, ...], role: str, depth: int, strict: bool = False) -> str | None:
    if depth > 5:
        return None
    value = maybe_json(value)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    messages = messages_from_value(value)
    if messages:
        chosen = [m for m in messages if m.role == role and m.content] or [m for m in messages if m.content]
        return chosen[-1].content if chosen else None
    if isinstance(value, dict):
        for key in keys:
            if key in value:
                found = _first_text(value[key], keys, role, depth + 1, strict)
                if found:
                    return found
        if set(value) <= {"args", "kwargs"}:
            args = value.get("args")
            if isinstance(args, list) and args:
                return _first_text(args[0], keys, role, depth + 1, strict)
            kwargs = value.get("kwargs")
            if isinstance(kwargs, dict):
                return _first_text(kwargs, keys, role, depth + 1, strict)
    if isinstance(value, list) and len(value) == 1:
        return _first_text(value[0], keys, role, depth + 1, strict)
    if strict and isinstance(value, dict | list):
        return None
    return text_of(value)


def answer_text(value: Any) -> str | None:
    """The answer inside a recorded output (plain text, JSON string, messages or an output dict)."""
    return _first_text(value, _ANSWER_KEYS, "assistant", 0)


def user_answer(value: Any) -> str | None:
    """The answer a user got inside a trace-level output; None when the output is a structured object
    with no answer in it (a framework's state: LangGraph's root output is the whole graph state,
    retrieved documents and history included, and reading it as the answer judges the wrong text)."""
    return _first_text(value, _ANSWER_KEYS, "assistant", 0, strict=True)


def request_text(value: Any) -> str | None:
    """The user's request inside a recorded input."""
    return _first_text(value, _INPUT_KEYS, "user", 0)


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
    md: Any = metadata
    if isinstance(md, str):
        md = view.json("document.metadata", md, python_literal=True)
    if not isinstance(md, dict):
        md = {}
    top = top or {}
    doc_id = None
    for key in _DOC_ID_KEYS:
        doc_id = as_str(md.get(key))
        if doc_id is not None:
            break
    if doc_id is None:
        for key in _DOC_ID_KEYS:
            doc_id = as_str(top.get(key))
            if doc_id is not None:
                break
    raw = as_str(raw_id)
    version = as_str(md.get("version")) or as_str(top.get("version"))
    text = content if isinstance(content, str) else text_of(content)
    if text == REDACTED:
        text = None
    return Document(
        doc_id=doc_id or raw,
        version=version,
        raw_id=raw,
        content=text,
        score=as_float(score),
        metadata=md,
        position=position,
    )


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
    if isinstance(value.get("kwargs"), dict):
        value = value["kwargs"]
    if isinstance(value.get("node"), dict):
        # LlamaIndex NodeWithScore: {"node": {...}, "score": ...}
        node = value["node"]
        value = {**node, "score": value.get("score", node.get("score"))}
    if isinstance(value.get("document"), dict):
        value = {**value["document"], **{k: v for k, v in value.items() if k != "document"}}
    content = next((value[k] for k in _CONTENT_KEYS if value.get(k) is not None), None)
    raw_id = next((value[k] for k in _RAW_ID_KEYS if value.get(k) is not None), None)
    score = next((value[k] for k in _SCORE_KEYS if value.get(k) is not None), None)
    return make_document(
        view,
        raw_id=raw_id,
        content=content,
        score=score,
        metadata=value.get("metadata", value.get("meta")),
        position=position,
        top=value,
    )


def documents_from_value(view: SpanView, value: Any) -> list[Document] | None:
    """Documents from a decoded retriever output: a list, or ``{"documents": [...]}`` and similar."""
    value = maybe_json(value)
    if isinstance(value, dict):
        for key in ("documents", "docs", "results", "nodes", "source_nodes", "output", "records"):
            if isinstance(value.get(key), list):
                value = value[key]
                break
        else:
            return None
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
