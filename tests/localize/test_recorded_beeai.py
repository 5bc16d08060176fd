"""Triage over a BeeAI ``RequirementAgent`` traced by openinference-instrumentation-beeai: the search tool's
TOOL span holds the documents as JSON text in ``output.value``; the agent answers by calling its
``final_answer`` tool (``{"response": ...}``), so the answering model call's output is that tool call. The
instrumentation builds its spans from BeeAI's events after the run, so the app records the filter on the
run (``using_metadata``), not from inside the tool. Fixtures from tests/fixtures/traces/record_beeai.py
(the app and its runs: _policy.py); the manifest is the recordings' index with each version's ``content``
(conftest ``policy_manifest``).
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

FILE = "beeai_{run}.pb"
# run -> (verdict, cause, stage statuses)
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}
ANSWERS = {
    "rag": "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit.",
    "ignored": "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine.",
}


@pytest.mark.parametrize("run", list(RUNS))
def test_each_fault_gets_its_verdict_and_cause(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(FILE.format(run=run), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


@pytest.mark.parametrize("run", ["rag", "ignored"])
def test_the_final_answer_tool_call_is_the_answering_calls_output(mk: ModuleType, run: str) -> None:
    record = mk.normalize(mk.recorded_spans(FILE.format(run=run)))
    assert record.final_answer == ANSWERS[run]
    first, last = record.model_calls
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == ["search_documents"]
    assert [c["name"] for m in last.output_messages for c in m.tool_calls] == ["final_answer"]
    assert last.output_text == ANSWERS[run]
    # the search result reached the answering call as a tool message
    assert "Prepayment shall not exceed 30,000 RMB per order." in last.input_text


def test_the_search_tool_is_the_retrieval_that_returned_v2_first(mk: ModuleType) -> None:
    rag = FILE.format(run="rag")
    loc = mk.triage_framework(rag, mk.policy_manifest("EU"))
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)
    # Without a manifest nothing says the tool's records are documents: no verdict.
    assert mk.triage_framework(rag, None).verdict == "unconfirmed"


def test_the_filter_in_the_runs_metadata_is_replayed_and_needed(mk: ModuleType) -> None:
    filtered = FILE.format(run="filtered")
    spans = mk.recorded_spans(filtered)
    [tool] = [s for s in spans if s.name == "search_documents"]
    assert json.loads(tool.attributes["metadata"]) == {"tracejudge.retrieval.filter": {"region": "CN"}}
    # v2 in the CN index would have passed region == CN: then it was lost on rank, not filtered.
    loc = mk.triage_framework(filtered, mk.policy_manifest("CN"))
    assert (loc.verdict, loc.cause) == ("not_retrieved", "rank")
    # Without the recorded filter nothing tells a filter from rank.
    loc = mk.localize(
        mk.normalize(mk.drop_attribute(spans, "metadata")), mk.ticket(), mk.policy_manifest("EU")
    )
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
