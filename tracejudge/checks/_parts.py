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


def _per_run(task: TaskRecord, text: Callable[[TaskRecord], str | None]) -> str | None:
    """A part's text, run by run under each run's label when the trace holds several (``TaskRecord.runs``: a
    trace id given to more than one run — which run the answer is is not known, and one run's documents are
    no context of another's)."""
    if not task.runs:
        return text(task)
    parts = [(label, got) for label, run in task.each_run() if (got := text(run)) is not None]
    return "\n\n".join(f"[{label}]\n{got}" for label, got in parts) if parts else None


def _model_input_text(task: TaskRecord) -> str | None:
    return _per_run(task, _one_model_input)


def _one_model_input(task: TaskRecord) -> str | None:
    recorded = [m.input_text for m in task.model_calls if m.input_recorded or m.input_text]
    return "\n\n".join(recorded) if recorded else None


def _context_text(task: TaskRecord) -> str | None:
    return _per_run(task, _one_context)


def _one_context(task: TaskRecord) -> str | None:
    docs = [d for r in task.retrievals for d in r.documents]
    if not docs:
        return None
    return "\n\n".join(f"[{_doc_label(d.doc_id, d.version)}]\n{d.content or ''}" for d in docs)


def _tool_calls_text(task: TaskRecord) -> str:
    # No tool call is a recorded fact (the agent called none), not a missing part.
    return _per_run(task, _one_tool_calls) or ""


def _one_tool_calls(task: TaskRecord) -> str | None:
    return "\n".join(f"{t.name}({_json(t.arguments)}) -> {_json(t.result)}" for t in task.tool_calls) or None


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
    # A trace holding several runs: each item names its run (one run's documents are no context of another's).
    if part == "context":
        return [
            {**_run(label), "document": _doc_label(d.doc_id, d.version), "content": d.content}
            for label, run in task.each_run()
            for r in run.retrievals
            for d in r.documents
        ]
    if part == "tool_calls":
        return [
            {**_run(label), "tool": t.name, "arguments": t.arguments, "result": t.result}
            for label, run in task.each_run()
            for t in run.tool_calls
        ]
    return part_text(task, part)


def _run(label: str) -> dict[str, str]:
    return {"run": label} if label else {}


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
