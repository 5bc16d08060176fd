"""Strands Agents' built-in tracing (``gen_ai.system = strands-agents``).

Strands records messages as span events of the GenAI event names, but their values are Bedrock
Converse content blocks in JSON text rather than GenAI parts:

- on a ``chat`` span, input events ``gen_ai.{system,user,assistant,tool}.message`` with ``content`` =
  ``[{"text"} | {"toolUse": {"toolUseId", "name", "input"}} | {"toolResult": {"toolUseId", "status",
  "content": [{"text"} | {"json"}]}}]`` and the output event ``gen_ai.choice`` with ``message`` = such a
  list (and ``finish_reason``);
- on an ``execute_tool <name>`` span, ``gen_ai.tool.message`` holds the tool's arguments (``content``,
  JSON) and ``gen_ai.choice`` its result (``message`` = ``[{"text": ...}]``).

With ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` Strands writes the latest GenAI
form instead, which the GenAI convention reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import documents_from_value
from tracejudge.normalize._values import REDACTED, as_str, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document, Message

SYSTEM = "strands-agents"
_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def is_strands(view: SpanView) -> bool:
    return SYSTEM in (view.attrs.get("gen_ai.system"), view.attrs.get("gen_ai.provider.name"))


def _block_text(block: dict[str, Any]) -> str | None:
    if isinstance(block.get("text"), str):
        return str(block["text"])
    if "json" in block:
        return json.dumps(block["json"], ensure_ascii=False, sort_keys=True)
    return None


def _blocks(value: Any) -> tuple[str | None, list[dict[str, Any]], bool]:
    """Text, tool calls and redaction of a list of content blocks (JSON text or parsed)."""
    if value == REDACTED:
        return None, [], True
    parsed = maybe_json(value) if isinstance(value, str) else value
    if isinstance(parsed, str):
        return parsed, [], False
    blocks = _dict_blocks(parsed)
    texts = [text for block in blocks for text in _block_texts(block)]
    calls = [call for call in map(_tool_use, blocks) if call is not None]
    return "\n".join(texts) or None, calls, False


def _dict_blocks(parsed: Any) -> list[dict[str, Any]]:
    """The blocks of a block list (one block alone is a list of one); none for any other value."""
    items = [parsed] if isinstance(parsed, dict) else parsed if isinstance(parsed, list) else []
    return [block for block in items if isinstance(block, dict)]


def _block_texts(block: dict[str, Any]) -> Iterator[str]:
    """A block's own text, then the texts of the content blocks of the tool result it holds."""
    text = _block_text(block)
    if text is not None:
        yield text
    result = block.get("toolResult")
    if isinstance(result, dict):
        inner = (b for b in result.get("content") or () if isinstance(b, dict))
        yield from (t for t in map(_block_text, inner) if t is not None)


def _tool_use(block: dict[str, Any]) -> dict[str, Any] | None:
    """The tool call a ``toolUse`` block asks for."""
    use = block.get("toolUse")
    if not isinstance(use, dict):
        return None
    return {
        "id": as_str(use.get("toolUseId")),
        "name": as_str(use.get("name")),
        "arguments": use.get("input"),
    }


def _events(view: SpanView, names: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, e.attributes) for e in view.raw.events if e.name in names]


class Strands(NoRecords):
    """Strands Agents: messages and tool I/O from its span events' content blocks."""

    name = "strands"

    def input_messages(self, view: SpanView) -> ModelIO | None:
        if not is_strands(view):
            return None
        events = _events(view, tuple(_ROLES))
        if not events:
            return None
        messages = []
        for name, attrs in events:
            text, calls, redacted = _blocks(attrs.get("content"))
            messages.append(
                Message(role=_ROLES[name], content=text, tool_calls=tuple(calls), redacted=redacted)
            )
        return ModelIO(messages=tuple(messages), redacted=any(m.redacted for m in messages))

    def output_messages(self, view: SpanView) -> ModelIO | None:
        if not is_strands(view):
            return None
        events = _events(view, ("gen_ai.choice",))
        if not events:
            return None
        messages = []
        for _, attrs in events:
            text, calls, redacted = _blocks(attrs.get("message"))
            messages.append(
                Message(role="assistant", content=text, tool_calls=tuple(calls), redacted=redacted)
            )
        return ModelIO(messages=tuple(messages), redacted=any(m.redacted for m in messages))

    def documents(self, view: SpanView) -> list[Document] | None:
        """A retrieval tool's documents: its result (a tool is a retrieval when marked or when its
        result names documents of the manifest)."""
        # A missing or redacted result is no document list: documents_from_value reads it as None.
        return documents_from_value(view, self.tool_result(view))

    def tool_arguments(self, view: SpanView) -> Any | None:
        if not is_strands(view):
            return None
        events = _events(view, ("gen_ai.tool.message",))
        return events[0][1].get("content") if events else None

    def tool_result(self, view: SpanView) -> Any | None:
        if not is_strands(view):
            return None
        events = _events(view, ("gen_ai.choice",))
        if not events:
            return None
        text, _, _ = _blocks(events[-1][1].get("message"))
        return text


CONVENTION = Strands()
