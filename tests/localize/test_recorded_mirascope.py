"""Triage over a Mirascope 2 tool-calling loop traced by Mirascope's own ``ops`` tracing: the model calls are
OTel GenAI spans (``ops.instrument_llm()``), the application's functions ``@ops.trace`` spans (the root
``answer_question`` and the search function ``retrieve``, whose ``mirascope.trace.output`` holds the
documents). The four faults, the unmarked search function and the filter replay are in
test_recorded_frameworks.py. Fixtures from tests/fixtures/traces/record_mirascope.py (the app and its runs:
_policy.py); the manifest is the recordings' index with each version's ``content`` (conftest
``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

FILE = "mirascope_{run}.pb"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."


def test_the_traced_functions_are_the_task_and_a_tool_call(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    # the root @ops.trace function: its arguments hold the request, its return value the answer
    assert (record.input, record.final_answer) == (QUESTION, RIGHT)
    # the search function below it is a tool call with its arguments and the documents it returned
    [tool] = record.tool_calls
    assert tool.name == "retrieve"
    assert tool.arguments == {"query": "prepayment per order", "region": None}
    assert [(d["doc_id"], d["version"]) for d in tool.result] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    # the model calls are GenAI spans: the first asks for the search, the last answers
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert last.output_text == RIGHT


def test_without_the_search_functions_output_no_verdict(mk: ModuleType) -> None:
    # Mirascope records no tool execution: the traced search function's output is the only record of
    # what the search returned. Without it the documents reach the trace only as the model's input.
    spans = mk.recorded_spans(FILE.format(run="dropped"))
    spans = [
        s.model_copy(
            update={"attributes": {k: v for k, v in s.attributes.items() if k != "mirascope.trace.output"}}
        )
        if s.name == "retrieve"
        else s
        for s in spans
    ]
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
