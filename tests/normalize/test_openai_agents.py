"""OpenInference for the OpenAI Agents SDK (openinference-instrumentation-openai-agents): an agent whose
function tool ``search_documents`` returns ``[{"doc_id", "version", "content", "score"}]``.

Fixtures: tests/fixtures/traces/openai_agents_{rag,ignored,unmarked_rag}.pb, re-recorded with
tests/fixtures/traces/record_openai_agents.py (side venv; see its docstring). ``rag``/``ignored`` mark
the tool a retriever with the instrumentation's ``tool_span_kinds``; ``unmarked_rag`` does not.

Before this round: a tool marked as a retriever was only a retrieval (no tool call, so a rubric's
``tool_not_called`` could not see it); no tool call had its call id (the instrumentation puts the id
only on the model output's tool call); and an unmarked search tool left a bare ``no_retrieval_span``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
INSTRUCTIONS = "You answer procurement questions. Search the contract documents first and cite what they say."
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWERS = {"rag": RIGHT, "ignored": STALE, "unmarked_rag": RIGHT}


def load(run: str) -> TaskRecord:
    spans = list(read_otlp_file(TRACES / f"openai_agents_{run}.pb"))
    assert spans
    return normalize(spans)


@pytest.mark.parametrize("run", list(ANSWERS))
def test_agent_run_steps_input_and_answer(run: str) -> None:
    record = load(run)
    search_step = "tool" if run == "unmarked_rag" else "retrieval"
    assert [(n.name, n.step, n.convention) for n in record.spans] == [
        ("Agent workflow", "agent", "openinference"),
        ("Agent workflow", "chain", "openinference"),
        ("procurement-agent", "agent", "openinference"),
        ("turn", "chain", "openinference"),
        ("generation", "model", "openinference"),
        ("search_documents", search_step, "openinference"),
        ("turn", "chain", "openinference"),
        ("generation", "model", "openinference"),
    ]
    # The root records no input or output: both come from the model calls.
    assert record.input == QUESTION
    assert record.final_answer == ANSWERS[run]
    assert record.final_answer_span_id == record.model_calls[-1].span_id
    assert record.metadata["service_name"] == "agents-procurement"


@pytest.mark.parametrize("run", list(ANSWERS))
def test_model_calls_carry_the_tool_request_and_the_documents_sent_back(run: str) -> None:
    first, second = load(run).model_calls
    assert first.model == second.model == "gpt-4.1-mini"
    assert [m.role for m in first.input_messages] == ["system", "user"]
    assert first.input_messages[0].content == INSTRUCTIONS
    [request] = first.output_messages[0].tool_calls
    assert request["name"] == "search_documents"
    assert request["arguments"] == {"query": "prepayment per order"}
    assert first.output_text is None
    assert first.output_recorded
    # The second call saw the tool's documents (as a tool message) and answered.
    assert [m.role for m in second.input_messages] == ["system", "user", "assistant", "tool"]
    assert CLAUSE_V1 in second.input_text
    assert CLAUSE_V2 in second.input_text
    assert second.output_text == ANSWERS[run]
    assert second.usage["input"] == 69
    assert second.usage["output"] > 0


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_a_tool_marked_retriever_is_a_retrieval_and_a_tool_call(run: str) -> None:
    record = load(run)
    [retrieval] = record.retrievals
    assert retrieval.name == "search_documents"
    assert retrieval.query == "prepayment per order"
    assert [(d.doc_id, d.version, d.score, d.position) for d in retrieval.documents] == [
        ("C-17/attachment", "v2", 0.378, 0),
        ("C-17/attachment", "v1", 0.3693, 1),
    ]
    assert retrieval.documents[0].content is not None
    assert CLAUSE_V2 in retrieval.documents[0].content
    [tool] = record.tool_calls
    assert tool.span_id == retrieval.span_id
    assert tool.name == "search_documents"
    assert tool.arguments == {"query": "prepayment per order"}
    assert isinstance(tool.result, list)
    assert [d["version"] for d in tool.result] == ["v2", "v1"]
    # The id the model gave the request, though the tool span itself records none.
    request = record.model_calls[0].output_messages[0].tool_calls[0]
    assert tool.call_id == request["id"]
    assert tool.call_id.startswith("call_")
    assert record.gaps == ()


def test_an_unmarked_search_tool_is_a_tool_call_and_the_gap_names_it() -> None:
    record = load("unmarked_rag")
    assert record.retrievals == ()
    [tool] = record.tool_calls
    assert tool.name == "search_documents"
    assert tool.arguments == {"query": "prepayment per order"}
    assert [(d["doc_id"], d["version"]) for d in tool.result] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    assert tool.call_id == record.model_calls[0].output_messages[0].tool_calls[0]["id"]
    [gap] = record.gaps
    assert gap.kind == "no_retrieval_span"
    assert "search_documents (2 documents)" in gap.detail
    assert "tool_span_kinds" in gap.detail
    assert "tracejudge.step = retrieval" in gap.detail
