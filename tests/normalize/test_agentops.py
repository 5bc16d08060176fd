"""What normalize reads from AgentOps 0.4.21: ``@agentops.trace`` / ``@agentops.tool`` functions
(``agentops.span.kind``, ``agentops.<kind>.input`` / ``.output`` and ``agentops.entity.*`` on the session
root) and its OpenAI instrumentation (OpenLLMetry's flat ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``,
with a ``tool_call.<name>`` span for each tool the model asked for, its kind the enum's repr).

Fixtures: tests/fixtures/traces/agentops_{rag,ignored,filtered,dropped,never_indexed}.pb, re-recorded with
record_agentops.py (a side venv; see its docstring).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.schema import TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWERS = {"rag": RIGHT, "ignored": STALE, "filtered": STALE, "dropped": STALE, "never_indexed": STALE}
FIRST = {"rag": "v2", "ignored": "v2", "filtered": "v1", "dropped": "v1", "never_indexed": "v1"}


def load(run: str) -> TaskRecord:
    return normalize(list(read_otlp_file(TRACES / f"agentops_{run}.pb")))


@pytest.mark.parametrize("run", list(ANSWERS))
def test_the_session_root_the_tool_and_the_model_calls(run: str) -> None:
    record = load(run)
    assert (record.input, record.final_answer) == (QUESTION, ANSWERS[run])
    steps = {node.name: (node.step, node.convention) for node in record.spans}
    assert steps["answer_question.session"] == ("chain", "agentops")
    assert steps["search_documents.tool"] == ("tool", "agentops")
    # the model's tool request, not the tool's run: not a second tool call
    assert steps["tool_call.search_documents"] == ("other", "")
    [tool] = record.tool_calls
    assert tool.arguments["query"] == "prepayment per order"
    assert (tool.arguments.get("region") == "CN") == (run == "filtered")
    assert (tool.result[0]["doc_id"], tool.result[0]["version"]) == ("C-17/attachment", FIRST[run])
    first, last = record.model_calls
    assert QUESTION in first.input_text
    assert last.output_text == ANSWERS[run]
    assert last.input_messages[-1].role == "tool"
    assert (CLAUSE_V2 in last.input_text) == (run in ("rag", "ignored"))
    # the instrumentation records no tool calls on the model span that asked for one
    assert not first.output_recorded
