"""A model input message carrying a part the trace holds no text of (a file, an image, audio) gave the
model more than its text: the clause may have been in the attached PDF or screenshot, so a clause found
in no recorded text is not ``dropped_in_context`` (DESIGN 5.5) — the input reads as partial and
``in_context`` stays unconfirmed, naming the messages and the parts' kinds. Across the shapes that carry
parts: OpenAI chat messages in OpenInference's ``input.value``, OpenInference's flattened
``message.contents``, and OTel GenAI parts."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.localize import conftest as mk
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import Localization, RawSpan, TaskRecord

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PDF = "data:application/pdf;base64," + base64.b64encode(mk.V2_TEXT.encode()).decode()


def _spans(llm_attributes: dict[str, Any]) -> list[RawSpan]:
    """A root answering with v2's cap, a retrieval returning v2, and one LLM span with these attributes
    (whose recorded text does not hold v2's clause)."""
    root, retrieval, t0 = mk.agent_and_retrieval(TRACE)
    llm = RawSpan(
        trace_id=TRACE,
        span_id="c" * 16,
        parent_span_id="a" * 16,
        name="chat",
        start_time_unix_nano=t0 + 3,
        end_time_unix_nano=t0 + 4,
        attributes={"openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1", "output.value": mk.GOOD}
        | llm_attributes,
    )
    return [root, retrieval, llm]


def _openai_messages(user_content: Any) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": "You answer procurement questions from the attached documents."},
        {"role": "user", "content": user_content},
    ]
    return {"input.value": json.dumps({"messages": messages}), "input.mime_type": "application/json"}


def _flattened(kind: str) -> dict[str, Any]:
    return {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": mk.QUESTION,
        "llm.input_messages.0.message.contents.1.message_content.type": kind,
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": PDF,
    }


def _genai(part: dict[str, Any]) -> dict[str, Any]:
    parts = [{"type": "text", "content": mk.QUESTION}, part]
    return {
        "openinference.span.kind": "",
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": parts}]),
    }


def _triage(task: TaskRecord) -> Localization:
    return localize(task, mk.ticket(), [mk.entry(acl=None), mk.v1_entry()])


def _in_context(loc: Localization) -> tuple[str, tuple[str, ...]]:
    stage = next(s for s in loc.stages if s.name == "in_context")
    return stage.status, stage.missing


CASES = {
    "openai file part": (
        _openai_messages(
            [
                {"type": "text", "text": mk.QUESTION},
                {"type": "file", "file": {"filename": "c17.pdf", "file_data": PDF}},
            ]
        ),
        "file",
    ),
    "openai image part": (
        _openai_messages(
            [{"type": "text", "text": mk.QUESTION}, {"type": "image_url", "image_url": {"url": PDF}}]
        ),
        "image_url",
    ),
    "openai audio part": (
        _openai_messages(
            [
                {"type": "text", "text": mk.QUESTION},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            ]
        ),
        "input_audio",
    ),
    "openinference flattened image": (_flattened("image"), "image"),
    "genai blob part": (
        _genai({"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw0KGgo="}),
        "blob",
    ),
    "genai uri part": (
        _genai({"type": "uri", "modality": "image", "uri": "https://example.invalid/c17.png"}),
        "uri",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_part_without_text_keeps_in_context_unconfirmed(name: str) -> None:
    attributes, kind = CASES[name]
    task = normalize(_spans(attributes))
    (call,) = task.model_calls
    assert call.input_partial
    (gap,) = [g for g in task.gaps if g.kind == "model_input_truncated" and g.span_id == call.span_id]
    assert f"carried parts the trace holds no text of ({kind})" in gap.detail
    loc = _triage(task)
    assert loc.verdict == "unconfirmed"
    status, missing = _in_context(loc)
    assert status == "unconfirmed"
    assert any(call.span_id in m and kind in m for m in missing)


@pytest.mark.parametrize(
    "attributes",
    [
        _openai_messages([{"type": "text", "text": mk.QUESTION}]),
        _openai_messages(mk.QUESTION),
        {**_flattened("image"), "llm.input_messages.0.message.contents.1.message_content.type": "text"},
        _genai({"type": "text", "content": "and the order is urgent"}),
    ],
    ids=["openai text part", "openai text", "openinference text parts", "genai text parts"],
)
def test_text_alone_still_reads_whole_and_the_drop_stays_definite(attributes: dict[str, Any]) -> None:
    task = normalize(_spans(attributes))
    (call,) = task.model_calls
    assert not call.input_partial
    assert not [g for g in task.gaps if g.kind == "model_input_truncated"]
    assert _triage(task).verdict == "dropped_in_context"
