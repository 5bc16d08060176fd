"""Triage over traces recorded by real instrumentation, one per convention (tests/fixtures/traces):
OTLP file -> decoder -> normalizer -> the four checks, with and without an index manifest."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("fixture", ["genai_agent.json", "langfuse_sdk.pb"])
@pytest.mark.parametrize("region", [None, "CN", "EU"])
def test_answers_resting_on_v2_are_no_fault_in_genai_and_langfuse_traces(
    mk: ModuleType, fixture: str, region: str | None
) -> None:
    # v2 was returned, its clause reached the model and the answer states 30,000: whatever the
    # manifest says about metadata, the retrieval evidently happened.
    loc = mk.triage_recorded(fixture, None if region is None else mk.recorded_manifest(region))
    assert loc.verdict == "no_fault"
    assert mk.statuses(loc) == ["pass", "pass", "pass", "pass"]
    assert all(stage.evidence for stage in loc.stages)
    assert all(ev.span_id for ev in loc.stages[1].evidence)


def test_openllmetry_chroma_trace_without_manifest_is_unconfirmed_and_says_what_would_settle_it(
    mk: ModuleType,
) -> None:
    loc = mk.triage_recorded("openllmetry_chroma.pb", None)
    assert loc.verdict == "unconfirmed"
    assert loc.stages[0].status == "unconfirmed"
    assert any("manifest" in m and "C-17/attachment@v2" in m for m in loc.stages[0].missing)
    assert mk.statuses(loc)[1:] == ["skipped", "skipped", "skipped"]


def test_openllmetry_chroma_filter_replay_tells_rank_from_filter(mk: ModuleType) -> None:
    # The Chroma span's where-filter (a Python literal) is {"region": "CN"}; v2 was not returned.
    ranked = mk.triage_recorded("openllmetry_chroma.pb", mk.recorded_manifest("CN"))
    assert (ranked.verdict, ranked.cause) == ("not_retrieved", "rank")
    filtered = mk.triage_recorded("openllmetry_chroma.pb", mk.recorded_manifest("EU"))
    assert (filtered.verdict, filtered.cause) == ("filtered", "filter")
    assert filtered.stages[1].status == "fail"
    assert any("region" in ev.note for ev in filtered.stages[1].evidence)


def test_openinference_rag_trace_recorded_candidates_prove_the_filter(mk: ModuleType) -> None:
    # The retriever recorded its candidates: v2 was excluded by the filter, manifest or not.
    for entries in (None, mk.recorded_manifest("CN")):
        loc = mk.triage_recorded("openinference_rag.pb", entries)
        assert (loc.verdict, loc.cause) == ("filtered", "filter")
        assert loc.stages[1].evidence


@pytest.mark.parametrize("fixture", ["openai_chat.pb", "openai_hidden_inputs.pb"])
def test_a_bare_llm_trace_has_no_retrieval_to_judge(mk: ModuleType, fixture: str) -> None:
    loc = mk.triage_recorded(fixture, mk.recorded_manifest("CN"))
    assert loc.verdict == "unconfirmed"
    assert mk.statuses(loc) == ["pass", "unconfirmed", "skipped", "skipped"]
    assert any("retrieval span" in m for m in loc.stages[1].missing)
