"""Triage over a Qwen-Agent ``Assistant`` (the API's own tool calls, ``use_raw_api``) whose model calls are
traced by openinference-instrumentation-openai: Qwen-Agent has no tracing of its own, so the tool records
itself as an OTel GenAI tool span marked ``gen_ai.tool.type = datastore`` (its result the documents with
``doc_id``/``version``) and the app records the run as a CHAIN root. Fixtures from
tests/fixtures/traces/record_qwen_agent.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "qwen_agent_{run}.pb"
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
    loc = mk.triage_framework(never, mk.never_indexed_manifest())
    assert (loc.verdict, mk.statuses(loc)) == ("not_indexed", ["fail", "skipped", "skipped", "skipped"])
    loc = mk.triage_framework(never, mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])


def test_the_datastore_tool_is_the_retrieval(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="rag"))
    record = mk.normalize(spans)
    [retrieval] = record.retrievals
    assert [(d.doc_id, d.version) for d in retrieval.documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert record.final_answer == last.output_text
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "no_fault"
    # unmarked (no gen_ai.tool.type), the tool's documents are no retrieval without a manifest
    unmarked = mk.normalize(mk.drop_attribute(spans, "gen_ai.tool.type"))
    assert unmarked.retrievals == ()
    assert any(g.kind == "no_retrieval_span" and "search_documents" in g.detail for g in unmarked.gaps)


def test_the_filter_recorded_on_the_tool_span_is_needed(mk: ModuleType) -> None:
    spans = mk.recorded_spans(FILE.format(run="filtered"))
    loc = mk.localize(
        mk.normalize(mk.drop_attribute(spans, "tracejudge.retrieval.filter")),
        mk.ticket(),
        mk.policy_manifest("EU"),
    )
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
