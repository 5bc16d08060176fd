"""LlamaIndex traces recorded under OpenLLMetry: opentelemetry-instrumentation-llamaindex with
opentelemetry-instrumentation-openai (as traceloop-sdk installs them), and the llama-index one alone.

Fixtures: tests/fixtures/traces/llamaindex_openllmetry_{rag,dropped,topk,filtered}.pb and
llamaindex_openllmetry_nollm_rag.pb, re-recorded with tests/fixtures/traces/record_llamaindex.py
(``openllmetry`` / ``openllmetry-nollm``; side venv, see its docstring). The app and the runs are the
ones of the OpenInference fixtures (test_llamaindex.py). Every span is a ``<Class>.task``: before this
reader the trace had no retrieval (the nodes sit in ``traceloop.entity.output`` as JSON strings) and the
task input was the raw ``{"str_or_query_bundle": ...}`` JSON.
"""

from __future__ import annotations

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
    "rag": {"docs": [V1, V2], "in_prompt": [CLAUSE_V1, CLAUSE_V2], "answer": ANSWER_RIGHT},
    "dropped": {"docs": [V1, V2], "in_prompt": [CLAUSE_V1], "answer": ANSWER_STALE},
    "topk": {"docs": [V1], "in_prompt": [CLAUSE_V1], "answer": ANSWER_STALE},
    "filtered": {"docs": [V1, MAIN], "in_prompt": [CLAUSE_V1], "answer": ANSWER_STALE},
}


def spans_of(name: str) -> list[RawSpan]:
    spans = list(read_otlp_file(TRACES / name))
    assert spans
    return spans


def load(run: str) -> TaskRecord:
    return normalize(spans_of(f"llamaindex_openllmetry_{run}.pb"))


def names(record: TaskRecord) -> dict[str, str]:
    return {n.span_id: n.name for n in record.spans}


@pytest.mark.parametrize("run", list(RUNS))
def test_query_engine_run_is_read(run: str) -> None:
    facts = RUNS[run]
    record = load(run)
    root = record.spans[0]
    assert (record.name, root.step, root.convention) == (
        "RetrieverQueryEngine.workflow",
        "chain",
        "openllmetry",
    )
    # The root's input is the bound arguments {"str_or_query_bundle": "..."}: the question inside.
    assert record.input == QUESTION
    # Its output {"response": ..., "metadata": {node id: metadata}} carries the answer.
    assert record.final_answer == facts["answer"]
    assert record.final_answer_span_id == root.span_id
    assert record.metadata["service_name"] == "llamaindex-rag"

    [retrieval] = record.retrievals
    span_names = names(record)
    # retrieve -> _retrieve -> the query embedding, all "task" spans: one call on the outer one.
    assert [span_names[s] for s in retrieval.span_ids] == [
        "VectorIndexRetriever.task",
        "VectorIndexRetriever.task",
        "OpenAIEmbedding.task",
    ]
    assert retrieval.span_id == retrieval.span_ids[0]
    assert retrieval.query == QUESTION
    assert retrieval.documents_recorded
    got = [(d.doc_id, d.version, d.content, d.metadata.get("region")) for d in retrieval.documents]
    assert got == facts["docs"]
    assert [d.position for d in retrieval.documents] == list(range(len(facts["docs"])))
    for document in retrieval.documents:
        assert document.score == pytest.approx(SCORES[document.version or ""], abs=1e-4)
        assert document.raw_id is not None  # the node's id_
        assert document.raw_id != document.doc_id
    # The instrumentations record neither top_k nor the MetadataFilters.
    assert (retrieval.filter, retrieval.top_k) == (None, None)
    assert record.gaps == ()


@pytest.mark.parametrize("run", list(RUNS))
def test_the_openai_chat_span_is_the_model_call(run: str) -> None:
    record = load(run)
    [call] = record.model_calls
    assert call.name == "openai.chat"
    assert call.model == "gpt-4.1-mini"
    # OTel GenAI structured messages (role + parts) written by opentelemetry-instrumentation-openai.
    assert [m.role for m in call.input_messages] == ["system", "user"]
    assert (call.input_messages[0].content or "").startswith("You are an expert Q&A system")
    user = call.input_messages[1].content or ""
    assert user.startswith("Context information is below.")
    assert user.rstrip().endswith(f"Query: {QUESTION}\nAnswer:")
    for clause in (CLAUSE_V1, CLAUSE_V2):
        assert (clause in call.input_text) == (clause in RUNS[run]["in_prompt"])
    assert call.output_text == RUNS[run]["answer"]
    assert [m.role for m in call.output_messages] == ["assistant"]
    assert call.usage["total"] == call.usage["input"] + call.usage["output"] > 0
    # The synthesizer and refine-program tasks above it stay chain steps, not model calls.
    steps = {n.name: n.step for n in record.spans}
    assert steps["DefaultRefineProgram.task"] == steps["CompactAndRefine.task"] == "chain"
    assert steps["TokenTextSplitter.task"] == "chain"


def test_similarity_postprocessor_task_is_a_rerank_over_the_retrieved_documents() -> None:
    record = load("dropped")
    steps = {n.name: n.step for n in record.spans}
    assert steps["SimilarityPostprocessor.task"] == "rerank"
    [rerank] = record.rerankings
    [retrieval] = record.retrievals
    assert names(record)[rerank.span_id] == "SimilarityPostprocessor.task"
    assert rerank.query == QUESTION
    assert rerank.input_documents == retrieval.documents
    assert [(d.doc_id, d.version, d.content) for d in rerank.output_documents] == [V1[:3]]
    assert rerank.output_documents[0].raw_id == retrieval.documents[0].raw_id


@pytest.mark.parametrize("run", ["rag", "topk", "filtered"])
def test_no_postprocessor_no_rerank_step(run: str) -> None:
    record = load(run)
    assert record.rerankings == ()
    assert "rerank" not in {n.step for n in record.spans}


def test_without_the_openai_instrumentation_the_model_call_is_a_gap_naming_what_to_enable() -> None:
    record = normalize(spans_of("llamaindex_openllmetry_nollm_rag.pb"))
    # The llama-index instrumentation defers OpenAI LLMs to the openai instrumentation: no span holds
    # the prompt, so nothing may pass for a model call (not the refine program's context_str).
    assert record.model_calls == ()
    [gap] = record.gaps
    assert (gap.kind, gap.span_id) == ("no_model_span", None)
    assert "opentelemetry-instrumentation-openai" in gap.detail
    # The rest of the trace is still read.
    assert record.input == QUESTION
    assert record.final_answer == ANSWER_RIGHT
    [retrieval] = record.retrievals
    assert [(d.doc_id, d.version) for d in retrieval.documents] == [V1[:2], V2[:2]]


# --- the readers, on hand-written spans -----------------------------------------------------------


def _span(span_id: str, name: str, attrs: dict[str, Any], parent: str | None = None) -> RawSpan:
    return RawSpan(
        trace_id="cd" * 16,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=1_000 + int(span_id, 16),
        end_time_unix_nano=9_000,
        attributes={"traceloop.span.kind": "task", "traceloop.entity.name": name, **attrs},
    )


def _node(node_id: str, text: str, score: float | None, **metadata: str) -> str:
    import json

    node = {"id_": node_id, "metadata": metadata, "text": text, "class_name": "TextNode"}
    return json.dumps({"node": node, "score": score, "class_name": "NodeWithScore"})


def test_node_lists_as_strings_or_objects_empty_results_and_plain_task_outputs() -> None:
    import json

    root = _span("01", "RetrieverQueryEngine.workflow", {"traceloop.span.kind": "workflow"})
    as_strings = _span(
        "02",
        "BM25Retriever.task",
        {
            "traceloop.entity.input": json.dumps({"str_or_query_bundle": {"query_str": "cap?"}}),
            "traceloop.entity.output": json.dumps([_node("n1", "cap is 30k", 1.5, doc_id="A", version="v2")]),
        },
        "01",
    )
    # A node list of objects (not strings), no score, no doc_id in the metadata: the node id identifies it.
    as_objects = _span(
        "03",
        "QueryFusionRetriever.task",
        {
            "traceloop.entity.input": json.dumps({"query_bundle": {"query_str": "other?"}}),
            "traceloop.entity.output": json.dumps([json.loads(_node("n2", "other text", None))]),
        },
        "01",
    )
    empty = _span(
        "04",
        "VectorIndexRetriever.task",
        {
            "traceloop.entity.input": json.dumps({"str_or_query_bundle": "none?"}),
            "traceloop.entity.output": "[]",
        },
        "01",
    )
    # A task returning a list of strings that are not nodes (a text splitter) stays a chain step.
    splitter = _span(
        "05",
        "TokenTextSplitter.task",
        {"traceloop.entity.output": json.dumps(['{"class_name": "x"}', "chunk two"])},
        "01",
    )
    record = normalize([root, as_strings, as_objects, empty, splitter])
    steps = {n.name: n.step for n in record.spans}
    assert steps["TokenTextSplitter.task"] == "chain"
    by_name = {r.name: r for r in record.retrievals}
    assert set(by_name) == {"BM25Retriever.task", "QueryFusionRetriever.task", "VectorIndexRetriever.task"}
    [doc] = by_name["BM25Retriever.task"].documents
    assert (doc.doc_id, doc.version, doc.raw_id, doc.content, doc.score) == (
        "A",
        "v2",
        "n1",
        "cap is 30k",
        1.5,
    )
    assert by_name["BM25Retriever.task"].query == "cap?"
    [other] = by_name["QueryFusionRetriever.task"].documents
    assert (other.doc_id, other.raw_id, other.score) == ("n2", "n2", None)
    assert by_name["QueryFusionRetriever.task"].query == "other?"
    assert by_name["VectorIndexRetriever.task"].documents == ()
    assert by_name["VectorIndexRetriever.task"].documents_recorded
    assert by_name["VectorIndexRetriever.task"].query == "none?"


def test_postprocessor_that_drops_every_node_and_nodes_the_retrieval_did_not_return() -> None:
    import json

    root = _span("01", "RetrieverQueryEngine.workflow", {"traceloop.span.kind": "workflow"})
    retriever = _span(
        "02",
        "VectorIndexRetriever.task",
        {"traceloop.entity.output": json.dumps([_node("n1", "kept text", 0.9, doc_id="A", version="v1")])},
        "01",
    )
    dropper = _span(
        "03",
        "SimilarityPostprocessor.task",
        {
            "traceloop.entity.input": json.dumps(
                {"nodes": [_node("n1", "kept text", 0.9)], "query_bundle": None}
            ),
            "traceloop.entity.output": "[]",
        },
        "01",
    )
    # Given a node no retrieval returned: kept as read from its own JSON.
    stranger = _span(
        "04",
        "LLMRerank.task",
        {
            "traceloop.entity.input": json.dumps(
                {"nodes": [_node("n9", "from elsewhere", 0.1, doc_id="B")], "query_str": "why?"}
            ),
            "traceloop.entity.output": json.dumps([_node("n9", "from elsewhere", 7.0, doc_id="B")]),
        },
        "01",
    )
    record = normalize([root, retriever, dropper, stranger])
    by_span = {r.span_id: r for r in record.rerankings}
    dropped = by_span["03"]
    # The node in is the retrieved document (identity from the retrieval's record), none comes out.
    assert [(d.doc_id, d.version, d.raw_id) for d in dropped.input_documents] == [("A", "v1", "n1")]
    assert dropped.output_documents == ()
    assert dropped.query is None
    reranked = by_span["04"]
    assert reranked.query == "why?"
    assert [(d.doc_id, d.raw_id, d.score) for d in reranked.output_documents] == [("B", "n9", 7.0)]
    assert [r.name for r in record.retrievals] == ["VectorIndexRetriever.task"]
