"""Free-form input and output: the raw I/O attributes several conventions write.

``langfuse.observation.input`` / ``.output`` (Langfuse), ``input.value`` / ``output.value``
(OpenInference), ``traceloop.entity.input`` / ``.output`` (OpenLLMetry): strings that are often
JSON (message lists, documents, answer objects), read by shape. They are the last resort of every
field: a convention's structured record always comes first. The first present key wins, in the
order below (a span carrying several usually holds the same value twice).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from tracejudge.normalize import _langfuse as langfuse
from tracejudge.normalize import _openinference as oi
from tracejudge.normalize import _openllmetry as oll
from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._shapes import documents_from_value, messages_from_value, request_text, user_answer
from tracejudge.normalize._values import REDACTED, maybe_json, text_of
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Document

INPUT_KEYS = (langfuse.INPUT, oi.INPUT, oll.INPUT)
OUTPUT_KEYS = (langfuse.OUTPUT, oi.OUTPUT, oll.OUTPUT)
# The GenAI convention's deprecated single-string prompt and completion are free-form too.
_MODEL_INPUT_KEYS = (*INPUT_KEYS, "gen_ai.prompt")
_MODEL_OUTPUT_KEYS = (*OUTPUT_KEYS, "gen_ai.completion")
# A value that is only an object's default repr names the object, not what it held: OpenInference's Groq
# instrumentation records a streamed reply as ``<groq.Stream object at 0x…>`` (it never reads the stream).
# Read as text it would be the model's output — and the run's answer.
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def object_repr(view: SpanView) -> str | None:
    """The raw output of a span when it is only an object's default repr (see ``_OBJECT_REPR``); else None."""
    value = view.get(*OUTPUT_KEYS)
    return value.strip() if isinstance(value, str) and _OBJECT_REPR.fullmatch(value.strip()) else None


def _model_io(view: SpanView, keys: Iterable[str]) -> ModelIO | None:
    """Messages or text from the first present key; a redacted key is noted and skipped."""
    redacted = False
    for key in keys:
        value = view.attrs.get(key)
        if value is None or value == "":
            continue
        if value == REDACTED:
            redacted = True
            continue
        if isinstance(value, str) and _OBJECT_REPR.fullmatch(value.strip()):
            continue
        parsed = maybe_json(value)
        if isinstance(parsed, dict) and parsed.get("messages") == []:
            # A chat request that sent no message: an empty message list, not the request's JSON as text.
            return ModelIO(messages=(), redacted=redacted)
        messages = messages_from_value(parsed)
        if messages:
            return ModelIO(messages=tuple(messages), redacted=redacted)
        text = text_of(parsed)
        return ModelIO(texts=(text,) if text else (), redacted=redacted)
    return ModelIO(redacted=True) if redacted else None


class FreeForm(NoRecords):
    """The raw input/output attributes, read by shape."""

    name = ""

    def input_messages(self, view: SpanView) -> ModelIO | None:
        return _model_io(view, _MODEL_INPUT_KEYS)

    def output_messages(self, view: SpanView) -> ModelIO | None:
        return _model_io(view, _MODEL_OUTPUT_KEYS)

    def documents(self, view: SpanView) -> list[Document] | None:
        for key in OUTPUT_KEYS:
            value = view.attrs.get(key)
            if value is None or value == REDACTED:
                continue
            docs = documents_from_value(view, maybe_json(value))
            if docs is not None:
                return docs
        return None

    def query(self, view: SpanView) -> str | None:
        for key in INPUT_KEYS:
            value = view.attrs.get(key)
            if value is not None and value != REDACTED:
                text = request_text(value)
                if text:
                    return text
        return None

    def tool_arguments(self, view: SpanView) -> Any | None:
        return view.get(*INPUT_KEYS)

    def tool_result(self, view: SpanView) -> Any | None:
        return view.get(*OUTPUT_KEYS)

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        value = root.get(*INPUT_KEYS)
        if value is None or value == REDACTED:
            return None
        return request_text(value) or None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        value = root.get(*OUTPUT_KEYS)
        if value is None or value == REDACTED:
            return None
        text = user_answer(value)
        return (text, root.span_id) if text else None


CONVENTION = FreeForm()
