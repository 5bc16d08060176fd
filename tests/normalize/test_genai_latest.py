"""OTel GenAI conventions, latest experimental form, as opentelemetry-util-genai writes them: structured
message parts on span attributes, ``retrieval`` / ``embeddings`` / ``execute_tool`` operations.

Fixtures: tests/fixtures/traces/genai_latest_{rag,ignored}.pb, re-recorded with
tests/fixtures/traces/record_genai_latest.py (side venv; see its docstring). Before this round the
retrieval's ``gen_ai.retrieval.top_k`` (the newer name of ``gen_ai.request.top_k``) was not read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
SYSTEM = "You answer procurement questions from the contract excerpts given. Check amounts with the tool."
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
ANSWERS = {
    "rag": "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit.",
    "ignored": "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine.",
}
CAPS = {"rag": 30_000, "ignored": 50_000}


def load(run: str) -> TaskRecord:
    spans = list(read_otlp_file(TRACES / f"genai_latest_{run}.pb"))
    assert spans
    return normalize(spans)


@pytest.mark.parametrize("run", list(ANSWERS))
def test_agent_run_steps_and_answer(run: str) -> None:
    record = load(run)
    assert [(n.name, n.step, n.convention) for n in record.spans] == [
        ("invoke_agent procurement-agent", "agent", "gen_ai"),
        ("embeddings text-embedding-3-small", "embedding", "gen_ai"),
        ("embeddings text-embedding-3-small", "embedding", "gen_ai"),
        ("retrieval contracts-index", "retrieval", "gen_ai"),
        ("chat gpt-4.1-mini", "model", "gen_ai"),
        ("execute_tool check_prepayment", "tool", "gen_ai"),
        ("chat gpt-4.1-mini", "model", "gen_ai"),
    ]
    # The agent span's gen_ai.input.messages / gen_ai.output.messages are the task's input and answer.
    assert record.input == QUESTION
    assert record.final_answer == ANSWERS[run]
    assert record.final_answer_span_id == record.spans[0].span_id
    assert record.metadata["service_name"] == "genai-latest-agent"


@pytest.mark.parametrize("run", list(ANSWERS))
def test_retrieval_records_ids_and_scores_but_no_content(run: str) -> None:
    record = load(run)
    [retrieval] = record.retrievals
    assert retrieval.query == QUESTION
    assert retrieval.top_k == 2  # gen_ai.retrieval.top_k
    assert retrieval.data_source == "contracts-index"
    assert [(d.doc_id, d.raw_id, d.score, d.position) for d in retrieval.documents] == [
        ("C-17/attachment@v1", "C-17/attachment@v1", 0.6205, 0),
        ("C-17/attachment@v2", "C-17/attachment@v2", 0.3705, 1),
    ]
    # The convention's document model is {id, score}: content missing is a gap, not an empty text.
    assert all(d.content is None for d in retrieval.documents)
    [gap] = record.gaps
    assert (gap.kind, gap.span_id) == ("retrieval_content_not_recorded", retrieval.span_id)
    # Said as what the convention records, not as a failure, with what would record the text.
    assert "ids and scores only" in gap.detail
    assert "Nothing is wrong" in gap.detail
    assert "retrieval.documents.N.document.content" in gap.detail


@pytest.mark.parametrize("run", list(ANSWERS))
def test_chat_spans_read_system_instructions_and_tool_call_parts(run: str) -> None:
    record = load(run)
    first, second = record.model_calls
    for call in (first, second):
        assert call.model == "gpt-4.1-mini"
        assert call.system_instructions == SYSTEM
        assert call.input_text.startswith(SYSTEM + "\n")
        assert CLAUSE_V1 in call.input_text
        assert CLAUSE_V2 in call.input_text
    # The first reply is a tool_call part only: output recorded, no text.
    [out] = first.output_messages
    assert out.content is None
    assert out.tool_calls[0]["name"] == "check_prepayment"
    assert out.tool_calls[0]["arguments"] == {"amount_rmb": 45_000, "cap_rmb": CAPS[run]}
    assert (first.output_recorded, first.output_text) == (True, None)
    assert first.usage == {"input": 60, "output": 0}
    # The second input replays the tool_call and its tool_call_response parts.
    assert [m.role for m in second.input_messages] == ["user", "assistant", "tool"]
    assert second.input_messages[1].tool_calls[0]["id"] == out.tool_calls[0]["id"]
    within = "true" if CAPS[run] >= 45_000 else "false"
    assert (
        second.input_messages[2].content
        == f'{{"within_cap": {within}, "over_by_rmb": {max(0, 45_000 - CAPS[run])}}}'
    )
    assert second.output_text == ANSWERS[run]


@pytest.mark.parametrize("run", list(ANSWERS))
def test_execute_tool_span_is_the_tool_call(run: str) -> None:
    record = load(run)
    [tool] = record.tool_calls
    assert tool.name == "check_prepayment"
    assert tool.call_id == record.model_calls[0].output_messages[0].tool_calls[0]["id"]
    assert tool.arguments == {"amount_rmb": 45_000, "cap_rmb": CAPS[run]}
    assert tool.result == {"within_cap": CAPS[run] >= 45_000, "over_by_rmb": max(0, 45_000 - CAPS[run])}
