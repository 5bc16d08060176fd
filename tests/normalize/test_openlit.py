"""What normalize reads from OpenLIT 1.45 (``openlit.init()``): its OpenAI instrumentation writes OTel GenAI
chat spans (parts-based ``gen_ai.input.messages`` / ``gen_ai.output.messages``, usage, and its own
``gen_ai.tool.args``, ``gen_ai.usage.cost``); ``@openlit.trace`` writes a function's return value as
``gen_ai.output.messages`` — plain text, not a message list — and its arguments as ``function.args`` /
``function.kwargs`` (Python reprs); OpenLIT's httpx instrumentation adds a ``POST`` span under each model
call.

OpenLIT's instrumentation of the OpenAI Agents SDK writes a tool's arguments and result as ``str()`` of the
value: the Python repr of a list of documents, read as a literal.

Fixtures: tests/fixtures/traces/openlit{,_agents}_{rag,ignored,filtered,dropped,never_indexed}.pb, re-recorded
with record_openlit.py and record_openlit_agents.py (side venvs; see their docstrings).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import RawSpan, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWERS = {"rag": RIGHT, "ignored": STALE, "filtered": STALE, "dropped": STALE, "never_indexed": STALE}
FIRST = {"rag": "v2", "ignored": "v2", "filtered": "v1", "dropped": "v1", "never_indexed": "v1"}


def load(run: str) -> TaskRecord:
    return normalize(list(read_otlp_file(TRACES / f"openlit_{run}.pb")))


@pytest.mark.parametrize("run", list(ANSWERS))
def test_the_chat_spans_the_search_and_the_traced_root(run: str) -> None:
    record = load(run)
    assert (record.input, record.final_answer) == (QUESTION, ANSWERS[run])
    # the answer is the @openlit.trace root's return value, kept as text
    root = next(node for node in record.spans if node.parent_span_id is None)
    assert (root.name, record.final_answer_span_id) == ("answer_question", root.span_id)
    assert any(g.kind == "attribute_unparseable" and g.span_id == root.span_id for g in record.gaps)
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert last.output_text == ANSWERS[run]
    assert (CLAUSE_V2 in last.input_text) == (run in ("rag", "ignored"))
    assert last.usage["input"] > 0
    [retrieval] = record.retrievals
    assert retrieval.query == "prepayment per order"
    assert retrieval.documents[0].doc_id == f"C-17/attachment@{FIRST[run]}"
    assert (retrieval.filter == {"region": "CN"}) == (run == "filtered")
    # the httpx instrumentation's POST spans are neither model calls nor tools
    assert sum(node.name == "POST" and node.step == "other" for node in record.spans) == 2


def agent_spans(run: str) -> list[RawSpan]:
    return list(read_otlp_file(TRACES / f"openlit_agents_{run}.pb"))


@pytest.mark.parametrize("run", list(ANSWERS))
def test_the_agents_tool_result_is_read_from_its_python_repr(run: str) -> None:
    spans = agent_spans(run)
    tool = next(s for s in spans if s.name == "execute_tool search_documents")
    assert tool.attributes["gen_ai.tool.call.result"].startswith("[{'doc_id': ")
    record = normalize(spans)
    [call] = record.tool_calls
    assert call.arguments["query"] == "prepayment per order"
    assert (call.result[0]["doc_id"], call.result[0]["version"]) == ("C-17/attachment", FIRST[run])
    assert all(d["content"] for d in call.result)
    assert record.final_answer == ANSWERS[run]
    assert record.model_calls[-1].output_text == ANSWERS[run]


def test_a_repr_on_another_instrumentations_span_stays_text() -> None:
    spans = agent_spans("rag")
    tool = next(s for s in spans if s.name == "execute_tool search_documents")
    other = tool.model_copy(update={"scope_name": "opentelemetry.instrumentation.openai_agents"})
    record = normalize([other if s is tool else s for s in spans])
    [call] = record.tool_calls
    assert isinstance(call.result, str)
    assert call.result.startswith("[{'doc_id': ")
