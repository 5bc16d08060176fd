"""Logfire's OpenAI Agents SDK integration: a Responses API span's ``events`` (input and output in one list)
split by ``raw_input`` as Logfire writes them, read only when the split fits one way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.normalize.test_conventions import kinds, root, span
from tracejudge.normalize import normalize
from tracejudge.schema import TaskRecord


def _call(raw_input: Any, events: list[dict[str, Any]]) -> TaskRecord:
    attrs = {
        "logfire.span_type": "span",
        "logfire.msg_template": "Responses API with {gen_ai.request.model!r}",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "raw_input": json.dumps(raw_input),
        "events": json.dumps(events),
    }
    return normalize([root(), span("b1", attrs, name="Responses API with {gen_ai.request.model!r}")])


def _event(role: str, content: str, name: str | None = None) -> dict[str, Any]:
    return {"event.name": name or f"gen_ai.{role}.message", "content": content, "role": role}


def test_instructions_and_content_parts_are_counted_as_logfire_writes_them() -> None:
    # Instructions are one system event the input items do not hold; a message of two parts is two events.
    raw = [
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
        }
    ]
    events = [
        _event("system", "Be brief."),
        _event("user", "a"),
        _event("user", "b"),
        _event("assistant", "Done."),
    ]
    (call,) = _call(raw, events).model_calls
    assert [(m.role, m.content) for m in call.input_messages] == [
        ("system", "Be brief."),
        ("user", "a"),
        ("user", "b"),
    ]
    assert [(m.role, m.content) for m in call.output_messages] == [("assistant", "Done.")]


def test_a_history_ending_with_the_model_s_own_message_is_not_split_by_guess() -> None:
    # The input's last item is an assistant message and a system event leads: with or without
    # instructions both splits leave only assistant events after them, so nothing tells them apart.
    raw = [{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "Hi."}]
    events = [_event("system", "Be brief."), _event("assistant", "Hi."), _event("assistant", "Done.")]
    record = _call(raw, events)
    (call,) = record.model_calls
    assert (call.input_recorded, call.output_recorded) == (False, False)
    assert "attribute_unparseable" in kinds(record)


def test_a_hosted_file_search_without_results_is_a_tool_call_and_a_gap() -> None:
    search = {
        "id": "fs_1",
        "queries": ["cap?"],
        "status": "completed",
        "type": "file_search_call",
        "results": None,
    }
    unknown = {"event.name": "gen_ai.unknown", "content": "file_search_call\n\nSee JSON for details"}
    events = [
        _event("user", "cap?"),
        {**unknown, "role": "assistant", "data": search},
        _event("assistant", "30,000 RMB."),
    ]
    record = _call([{"role": "user", "content": "cap?"}], events)
    (call,) = record.model_calls
    assert call.output_text == "30,000 RMB."
    assert call.output_messages[0].tool_calls == (
        {"id": "fs_1", "name": "file_search", "arguments": {"queries": ["cap?"]}, "type": "file_search_call"},
    )
    (hosted,) = [g for g in record.gaps if g.kind == "retrieval_documents_not_recorded"]
    assert 'include=["file_search_call.results"]' in hosted.detail
    (none,) = [g for g in record.gaps if g.kind == "no_retrieval_span"]
    assert "00000000000000b1 (file_search)" in none.detail
    # The same search passed back as input: what it found may have reached the model, and is not recorded.
    later = _call(
        [{"role": "user", "content": "cap?"}, search, {"role": "user", "content": "and?"}],
        [
            _event("user", "cap?"),
            {**unknown, "role": "unknown", "data": search},
            _event("user", "and?"),
            _event("assistant", "No."),
        ],
    )
    (call,) = later.model_calls
    assert call.input_partial


def test_a_function_tool_span_is_a_tool_call_whose_result_may_name_documents() -> None:
    # Logfire records a function tool's run as "Function: {name}": name, input, output (JSON text).
    docs = [{"doc_id": "POL-7", "version": "v2", "text": "Prepayment shall not exceed 30,000 RMB."}]
    attrs = {
        "logfire.span_type": "span",
        "logfire.msg_template": "Function: {name}",
        "logfire.msg": "Function: search_policies",
        "name": "search_policies",
        "input": json.dumps({"query": "prepayment cap"}),
        "output": json.dumps(docs),
    }
    record = normalize([root(), span("c1", attrs, name="Function: {name}")])
    (tool,) = record.tool_calls
    assert (tool.name, tool.arguments) == ("search_policies", {"query": "prepayment cap"})
    assert [d.doc_id for d in tool.documents or ()] == ["POL-7"]
    # Not a retrieval by itself (a list with ids may be orders): the gap names it to mark.
    (none,) = [g for g in record.gaps if g.kind == "no_retrieval_span"]
    assert "search_policies (1 documents)" in none.detail


@pytest.mark.parametrize("kind", ["file_search_call", "web_search_call"])
def test_text_after_a_hosted_tool_logfire_names_without_call_is_the_answer(kind: str) -> None:
    # Logfire's reading names the hosted item's tool without "_call" (file_search, web_search): the answer
    # rule's exception for tools the API runs inside the call must know it by the item's type kept beside it —
    # read as a tool the app runs, the reply's text was taken for a preamble (answer_uncertain).
    item = {"id": "hs_1", "type": kind, "status": "completed"}
    events = [
        _event("user", "cap?"),
        {"event.name": "gen_ai.unknown", "content": f"{kind}\n\nSee JSON", "role": "assistant", "data": item},
        _event("assistant", "30,000 RMB."),
    ]
    record = _call([{"role": "user", "content": "cap?"}], events)
    assert (record.final_answer, record.final_answer_span_id) == ("30,000 RMB.", "00000000000000b1")
    assert "answer_uncertain" not in kinds(record)


def test_a_function_tool_named_like_a_hosted_one_still_leaves_the_answer_open() -> None:
    # A function tool of the app's own named file_search (an assistant message's tool call, no hosted item):
    # the text beside it may be a preamble.
    asked = {
        **_event("assistant", "Let me search."),
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "file_search", "arguments": "{}"}}
        ],
    }
    record = _call([{"role": "user", "content": "cap?"}], [_event("user", "cap?"), asked])
    assert record.final_answer is None
    assert "answer_uncertain" in kinds(record)
