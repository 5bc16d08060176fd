"""Instructor's structured outputs under openinference-instrumentation-instructor (0.1.29; scope
``openinference.instrumentation.instructor``).

Instructor asks the model for a response model through function calling: the model call (an LLM span of the
OpenAI instrumentation, a child of Instructor's ``instructor.create`` span) outputs one tool call whose
arguments *are* the structured answer, and no tool ever runs. Instructor's span records the object it
validated and returned as ``output.value`` (JSON). Read alone, that model call "asked for a tool and no
recorded call answered" — so the call that wrote the answer would look unrecorded. This convention says
which call it was: when the answer the trace gives (its root's output, else — when no model call came
after it — the object's own answer field) is a value of the object Instructor returned, and a model call
under that Instructor span (directly, or below a framework's own model-attempt span: Atomic Agents 2
records one) output exactly that object as its one tool call, that call wrote the answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._freeform import CONVENTION as FREEFORM
from tracejudge.normalize._openinference import messages
from tracejudge.normalize._shapes import user_answer
from tracejudge.normalize._values import REDACTED, maybe_json
from tracejudge.normalize._view import SpanView

SCOPE = "openinference.instrumentation.instructor"


def _returned(view: SpanView) -> dict[str, Any] | None:
    """The object an Instructor span returned (its ``output.value``), when it is one."""
    if view.raw.scope_name != SCOPE:
        return None
    value = view.get("output.value")
    value = None if value is None or value == REDACTED else maybe_json(value)
    return value if isinstance(value, dict) and value else None


def _wrote(model: SpanView, returned: dict[str, Any]) -> bool:
    """The model call output exactly one tool call, with the returned object as its arguments."""
    calls = [call for message in messages(model, "llm.output_messages") or () for call in message.tool_calls]
    return len(calls) == 1 and maybe_json(calls[0].get("arguments")) == returned


def _under(view: SpanView, ancestor: SpanView, parents: dict[str, str | None]) -> bool:
    """Whether ``ancestor`` is above ``view`` (a framework's own model-attempt span may sit between)."""
    seen: set[str] = set()
    current = parents.get(view.span_id)
    while current is not None and current not in seen:  # parent links may loop in a bad trace
        if current == ancestor.span_id:
            return True
        seen.add(current)
        current = parents.get(current)
    return False


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _answered_later(writer: SpanView, views: Sequence[SpanView]) -> bool:
    """Whether another model call of the trace started after ``writer`` did."""
    start = writer.raw.start_time_unix_nano
    return any(
        v.step == "model" and v.span_id != writer.span_id and v.raw.start_time_unix_nano > start
        for v in views
    )


class Instructor(NoRecords):
    """Instructor: the model call whose one tool call is the structured output Instructor returned wrote
    the answer."""

    name = "instructor"

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:
        structured = [(view, returned) for view in views if (returned := _returned(view)) is not None]
        if not structured:
            return None
        recorded = FREEFORM.final_answer(root, views)
        parents = {v.span_id: v.raw.parent_span_id for v in views}
        for span, returned in reversed(structured):
            text = recorded[0] if recorded else user_answer(returned)
            if not text or text not in set(_strings(returned)):
                continue
            writers = [
                v for v in views if v.step == "model" and _under(v, span, parents) and _wrote(v, returned)
            ]
            if not writers:
                continue
            writer = writers[-1]
            if recorded is None and _answered_later(writer, views):
                # No answer at the root: the trace's answer is its last model output (normalize's
                # rule), and a model call after this one may have written what the user got.
                return None
            return text, writer.span_id
        return None


CONVENTION = Instructor()
