"""The parts of a task record that checks read and the judge sees."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from tracejudge.schema import JudgedPart, TaskRecord


def _doc_label(doc_id: str | None, version: str | None) -> str:
    ident = doc_id or "<no id>"
    return f"{ident}@{version}" if version else ident


def _model_input_text(task: TaskRecord) -> str | None:
    recorded = [m.input_text for m in task.model_calls if m.input_recorded or m.input_text]
    return "\n\n".join(recorded) if recorded else None


def _context_text(task: TaskRecord) -> str | None:
    docs = [d for r in task.retrievals for d in r.documents]
    if not docs:
        return None
    return "\n\n".join(f"[{_doc_label(d.doc_id, d.version)}]\n{d.content or ''}" for d in docs)


def _tool_calls_text(task: TaskRecord) -> str:
    # No tool call is a recorded fact (the agent called none), not a missing part.
    return "\n".join(f"{t.name}({_json(t.arguments)}) -> {_json(t.result)}" for t in task.tool_calls)


_PART_TEXT: Mapping[str, Callable[[TaskRecord], str | None]] = MappingProxyType(
    {
        "input": attrgetter("input"),
        "output": attrgetter("final_answer"),
        "model_input": _model_input_text,
        "context": _context_text,
        "tool_calls": _tool_calls_text,
    }
)
"""How each judged part reads as text (None when the trace did not record it)."""


def part_text(task: TaskRecord, part: JudgedPart) -> str | None:
    """The text of one part, or None when the trace did not record it."""
    return _PART_TEXT.get(part, _tool_calls_text)(task)


def part_data(task: TaskRecord, part: JudgedPart) -> Any:
    """The part as plain JSON data, for the judge's delimited material block."""
    if part == "context":
        return [
            {"document": _doc_label(d.doc_id, d.version), "content": d.content}
            for r in task.retrievals
            for d in r.documents
        ]
    if part == "tool_calls":
        return [{"tool": t.name, "arguments": t.arguments, "result": t.result} for t in task.tool_calls]
    return part_text(task, part)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def task_category(task: TaskRecord, key: str = "category") -> str:
    """The item's category: trace metadata ``key`` (also under ``metadata``/``attributes``) or a
    ``key:value`` tag; ``uncategorized`` when none is recorded."""
    md = task.metadata
    for scope in (md, md.get("metadata"), md.get("attributes")):
        if isinstance(scope, dict):
            value = scope.get(key)
            if isinstance(value, str | int) and str(value):
                return str(value)
    tags = md.get("tags")
    if isinstance(tags, list | tuple):
        prefix = f"{key}:"
        for tag in tags:
            if isinstance(tag, str) and tag.startswith(prefix):
                return tag[len(prefix) :]
    return "uncategorized"


def evaluated_span(task: TaskRecord) -> str | None:
    """The span a verdict is attached to: the final-answer span, else the root span."""
    if task.final_answer_span_id:
        return task.final_answer_span_id
    known = {s.span_id for s in task.spans}
    for s in task.spans:
        if s.parent_span_id is None or s.parent_span_id not in known:
            return s.span_id
    return None
