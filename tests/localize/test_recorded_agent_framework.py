"""Triage over a Microsoft Agent Framework agent traced by the framework's own telemetry (OTel GenAI spans,
global tracer provider). With sensitive data on, the four faults, the unmarked tool and the filter replay are
in test_recorded_frameworks.py (row ``agent_framework``); with openinference-instrumentation-agent-framework's
processor, which adds OpenInference attributes beside the GenAI ones and copies the others (the filter
among them) into its ``metadata`` JSON, they are here. Fixtures from
tests/fixtures/traces/record_agent_framework.py (the app and its runs: _policy.py); the manifest is the
recordings' index with each version's ``content`` (conftest ``policy_manifest``).
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_the_default_records_no_content_no_verdict_and_the_gaps_name_enable_sensitive_data(
    mk: ModuleType, region: str | None
) -> None:
    # Sensitive data is off by default: the spans carry no message, tool argument, tool result or answer.
    record = mk.normalize(mk.recorded_spans("agent_framework_nocontent_rag.pb"))
    loc = mk.localize(record, mk.ticket(), None if region is None else mk.policy_manifest(region))
    assert loc.verdict == "unconfirmed"
    assert (record.input, record.final_answer) == (None, None)
    for kind in ("model_input_not_recorded", "model_output_not_recorded", "no_final_answer"):
        details = [g.detail for g in record.gaps if g.kind == kind]
        assert details, kind
        assert all(
            "enable_sensitive_data=True" in d and "ENABLE_SENSITIVE_DATA=true" in d for d in details
        ), kind


def test_with_sensitive_data_the_tool_result_holds_the_documents(mk: ModuleType) -> None:
    record = mk.normalize(mk.recorded_spans("agent_framework_rag.pb"))
    [tool] = record.tool_calls
    assert tool.name == "search_documents"
    assert [(d["doc_id"], d["version"]) for d in tool.result] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]


OPENINFERENCE = "agent_framework_openinference_{run}.pb"
# run -> (verdict, cause, stage statuses)
RUNS = {
    "rag": ("no_fault", None, ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", None, ["pass", "pass", "pass", "fail"]),
    "filtered": ("filtered", "filter", ["pass", "fail", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", None, ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_under_the_openinference_processor_each_fault_gets_its_verdict(mk: ModuleType, run: str) -> None:
    verdict, cause, statuses = RUNS[run]
    loc = mk.triage_framework(OPENINFERENCE.format(run=run), mk.policy_manifest("EU"))
    assert (loc.verdict, loc.cause, mk.statuses(loc)) == (verdict, cause, statuses)
    # Without a manifest nothing says the tool's records are documents: no verdict.
    assert mk.triage_framework(OPENINFERENCE.format(run=run), None).verdict == "unconfirmed"


def test_under_the_openinference_processor_the_filter_is_recorded_twice_and_needed(mk: ModuleType) -> None:
    filtered = OPENINFERENCE.format(run="filtered")
    loc = mk.triage_framework(filtered, mk.policy_manifest("CN"))
    assert (loc.verdict, loc.cause) == ("not_retrieved", "rank")
    spans = mk.recorded_spans(filtered)
    # the attribute the tool set, and the processor's metadata copy: either one tells the filter
    for key in ("tracejudge.retrieval.filter", "metadata"):
        loc = mk.localize(mk.normalize(mk.drop_attribute(spans, key)), mk.ticket(), mk.policy_manifest("EU"))
        assert (loc.verdict, loc.cause) == ("filtered", "filter"), key
    spans = mk.drop_attribute(mk.drop_attribute(spans, "tracejudge.retrieval.filter"), "metadata")
    loc = mk.localize(mk.normalize(spans), mk.ticket(), mk.policy_manifest("EU"))
    assert loc.verdict == "unconfirmed"
    assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)
