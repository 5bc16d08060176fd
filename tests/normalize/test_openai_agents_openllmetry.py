"""What normalize reads from the OpenAI Agents SDK under OpenLLMetry's
opentelemetry-instrumentation-openai-agents 0.62 (OTel GenAI attributes: ``invoke_agent``, ``chat`` with
parts-based messages, ``execute_tool`` with ``gen_ai.tool.call.arguments`` / ``.result``), with and without
opentelemetry-instrumentation-openai: with the chat-completions model the agents instrumentation records a
model call's input only, the OpenAI one the completion.

Fixtures: tests/fixtures/traces/openai_agents_openllmetry{,_alone}_{run}.pb (rag, ignored, filtered, dropped,
never_indexed), re-recorded with record_openai_agents_openllmetry.py (a side venv; see its docstring).
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


def load(name: str) -> TaskRecord:
    return normalize(list(read_otlp_file(TRACES / f"{name}.pb")))


@pytest.mark.parametrize("run", list(ANSWERS))
def test_the_tool_call_and_the_model_calls(run: str) -> None:
    for name in (f"openai_agents_openllmetry_{run}", f"openai_agents_openllmetry_alone_{run}"):
        record = load(name)
        [tool] = record.tool_calls
        assert tool.name == "search_documents"
        assert tool.arguments["query"] == "prepayment per order"
        assert (tool.arguments.get("region") == "CN") == (run == "filtered")
        assert all(d["doc_id"] == "C-17/attachment" or d["doc_id"] == "C-09/framework" for d in tool.result)
        last = record.model_calls[-1]
        assert QUESTION in last.input_text
        assert (CLAUSE_V2 in last.input_text) == (run in ("rag", "ignored"))


@pytest.mark.parametrize("run", list(ANSWERS))
def test_only_the_openai_instrumentation_records_the_completion(run: str) -> None:
    with_openai = load(f"openai_agents_openllmetry_{run}")
    # the agents instrumentation's openai.response spans are the outer model calls; the openai.chat span
    # inside each is the one read (of nested model calls only the innermost is one)
    assert [c.name for c in with_openai.model_calls] == ["openai.chat", "openai.chat"]
    assert with_openai.model_calls[-1].output_text == ANSWERS[run]
    assert with_openai.final_answer == ANSWERS[run]
    alone = load(f"openai_agents_openllmetry_alone_{run}")
    assert [c.name for c in alone.model_calls] == ["openai.response", "openai.response"]
    assert not any(c.output_recorded for c in alone.model_calls)
    assert alone.final_answer is None
