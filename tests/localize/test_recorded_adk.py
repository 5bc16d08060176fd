"""Triage over a Google ADK LlmAgent traced by ADK's built-in tracing: ADK 2 (``adk_*``, with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``) writes OTel GenAI spans, the search tool's
result in ``gen_ai.tool.call.result``; ADK 1 (``adk_legacy_*``) its own ``gcp.vertex.agent.llm_request`` /
``llm_response`` (Gemini contents) and ``gcp.vertex.agent.tool_response``. Fixtures from
tests/fixtures/traces/record_adk.py (the app and its runs: _policy.py); the manifest is the recordings'
index with each version's ``content`` (conftest ``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

import pytest

FILE = "adk_{run}.pb"
LEGACY = "adk_legacy_{run}.pb"
# run -> (verdict, cause, stage statuses)
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("file", [FILE, LEGACY])
@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, file: str, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(file.format(run=run), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_the_search_tool_is_the_retrieval_that_returned_v2_first(mk: ModuleType) -> None:
    # The tool is not marked: its result names documents of the manifest, so it is a retrieval.
    loc = mk.triage_framework(FILE.format(run="rag"), mk.policy_manifest("EU"))
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)
    # Without a manifest nothing says the tool's records are documents: no verdict.
    assert mk.triage_framework(FILE.format(run="rag"), None).verdict == "unconfirmed"


def test_the_filter_on_the_tool_span_is_replayed_and_needed(mk: ModuleType) -> None:
    # v2 in the CN index would have passed region == CN: then it was lost on rank, not filtered.
    loc = mk.triage_framework(FILE.format(run="filtered"), mk.policy_manifest("CN"))
    assert (loc.verdict, loc.cause) == ("not_retrieved", "rank")
    # Without the recorded filter nothing tells a filter from rank.
    spans = mk.drop_attribute(mk.recorded_spans(FILE.format(run="filtered")), "tracejudge.retrieval.filter")
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


def test_adk_2_by_default_records_no_content_and_gets_no_verdict(mk: ModuleType) -> None:
    # ADK 2 without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: no message, argument or result.
    loc = mk.triage_framework("adk_nocontent_rag.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    # and every content gap names the switch
    record = mk.normalize(mk.recorded_spans("adk_nocontent_rag.pb"))
    details = [g.detail for g in record.gaps if g.kind.startswith("model_")]
    assert details
    assert all("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in d for d in details)
