"""LangChain traces: one RAG chain recorded under two LangChain instrumentations, and the readers
they needed (hand-written spans, one test per fix).

Fixtures: tests/fixtures/traces/langchain_{openinference,openllmetry}_{rag,dropped,filtered}.pb,
re-recorded with tests/fixtures/traces/record_langchain.py (side venv; see its docstring). The facts
pinned are the content the recorder put in, so they survive a re-recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"

CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
MAIN = "Payment terms: net 30 days after delivery."
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
ANSWER_STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWER_RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
INSTRUMENTATIONS = ["openinference", "openllmetry"]

# What each recorded run returned and what reached the model (see record_langchain.py).
RUNS: dict[str, dict[str, Any]] = {
    "rag": {
        "docs": [("C-17/attachment", "v2", CLAUSE_V2, "EU"), ("C-17/attachment", "v1", CLAUSE_V1, "CN")],
        "in_prompt": [CLAUSE_V2, CLAUSE_V1],
        "not_in_prompt": [],
        "answer": ANSWER_RIGHT,
        "filter": None,
    },
    "dropped": {
        "docs": [("C-17/attachment", "v2", CLAUSE_V2, "EU"), ("C-17/attachment", "v1", CLAUSE_V1, "CN")],
        "in_prompt": [CLAUSE_V1],
        "not_in_prompt": [CLAUSE_V2],
        "answer": ANSWER_STALE,
        "filter": None,
    },
    "filtered": {
        "docs": [("C-17/attachment", "v1", CLAUSE_V1, "CN"), ("C-17/main", "v3", MAIN, "CN")],
        "in_prompt": [CLAUSE_V1, MAIN],
        "not_in_prompt": [CLAUSE_V2],
        "answer": ANSWER_STALE,
        "filter": {"region": "CN"},
    },
}


def load(instrumentation: str, run: str) -> TaskRecord:
    spans = list(read_otlp_file(TRACES / f"langchain_{instrumentation}_{run}.pb"))
    assert spans
    return normalize(spans)


# --- recorded fixtures ----------------------------------------------------------------------------


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_langchain_rag_run_is_read(instrumentation: str, run: str) -> None:
    facts = RUNS[run]
    record = load(instrumentation, run)
    assert record.input == QUESTION
    assert record.final_answer == facts["answer"]
    assert record.final_answer_span_id == record.spans[0].span_id  # the chain's root span
    [retrieval] = record.retrievals
    assert retrieval.name.endswith("contract_retriever")  # OpenLLMetry prefixes the operation
    assert retrieval.span_ids == (retrieval.span_id,)
    assert retrieval.query == QUESTION
    assert retrieval.documents_recorded
    assert [(d.doc_id, d.version, d.content, d.metadata) for d in retrieval.documents] == [
        (doc_id, version, content, {"doc_id": doc_id, "version": version, "region": region})
        for doc_id, version, content, region in facts["docs"]
    ]
    assert [d.position for d in retrieval.documents] == list(range(len(facts["docs"])))
    assert retrieval.filter == facts["filter"]
    [call] = record.model_calls
    assert call.model == "gpt-4.1-mini"
    assert call.input_text.startswith("You are a procurement assistant. Answer only from these contract")
    assert QUESTION in call.input_text
    for clause in facts["in_prompt"]:
        assert clause in call.input_text
    for clause in facts["not_in_prompt"]:
        assert clause not in call.input_text
    assert call.output_text == facts["answer"]
    assert call.usage["input"] == 120
    assert call.usage["output"] == 24
    assert record.gaps == ()
    assert record.metadata == {"service_name": "langchain-rag"}


@pytest.mark.parametrize("run", list(RUNS))
def test_openinference_langchain_steps_and_messages(run: str) -> None:
    record = load("openinference", run)
    steps = {n.name: (n.step, n.convention) for n in record.spans}
    assert steps["procurement_rag"] == ("chain", "openinference")
    assert steps["contract_retriever"] == ("retrieval", "openinference")
    assert steps["ChatOpenAI"] == ("model", "openinference")
    # Kind PROMPT ("the rendering of a prompt template") is context assembly: the rendered messages.
    assert steps["ChatPromptTemplate"] == ("context", "openinference")
    [context] = record.context_assemblies
    assert context.name == "ChatPromptTemplate"
    assert context.output is not None
    assert context.output.startswith("You are a procurement assistant.")
    assert context.output.endswith(QUESTION)
    for clause in RUNS[run]["in_prompt"]:
        assert clause in context.output
    for clause in RUNS[run]["not_in_prompt"]:
        assert clause not in context.output
    [call] = record.model_calls
    assert [m.role for m in call.input_messages] == ["system", "user"]
    assert call.input_messages[1].content == QUESTION
    assert call.usage == {"input": 120, "output": 24, "total": 144}


@pytest.mark.parametrize("run", list(RUNS))
def test_openllmetry_langchain_steps_and_messages(run: str) -> None:
    record = load("openllmetry", run)
    steps = {n.name: (n.step, n.convention) for n in record.spans}
    # The root carries gen_ai.operation.name = invoke_agent beside traceloop.span.kind = workflow.
    assert steps["procurement_rag.workflow"] == ("agent", "gen_ai")
    assert steps["vector_db_retrieve contract_retriever"] == ("retrieval", "openllmetry")
    assert steps["execute_task stuff_documents"] == ("chain", "openllmetry")
    assert steps["execute_task ChatPromptTemplate"] == ("chain", "openllmetry")
    assert steps["ChatOpenAI.chat"] == ("model", "gen_ai")
    [call] = record.model_calls
    # The stuffed system message arrives as gen_ai.system_instructions, not as an input message.
    assert call.system_instructions is not None
    assert call.system_instructions.startswith("You are a procurement assistant.")
    assert [m.role for m in call.input_messages] == ["user"]
    assert call.input_messages[0].content == QUESTION


# --- the readers each fix added (hand-written spans) ------------------------------------------------

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(span_id: str, attrs: dict[str, Any], *, parent: str | None, name: str = "") -> RawSpan:
    return RawSpan(
        trace_id=TRACE,
        span_id=span_id.rjust(16, "0"),
        parent_span_id=None if parent is None else parent.rjust(16, "0"),
        name=name or f"span-{span_id}",
        start_time_unix_nano=1_780_000_000_000_000_000 + int(span_id, 16),
        end_time_unix_nano=1_780_000_000_100_000_000,
        attributes=attrs,
    )


def entity_task(name: str, inputs: Any, outputs: Any, **extra: Any) -> dict[str, Any]:
    return {
        "traceloop.span.kind": "task",
        "traceloop.entity.name": name,
        "gen_ai.operation.name": "execute_task",
        "traceloop.entity.input": json.dumps(inputs),
        "traceloop.entity.output": json.dumps(outputs),
        **extra,
    }


def retriever_task(**extra: Any) -> dict[str, Any]:
    return entity_task(
        "docs",
        {"query": "cap?", "tags": [], "metadata": {}, "kwargs": {"name": "docs"}},
        {"documents": [{"page_content": "text", "metadata": {"source": "D", "version": "v2"}}]},
        **{"gen_ai.operation.name": "vector_db_retrieve", **extra},
    )


def test_openllmetry_vector_db_retrieve_is_a_retrieval_with_query_and_documents() -> None:
    record = normalize(
        [
            span("a0", {"traceloop.span.kind": "workflow"}, parent=None),
            span("a1", entity_task("seq", {"inputs": "cap?"}, {"outputs": "text"}), parent="a0"),
            span("a2", retriever_task(), parent="a1"),
        ]
    )
    [retrieval] = record.retrievals
    assert retrieval.query == "cap?"
    assert [(d.doc_id, d.version, d.content) for d in retrieval.documents] == [("D", "v2", "text")]
    # The retriever task records its own query: the enclosing task is not part of the call.
    assert retrieval.span_ids == ("00000000000000a2",)
    assert {n.span_id[-2:]: (n.step, n.convention) for n in record.spans} == {
        "a0": ("chain", "openllmetry"),
        "a1": ("chain", "openllmetry"),
        "a2": ("retrieval", "openllmetry"),
    }


def test_a_vector_store_span_under_a_task_still_takes_the_task_into_the_call() -> None:
    record = normalize(
        [
            span("a0", {"traceloop.span.kind": "workflow"}, parent=None),
            span("a1", entity_task("retrieve", {"args": ["cap?"]}, []), parent="a0"),
            span("a2", {"db.system": "chroma", "db.operation": "query"}, parent="a1"),
        ]
    )
    [retrieval] = record.retrievals
    assert retrieval.query == "cap?"
    assert retrieval.span_ids == ("00000000000000a2", "00000000000000a1")


def test_an_unknown_genai_operation_alone_stays_other() -> None:
    record = normalize([span("a0", {"gen_ai.operation.name": "execute_task"}, parent=None)])
    assert (record.spans[0].step, record.spans[0].convention) == ("other", "gen_ai")


def test_known_genai_operation_wins_over_traceloop_kind() -> None:
    attrs = {"gen_ai.operation.name": "invoke_agent", "traceloop.span.kind": "workflow"}
    record = normalize([span("a0", attrs, parent=None)])
    assert (record.spans[0].step, record.spans[0].convention) == ("agent", "gen_ai")


def oi_retriever(metadata: Any, **extra: Any) -> dict[str, Any]:
    return {
        "openinference.span.kind": "RETRIEVER",
        "input.value": "cap?",
        "retrieval.documents.0.document.content": "text",
        "retrieval.documents.0.document.metadata": '{"doc_id": "D", "version": "v1", "region": "CN"}',
        "metadata": metadata,
        **extra,
    }


def test_openinference_run_metadata_carries_tracejudge_retrieval_attributes() -> None:
    metadata = json.dumps(
        {
            "tracejudge.retrieval.filter": '{"region": "CN"}',
            "tracejudge.retrieval.principal": "procurement",
            "ls_retriever_name": "contract",
        }
    )
    record = normalize([span("a0", oi_retriever(metadata), parent=None)])
    [retrieval] = record.retrievals
    assert retrieval.filter == {"region": "CN"}
    assert retrieval.filter_raw == '{"region": "CN"}'
    assert retrieval.principal == "procurement"
    assert not [g for g in record.gaps if g.kind == "attribute_unparseable"]


def test_openinference_run_metadata_filter_may_be_structured() -> None:
    metadata = json.dumps({"tracejudge.retrieval.filter": {"region": {"$in": ["CN", "HK"]}}})
    record = normalize([span("a0", oi_retriever(metadata), parent=None)])
    assert record.retrievals[0].filter == {"region": {"$in": ["CN", "HK"]}}


def test_a_real_span_attribute_wins_over_run_metadata() -> None:
    metadata = json.dumps({"tracejudge.retrieval.filter": '{"region": "CN"}'})
    attrs = oi_retriever(metadata, **{"tracejudge.retrieval.filter": '{"region": "EU"}'})
    record = normalize([span("a0", attrs, parent=None)])
    assert record.retrievals[0].filter == {"region": "EU"}


@pytest.mark.parametrize(
    "metadata",
    ['{"ls_retriever_name": "contract"}', "not json tracejudge.", '["tracejudge.retrieval.filter"]'],
)
def test_run_metadata_without_our_keys_changes_nothing(metadata: str) -> None:
    record = normalize([span("a0", oi_retriever(metadata), parent=None)])
    [retrieval] = record.retrievals
    assert retrieval.filter is None
    assert [d.doc_id for d in retrieval.documents] == ["D"]
    # OpenInference metadata is free-form: not being our JSON is no gap.
    assert not [g for g in record.gaps if g.kind == "attribute_unparseable"]


def test_openllmetry_association_properties_carry_tracejudge_retrieval_attributes() -> None:
    attrs = retriever_task(
        **{
            "traceloop.association.properties.tracejudge.retrieval.filter": '{"region": "CN"}',
            "traceloop.association.properties.ls_retriever_name": "contract",
        }
    )
    record = normalize([span("a0", attrs, parent=None)])
    [retrieval] = record.retrievals
    assert retrieval.filter == {"region": "CN"}
    assert retrieval.filter_raw == '{"region": "CN"}'
