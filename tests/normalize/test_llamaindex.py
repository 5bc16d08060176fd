"""LlamaIndex traces: a VectorStoreIndex query engine recorded under
openinference-instrumentation-llama-index, and the readers it needed.

Fixtures: tests/fixtures/traces/llamaindex_openinference_{rag,dropped,topk,filtered}.pb, re-recorded with
tests/fixtures/traces/record_llamaindex.py (side venv; see its docstring). The facts pinned are what the
recorder put in (documents, scores of the deterministic embeddings, scripted answers), so they survive a
re-recording; node ids are random per recording and are only compared with each other.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.normalize.llamaindex_app import (
    ANSWER_RIGHT,
    ANSWER_STALE,
    CLAUSE_V1,
    CLAUSE_V2,
    MAIN,
    QUESTION,
    SCORES,
    TRACES,
    V1,
    V2,
)
from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

RUNS: dict[str, dict[str, Any]] = {
    "rag": {"docs": [V1, V2], "in_prompt": [CLAUSE_V1, CLAUSE_V2], "answer": ANSWER_RIGHT, "filter": None},
    "dropped": {"docs": [V1, V2], "in_prompt": [CLAUSE_V1], "answer": ANSWER_STALE, "filter": None},
    "topk": {"docs": [V1], "in_prompt": [CLAUSE_V1], "answer": ANSWER_STALE, "filter": None},
    "filtered": {
        "docs": [V1, MAIN],
        "in_prompt": [CLAUSE_V1],
        "answer": ANSWER_STALE,
        "filter": {"region": "CN"},
    },
}


def spans_of(run: str) -> list[RawSpan]:
    spans = list(read_otlp_file(TRACES / f"llamaindex_openinference_{run}.pb"))
    assert spans
    return spans


def load(run: str) -> TaskRecord:
    return normalize(spans_of(run))


@pytest.mark.parametrize("run", list(RUNS))
def test_query_engine_run_is_read(run: str) -> None:
    facts = RUNS[run]
    record = load(run)
    assert record.name == "RetrieverQueryEngine.query"
    assert record.input == QUESTION
    assert record.final_answer == facts["answer"]
    assert record.final_answer_span_id == record.spans[0].span_id
    assert record.metadata["service_name"] == "llamaindex-rag"
    [retrieval] = record.retrievals
    # retrieve -> _retrieve -> the query embedding: one call anchored on the outer retriever span.
    assert retrieval.name == "VectorIndexRetriever.retrieve"
    names = {n.span_id: n.name for n in record.spans}
    assert [names[s] for s in retrieval.span_ids] == [
        "VectorIndexRetriever.retrieve",
        "VectorIndexRetriever._retrieve",
        "OpenAIEmbedding.get_query_embedding",
    ]
    assert retrieval.query == QUESTION
    assert retrieval.filter == facts["filter"]
    got = [(d.doc_id, d.version, d.content, d.metadata.get("region")) for d in retrieval.documents]
    assert got == facts["docs"]
    assert [d.position for d in retrieval.documents] == list(range(len(facts["docs"])))
    for document in retrieval.documents:
        assert document.score == pytest.approx(SCORES[document.version or ""], abs=1e-4)
        assert document.raw_id is not None  # the node id
        assert document.raw_id != document.doc_id
    assert record.gaps == ()


@pytest.mark.parametrize("run", list(RUNS))
def test_predict_wrapper_is_not_a_second_model_call(run: str) -> None:
    record = load(run)
    steps = {n.name: n.step for n in record.spans}
    assert steps["OpenAI.predict"] == steps["OpenAI.chat"] == "model"
    # Before: two model calls, the predict wrapper's "input" being a repr of the prompt template object.
    [call] = record.model_calls
    assert call.name == "OpenAI.chat"
    assert call.model == "gpt-4.1-mini"
    assert [m.role for m in call.input_messages] == ["system", "user"]
    assert call.input_messages[0].content is not None
    assert call.input_messages[0].content.startswith("You are an expert Q&A system")
    user = call.input_messages[1].content or ""
    assert user.startswith("Context information is below.")
    assert user.rstrip().endswith(f"Query: {QUESTION}\nAnswer:")
    for clause in (CLAUSE_V1, CLAUSE_V2):
        assert (clause in call.input_text) == (clause in RUNS[run]["in_prompt"])
    assert "SelectorPromptTemplate" not in call.input_text
    assert call.output_text == RUNS[run]["answer"]
    assert set(call.usage) == {"input", "output", "total"}
    assert call.usage["total"] == call.usage["input"] + call.usage["output"]


def test_similarity_postprocessor_is_a_rerank_step_over_the_retrieved_documents() -> None:
    record = load("dropped")
    steps = {n.name: n.step for n in record.spans}
    assert steps["SimilarityPostprocessor._postprocess_nodes"] == "rerank"
    [rerank] = record.rerankings
    [retrieval] = record.retrievals
    # Its node ids resolve to the documents the retriever returned, with their identity and content.
    assert rerank.input_documents == retrieval.documents
    assert [(d.doc_id, d.version, d.content) for d in rerank.output_documents] == [V1[:3]]
    assert rerank.output_documents[0].raw_id == retrieval.documents[0].raw_id


@pytest.mark.parametrize("run", ["rag", "topk", "filtered"])
def test_no_postprocessor_no_rerank_step(run: str) -> None:
    assert load(run).rerankings == ()


# --- the readers, on hand-written spans -----------------------------------------------------------


def _span(span_id: str, name: str, attrs: dict[str, Any], parent: str | None = None) -> RawSpan:
    return RawSpan(
        trace_id="ab" * 16,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=1_000 + int(span_id, 16),
        end_time_unix_nano=9_000,
        attributes=attrs,
    )


def _node(node_id: str, score: float | None) -> str:
    tail = f", score={score}" if score is not None else ""
    return f"<NodeWithScore(node=TextNode(id_={node_id}){tail})>"


def test_postprocessor_that_drops_every_node_and_unknown_node_ids() -> None:
    retriever = _span(
        "02",
        "VectorIndexRetriever.retrieve",
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.id": "n-1",
            "retrieval.documents.0.document.content": "alpha",
            "retrieval.documents.0.document.metadata": '{"doc_id": "A", "version": "v1"}',
        },
        "01",
    )
    post = _span(
        "03",
        "KeywordNodePostprocessor._postprocess_nodes",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": json.dumps(
                {"nodes": [_node("n-1", 0.5), _node("n-9", None)], "query_bundle": None}
            ),
            "output.value": "[]",
        },
        "01",
    )
    root = _span("01", "RetrieverQueryEngine.query", {"openinference.span.kind": "CHAIN"})
    record = normalize([root, retriever, post])
    [rerank] = record.rerankings
    assert [(d.doc_id, d.version, d.content, d.score) for d in rerank.input_documents] == [
        ("A", "v1", "alpha", 0.5),
        ("n-9", None, None, None),  # not among the retrieved documents: the node id is all there is
    ]
    assert rerank.output_documents == ()


def test_real_reranker_attributes_win_over_node_reprs() -> None:
    span = _span(
        "02",
        "SentenceTransformerRerank._postprocess_nodes",
        {
            "openinference.span.kind": "RERANKER",
            "reranker.input_documents.0.document.id": "n-1",
            "reranker.input_documents.0.document.metadata": '{"doc_id": "A", "version": "v1"}',
            "reranker.output_documents.0.document.id": "n-1",
            "reranker.output_documents.0.document.metadata": '{"doc_id": "A", "version": "v1"}',
            "reranker.top_k": 1,
            "output.value": f'["{_node("n-7", 0.1)}"]',
        },
    )
    [rerank] = normalize([span]).rerankings
    assert [d.doc_id for d in rerank.input_documents] == [d.doc_id for d in rerank.output_documents] == ["A"]
    assert rerank.top_k == 1


def test_chain_span_with_other_output_is_not_a_rerank() -> None:
    span = _span(
        "02", "CompactAndRefine.synthesize", {"openinference.span.kind": "CHAIN", "output.value": "x"}
    )
    assert normalize([span]).spans[0].step == "chain"
    odd = _span(
        "03",
        "Custom._postprocess_nodes",
        {"openinference.span.kind": "CHAIN", "output.value": '["not a node"]'},
    )
    [rerank] = normalize([odd]).rerankings
    assert rerank.output_documents == ()


def test_nested_llm_spans_keep_only_the_innermost_and_siblings_stay() -> None:
    outer = _span(
        "02",
        "OpenAI.predict",
        {"openinference.span.kind": "LLM", "input.value": '{"prompt": "<template>"}', "output.value": "hi"},
        "01",
    )
    inner = _span(
        "03",
        "OpenAI.chat",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "hello",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "hi",
        },
        "02",
    )
    sibling = _span(
        "04",
        "OpenAI.chat",
        {"openinference.span.kind": "LLM", "input.value": "again", "output.value": "bye"},
        "01",
    )
    root = _span("01", "agent", {"openinference.span.kind": "AGENT"})
    record = normalize([root, outer, inner, sibling])
    assert [c.span_id for c in record.model_calls] == ["03", "04"]
    # The sibling sent a prompt of its own: the inner call's reply may be the answer, so none is read.
    assert record.final_answer is None
    assert [(g.kind, g.span_id) for g in record.gaps if g.kind == "answer_uncertain"] == [
        ("answer_uncertain", "04")
    ]


def test_prompt_span_is_context_assembly_with_the_rendered_text() -> None:
    rendered = (
        '{"messages": [{"type": "system", "content": "Use: clause X"}, {"type": "human", "content": "Q?"}]}'
    )
    span = _span("02", "ChatPromptTemplate", {"openinference.span.kind": "PROMPT", "output.value": rendered})
    text = _span("03", "render", {"openinference.span.kind": "PROMPT", "output.value": "Context: clause Y"})
    record = normalize([span, text])
    assert [n.step for n in record.spans] == ["context", "context"]
    assert [c.output for c in record.context_assemblies] == ["Use: clause X\n\nQ?", "Context: clause Y"]
