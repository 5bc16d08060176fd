"""Triage over a Langroid ``ChatAgent`` (OpenAI tool calls) whose model calls are traced by
openinference-instrumentation-openai: Langroid has no tracing of its own, so the app records the run as a
CHAIN root and the search, inside its ``ToolMessage`` handler, as an OpenInference RETRIEVER span (the
index's chunk ids, the text, ``doc_id``/``version`` in the metadata, the filter as
``tracejudge.retrieval.filter``). Fixtures from tests/fixtures/traces/record_langroid.py (recorded offline
with tiktoken's ``cl100k_base`` from LiteLLM's wheel; the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "langroid_{run}.pb"
# run -> (verdict, cause, stage statuses) under the recordings' index (v2 indexed, in the EU)
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_never_indexed_is_told_by_the_manifest_not_the_trace(mk: ModuleType) -> None:
    never = FILE.format(run="never_indexed")
    # The index never held v2: the search returned v1 and the main terms, with no filter.
    loc = mk.triage_framework(never, mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    assert "never indexed" in loc.stages[0].evidence[0].note
    # Under a manifest that says v2 was indexed, the trace cannot tell rank from a filter nobody recorded.
    loc = mk.triage_framework(never, mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


def test_the_retriever_span_identifies_documents_by_their_metadata(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run="rag")))
    assert record.input == "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
    [retrieval] = record.retrievals
    assert [(d.doc_id, d.version) for d in retrieval.documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert record.final_answer == last.output_text
    # the tool result reached the answering call
    assert "Prepayment shall not exceed 30,000 RMB per order." in last.input_text
    # ids, versions and text are all in the trace: no manifest needed to see v2 returned and used
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "no_fault"


def test_the_filter_recorded_on_the_retriever_span_is_needed(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="filtered"))
    loc = mk.localize(
        mk.normalize(mk.drop_attribute(spans, "tracejudge.retrieval.filter")),
        mk.ticket(),
        mk.policy_manifest("EU"),
    )
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
