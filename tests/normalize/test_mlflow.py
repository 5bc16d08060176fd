"""What normalize reads from MLflow tracing exported over OTLP (mlflow-tracing 3.17): the ``mlflow.span*``
attributes — span type, JSON-encoded inputs and outputs, token usage — of a tool-calling agent whose search
is an ``@mlflow.trace(span_type=RETRIEVER)`` function returning MLflow ``Document``\\ s, and the same app
exported with ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true`` (GenAI attributes; the retriever's inputs and
outputs dropped).

Fixtures: tests/fixtures/traces/mlflow{,_genai}_{rag,ignored,filtered,dropped,never_indexed}.pb, re-recorded
with record_mlflow.py (a side venv; see its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWERS = {"rag": RIGHT, "ignored": STALE, "filtered": STALE, "dropped": STALE, "never_indexed": STALE}
# the search's documents per run: v2 ranks first; the filter and the index without v2 leave v1 and another
FOUND = {
    "rag": [("C-17/attachment", "v2"), ("C-17/attachment", "v1")],
    "ignored": [("C-17/attachment", "v2"), ("C-17/attachment", "v1")],
    "filtered": [("C-17/attachment", "v1"), ("C-09/framework", "v1")],
    "dropped": [("C-17/attachment", "v1"), ("C-17/attachment", "v2")],
    "never_indexed": [("C-17/attachment", "v1"), ("C-09/framework", "v1")],
}


def spans(name: str) -> list[RawSpan]:
    return list(read_otlp_file(TRACES / f"{name}.pb"))


def load(name: str) -> TaskRecord:
    return normalize(spans(name))


@pytest.mark.parametrize("run", list(ANSWERS))
def test_the_agent_root_model_calls_and_retriever_are_read(run: str) -> None:
    record = load(f"mlflow_{run}")
    assert (record.input, record.final_answer) == (QUESTION, ANSWERS[run])
    steps = {node.name: (node.step, node.convention) for node in record.spans}
    assert steps["answer_question"] == ("agent", "mlflow")
    assert steps["search_documents"] == ("retrieval", "mlflow")
    [retrieval] = record.retrievals
    assert retrieval.query == "prepayment per order"
    assert [(d.doc_id, d.version) for d in retrieval.documents] == FOUND[run]
    # the retriever's own ids (MLflow Document.id) and text
    assert all(d.raw_id and d.raw_id.startswith("chunk-") and d.content for d in retrieval.documents)
    first, last = record.model_calls
    assert [m.role for m in first.input_messages] == ["system", "user"]
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert last.output_text == ANSWERS[run]
    # the tool message holds the documents as JSON text (a list of records is the message's text)
    assert last.input_messages[-1].role == "tool"
    assert CLAUSE_V1 in last.input_text
    assert (CLAUSE_V2 in last.input_text) == (run in ("rag", "ignored"))
    assert set(last.usage) == {"input", "output", "total"}
    assert not [g for g in record.gaps if g.kind == "model_input_not_recorded"]


def test_the_filter_set_through_mlflow_is_read_decoded() -> None:
    [retrieval] = load("mlflow_filtered").retrievals
    assert retrieval.filter == {"region": "CN"}


def test_a_string_set_through_mlflow_arrives_in_quotes_and_is_read_without_them() -> None:
    # MLflow's set_attribute stores every value as its JSON text: json.dumps(filter) arrives encoded twice,
    # a principal "buyer-cn" as '"buyer-cn"'.
    found = spans("mlflow_filtered")
    search = next(s for s in found if s.name == "search_documents")
    assert search.attributes["mlflow.spanType"] == '"RETRIEVER"'
    changed = search.model_copy(
        update={
            "attributes": {
                **search.attributes,
                "tracejudge.retrieval.filter": json.dumps(json.dumps({"region": "CN"})),
                "tracejudge.retrieval.principal": json.dumps("buyer-cn"),
            }
        }
    )
    record = normalize([changed if s is search else s for s in found])
    [retrieval] = record.retrievals
    assert (retrieval.filter, retrieval.principal) == ({"region": "CN"}, "buyer-cn")
    # the same quoted value on a span MLflow did not write stays what it is
    plain = changed.model_copy(
        update={"attributes": {k: v for k, v in changed.attributes.items() if not k.startswith("mlflow.")}}
    )
    assert plain.attributes["tracejudge.retrieval.principal"] == '"buyer-cn"'
    other = normalize([plain if s is search else s for s in found])
    assert [r.principal for r in other.retrievals] == ['"buyer-cn"']


@pytest.mark.parametrize("run", list(ANSWERS))
def test_the_genai_translation_keeps_the_messages_but_not_the_retrievers_documents(run: str) -> None:
    record = load(f"mlflow_genai_{run}")
    # the model calls are GenAI chat spans with their messages and the tool result
    first, last = record.model_calls
    assert QUESTION in first.input_text
    assert last.output_text == ANSWERS[run]
    assert (CLAUSE_V2 in last.input_text) == (run in ("rag", "ignored"))
    # the retriever span is translated with no inputs or outputs: no documents, no retrieval read
    search = next(
        s for s in spans(f"mlflow_genai_{run}") if s.attributes.get("gen_ai.operation.name") == "RETRIEVER"
    )
    assert not any(k.startswith("mlflow.") for k in search.attributes)
    assert all(r.documents == () for r in record.retrievals)
