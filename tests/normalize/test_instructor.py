"""Instructor's structured output (tests/fixtures/traces/record_instructor.py): the model call whose one
tool call is the object ``instructor.create`` returned is the call that wrote the answer."""

from __future__ import annotations

import json

import pytest

from tests.localize.conftest import recorded_spans
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan

ANSWER = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."


def _spans() -> list[RawSpan]:
    return recorded_spans("instructor_rag.pb")


def _named(spans: list[RawSpan], name: str) -> RawSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def _with(spans: list[RawSpan], name: str, key: str, value: str) -> list[RawSpan]:
    return [
        s.model_copy(update={"attributes": {**s.attributes, key: value}}) if s.name == name else s
        for s in spans
    ]


def test_the_structured_calls_model_span_wrote_the_answer() -> None:
    spans = _spans()
    record = normalize(spans)
    [call] = record.model_calls
    assert record.final_answer == ANSWER
    assert record.final_answer_span_id == call.span_id == _named(spans, "ChatCompletion").span_id
    [message] = call.output_messages
    [tool_call] = message.tool_calls
    assert tool_call["name"] == "ContractAnswer"
    assert tool_call["arguments"] == {"answer": ANSWER, "sources": ["C-17/attachment@v2"]}
    assert "Prepayment shall not exceed 30,000 RMB per order." in call.input_text


def test_a_model_call_whose_arguments_are_not_the_returned_object_wrote_nothing() -> None:
    # e.g. a first attempt Instructor rejected and retried: its arguments are not what it returned
    changed = json.dumps({"answer": ANSWER, "sources": ["C-17/attachment@v1"]})
    spans = _with(_spans(), "instructor.create", "output.value", changed)
    record = normalize(spans)
    assert record.final_answer == ANSWER
    assert record.final_answer_span_id == _named(spans, "answer question").span_id


@pytest.mark.parametrize("answer", ["Something else entirely.", ""])
def test_an_answer_that_is_not_in_the_object_was_not_written_by_it(answer: str) -> None:
    spans = _with(_spans(), "answer question", "output.value", answer)
    record = normalize(spans)
    root = _named(spans, "answer question").span_id
    if answer:
        assert (record.final_answer, record.final_answer_span_id) == (answer, root)
    else:
        # no answer at the root: the object's own answer field, written by the model call
        assert record.final_answer == ANSWER
        assert record.final_answer_span_id == _named(spans, "ChatCompletion").span_id


def test_without_a_root_answer_a_later_model_call_leaves_the_answer_open() -> None:
    # The app extracted a draft with Instructor, then a plain model call rewrote it: with no answer at the
    # root, the earlier draft object is not read as the answer; nor is the rewrite, which may have been made
    # after the answer (a title, a summary: it does not continue the draft's call), so none is read.
    spans = _with(_spans(), "answer question", "output.value", "")
    root = _named(spans, "answer question")
    draft = _named(spans, "ChatCompletion")
    later = "Yes: the 50,000 RMB cap of attachment v1 allows 45,000 RMB."
    rewrite = draft.model_copy(
        update={
            "span_id": "0123456789abcdef",
            "parent_span_id": root.span_id,
            "start_time_unix_nano": draft.end_time_unix_nano + 1_000,
            "end_time_unix_nano": draft.end_time_unix_nano + 2_000,
            "attributes": {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "Rewrite the answer for the buyer.",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": later,
            },
        }
    )
    record = normalize([*spans, rewrite])
    assert (record.final_answer, record.final_answer_span_id) == (None, None)
    (gap,) = [g for g in record.gaps if g.kind == "answer_uncertain"]
    assert gap.span_id == rewrite.span_id
    assert f"model call {draft.span_id}" in gap.note
