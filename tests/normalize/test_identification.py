"""DESIGN 5.4 reading rules that need no manifest: datastore tools are retrievals, nested retriever
spans are one call, and the answer is what the user got (never a framework's state object)."""

from __future__ import annotations

import json

from tests.normalize.test_conventions import ROOT, root, span
from tracejudge.normalize import normalize

DOCS = [
    {"id": "C-17/attachment@v2", "text": "Prepayment shall not exceed 30,000 RMB per order.", "score": 0.9},
    {"id": "C-12/contract@v1", "text": "Invoices are payable within thirty days.", "score": 0.4},
]


def tool_span(tool_type: str | None) -> dict[str, object]:
    attrs: dict[str, object] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_policies",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": json.dumps({"query": "prepayment cap"}),
        "gen_ai.tool.call.result": json.dumps(DOCS),
    }
    if tool_type is not None:
        attrs["gen_ai.tool.type"] = tool_type
    return attrs


def test_a_datastore_tool_is_a_retrieval_read_from_its_result() -> None:
    record = normalize([root(), span("b1", tool_span("datastore"))])
    (call,) = record.retrievals
    assert [(d.doc_id, d.content, d.score) for d in call.documents] == [
        (d["id"], d["text"], d["score"]) for d in DOCS
    ]
    # It was still called by the model: a tool call too.
    assert [t.call_id for t in record.tool_calls] == ["call_1"]
    assert "no_retrieval_span" not in {g.kind for g in record.gaps}


def test_a_function_tool_is_not_a_retrieval_but_its_documents_are_kept_for_the_manifest() -> None:
    record = normalize([root(), span("b1", tool_span("function"))])
    assert record.retrievals == ()
    (tool,) = record.tool_calls
    assert [d.doc_id for d in tool.documents or ()] == [d["id"] for d in DOCS]
    (gap,) = [g for g in record.gaps if g.kind == "no_retrieval_span"]
    assert "gen_ai.tool.type = datastore" in gap.detail


def test_nested_retriever_spans_join_ids_scores_and_text_from_every_level() -> None:
    outer = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.content": "Prepayment shall not exceed 30,000 RMB per order.",
        "retrieval.documents.1.document.content": "Invoices are payable within thirty days.",
    }
    inner = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.id": "p-2",
        "retrieval.documents.0.document.content": "Invoices are payable   within thirty days.",
        "retrieval.documents.0.document.score": 3.0,
        "retrieval.documents.1.document.id": "p-1",
        "retrieval.documents.1.document.content": "Prepayment shall not exceed 30,000 RMB per order.",
        "retrieval.documents.1.document.score": 7.0,
        "retrieval.documents.1.document.metadata": json.dumps({"doc_id": "C-17/attachment", "version": "v2"}),
        "retrieval.documents.2.document.id": "p-9",
        "retrieval.documents.2.document.content": "Cut by the outer step.",
    }
    record = normalize([root(), span("b1", outer), span("b2", inner, parent="00000000000000b1")])
    (call,) = record.retrievals
    got = [(d.doc_id, d.version, d.raw_id, d.score, d.position) for d in call.documents]
    assert got == [
        ("C-17/attachment", "v2", "p-1", 7.0, 0),  # outer rank, inner identity and score
        ("p-2", None, "p-2", 3.0, 1),
        ("p-9", None, "p-9", None, 2),  # returned by the client: kept
    ]
    assert call.span_ids == ("00000000000000b1", "00000000000000b2")


def test_a_langgraph_state_as_root_output_is_not_the_answer() -> None:
    state = {
        "question": "Can Acme get 40,000 RMB prepayment?",
        "documents": [{"page_content": "Prepayment shall not exceed 50,000 RMB per order."}],
        "generation": "No, the cap is 30,000 RMB.",
    }
    llm = {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "No, the cap is 30,000 RMB.",
    }
    record = normalize(
        [root({"openinference.span.kind": "CHAIN", "output.value": json.dumps(state)}), span("b1", llm)]
    )
    assert record.final_answer == "No, the cap is 30,000 RMB."
    assert record.final_answer_span_id == "00000000000000b1"


def test_a_state_holding_messages_answers_with_its_last_assistant_message() -> None:
    state = {
        "messages": [
            {"role": "user", "content": "Can Acme get 40,000 RMB prepayment?"},
            {"role": "tool", "content": "Prepayment shall not exceed 50,000 RMB per order."},
            {"role": "assistant", "content": "No, the cap is 30,000 RMB."},
        ]
    }
    record = normalize([root({"openinference.span.kind": "CHAIN", "output.value": json.dumps(state)})])
    assert record.final_answer == "No, the cap is 30,000 RMB."
    assert record.final_answer_span_id == ROOT


def test_a_plain_root_output_is_the_answer_even_when_it_differs_from_the_model_output() -> None:
    llm = {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "No, the cap is 30,000 RMB.",
    }
    shown = "No, the cap is 30,000 RMB. [source: C-17/attachment v2]"
    record = normalize([root({"output.value": shown}), span("b1", llm)])
    assert record.final_answer == shown
