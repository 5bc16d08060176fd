"""Triage over an AutoGen AgentChat ``AssistantAgent`` recorded two ways: AutoGen's own tracing (with
openinference-instrumentation-openai for the model calls), whose ``execute_tool`` span records neither the
tool's arguments nor its result (``autogen_*``), and openinference-instrumentation-autogen-agentchat, whose
TOOL span records both (``autogen_openinference_*``). AutoGen runs a tool outside its span's context, so
the filter the tool tries to record is lost under both. Fixtures from
tests/fixtures/traces/record_autogen.py (the app and its runs: _policy.py).
"""

from __future__ import annotations

from types import ModuleType

import pytest

RUNS = {
    "rag": ("no_fault", ["pass", "pass", "pass", "pass"]),
    "ignored": ("ignored_by_model", ["pass", "pass", "pass", "fail"]),
    # the filter was not recorded: nothing tells a filter from rank
    "filtered": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"]),
    "dropped": ("dropped_in_context", ["pass", "pass", "fail", "skipped"]),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_openinference_recording_gets_each_verdict(mk: ModuleType, run: str) -> None:
    verdict, statuses = RUNS[run]
    loc = mk.triage_framework(f"autogen_openinference_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == (verdict, statuses)
    if run == "filtered":
        assert any("tracejudge.retrieval.filter" in item for item in loc.stages[1].missing)


@pytest.mark.parametrize("run", list(RUNS))
def test_autogens_own_tracing_records_no_retrieval_and_says_what_would(mk: ModuleType, run: str) -> None:
    # The documents are only in the model input's tool message, which is what the model was given,
    # not necessarily what the tool returned: no retrieval is read from it, whatever the fault.
    loc = mk.triage_framework(f"autogen_{run}.pb", mk.policy_manifest("EU"))
    assert (loc.verdict, mk.statuses(loc)) == ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"])
    record = mk.normalize(mk.recorded_spans(f"autogen_{run}.pb"))
    [gap] = [g for g in record.gaps if g.kind == "no_retrieval_span"]
    assert "openinference-instrumentation-autogen-agentchat" in gap.detail
