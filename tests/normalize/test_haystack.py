"""Haystack under OpenInference (openinference-instrumentation-haystack): BM25 retriever, chat prompt
builder and OpenAI chat generator in a ``Pipeline``.

Fixtures: tests/fixtures/traces/haystack_{rag,ignored,dropped,filtered}.pb, re-recorded with
tests/fixtures/traces/record_haystack.py (side venv; see its docstring). Before this round the task
input and the final answer were the pipeline's raw JSON (``{"data": {...}}`` and ``{"llm": {"replies":
["ChatMessage(...)"]}}``), and the retriever's ``filters`` (Haystack filter syntax) were not read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.normalize._haystack import _translate, message_text
from tracejudge.schema import TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWERS = {"rag": RIGHT, "ignored": STALE, "dropped": STALE, "filtered": STALE}
RETURNED = {
    "rag": [("C-17/attachment", "v1"), ("C-17/main", "v3"), ("C-17/attachment", "v2")],
    "filtered": [("C-17/attachment", "v1"), ("C-17/main", "v3"), ("C-09/framework", "v1")],
}


def load(run: str) -> TaskRecord:
    spans = list(read_otlp_file(TRACES / f"haystack_{run}.pb"))
    assert spans
    return normalize(spans)


@pytest.mark.parametrize("run", list(ANSWERS))
def test_pipeline_steps_input_and_answer(run: str) -> None:
    record = load(run)
    assert [(n.name, n.step, n.convention) for n in record.spans] == [
        ("Pipeline.run", "chain", "openinference"),
        ("InMemoryBM25Retriever.run", "retrieval", "openinference"),
        ("ChatPromptBuilder.run", "chain", "openinference"),
        ("OpenAIChatGenerator.run", "model", "openinference"),
    ]
    # The question among the components' inputs; the reply's text out of its ChatMessage repr.
    assert record.input == QUESTION
    assert record.final_answer == ANSWERS[run]
    assert record.final_answer_span_id == record.spans[0].span_id
    assert record.gaps == ()
    assert record.metadata["service_name"] == "haystack-rag"


@pytest.mark.parametrize("run", list(ANSWERS))
def test_retrieval_documents_with_meta_identity_and_bm25_scores(run: str) -> None:
    [retrieval] = load(run).retrievals
    assert retrieval.query == QUESTION
    expected = RETURNED.get(run, RETURNED["rag"])
    assert [(d.doc_id, d.version) for d in retrieval.documents] == expected
    assert all(d.raw_id is not None and len(d.raw_id) == 64 for d in retrieval.documents)  # content hashes
    scores = [d.score for d in retrieval.documents]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert retrieval.documents[0].content is not None
    assert CLAUSE_V1 in retrieval.documents[0].content


def test_haystack_filters_are_read_as_operator_filters_and_kept_raw() -> None:
    [retrieval] = load("filtered").retrievals
    assert retrieval.filter == {"region": {"$eq": "CN"}}
    assert retrieval.filter_raw == '{"field": "meta.region", "operator": "==", "value": "CN"}'
    assert load("rag").retrievals[0].filter is None


@pytest.mark.parametrize(
    ("run", "v2_in_prompt"), [("rag", True), ("ignored", True), ("dropped", False), ("filtered", False)]
)
def test_model_call_holds_the_rendered_prompt(run: str, v2_in_prompt: bool) -> None:
    [call] = load(run).model_calls
    assert call.model == "gpt-4.1-mini"
    assert [m.role for m in call.input_messages] == ["user"]
    assert CLAUSE_V1 in call.input_text
    assert (CLAUSE_V2 in call.input_text) is v2_in_prompt
    assert call.output_text == ANSWERS[run]
    assert call.usage["input"] > 0


def test_filter_syntax_translation() -> None:
    nested = {
        "operator": "AND",
        "conditions": [
            {"field": "meta.version", "operator": "!=", "value": "v1"},
            {
                "operator": "NOT",
                "conditions": [{"field": "meta.tier", "operator": "not in", "value": [1, 2]}],
            },
            {"operator": "OR", "conditions": [{"field": "meta.year", "operator": ">=", "value": 2026}]},
        ],
    }
    assert _translate(nested) == {
        "$and": [
            {"version": {"$ne": "v1"}},
            {"$not": {"$and": [{"tier": {"$nin": [1, 2]}}]}},
            {"$or": [{"year": {"$gte": 2026}}]},
        ]
    }
    # An operator with no equivalent stays unknown (the replay then cannot tell), never dropped.
    assert "$unknown" in _translate({"field": "meta.x", "operator": "like", "value": "a%"})


def test_chat_message_repr_text() -> None:
    repr_ = (
        "ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>,"
        " _content=[TextContent(text='It\\'s 30,000 RMB.'),"
        ' TextContent(text="second")], _name=None, _meta={})'
    )
    assert message_text(repr_) == "It's 30,000 RMB.\nsecond"
    assert message_text("plain text") is None
