"""Triage over a Griptape ``Agent`` traced by Griptape's ``OpenTelemetryObservabilityDriver``: alone, the
driver records span names and tags only, so no fault can be told and every verdict is ``unconfirmed``,
with gaps naming what to add; with openinference-instrumentation-openai for the model calls and the
search activity recording its documents on its own span (OTel GenAI retrieval attributes), each fault gets
its verdict. Fixtures from tests/fixtures/traces/record_griptape.py (the app and its runs: _policy.py);
the manifest is the recordings' index with each version's ``content`` (conftest ``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

import pytest

RUNS = ["rag", "ignored", "filtered", "dropped"]
# run -> (verdict, cause, stage statuses) with the search recording its documents
VERDICTS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("region", [None, "CN", "EU"])
@pytest.mark.parametrize("run", RUNS)
def test_the_driver_alone_records_nothing_to_tell_a_fault_by(
    mk: ModuleType, run: str, region: str | None
) -> None:
    # No request, message, tool result or answer in the trace: whatever happened, no verdict.
    loc = mk.triage_framework(f"griptape_{run}.pb", None if region is None else mk.policy_manifest(region))
    assert loc.verdict == "unconfirmed"
    assert loc.stages[1].status in ("unconfirmed", "skipped")


def test_the_driver_alones_gaps_name_what_to_add(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("griptape_rag.pb"))
    assert (record.input, record.final_answer, record.model_calls) == (None, None, ())
    details = {g.kind: g.detail for g in record.gaps}
    for kind in ("no_model_span", "no_retrieval_span", "no_final_answer"):
        assert "OpenAIInstrumentor" in details[kind], kind
        assert "gen_ai.retrieval.documents" in details[kind], kind


@pytest.mark.parametrize("run", RUNS)
def test_with_the_client_instrumented_and_the_documents_recorded_each_fault_gets_its_verdict(
    mk: ModuleType, run: str
) -> None:
    verdict, cause, statuses = VERDICTS[run]
    loc = mk.triage_framework(f"griptape_openinference_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)


def test_the_recorded_filter_is_replayed_and_needed(mk: ModuleType) -> None:
    filtered = "griptape_openinference_filtered.pb"
    # v2 in the CN index would have passed region == CN: then it was lost on rank, not filtered.
    loc = mk.triage_framework(filtered, mk.policy_manifest("CN"))
    assert (loc.verdict, loc.cause) == ("not_retrieved", "rank")
    # Without the manifest nothing says v2 is EU: no verdict.
    assert mk.triage_framework(filtered, None).verdict == "unconfirmed"
    spans = mk.drop_attribute(mk.recorded_spans(filtered), "tracejudge.retrieval.filter")
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
