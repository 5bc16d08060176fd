"""Triage over an OpenAI Agents SDK run traced with openinference-instrumentation-openai-agents: the
documents come from a function tool. Fixtures from tests/fixtures/traces/record_openai_agents.py.
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_retriever_tool_returning_v2_and_the_right_answer_is_no_fault(
    mk: ModuleType, region: str | None
) -> None:
    loc = mk.triage_recorded("openai_agents_rag.pb", None if region is None else mk.recorded_manifest(region))
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)
    # The documents reached the model as the tool's result message.
    assert any("in the model input" in ev.note for ev in loc.stages[2].evidence)


@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_retriever_tool_returning_v2_and_the_stale_answer_is_ignored_by_model(
    mk: ModuleType, region: str | None
) -> None:
    loc = mk.triage_recorded(
        "openai_agents_ignored.pb", None if region is None else mk.recorded_manifest(region)
    )
    assert loc.verdict == "ignored_by_model"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "fail"]
    record = mk.normalize(list(mk.read_otlp_file(mk.RECORDED / "openai_agents_ignored.pb")))
    assert any(ev.span_id == record.final_answer_span_id for ev in loc.stages[3].evidence)


def test_an_unmarked_search_tool_naming_manifest_documents_is_a_retrieval(mk: ModuleType) -> None:
    # The same run, the tool not marked a retriever: its result names documents of the index
    # manifest (doc_id and version), so it is a retrieval call (DESIGN 5.4) and the run is no fault.
    loc = mk.triage_recorded("openai_agents_unmarked_rag.pb", mk.recorded_manifest("EU"))
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert any("C-17/attachment@v2 at rank 1" in ev.note for ev in loc.stages[1].evidence)


def test_an_unmarked_search_tool_without_a_manifest_leaves_retrieval_unconfirmed_not_guessed(
    mk: ModuleType,
) -> None:
    # Without a manifest nothing says the tool's records are documents: tracejudge does not guess a
    # retrieval from a tool result, so the verdict is unconfirmed, asking for the retrieval span.
    loc = mk.triage_recorded("openai_agents_unmarked_rag.pb", None)
    assert loc.verdict == "unconfirmed"
    record = mk.normalize(list(mk.read_otlp_file(mk.RECORDED / "openai_agents_unmarked_rag.pb")))
    assert record.retrievals == ()
    (gap,) = [g for g in record.gaps if g.kind == "no_retrieval_span"]
    assert "not marked as retrievers" in gap.detail
