"""Recorded traces from real instrumentation libraries, read through the OTLP file decoder.

Re-record with tests/fixtures/traces/record.py (and record_openllmetry.py); the facts pinned
here are the content the recorders put in, so they survive a re-recording.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"

CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
ANSWER_STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWER_RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."


def load(name: str) -> TaskRecord:
    spans = list(read_otlp_file(TRACES / name))
    assert spans, name
    return normalize(spans)


def kinds(record: TaskRecord) -> set[str]:
    return {gap.kind for gap in record.gaps}


def test_openai_chat_content_captured() -> None:
    record = load("openai_chat.pb")
    [call] = record.model_calls
    assert call.model == "gpt-4.1-mini"
    assert [m.role for m in call.input_messages] == ["system", "user", "user"]
    assert call.input_messages[2].content == QUESTION
    assert CLAUSE_V1 in call.input_text
    assert QUESTION in call.input_text
    assert call.input_recorded
    assert not call.input_redacted
    assert call.output_text == ANSWER_STALE
    assert call.usage == {"input": 120, "output": 24, "total": 144}
    assert record.final_answer == ANSWER_STALE
    assert record.input == QUESTION
    assert record.spans[0].convention == "openinference"
    assert kinds(record) == {"no_retrieval_span"}
    assert record.metadata["service_name"] == "procurement-agent"


def test_openai_hidden_inputs_is_redacted_not_recorded() -> None:
    record = load("openai_hidden_inputs.pb")
    [call] = record.model_calls
    assert call.input_messages == ()
    assert call.input_text == ""
    assert not call.input_recorded
    assert call.input_redacted
    assert call.output_text == ANSWER_STALE  # outputs were not hidden
    assert "model_input_redacted" in kinds(record)
    assert CLAUSE_V1 not in record.model_dump_json()


def test_openinference_rag() -> None:
    record = load("openinference_rag.pb")
    assert record.name == "procurement-rag"
    assert record.input == QUESTION
    assert record.final_answer == ANSWER_STALE
    [retrieval] = record.retrievals
    assert retrieval.query == "prepayment cap contract C-17 Hengda"
    assert [(d.doc_id, d.version, d.raw_id) for d in retrieval.documents] == [
        ("C-17/attachment", "v1", "chunk-881"),
        ("C-17/main", "v3", "chunk-912"),
        ("C-17/annex-b", None, "chunk-977"),
    ]
    assert retrieval.documents[0].content == CLAUSE_V1
    assert retrieval.documents[0].score == pytest.approx(0.91)
    assert retrieval.documents[0].metadata["region"] == "CN"
    assert retrieval.filter == {"region": {"$eq": "CN"}}
    assert retrieval.principal == "procurement"
    assert retrieval.candidates is not None
    assert [(c.doc_id, c.version, c.excluded_by) for c in retrieval.candidates] == [
        ("C-17/attachment", "v1", None),
        ("C-17/attachment", "v2", "filter"),
    ]
    [rerank] = record.rerankings
    assert rerank.query == "prepayment cap"
    assert rerank.top_k == 2
    assert len(rerank.input_documents) == 3
    assert [d.doc_id for d in rerank.output_documents] == ["C-17/attachment", "C-17/main"]
    [context] = record.context_assemblies
    assert context.included == ("C-17/attachment@v1", "C-17/main@v3")
    assert context.dropped == ("C-17/annex-b",)
    assert context.dropped_reasons == {"C-17/annex-b": "budget"}
    assert context.budget == 2000
    assert context.output is not None
    assert CLAUSE_V1 in context.output
    [call] = record.model_calls
    assert CLAUSE_V1 in call.input_text
    assert CLAUSE_V2 not in call.input_text
    [tool] = record.tool_calls
    assert tool.name == "lookup_supplier"
    assert tool.arguments == {"name": "Hengda"}
    assert tool.result == {"supplier_id": "S-204", "status": "active"}
    assert {n.name: n.step for n in record.spans} == {
        "procurement-rag": "chain",
        "retrieve": "retrieval",
        "rerank": "rerank",
        "build-context": "context",
        "lookup_supplier": "tool",
        "ChatCompletion": "model",
    }
    assert record.gaps == ()
    assert record.metadata == {
        "service_name": "rag-service",
        "session_id": "sess-42",
        "user_id": "buyer-7",
        "tags": ["procurement", "prod"],
    }


def test_genai_agent_structured_and_json_values() -> None:
    record = load("genai_agent.json")
    assert record.input == QUESTION  # root gen_ai.input.messages as a JSON string
    assert record.final_answer == ANSWER_RIGHT  # root gen_ai.output.messages structured
    [retrieval] = record.retrievals
    assert retrieval.query == "prepayment cap C-17"
    assert retrieval.top_k == 3
    assert retrieval.data_source == "contracts-index"
    assert [(d.doc_id, d.version, d.content) for d in retrieval.documents] == [
        ("C-17/attachment", "v2", CLAUSE_V2),
        ("c17-main", None, "Payment terms: net 30 days after delivery."),
    ]
    assert retrieval.filter == {"$and": [{"region": "CN"}]}
    [call] = record.model_calls
    assert call.model == "gpt-4.1-mini-2025-04-14"
    assert call.system_instructions is not None
    assert call.system_instructions.startswith("You are a procurement")
    assert [m.role for m in call.input_messages] == ["user", "assistant", "tool"]
    assert call.input_messages[1].tool_calls[0]["name"] == "search_contracts"
    assert CLAUSE_V2 in call.input_text  # from the tool_call_response part
    assert call.output_text == ANSWER_RIGHT
    assert call.usage == {"input": 321, "output": 40}
    [tool] = record.tool_calls
    assert (tool.name, tool.call_id, tool.result) == ("notify_buyer", "call_2", {"ok": True})
    assert record.metadata["session_id"] == "conv-9"
    assert record.gaps == ()


def test_langfuse_sdk_trace() -> None:
    record = load("langfuse_sdk.pb")
    assert {n.convention for n in record.spans} == {"langfuse"}
    assert record.name == "procurement-question"
    assert record.input == QUESTION
    assert record.final_answer == ANSWER_RIGHT
    [retrieval] = record.retrievals
    assert retrieval.query == "prepayment cap C-17"
    assert [(d.doc_id, d.version) for d in retrieval.documents] == [
        ("C-17/attachment", "v2"),
        ("kb-3", None),
        ("policy/prepayment", None),
    ]
    assert retrieval.documents[0].content == CLAUSE_V2
    assert retrieval.principal == "procurement"
    assert retrieval.filter == {"region": "CN"}
    [call] = record.model_calls
    assert call.model == "gpt-4.1-mini"
    assert call.usage == {"input": 200, "output": 30}
    assert CLAUSE_V2 in call.input_text
    assert call.output_text == ANSWER_RIGHT
    assert kinds(record) == {"retrieval_content_not_recorded"}
    assert record.metadata["user_id"] == "buyer-7"
    assert record.metadata["session_id"] == "sess-lf-1"
    assert record.metadata["environment"] == "staging"
    assert record.metadata["tags"] == ["procurement"]


def test_openllmetry_chroma_trace() -> None:
    record = load("openllmetry_chroma.pb")
    assert record.input == QUESTION
    assert record.final_answer == ANSWER_STALE
    [retrieval] = record.retrievals
    assert retrieval.name == "chroma.query"
    assert retrieval.query == "prepayment cap C-17"  # from the enclosing task span
    assert len(retrieval.span_ids) == 2
    assert retrieval.filter == {"region": "CN"}  # Python literal str(dict) from the instrumentation
    assert retrieval.filter_raw == "{'region': 'CN'}"
    assert retrieval.top_k == 2
    assert [(d.doc_id, d.version, d.raw_id) for d in retrieval.documents] == [
        ("C-17/attachment", "v1", "c17-att-v1"),
        ("C-17/main", "v3", "c17-main"),
    ]
    assert retrieval.documents[0].content == CLAUSE_V1
    [call] = record.model_calls
    assert CLAUSE_V1 in call.input_text
    assert call.output_text == ANSWER_STALE
    assert {n.name: n.step for n in record.spans}["procurement_rag.workflow"] == "chain"
    assert record.gaps == ()


def test_no_two_recordings_share_a_trace_id() -> None:
    # The recorders seed their ids (_policy.runs(base_seed)): a new recorder reusing a base seed writes
    # traces whose ids another fixture has, and a store holding both keeps one of them.
    from tracejudge_collectors.otel import iter_otlp_file

    owners: dict[str, set[str]] = {}
    for path in sorted(p for p in TRACES.iterdir() if p.suffix in (".pb", ".json")):
        for trace_id in {s.trace_id for result in iter_otlp_file(path) for s in result.spans}:
            owners.setdefault(trace_id, set()).add(path.name)
    shared = {t: sorted(names) for t, names in owners.items() if len(names) > 1}
    # record_adk.py records ADK 2 and ADK 1 (legacy) with one base seed: a store keeps either of a pair (same
    # run, same answer), so the sweep over every fixture still sees each run once
    adk = {
        t
        for t, names in shared.items()
        if {n.replace("adk_legacy_", "adk_") for n in names} == {names[0].replace("adk_legacy_", "adk_")}
        and len(names) == 2
        and names[0].startswith("adk_")
    }
    assert len(adk) == 4
    assert not shared.keys() - adk, f"give one recorder another base seed: {shared}"
