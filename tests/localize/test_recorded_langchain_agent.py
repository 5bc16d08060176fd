"""Triage over LangChain 1.x's ``create_agent`` traced by openinference-instrumentation-langchain: the search
tool's TOOL span records the ``ToolMessage`` it returned, serialized (``{"type": "tool", "data": {"content":
...}}``), whose content holds the documents (``_langchain.py``); the graph root's output is the agent state,
not the answer. The tool records its filter on its own span through the instrumentor's ``get_span``.
Fixtures from tests/fixtures/traces/record_langchain_agent.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "langchain_agent_{run}.pb"
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}
ANSWER = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_never_indexed_is_told_by_the_manifest_not_the_trace(mk: ModuleType) -> None:
    never = FILE.format(run="never_indexed")
    loc = mk.triage_framework(never, mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    loc = mk.triage_framework(never, mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])


def test_the_tool_messages_content_is_the_result_and_the_state_is_not_the_answer(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    [tool] = record.tool_calls
    assert tool.name == "search_documents"
    assert [(d.doc_id, d.version) for d in tool.documents or ()] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    assert record.final_answer == ANSWER == record.model_calls[-1].output_text
    # an unmarked tool: without the manifest nothing says its records are documents
    assert record.retrievals == ()
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "unconfirmed"


def test_the_filter_set_through_get_span_is_needed(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="filtered"))
    loc = mk.localize(
        mk.normalize(mk.drop_attribute(spans, "tracejudge.retrieval.filter")),
        mk.ticket(),
        mk.policy_manifest("EU"),
    )
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
